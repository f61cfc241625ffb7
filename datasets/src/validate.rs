//! A thorough check of a dataset folder that reads every file and reports every problem it
//! finds with the file and the field, instead of stopping at the first as [`Dataset::open`]
//! does.
//!
//! [`Dataset::open`]: crate::Dataset::open

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::error::Error;
use crate::meta::episodes::{Episode, read_episodes};
use crate::meta::features::Feature;
use crate::meta::info::{DatasetInfo, INFO_PATH};
use crate::meta::paths::join_under;
use crate::meta::tasks::read_tasks;
use crate::stats::{EPISODES_STATS_JSONL, STATS_JSON, Stats, non_finite, read_episode_stats, read_stats};
use crate::table::{ColumnValues, FrameTable};
use crate::video::probe;

/// One problem: where, which field, what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file.
    pub file: PathBuf,
    /// The field, column or key.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: `{}`: {}", self.file.display(), self.field, self.message)
    }
}

impl From<Error> for Problem {
    fn from(error: Error) -> Self {
        match error {
            Error::Field { path, field, message } => Problem { file: path, field, message },
            Error::Image { path, field, row, message } => {
                Problem { file: path, field, message: format!("row {row}: {message}") }
            }
            Error::Io { ref path, .. }
            | Error::Json { ref path, .. }
            | Error::Parquet { ref path, .. }
            | Error::UnsupportedVersion { ref path, .. }
            | Error::Video { ref path, .. }
            | Error::VideoUnsupported { ref path }
            | Error::FrameTimestamp { ref path, .. } => {
                let file = path.clone();
                let text = error.to_string();
                let prefix = format!("{}: ", file.display());
                Problem {
                    file,
                    field: "(file)".into(),
                    message: text.strip_prefix(&prefix).unwrap_or(&text).to_string(),
                }
            }
            Error::Request(message) => Problem { file: PathBuf::new(), field: "(request)".into(), message },
            Error::Hub { .. } | Error::HubUpload { .. } => {
                Problem { file: PathBuf::new(), field: "(hub)".into(), message: error.to_string() }
            }
            Error::Remote { ref url, .. } => {
                let text = error.to_string();
                let message = text.strip_prefix(&format!("{url}: ")).unwrap_or(&text).to_string();
                Problem { file: PathBuf::from(url), field: "(stream)".into(), message }
            }
        }
    }
}

/// What [`validate`] checked and found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Every problem found.
    pub problems: Vec<Problem>,
    /// Parquet data files read.
    pub data_files: usize,
    /// Rows read.
    pub rows: usize,
    /// Video files decoded.
    pub video_files: usize,
    /// Video frames decoded.
    pub video_frames: usize,
}

impl Report {
    /// Whether nothing was wrong.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }

    fn push(&mut self, file: &Path, field: impl Into<String>, message: impl Into<String>) {
        self.problems.push(Problem { file: file.to_path_buf(), field: field.into(), message: message.into() });
    }
}

/// Reads every file of the dataset at `root` and checks it against `info.json` and LeRobot's
/// rules, with `tolerance_s` for timestamps.
pub fn validate(root: &Path, tolerance_s: f64) -> Report {
    let mut report = Report::default();
    let info_path = root.join(INFO_PATH);
    let info = match DatasetInfo::read(root) {
        Ok(info) => info,
        Err(e) => {
            report.problems.push(e.into());
            return report;
        }
    };
    let episodes = match read_episodes(root, &info) {
        Ok(e) => e,
        Err(e) => {
            report.problems.push(e.into());
            return report;
        }
    };
    let frames = episodes.last().map_or(0, |e| e.frames.end);
    if episodes.len() != info.total_episodes {
        report.push(
            &info_path,
            "total_episodes",
            format!("{} but the episode table lists {}", info.total_episodes, episodes.len()),
        );
    }
    if frames != info.total_frames {
        report.push(&info_path, "total_frames", format!("{} but the episodes hold {frames} frames", info.total_frames));
    }
    let tasks = match read_tasks(root, &info) {
        Ok(t) => {
            if t.len() != info.total_tasks {
                report.push(
                    &info_path,
                    "total_tasks",
                    format!("{} but the task table lists {}", info.total_tasks, t.len()),
                );
            }
            Some(t)
        }
        Err(e) => {
            report.problems.push(e.into());
            None
        }
    };
    check_stats(root, &info, &episodes, &mut report);
    check_data(root, &info, &episodes, tasks.as_deref(), tolerance_s, &mut report);
    check_videos(root, &info, &episodes, tolerance_s, &mut report);
    report
}

