//! The decoded-frame cache: every camera frame of a dataset decoded once into one memory-mapped
//! uint8 file per camera, so that training reads frames with a copy instead of a decode.
//!
//! A cache file is `{dir}/{camera key}.frames`: a 4 KiB header, then one CHW frame per dataset
//! row, in global `index` order. The header carries a format version and a fingerprint of the
//! dataset it was made from (its `info.json`, episode table and timestamps); opening refuses a
//! cache of another version or another dataset, or one whose size does not add up (truncated).

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;

use crate::dataset::{Dataset, check_video_shape};
use crate::error::{Error, Result};
use crate::meta::features::{Feature, FrameShape, MAX_FEATURE_VALUES};
use crate::meta::info::INFO_PATH;
use crate::table::ColumnValues;
use crate::table::image::decode_chw;
use crate::video::DecoderCache;

/// The cache format this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;
const MAGIC: &[u8; 8] = b"LRFRAMES";
/// Header size; frames start at this (page-aligned) offset.
const HEADER_LEN: usize = 4096;

/// The header of one camera's cache file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheHeader {
    /// Format version.
    pub version: u32,
    /// Fingerprint of the source dataset.
    pub fingerprint: u64,
    /// Number of frames (dataset rows).
    pub frames: u64,
    /// Shape of each stored frame.
    pub shape: FrameShape,
    /// Shape of the source frames (differs when the cache was resized).
    pub source: FrameShape,
    /// The camera's feature key.
    pub key: String,
}

impl CacheHeader {
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&(HEADER_LEN as u32).to_le_bytes());
        out.extend_from_slice(&self.fingerprint.to_le_bytes());
        out.extend_from_slice(&self.frames.to_le_bytes());
        for v in [
            self.shape.channels,
            self.shape.height,
            self.shape.width,
            self.source.channels,
            self.source.height,
            self.source.width,
        ] {
            out.extend_from_slice(&(v as u32).to_le_bytes());
        }
        out.extend_from_slice(&(self.key.len() as u32).to_le_bytes());
        out.extend_from_slice(self.key.as_bytes());
        out.resize(HEADER_LEN, 0);
        out
    }

    fn decode(path: &Path, bytes: &[u8]) -> Result<Self> {
        let bad = |m: String| Error::field(path, "header", m);
        if bytes.len() < 64 || &bytes[..8] != MAGIC {
            return Err(bad("not a frame-cache file (bad magic)".into()));
        }
        let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().expect("4 bytes"));
        let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().expect("8 bytes"));
        let version = u32_at(8);
        if version != FORMAT_VERSION {
            return Err(bad(format!(
                "format version {version}, this build reads version {FORMAT_VERSION}: rebuild the cache with `datasets cache`"
            )));
        }
        if u32_at(12) as usize != HEADER_LEN {
            return Err(bad(format!("header length {} (expected {HEADER_LEN})", u32_at(12))));
        }
        let dims: Vec<usize> = (0..6).map(|i| u32_at(32 + 4 * i) as usize).collect();
        let shape = FrameShape { channels: dims[0], height: dims[1], width: dims[2] };
        let source = FrameShape { channels: dims[3], height: dims[4], width: dims[5] };
        if shape.is_empty() || shape.len() > MAX_FEATURE_VALUES {
            return Err(bad(format!("implausible frame shape {shape}")));
        }
        let key_len = u32_at(56) as usize;
        let key = bytes
            .get(60..60 + key_len)
            .and_then(|k| std::str::from_utf8(k).ok())
            .ok_or_else(|| bad("bad camera key".into()))?;
        Ok(CacheHeader { version, fingerprint: u64_at(16), frames: u64_at(24), shape, source, key: key.to_string() })
    }
}

