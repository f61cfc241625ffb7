//! The episode table: for each episode its frames (a range of global `index`), its data file
//! and, per camera, its video file and time offset inside that file.
//!
//! v2.1 lists episodes in `meta/episodes.jsonl` and stores one file per episode; v3.0 lists them
//! in `meta/episodes/chunk-*/file-*.parquet` with the file and offset of each.

use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::meta::info::DatasetInfo;
use crate::meta::json::{Obj, parse_json};
use crate::meta::paths::TemplateArg;
use crate::table::parquet_file::{ParquetFile, nested_parquet_files};

/// Where v2.1 lists its episodes.
pub const EPISODES_JSONL: &str = "meta/episodes.jsonl";
/// Where v3.0 keeps its episode tables.
pub const EPISODES_DIR: &str = "meta/episodes";

/// Where one episode's frames of one camera are.
#[derive(Debug, Clone, PartialEq)]
pub struct EpisodeVideo {
    /// The MP4, relative to the dataset root.
    pub file: PathBuf,
    /// The episode's start inside that file, in seconds (0 in v2.1).
    pub from_timestamp: f64,
    /// The episode's end inside that file, in seconds, when recorded (v3.0).
    pub to_timestamp: Option<f64>,
}

/// One episode.
#[derive(Debug, Clone, PartialEq)]
pub struct Episode {
    /// `episode_index`, equal to its position in the table.
    pub index: usize,
    /// The global `index` range of its frames.
    pub frames: Range<usize>,
    /// The tasks performed in it.
    pub tasks: Vec<String>,
    /// Its parquet file, relative to the dataset root.
    pub data_file: PathBuf,
    /// Its video per video feature, in the order of [`DatasetInfo::video_keys`].
    pub videos: Vec<EpisodeVideo>,
}

impl Episode {
    /// The number of frames.
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// Whether the episode has no frames.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }
}

/// Reads the episode table of a dataset.
pub fn read_episodes(root: &Path, info: &DatasetInfo) -> Result<Vec<Episode>> {
    if info.version.is_v3() { read_v3(root, info) } else { read_v2(root, info) }
}

/// A raw episode row before frame ranges are assigned (v2.1).
struct JsonlEpisode {
    index: usize,
    length: usize,
    tasks: Vec<String>,
    line: usize,
}

fn read_v2(root: &Path, info: &DatasetInfo) -> Result<Vec<Episode>> {
    let path = root.join(EPISODES_JSONL);
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
    let mut rows = Vec::new();
    for (line_no, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let value = parse_json(&path, line)?;
        let prefix = format!("line {}", line_no + 1);
        let obj = Obj::new(&path, &prefix, &value)?;
        let tasks = obj
            .req_array("tasks")?
            .iter()
            .map(|t| t.as_str().map(str::to_string).ok_or_else(|| obj.error("tasks", "expected a list of strings")))
            .collect::<Result<Vec<_>>>()?;
        rows.push(JsonlEpisode {
            index: obj.req_usize("episode_index")?,
            length: obj.req_usize("length")?,
            tasks,
            line: line_no + 1,
        });
    }
    rows.sort_by_key(|r| r.index);
    let mut episodes = Vec::with_capacity(rows.len());
    let mut start = 0;
    for (position, row) in rows.into_iter().enumerate() {
        if row.index != position {
            return Err(Error::field(
                &path,
                format!("line {}.episode_index", row.line),
                format!(
                    "expected episode {position}, found {}: episode indices must run from 0 without gaps or repeats",
                    row.index
                ),
            ));
        }
        let chunk = row.index / info.chunks_size;
        let args = [("episode_chunk", TemplateArg::Int(chunk)), ("episode_index", TemplateArg::Int(row.index))];
        let info_path = root.join(crate::meta::info::INFO_PATH);
        let data_file = info.data_path.render(&args).map_err(|m| Error::field(&info_path, "data_path", m))?;
        let mut videos = Vec::new();
        for key in info.video_keys() {
            let template = info.video_path.as_ref().expect("checked when info.json was read");
            let mut video_args = args.to_vec();
            video_args.push(("video_key", TemplateArg::Str(key.as_str())));
            let file = template.render(&video_args).map_err(|m| Error::field(&info_path, "video_path", m))?;
            videos.push(EpisodeVideo { file, from_timestamp: 0.0, to_timestamp: None });
        }
        episodes.push(Episode {
            index: row.index,
            frames: start..start + row.length,
            tasks: row.tasks,
            data_file,
            videos,
        });
        start += row.length;
    }
    Ok(episodes)
}