fn check_stats(root: &Path, info: &DatasetInfo, episodes: &[Episode], report: &mut Report) {
    let (file, stats) = match info.version {
        crate::meta::version::CodebaseVersion::V2_1 => {
            let path = root.join(EPISODES_STATS_JSONL);
            match read_episode_stats(&path) {
                Ok(per_episode) => {
                    let listed: Vec<usize> = per_episode.iter().map(|(i, _)| *i).collect();
                    if listed != (0..episodes.len()).collect::<Vec<_>>() {
                        report.push(
                            &path,
                            "episode_index",
                            format!(
                                "stats for {} episodes, not one line per episode 0..{}",
                                listed.len(),
                                episodes.len()
                            ),
                        );
                    }
                    for (i, s) in &per_episode {
                        for (name, pos) in non_finite(s) {
                            report.push(
                                &path,
                                format!("episode {i}: {name}"),
                                format!("non-finite value at position {pos}"),
                            );
                        }
                    }
                }
                Err(e) => {
                    report.problems.push(e.into());
                    return;
                }
            }
            (path, read_stats(root, info))
        }
        _ => (root.join(STATS_JSON), read_stats(root, info)),
    };
    let stats: Stats = match stats {
        Ok(s) => s,
        Err(e) => {
            report.problems.push(e.into());
            return;
        }
    };
    if stats.is_empty() {
        report.push(
            &file,
            "(file)",
            "missing or empty: normalisation needs statistics (`datasets stats --write` computes them)",
        );
        return;
    }
    for (name, pos) in non_finite(&stats) {
        report.push(&file, name, format!("non-finite value at position {pos}"));
    }
    for feature in &info.features {
        if matches!(feature.dtype, crate::meta::features::Dtype::String) {
            continue;
        }
        let Some(s) = stats.get(feature.key.as_str()) else {
            report.push(&file, feature.key.as_str(), "no statistics for this feature");
            continue;
        };
        let expected: Vec<usize> = match feature.frame_shape() {
            Some(f) => vec![f.channels, 1, 1],
            None => vec![feature.width()],
        };
        for stat in ["min", "max", "mean", "std"] {
            match s.get(stat) {
                None => report.push(&file, format!("{}.{stat}", feature.key), "missing"),
                Some(a) if a.values.len() != expected.iter().product::<usize>() => {
                    report.push(
                        &file,
                        format!("{}.{stat}", feature.key),
                        format!("shape {:?}, expected {expected:?}", a.shape),
                    );
                }
                Some(_) => {}
            }
        }
    }
}

