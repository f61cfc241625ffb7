//! An opened LeRobot dataset: metadata checked once at open, the frame table in memory, and
//! `get`, which returns exactly the sample LeRobot's `__getitem__` returns.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::meta::episodes::{Episode, read_episodes};
use crate::meta::features::{Feature, FrameEncoding, FrameShape};
use crate::meta::info::{DatasetInfo, INFO_PATH};
use crate::meta::paths::join_under;
use crate::meta::tasks::read_tasks;
use crate::sample::{Sample, Tensor, Values};
use crate::source::FileSource;
use crate::stats::{Stats, read_stats};
use crate::table::image::decode_chw;
use crate::table::{ColumnValues, FrameTable};
use crate::video::DecoderCache;
use crate::window::{WindowSpec, window_rows};

/// LeRobot's default `tolerance_s`: how far a decoded frame may be from its query timestamp.
pub const DEFAULT_TOLERANCE_S: f64 = 1e-4;

/// How a dataset is opened.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OpenOptions {
    /// Allowed distance between a query timestamp and the frame returned, in seconds (strict).
    /// Default 1e-4, as LeRobot.
    pub tolerance_s: f64,
}

impl Default for OpenOptions {
    fn default() -> Self {
        Self { tolerance_s: DEFAULT_TOLERANCE_S }
    }
}

/// How camera frames are returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FrameFormat {
    /// float32 in [0, 1] (`k / 255`), LeRobot's default.
    #[default]
    Float,
    /// Raw uint8, as LeRobot 0.6's training path (`return_uint8`) transports them.
    Uint8,
}

/// A LeRobot dataset (v3.0 or v2.1) opened from a folder.
#[derive(Debug)]
pub struct Dataset {
    root: PathBuf,
    info: DatasetInfo,
    episodes: Vec<Episode>,
    tasks: Vec<String>,
    stats: Stats,
    table: FrameTable,
    options: OpenOptions,
    /// The episodes whose frames were read, ascending, when it was opened with some episodes
    /// only ([`Dataset::open_episodes`]); `None`: every episode.
    read_episodes: Option<Vec<usize>>,
    /// Where the data and video files are read from.
    source: FileSource,
}

/// Everything under `meta/`, read and checked against `info.json`'s totals.
#[derive(Debug, Clone)]
pub(crate) struct Metadata {
    info: DatasetInfo,
    episodes: Vec<Episode>,
    tasks: Vec<String>,
    stats: Stats,
}

impl Metadata {
    /// The first data or video file the episodes name that is not under `root`.
    pub(crate) fn first_missing_file(&self, root: &Path) -> Result<Option<PathBuf>> {
        self.first_missing_file_of(root, None)
    }

    /// The first data or video file that `episodes` (all when `None`) name and `root` lacks.
    pub(crate) fn first_missing_file_of(&self, root: &Path, episodes: Option<&[usize]>) -> Result<Option<PathBuf>> {
        let info_path = root.join(INFO_PATH);
        for episode in self.episodes.iter().filter(|e| episodes.is_none_or(|list| list.contains(&e.index))) {
            let data = join_under(root, &episode.data_file).map_err(|m| Error::field(&info_path, "data_path", m))?;
            if !data.is_file() {
                return Ok(Some(data));
            }
            for video in &episode.videos {
                let path = join_under(root, &video.file).map_err(|m| Error::field(&info_path, "video_path", m))?;
                if !path.is_file() {
                    return Ok(Some(path));
                }
            }
        }
        Ok(None)
    }

    /// The data and video files (relative to the dataset's root) that `episodes` live in.
    #[cfg(feature = "hub")]
    pub(crate) fn files_of(&self, episodes: &[usize]) -> std::collections::BTreeSet<PathBuf> {
        let mut files = std::collections::BTreeSet::new();
        for episode in self.episodes.iter().filter(|e| episodes.contains(&e.index)) {
            files.insert(episode.data_file.clone());
            files.extend(episode.videos.iter().map(|v| v.file.clone()));
        }
        files
    }