/// A fingerprint of a dataset's layout: `info.json`, the episode table (frame ranges, files,
/// time offsets) and every row's timestamp. A checkpoint records it, so that a resumed run reads
/// the same samples; a copy of the dataset elsewhere has the same one.
pub fn fingerprint(dataset: &Dataset) -> Result<u64> {
    let info_path = dataset.root().join(INFO_PATH);
    let mut bytes = std::fs::read(&info_path).map_err(|e| Error::io(&info_path, e))?;
    for e in dataset.episodes() {
        bytes.extend_from_slice(format!("{}:{:?}:{}", e.index, e.frames, e.data_file.display()).as_bytes());
        for v in &e.videos {
            bytes.extend_from_slice(format!("{}@{}", v.file.display(), v.from_timestamp).as_bytes());
        }
    }
    for row in 0..dataset.len() {
        bytes.extend_from_slice(&(dataset.timestamp(row) as f32).to_le_bytes());
    }
    Ok(twox_hash::XxHash64::oneshot(0, &bytes))
}

/// A fingerprint of everything a frame cache's frames depend on: the layout ([`fingerprint`])
/// and the size and modification time of every data and video file, so that a dataset written
/// again in place with other frames but the same layout (a synthetic dataset rewritten with
/// another seed) is not served the frames of its previous writing. A copy that does not keep
/// the files' times gets a cache of its own.
pub fn cache_fingerprint(dataset: &Dataset) -> Result<u64> {
    let mut bytes = fingerprint(dataset)?.to_le_bytes().to_vec();
    let mut files = std::collections::BTreeSet::new();
    for e in dataset.episodes() {
        files.insert(&e.data_file);
        files.extend(e.videos.iter().map(|v| &v.file));
    }
    for file in files {
        let path = dataset.root().join(file);
        let meta = std::fs::metadata(&path).map_err(|e| Error::io(&path, e))?;
        let modified = meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
        bytes.extend_from_slice(&meta.len().to_le_bytes());
        bytes.extend_from_slice(&modified.map_or(0, |d| d.as_nanos()).to_le_bytes());
    }
    Ok(twox_hash::XxHash64::oneshot(0, &bytes))
}

/// The cache file of camera `key` in `dir`.
pub fn cache_file(dir: &Path, key: &str) -> PathBuf {
    dir.join(format!("{key}.frames"))
}