fn check_data(
    root: &Path,
    info: &DatasetInfo,
    episodes: &[Episode],
    tasks: Option<&[String]>,
    tolerance_s: f64,
    report: &mut Report,
) {
    let info_path = root.join(INFO_PATH);
    let mut files: BTreeMap<PathBuf, Vec<&Episode>> = BTreeMap::new();
    for e in episodes {
        match join_under(root, &e.data_file) {
            Ok(path) => files.entry(path).or_default().push(e),
            Err(m) => report.push(&info_path, "data_path", m),
        }
    }
    let features: Vec<&Feature> = info.column_features().collect();
    let declared: Vec<&str> = features.iter().map(|f| f.key.as_str()).collect();
    let results: Vec<(PathBuf, Vec<Problem>, usize)> = files
        .par_iter()
        .map(|(path, members)| {
            let mut problems = Vec::new();
            let mut local = Report::default();
            if let Ok(extra) = undeclared_columns(path, &declared) {
                for column in extra {
                    local.push(path, &column, "column not declared in meta/info.json (LeRobot's loader refuses it)");
                }
            }
            let rows = match FrameTable::read(std::slice::from_ref(path), &features) {
                Ok(table) => {
                    check_rows(&table, path, members, info, tasks, tolerance_s, &mut local);
                    table.len()
                }
                Err(e) => {
                    local.problems.push(e.into());
                    0
                }
            };
            problems.extend(local.problems);
            (path.clone(), problems, rows)
        })
        .collect();
    for (_, problems, rows) in results {
        report.data_files += 1;
        report.rows += rows;
        report.problems.extend(problems);
    }
}

/// Columns in the parquet file that `info.json` does not declare.
fn undeclared_columns(path: &Path, declared: &[&str]) -> crate::error::Result<Vec<String>> {
    let bytes = crate::table::mmap::map_file(path)?;
    let builder = crate::table::parquet_file::catch_decoder_panics(path, || {
        parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)
            .map_err(|e| Error::parquet(path, e))
    })?;
    Ok(builder.schema().fields().iter().map(|f| f.name().clone()).filter(|n| !declared.contains(&n.as_str())).collect())
}

fn check_rows(
    table: &FrameTable,
    path: &Path,
    members: &[&Episode],
    info: &DatasetInfo,
    tasks: Option<&[String]>,
    tolerance_s: f64,
    report: &mut Report,
) {
    let expected: usize = members.iter().map(|e| e.len()).sum();
    if table.len() != expected {
        report.push(
            path,
            "(rows)",
            format!(
                "{} rows, but its episodes {:?} hold {expected} frames",
                table.len(),
                members.iter().map(|e| e.index).collect::<Vec<_>>()
            ),
        );
        return;
    }
    let ints = |k: &str| table.column(k).and_then(|c| c.as_i64());
    let ts = table.column("timestamp").and_then(|c| c.as_f32());
    let period = 1.0 / info.fps;
    let mut row = 0;
    for e in members {
        for t in 0..e.len() {
            let global = e.frames.start + t;
            let mut check = |key: &str, want: i64| {
                if let Some(col) = ints(key)
                    && col[row] != want
                {
                    report.push(
                        path,
                        key,
                        format!("row {row} has {}, expected {want} (frame {t} of episode {})", col[row], e.index),
                    );
                }
            };
            check("index", global as i64);
            check("episode_index", e.index as i64);
            check("frame_index", t as i64);
            if let (Some(col), Some(tasks)) = (ints("task_index"), tasks)
                && usize::try_from(col[row]).ok().is_none_or(|i| i >= tasks.len())
            {
                report.push(
                    path,
                    "task_index",
                    format!("row {row} has {}, but there are {} tasks", col[row], tasks.len()),
                );
            }
            if let Some(ts) = ts
                && t > 0
            {
                let diff = f64::from(ts[row]) - f64::from(ts[row - 1]);
                if (diff - period).abs() > tolerance_s {
                    report.push(path, "timestamp", format!("row {row} (episode {}): {diff:.6}s after the previous frame, expected {period:.6}s ± {tolerance_s}", e.index));
                }
            }
            row += 1;
        }
    }
    for feature in info.column_features() {
        if let Some(ColumnValues::F32(values)) = table.column(feature.key.as_str()).map(|c| &c.values)
            && let Some(i) = values.iter().position(|v| !v.is_finite())
        {
            let width = feature.width();
            report.push(path, feature.key.as_str(), format!("non-finite value {} at row {}", values[i], i / width));
        }
    }
}