    /// Reads `info.json`, the episodes, tasks and stats of the dataset at `root`.
    pub(crate) fn read(root: &Path) -> Result<Self> {
        let info = DatasetInfo::read(root)?;
        let info_path = root.join(INFO_PATH);
        let episodes = read_episodes(root, &info)?;
        if episodes.len() != info.total_episodes {
            return Err(Error::field(
                &info_path,
                "total_episodes",
                format!("{} but the episode table lists {}", info.total_episodes, episodes.len()),
            ));
        }
        let frames = episodes.last().map_or(0, |e| e.frames.end);
        if frames != info.total_frames {
            return Err(Error::field(
                &info_path,
                "total_frames",
                format!("{} but the episodes hold {frames} frames", info.total_frames),
            ));
        }
        let tasks = read_tasks(root, &info)?;
        if tasks.len() != info.total_tasks {
            return Err(Error::field(
                &info_path,
                "total_tasks",
                format!("{} but the task table lists {}", info.total_tasks, tasks.len()),
            ));
        }
        let stats = read_stats(root, &info)?;
        Ok(Self { info, episodes, tasks, stats })
    }
}

impl Dataset {
    /// Opens the dataset at `root` with LeRobot's default tolerance.
    pub fn open(root: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(root, OpenOptions::default())
    }

    /// Opens the dataset at `root`: reads and cross-checks all metadata and every parquet
    /// data file; video files are opened lazily, when frames are asked for.
    pub fn open_with(root: impl AsRef<Path>, options: OpenOptions) -> Result<Self> {
        let root = root.as_ref().to_path_buf();
        let metadata = Metadata::read(&root)?;
        Self::from_metadata(root, metadata, options, None, FileSource::Local)
    }

    /// Opens the dataset at `root` to read `episodes` (all when `None`): whole when the files of
    /// every episode are here, else, as a download of some episodes leaves it, with the frames
    /// of `episodes` only ([`Self::open_episodes`]). The samples are the same either way.
    pub fn open_for(root: impl AsRef<Path>, options: OpenOptions, episodes: Option<&[usize]>) -> Result<Self> {
        let root = root.as_ref().to_path_buf();
        let metadata = Metadata::read(&root)?;
        match episodes {
            Some(episodes) if metadata.first_missing_file(&root)?.is_some() => {
                Self::from_episodes(root, metadata, options, episodes, FileSource::Local)
            }
            _ => Self::from_metadata(root, metadata, options, None, FileSource::Local),
        }
    }

    /// Opens the dataset at `root` with the frames of `episodes` only, as LeRobot's
    /// `LeRobotDataset(episodes=...)` reads it: all metadata, and the data files those episodes
    /// live in, so the files of other episodes need not be there (a download of some episodes).
    /// Their samples are the whole dataset's; asking for a frame of another episode is an error,
    /// and the loader samples these episodes only.
    pub fn open_episodes(root: impl AsRef<Path>, options: OpenOptions, episodes: &[usize]) -> Result<Self> {
        let root = root.as_ref().to_path_buf();
        let metadata = Metadata::read(&root)?;
        Self::from_episodes(root, metadata, options, episodes, FileSource::Local)
    }

    /// Opens the dataset streamed from `files`' root: its `meta/` mirrored under `mirror_dir`
    /// ([`crate::remote::metadata::mirror`]), the data parquet files of `episodes` (all when
    /// `None`) read into memory, and the videos read by ranges through `files`' buffer when
    /// frames are asked for. The samples are those of the same dataset read from a folder. Where
    /// the store lists, every file's version is pinned now; elsewhere at its first read.
    #[cfg(feature = "stream")]
    pub fn open_streaming(
        files: std::sync::Arc<crate::remote::RemoteFiles>,
        mirror_dir: &Path,
        options: OpenOptions,
        episodes: Option<&[usize]>,
    ) -> Result<Self> {
        let root = crate::remote::metadata::mirror(&files, mirror_dir)?;
        let metadata = Metadata::read(&root)?;
        if files.root().kind() != crate::remote::StoreKind::Http {
            // Every file's version as of now (one listing), not as of its first read.
            files.pin_listed("data")?;
            files.pin_listed("videos")?;
        }
        let source = FileSource::Remote(crate::remote::VideoPrefetch::new(files));
        match episodes {
            Some(episodes) => Self::from_episodes(root, metadata, options, episodes, source),
            None => Self::from_metadata(root, metadata, options, None, source),
        }
    }