/// Decodes every frame of every camera of `dataset` into `dir` (one file per camera), resized
/// to `resize` (height, width) if given. `progress` is called with the number of frames done
/// so far. Files are written beside their final name and renamed into place when complete.
pub fn write_frame_cache(
    dataset: &Dataset,
    dir: &Path,
    resize: Option<(usize, usize)>,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let fingerprint = cache_fingerprint(dataset)?;
    let done = AtomicU64::new(0);
    let mut written = Vec::new();
    for key in dataset.info().camera_keys() {
        let feature = dataset.info().feature(key.as_str()).expect("a camera");
        let source = feature.frame_shape().expect("a camera has a frame shape");
        let shape = match resize {
            Some((height, width)) => FrameShape { channels: source.channels, height, width },
            None => source,
        };
        let header = CacheHeader {
            version: FORMAT_VERSION,
            fingerprint,
            frames: dataset.len() as u64,
            shape,
            source,
            key: key.to_string(),
        };
        let path = cache_file(dir, key.as_str());
        // One temporary file per writer (process and call): runs that build the same cache at
        // once each write a whole file and publish it by renaming; none writes into another's.
        static WRITERS: AtomicU64 = AtomicU64::new(0);
        let writer = WRITERS.fetch_add(1, Ordering::Relaxed);
        let tmp = path.with_extension(format!("frames.tmp.{}.{writer}", std::process::id()));
        let removed_on_error = RemoveOnDrop(Some(tmp.clone()));
        let file = File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
        let total = HEADER_LEN as u64 + dataset.len() as u64 * shape.len() as u64;
        file.set_len(total).map_err(|e| Error::io(&tmp, e))?;
        let camera = dataset.info().video_keys().iter().position(|k| *k == key);
        dataset.episodes().par_iter().try_for_each_init(
            || (DecoderCache::default(), Vec::new(), Vec::new()),
            |(decoders, pixels, resized), episode| -> Result<()> {
                pixels.resize(episode.len() * source.len(), 0);
                match camera {
                    Some(c) => {
                        let path = dataset.video_file(episode, c)?;
                        let from = episode.videos[c].from_timestamp;
                        let times: Vec<f64> = episode.frames.clone().map(|r| from + dataset.timestamp(r)).collect();
                        let decoder = decoders.get(&path)?;
                        check_video_shape(dataset.root(), feature, source, decoder.shape(), &path)?;
                        decoder.frames_at(&times, dataset.options().tolerance_s, pixels)?;
                    }
                    None => {
                        let Some(ColumnValues::Image(images)) = dataset.table().column(key.as_str()).map(|c| &c.values)
                        else {
                            return Err(Error::request(format!("camera `{key}` has no image column")));
                        };
                        for (i, row) in episode.frames.clone().enumerate() {
                            let (s, chw) = decode_chw(images.get(row)).map_err(|message| Error::Image {
                                path: dataset.table().file_of(row).to_path_buf(),
                                field: key.to_string(),
                                row,
                                message,
                            })?;
                            if s != source {
                                return Err(Error::Image {
                                    path: dataset.table().file_of(row).to_path_buf(),
                                    field: key.to_string(),
                                    row,
                                    message: format!("image is {s}, meta/info.json declares {source}"),
                                });
                            }
                            pixels[i * source.len()..(i + 1) * source.len()].copy_from_slice(&chw);
                        }
                    }
                }
                let out: &[u8] = if shape == source {
                    pixels
                } else {
                    resized.clear();
                    for frame in pixels.chunks_exact(source.len()) {
                        resized.extend_from_slice(&resize_chw(frame, source, shape));
                    }
                    resized
                };
                let offset = HEADER_LEN as u64 + episode.frames.start as u64 * shape.len() as u64;
                file.write_all_at(out, offset).map_err(|e| Error::io(&tmp, e))?;
                progress(done.fetch_add(episode.len() as u64, Ordering::Relaxed) + episode.len() as u64);
                Ok(())
            },
        )?;
        file.write_all_at(&header.encode(), 0).map_err(|e| Error::io(&tmp, e))?;
        file.sync_all().map_err(|e| Error::io(&tmp, e))?;
        drop(file);
        std::fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
        removed_on_error.keep();
        written.push(path);
    }
    let note = dir.join("README.txt");
    let mut f = File::create(&note).map_err(|e| Error::io(&note, e))?;
    writeln!(
        f,
        "Decoded-frame cache of {} (format {FORMAT_VERSION}), written by `datasets cache`.",
        dataset.root().display()
    )
    .map_err(|e| Error::io(&note, e))?;
    Ok(written)
}

/// Removes a half-written file when the writer returns early (an error, a full disk).
struct RemoveOnDrop(Option<PathBuf>);

impl RemoveOnDrop {
    /// The file was published: leave it.
    fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The bytes [`write_frame_cache`] writes for `dataset` at its cameras' own sizes: one header and
/// one frame per row, per camera.
pub fn decoded_bytes(dataset: &Dataset) -> u64 {
    let info = dataset.info();
    info.camera_keys()
        .iter()
        .filter_map(|key| info.feature(key.as_str()).and_then(Feature::frame_shape))
        .map(|shape| HEADER_LEN as u64 + dataset.len() as u64 * shape.len() as u64)
        .sum()
}

/// Resizes one CHW frame with a triangle (bilinear, area-averaging when shrinking) filter.
fn resize_chw(frame: &[u8], from: FrameShape, to: FrameShape) -> Vec<u8> {
    let plane = from.height * from.width;
    let mut hwc = vec![0u8; frame.len()];
    for i in 0..plane {
        for c in 0..from.channels {
            hwc[i * from.channels + c] = frame[c * plane + i];
        }
    }
    let image = image::RgbImage::from_raw(from.width as u32, from.height as u32, hwc).expect("sizes match");
    let small =
        image::imageops::resize(&image, to.width as u32, to.height as u32, image::imageops::FilterType::Triangle);
    let out_plane = to.height * to.width;
    let mut chw = vec![0u8; to.len()];
    for (i, px) in small.pixels().enumerate() {
        for c in 0..3 {
            chw[c * out_plane + i] = px.0[c];
        }
    }
    chw
}

/// One camera's frames, memory-mapped.
#[derive(Debug)]
pub struct CachedCamera {
    header: CacheHeader,
    map: memmap2::Mmap,
    /// The mapped file, kept open to notice a truncation (see [`FrameCache::check_intact`]).
    file: File,
    path: PathBuf,
}

impl CachedCamera {
    /// The header.
    pub fn header(&self) -> &CacheHeader {
        &self.header
    }