fn check_videos(root: &Path, info: &DatasetInfo, episodes: &[Episode], tolerance_s: f64, report: &mut Report) {
    let info_path = root.join(INFO_PATH);
    let cameras = info.video_keys();
    // Every (file, camera) with the episodes it holds.
    let mut files: BTreeMap<PathBuf, (usize, Vec<&Episode>)> = BTreeMap::new();
    for e in episodes {
        for (c, video) in e.videos.iter().enumerate() {
            match join_under(root, &video.file) {
                Ok(path) => files.entry(path).or_insert_with(|| (c, Vec::new())).1.push(e),
                Err(m) => report.push(&info_path, "video_path", m),
            }
        }
    }
    // The timestamps of every row, to check each frame is in the video.
    let timestamps: Option<Vec<f32>> = {
        let features: Vec<&Feature> = info.feature("timestamp").into_iter().collect();
        let data: Vec<PathBuf> = {
            let mut d: Vec<PathBuf> = episodes.iter().filter_map(|e| join_under(root, &e.data_file).ok()).collect();
            d.dedup();
            d
        };
        FrameTable::read(&data, &features)
            .ok()
            .and_then(|t| t.column("timestamp").and_then(|c| c.as_f32()).map(<[f32]>::to_vec))
            // Fewer rows than the episodes claim is reported by the data checks; skip these.
            .filter(|ts| episodes.iter().all(|e| e.frames.end <= ts.len()))
    };
    let results: Vec<(Vec<Problem>, usize)> = files
        .par_iter()
        .map(|(path, (camera, members))| {
            let mut local = Report::default();
            let feature = info.feature(cameras[*camera].as_str()).expect("a video feature");
            let decoded = match probe(path) {
                Ok(p) => p,
                Err(e) => {
                    local.problems.push(e.into());
                    return (local.problems, 0);
                }
            };
            if let Some(declared) = feature.frame_shape()
                && declared != decoded.shape {
                    local.push(&info_path, format!("features.{}.shape", feature.key), format!("declares {declared} but {} decodes to {}", path.display(), decoded.shape));
                }
            let mut sorted = decoded.timestamps.clone();
            sorted.sort_by(f64::total_cmp);
            for e in members {
                let video = &e.videos[*camera];
                let from = video.from_timestamp;
                let to = video.to_timestamp.unwrap_or(f64::INFINITY);
                let in_range = sorted.iter().filter(|&&t| t >= from - tolerance_s && t < to - tolerance_s).count();
                if in_range != e.len() {
                    local.push(path, format!("episode {}", e.index), format!("{in_range} frames in [{from:.4}s, {to:.4}s), the episode has {} rows", e.len()));
                }
                if let Some(to) = video.to_timestamp {
                    let duration = e.len() as f64 / info.fps;
                    if ((to - from) - duration).abs() > tolerance_s.max(1e-6) {
                        local.push(path, format!("videos/{}/to_timestamp", feature.key), format!("episode {}: to - from = {:.6}s, but {} frames at {} fps last {duration:.6}s", e.index, to - from, e.len(), info.fps));
                    }
                }
                let Some(ts) = timestamps.as_ref() else { continue };
                let missing: Vec<f64> = e
                    .frames
                    .clone()
                    .map(|row| from + f64::from(ts[row]))
                    .filter(|&q| {
                        let i = sorted.partition_point(|&t| t < q);
                        let near = [i.checked_sub(1), Some(i)].into_iter().flatten().filter_map(|j| sorted.get(j)).any(|&t| (t - q).abs() < tolerance_s);
                        !near
                    })
                    .collect();
                if let Some(first) = missing.first() {
                    local.push(
                        path,
                        format!("episode {}", e.index),
                        format!("{} of its {} frame timestamps have no video frame within {tolerance_s}s (first: {first:.6}s)", missing.len(), e.len()),
                    );
                }
            }
            (local.problems, decoded.timestamps.len())
        })
        .collect();
    for (problems, frames) in results {
        report.video_files += 1;
        report.video_frames += frames;
        report.problems.extend(problems);
    }
}