    /// [`Self::from_metadata`] with the frames of `episodes` only, checked to be the dataset's.
    fn from_episodes(
        root: PathBuf,
        metadata: Metadata,
        options: OpenOptions,
        episodes: &[usize],
        source: FileSource,
    ) -> Result<Self> {
        if let Some(bad) = episodes.iter().find(|&&e| e >= metadata.episodes.len()) {
            return Err(Error::request(format!(
                "episode {bad} is not in the dataset at {} ({} episodes)",
                root.display(),
                metadata.episodes.len()
            )));
        }
        let mut chosen = episodes.to_vec();
        chosen.sort_unstable();
        chosen.dedup();
        Self::from_metadata(root, metadata, options, Some(chosen), source)
    }

    /// Reads the data parquet files that the episodes of `metadata` (those of `chosen` when
    /// given) live in, and checks their rows.
    pub(crate) fn from_metadata(
        root: PathBuf,
        metadata: Metadata,
        options: OpenOptions,
        chosen: Option<Vec<usize>>,
        source: FileSource,
    ) -> Result<Self> {
        let Metadata { info, episodes, tasks, stats } = metadata;
        let info_path = root.join(INFO_PATH);
        let files_root = source.files_root(&root);
        // Each data file with the global rows of its episodes, in episode order.
        let mut files: Vec<(PathBuf, std::ops::Range<usize>)> = Vec::new();
        for episode in &episodes {
            let path =
                join_under(&files_root, &episode.data_file).map_err(|m| Error::field(&info_path, "data_path", m))?;
            match files.last_mut() {
                Some((last, rows)) if *last == path => rows.end = episode.frames.end,
                _ => {
                    if files.iter().any(|(file, _)| *file == path) {
                        return Err(Error::field(
                            &path,
                            "episode_index",
                            format!("episode {} is stored apart from the other episodes of this file", episode.index),
                        ));
                    }
                    files.push((path, episode.frames.clone()));
                }
            }
        }
        let column_features: Vec<&Feature> = info.column_features().collect();
        let table = match &chosen {
            None => FrameTable::read_from(
                &source,
                &files.into_iter().map(|(path, _)| path).collect::<Vec<_>>(),
                &column_features,
            )?,
            Some(chosen) => {
                let needed: Vec<(PathBuf, std::ops::Range<usize>)> = files
                    .into_iter()
                    .filter(|(path, _)| {
                        chosen
                            .iter()
                            .any(|&e| join_under(&files_root, &episodes[e].data_file).is_ok_and(|p| p == *path))
                    })
                    .collect();
                FrameTable::read_placed_from(&source, &needed, info.total_frames, &column_features)?
            }
        };
        let dataset = Dataset { root, info, episodes, tasks, stats, table, options, read_episodes: chosen, source };
        dataset.check_rows()?;
        Ok(dataset)
    }

    /// Checks that the rows are the frames the episode table promises, in order.
    fn check_rows(&self) -> Result<()> {
        let n = self.table.len();
        if n != self.info.total_frames {
            return Err(Error::field(
                self.root.join(INFO_PATH),
                "total_frames",
                format!("{} but the data files hold {n} rows", self.info.total_frames),
            ));
        }
        let ints = |key: &str| self.table.column(key).and_then(|c| c.as_i64());
        let (Some(index), Some(episode_index), Some(task_index)) =
            (ints("index"), ints("episode_index"), ints("task_index"))
        else {
            return Err(Error::field(
                self.root.join(INFO_PATH),
                "features",
                "`index`, `episode_index` and `task_index` must be integer features",
            ));
        };
        for episode in self.episodes.iter().filter(|e| self.has_frames(e.index)) {
            for row in episode.frames.clone() {
                let file = || self.table.file_of(row).to_path_buf();
                if usize::try_from(index[row]).ok() != Some(row) {
                    return Err(Error::field(
                        file(),
                        "index",
                        format!(
                            "row {row} has index {}: the global index must count the rows from 0 without gaps",
                            index[row]
                        ),
                    ));
                }
                if usize::try_from(episode_index[row]).ok() != Some(episode.index) {
                    return Err(Error::field(
                        file(),
                        "episode_index",
                        format!(
                            "frame {row} is in episode {} by the episode table, but its row says {}",
                            episode.index, episode_index[row]
                        ),
                    ));
                }
                if usize::try_from(task_index[row]).ok().is_none_or(|t| t >= self.tasks.len()) {
                    return Err(Error::field(
                        file(),
                        "task_index",
                        format!(
                            "frame {row} has task_index {} but there are {} tasks",
                            task_index[row],
                            self.tasks.len()
                        ),
                    ));
                }
            }
        }
        if !self.info.version.is_v3() {
            self.check_timestamps_sync()?;
        }
        Ok(())
    }