fn read_v3(root: &Path, info: &DatasetInfo) -> Result<Vec<Episode>> {
    let dir = root.join(EPISODES_DIR);
    let files = nested_parquet_files(&dir)?;
    if files.is_empty() {
        return Err(Error::field(&dir, "chunk-*/file-*.parquet", "no episode tables found"));
    }
    let info_path = root.join(crate::meta::info::INFO_PATH);
    let mut episodes = Vec::new();
    for path in &files {
        let table = ParquetFile::read(path, |name| !name.starts_with("stats/"))?;
        let indices: Vec<i64> = table.scalars("episode_index")?;
        let tasks = if table.has("tasks") { table.string_lists("tasks")? } else { vec![Vec::new(); indices.len()] };
        let from: Vec<i64> = table.scalars("dataset_from_index")?;
        let to: Vec<i64> = table.scalars("dataset_to_index")?;
        let lengths: Vec<i64> = if table.has("length") { table.scalars("length")? } else { Vec::new() };
        let data_chunk: Vec<i64> = table.scalars("data/chunk_index")?;
        let data_file: Vec<i64> = table.scalars("data/file_index")?;
        let mut cameras = Vec::new();
        for key in info.video_keys() {
            let col = |stat: &str| format!("videos/{key}/{stat}");
            let chunk: Vec<i64> = table.scalars(&col("chunk_index"))?;
            let file: Vec<i64> = table.scalars(&col("file_index"))?;
            let from_ts: Vec<f64> = table.scalars(&col("from_timestamp"))?;
            let to_ts: Option<Vec<f64>> =
                if table.has(&col("to_timestamp")) { Some(table.scalars(&col("to_timestamp"))?) } else { None };
            cameras.push((key, chunk, file, from_ts, to_ts));
        }
        for row in 0..indices.len() {
            let position = episodes.len();
            let nonneg = |v: i64, field: &str| -> Result<usize> {
                usize::try_from(v).map_err(|_| Error::field(path, field, format!("row {row}: negative value {v}")))
            };
            let index = nonneg(indices[row], "episode_index")?;
            if index != position {
                return Err(Error::field(
                    path,
                    "episode_index",
                    format!(
                        "row {row} is episode {index} but episode {position} was expected: episode indices must run from 0 without gaps or repeats"
                    ),
                ));
            }
            let frames = nonneg(from[row], "dataset_from_index")?..nonneg(to[row], "dataset_to_index")?;
            if let Some(&len) = lengths.get(row)
                && nonneg(len, "length")? != frames.len()
            {
                return Err(Error::field(
                    path,
                    "length",
                    format!("episode {index}: length {len} but dataset_from/to_index span {frames:?}"),
                ));
            }
            let args = [
                ("chunk_index", TemplateArg::Int(nonneg(data_chunk[row], "data/chunk_index")?)),
                ("file_index", TemplateArg::Int(nonneg(data_file[row], "data/file_index")?)),
            ];
            let data_file = info.data_path.render(&args).map_err(|m| Error::field(&info_path, "data_path", m))?;
            let mut videos = Vec::with_capacity(cameras.len());
            for (key, chunk, file, from_ts, to_ts) in &cameras {
                let field = format!("videos/{key}/chunk_index");
                let args = [
                    ("video_key", TemplateArg::Str(key.as_str())),
                    ("chunk_index", TemplateArg::Int(nonneg(chunk[row], &field)?)),
                    ("file_index", TemplateArg::Int(nonneg(file[row], &format!("videos/{key}/file_index"))?)),
                ];
                let template = info.video_path.as_ref().expect("checked when info.json was read");
                let file = template.render(&args).map_err(|m| Error::field(&info_path, "video_path", m))?;
                let from_timestamp = from_ts[row];
                if !(from_timestamp.is_finite() && from_timestamp >= 0.0) {
                    return Err(Error::field(
                        path,
                        format!("videos/{key}/from_timestamp"),
                        format!("episode {index}: {from_timestamp} is not a valid offset"),
                    ));
                }
                videos.push(EpisodeVideo { file, from_timestamp, to_timestamp: to_ts.as_ref().map(|t| t[row]) });
            }
            episodes.push(Episode { index, frames, tasks: tasks[row].clone(), data_file, videos });
        }
    }
    check_frame_ranges(&episodes, &dir)?;
    Ok(episodes)
}

/// Episodes must tile `0..total` in order: each starts where the previous ended.
fn check_frame_ranges(episodes: &[Episode], source: &Path) -> Result<()> {
    let mut expected = 0;
    for episode in episodes {
        if episode.frames.start != expected || episode.frames.end < episode.frames.start {
            return Err(Error::field(
                source,
                "dataset_from_index",
                format!(
                    "episode {} spans frames {:?} but should start at {expected}: episodes must tile the global index without gaps",
                    episode.index, episode.frames
                ),
            ));
        }
        expected = episode.frames.end;
    }
    Ok(())
}