    /// The frame of dataset row `row` (CHW uint8), borrowed from the map.
    pub fn frame(&self, row: usize) -> &[u8] {
        let len = self.header.shape.len();
        &self.map[HEADER_LEN + row * len..HEADER_LEN + (row + 1) * len]
    }
}

/// The frame cache of a dataset: one memory-mapped file per camera.
#[derive(Debug)]
pub struct FrameCache {
    dir: PathBuf,
    cameras: Vec<CachedCamera>,
}

impl FrameCache {
    /// Opens the cache in `dir` for `dataset`, refusing files of another format version, of
    /// another dataset (or an older state of this one), or of the wrong size.
    pub fn open(dir: &Path, dataset: &Dataset) -> Result<Self> {
        let fingerprint = cache_fingerprint(dataset)?;
        let mut cameras = Vec::new();
        for key in dataset.info().camera_keys() {
            let path = cache_file(dir, key.as_str());
            let map = crate::table::mmap::map_readonly(&path)?
                .ok_or_else(|| Error::field(&path, "header", "the file is empty"))?;
            let header = CacheHeader::decode(&path, &map[..map.len().min(HEADER_LEN)])?;
            if header.key != key.as_str() {
                return Err(Error::field(&path, "key", format!("holds camera `{}`, not `{key}`", header.key)));
            }
            if header.fingerprint != fingerprint || header.frames != dataset.len() as u64 {
                return Err(Error::field(
                    &path,
                    "fingerprint",
                    format!(
                        "this cache was made from another dataset or an older state of {} (its {} frames, fingerprint {:016x}; the dataset has {} frames, fingerprint {fingerprint:016x}): rebuild it with `datasets cache`",
                        dataset.root().display(),
                        header.frames,
                        header.fingerprint,
                        dataset.len()
                    ),
                ));
            }
            let expected = HEADER_LEN as u64 + header.frames * header.shape.len() as u64;
            if map.len() as u64 != expected {
                return Err(Error::field(
                    &path,
                    "size",
                    format!(
                        "{} bytes, {expected} expected: the file is truncated or was written incompletely",
                        map.len()
                    ),
                ));
            }
            let file = File::open(&path).map_err(|e| Error::io(&path, e))?;
            cameras.push(CachedCamera { header, map, file, path });
        }
        Ok(FrameCache { dir: dir.to_path_buf(), cameras })
    }

    /// The cache folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Checks that no cache file shrank since it was mapped. Reading a mapped page past the
    /// end of a file that another process truncated raises `SIGBUS`, which would kill the
    /// process; the loader calls this before each batch so that a truncation between batches
    /// is an error instead. (One that lands during a batch's copy cannot be caught this way.)
    pub fn check_intact(&self) -> Result<()> {
        for camera in &self.cameras {
            let len = camera.file.metadata().map_err(|e| Error::io(&camera.path, e))?.len();
            if len < camera.map.len() as u64 {
                return Err(Error::field(
                    &camera.path,
                    "size",
                    format!(
                        "the file shrank from {} to {len} bytes while in use: another process truncated it; rebuild it with `datasets cache`",
                        camera.map.len()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The cached camera `key`.
    pub fn camera(&self, key: &str) -> Option<&CachedCamera> {
        self.cameras.iter().find(|c| c.header.key == key)
    }
}