    /// LeRobot v2.1's `check_timestamps_sync`: inside each episode consecutive timestamps
    /// differ by `1/fps` within `tolerance_s`.
    fn check_timestamps_sync(&self) -> Result<()> {
        let Some(ts) = self.table.column("timestamp").and_then(|c| c.as_f32()) else {
            return Err(Error::field(self.root.join(INFO_PATH), "features.timestamp", "must be a float feature"));
        };
        let period = 1.0 / self.info.fps;
        for episode in self.episodes.iter().filter(|e| self.has_frames(e.index)) {
            for row in episode.frames.start + 1..episode.frames.end {
                let diff = f64::from(ts[row]) - f64::from(ts[row - 1]);
                if (diff - period).abs() > self.options.tolerance_s {
                    return Err(Error::field(
                        self.table.file_of(row),
                        "timestamp",
                        format!(
                            "frame {row} (episode {}): {diff:.6}s after the previous frame, expected 1/fps = {period:.6}s within tolerance_s={}",
                            episode.index, self.options.tolerance_s
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The dataset's folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `meta/info.json`.
    pub fn info(&self) -> &DatasetInfo {
        &self.info
    }

    /// The episodes, by `episode_index` (every episode of the metadata, also when it was
    /// opened with some only: see [`Self::read_episodes`]).
    pub fn episodes(&self) -> &[Episode] {
        &self.episodes
    }

    /// The episodes whose frames were read, ascending, when the dataset was opened with some
    /// episodes only ([`Self::open_episodes`]); `None` when every episode was read.
    pub fn read_episodes(&self) -> Option<&[usize]> {
        self.read_episodes.as_deref()
    }

    /// Whether the frames of episode `index` were read (every episode's, unless the dataset
    /// was opened with some only).
    pub fn has_frames(&self, index: usize) -> bool {
        self.read_episodes.as_ref().is_none_or(|read| read.binary_search(&index).is_ok())
    }

    /// An error unless every episode was read: what needs the whole dataset (`doing`) says so.
    pub fn require_every_episode(&self, doing: &str) -> Result<()> {
        match &self.read_episodes {
            None => Ok(()),
            Some(read) => Err(Error::request(format!(
                "{doing} needs every episode of {}, but it was opened with episodes {read:?} only",
                self.root.display()
            ))),
        }
    }

    /// Refuses an `encoding` that this dataset's camera frames cannot be read in, naming the
    /// camera: RGB always can be; YUV 4:2:0 planes ([`FrameEncoding::Yuv420`]) come from video
    /// streams of even height whose pixel format is `yuv420p` (probed in the file of the first
    /// episode read, which needs FFmpeg).
    pub fn check_frame_encoding(&self, encoding: FrameEncoding) -> Result<()> {
        if encoding == FrameEncoding::Rgb {
            return Ok(());
        }
        let refuse = |key: &str, why: String| {
            Err(Error::request(format!(
                "camera `{key}` of {} {why}: the {encoding} encoding reads YUV 4:2:0 video (read it as rgb)",
                self.root.display()
            )))
        };
        let probed = match &self.read_episodes {
            Some(read) => read.first().and_then(|&index| self.episodes.iter().find(|e| e.index == index)),
            None => self.episodes.first(),
        };
        // Every camera before the one at hand is a video (an image returns): its index among
        // the videos is its index among the cameras.
        for (video, key) in self.info.camera_keys().into_iter().enumerate() {
            let feature = self.info.feature(key.as_str()).expect("a camera");
            let shape = feature.frame_shape().expect("a camera has a frame shape");
            if !feature.is_video() {
                return refuse(key.as_str(), "is stored as images in parquet, which hold RGB".into());
            }
            if shape.height % 2 == 1 {
                return refuse(key.as_str(), format!("is {shape}, of odd height"));
            }
            if let Some(episode) = probed {
                let path = self.video_file(episode, video)?;
                let format = self.open_video(&path)?.pixel_format();
                if format != "yuv420p" {
                    return refuse(key.as_str(), format!("is {format} in {}", path.display()));
                }
            }
        }
        Ok(())
    }

    /// The task strings, by `task_index`.
    pub fn tasks(&self) -> &[String] {
        &self.tasks
    }

    /// The statistics LeRobot would normalise with (before any ImageNet override).
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The parquet columns of every frame.
    pub fn table(&self) -> &FrameTable {
        &self.table
    }

    /// The options the dataset was opened with.
    pub fn options(&self) -> OpenOptions {
        self.options
    }

    /// The number of frames.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether the dataset has no frames.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// The episode holding frame `index`.
    pub fn episode_of(&self, index: usize) -> Option<&Episode> {
        let i = self.episodes.partition_point(|e| e.frames.end <= index);
        self.episodes.get(i).filter(|e| e.frames.contains(&index))
    }

    /// The absolute path of `episode`'s video of the `camera`-th video key.
    pub fn video_file(&self, episode: &Episode, camera: usize) -> Result<PathBuf> {
        let video = &episode.videos[camera];
        join_under(&self.source.files_root(&self.root), &video.file)
            .map_err(|m| Error::field(self.root.join(INFO_PATH), "video_path", m))
    }

    /// A decoder of `path`, one of [`Self::video_file`]'s, read where the dataset's files are.
    pub fn open_video(&self, path: &Path) -> Result<crate::video::VideoDecoder> {
        self.source.open_video(path)
    }

    /// Starts fetching, without waiting, the video bytes that the frames of `episodes` decode
    /// from, for a streamed dataset (a folder's dataset has nothing to fetch).
    pub fn prefetch_episodes(&self, episodes: &[usize]) {
        #[cfg(feature = "stream")]
        if let FileSource::Remote(prefetch) = &self.source {
            for episode in episodes.iter().filter_map(|&e| self.episodes.get(e)) {
                let (Some(first), Some(last)) = (episode.frames.clone().next(), episode.frames.clone().last()) else {
                    continue;
                };
                for video in &episode.videos {
                    let relative = video.file.to_string_lossy();
                    let (first_s, last_s) = (self.timestamp(first), self.timestamp(last));
                    prefetch.frames(&relative, video.from_timestamp + first_s, video.from_timestamp + last_s);
                }
            }
        }
        #[cfg(not(feature = "stream"))]
        let _ = episodes;
    }

    /// Whether the data and video files are streamed rather than read from a folder.
    pub fn is_streamed(&self) -> bool {
        !matches!(self.source, FileSource::Local)
    }

    /// The timestamp (seconds since the episode start) of frame `row`, as stored.
    pub fn timestamp(&self, row: usize) -> f64 {
        let ts = self.table.column("timestamp").and_then(|c| c.as_f32()).expect("checked at open");
        f64::from(ts[row])
    }

    /// The task string of frame `row`.
    pub fn task_of(&self, row: usize) -> &str {
        let t = self.table.column("task_index").and_then(|c| c.as_i64()).expect("checked at open");
        &self.tasks[t[row] as usize]
    }

    /// The sample LeRobot returns for `index` with the windows of `spec`: every parquet
    /// column, every camera, `{key}_is_pad` for each windowed key, and the task. Video frames
    /// come from `decoders`, which keeps files open between calls.
    pub fn get(
        &self,
        index: usize,
        spec: &WindowSpec,
        decoders: &mut DecoderCache,
        format: FrameFormat,
    ) -> Result<Sample> {
        let episode = self.episode_of(index).ok_or_else(|| {
            Error::request(format!("index {index} is out of range: the dataset has {} frames", self.len()))
        })?;
        if !self.has_frames(episode.index) {
            return Err(Error::request(format!(
                "frame {index} is in episode {}, which was not read: the dataset was opened with episodes {:?} only",
                episode.index,
                self.read_episodes.as_deref().unwrap_or_default()
            )));
        }
        let mut tensors = BTreeMap::new();
        let mut rows = Vec::new();
        let mut pads = Vec::new();
        for feature in &self.info.features {
            let key = feature.key.as_str();
            rows.clear();
            pads.clear();
            let windowed = match spec.offsets(key) {
                Some(offsets) => {
                    window_rows(index, offsets, &episode.frames, &mut rows, &mut pads);
                    tensors.insert(format!("{key}_is_pad"), Tensor::new(vec![pads.len()], Values::Bool(pads.clone())));
                    true
                }
                None => {
                    rows.push(index);
                    false
                }
            };
            let tensor = if feature.is_video() {
                let camera = self.info.video_keys().iter().position(|k| k.as_str() == key).expect("a video key");
                self.video_tensor(feature, episode, camera, &rows, decoders, format)?
            } else {
                match self.column_tensor(feature, &rows, windowed, format)? {
                    Some(t) => t,
                    None => continue,
                }
            };
            tensors.insert(key.to_string(), tensor);
        }
        Ok(Sample { tensors, task: self.task_of(index).to_string() })
    }

    /// Gathers `rows` of a parquet column; `None` for string features, which are not tensors.
    fn column_tensor(
        &self,
        feature: &Feature,
        rows: &[usize],
        windowed: bool,
        format: FrameFormat,
    ) -> Result<Option<Tensor>> {
        let column = self.table.column(feature.key.as_str()).expect("every non-video feature has a column");
        let mut shape = if windowed { vec![rows.len()] } else { Vec::new() };
        let item_shape = feature.item_shape();
        let values = match &column.values {
            ColumnValues::F32(v) => {
                Values::F32(rows.iter().flat_map(|&r| &v[r * column.width..(r + 1) * column.width]).copied().collect())
            }
            ColumnValues::I64(v) => {
                Values::I64(rows.iter().flat_map(|&r| &v[r * column.width..(r + 1) * column.width]).copied().collect())
            }
            ColumnValues::Bool(v) => {
                Values::Bool(rows.iter().flat_map(|&r| &v[r * column.width..(r + 1) * column.width]).copied().collect())
            }
            ColumnValues::Str(_) => return Ok(None),
            ColumnValues::Image(images) => {
                let declared = feature.frame_shape().expect("images have a frame shape");
                let mut pixels = Vec::with_capacity(rows.len() * declared.len());
                for &row in rows {
                    let (shape, chw) = decode_chw(images.get(row)).map_err(|message| Error::Image {
                        path: self.table.file_of(row).to_path_buf(),
                        field: feature.key.to_string(),
                        row,
                        message,
                    })?;
                    if shape != declared {
                        return Err(Error::Image {
                            path: self.table.file_of(row).to_path_buf(),
                            field: feature.key.to_string(),
                            row,
                            message: format!("image is {shape}, meta/info.json declares {declared}"),
                        });
                    }
                    pixels.extend_from_slice(&chw);
                }
                frames_values(pixels, format)
            }
        };
        shape.extend(item_shape);
        Ok(Some(Tensor::new(shape, values)))
    }

    /// Decodes the frames of `rows` of one camera: `(T, C, H, W)`, squeezed to `(C, H, W)` when
    /// `T = 1` as LeRobot does for videos.
    fn video_tensor(
        &self,
        feature: &Feature,
        episode: &Episode,
        camera: usize,
        rows: &[usize],
        decoders: &mut DecoderCache,
        format: FrameFormat,
    ) -> Result<Tensor> {
        let declared = feature.frame_shape().expect("videos have a frame shape");
        let path = self.video_file(episode, camera)?;
        let from = episode.videos[camera].from_timestamp;
        let timestamps: Vec<f64> = rows.iter().map(|&r| from + self.timestamp(r)).collect();
        let decoder = decoders.get_with(&path, |p| self.open_video(p))?;
        check_video_shape(&self.root, feature, declared, decoder.shape(), &path)?;
        let mut pixels = vec![0u8; rows.len() * declared.len()];
        decoder.frames_at(&timestamps, self.options.tolerance_s, &mut pixels)?;
        let mut shape = if rows.len() == 1 { Vec::new() } else { vec![rows.len()] };
        shape.extend([declared.channels, declared.height, declared.width]);
        Ok(Tensor::new(shape, frames_values(pixels, format)))
    }
}

/// Refuses a video whose frames differ from the shape `info.json` declares.
pub(crate) fn check_video_shape(
    root: &Path,
    feature: &Feature,
    declared: FrameShape,
    actual: FrameShape,
    video: &Path,
) -> Result<()> {
    if declared == actual {
        return Ok(());
    }
    Err(Error::field(
        root.join(INFO_PATH),
        format!("features.{}.shape", feature.key),
        format!("declares {declared} but {} decodes to {actual}", video.display()),
    ))
}

/// Camera pixels in the requested format.
fn frames_values(pixels: Vec<u8>, format: FrameFormat) -> Values {
    match format {
        FrameFormat::Uint8 => Values::U8(pixels),
        FrameFormat::Float => Values::F32(pixels_to_unit_floats(&pixels)),
    }
}

/// Pixels as LeRobot's float32 frames: `k / 255`, in [0, 1].
pub fn pixels_to_unit_floats(pixels: &[u8]) -> Vec<f32> {
    pixels.iter().map(|&p| f32::from(p) / 255.0).collect()
}
