//! Several datasets trained as one, as LeRobot's `MultiLeRobotDataset` joins them: concatenated
//! (a sample's index is its dataset's start plus its row there), the features every dataset has
//! (a feature only some have is left out, and said so), one set of statistics aggregated as
//! LeRobot's `aggregate_stats` does, and each dataset's own tasks.
//!
//! Where LeRobot does not check, this does: the features kept must agree in kind and shape, and
//! the datasets must share their frame rate (LeRobot would silently use the first one's).

use std::sync::Arc;

use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::meta::features::{Dtype, Feature};
use crate::meta::info::{DatasetInfo, INFO_PATH};
use crate::stats::{STATS_JSON, Stats, aggregate};

/// Datasets read together: one index space, the common features, aggregated statistics.
#[derive(Debug, Clone)]
pub struct DatasetSet {
    parts: Vec<Arc<Dataset>>,
    names: Vec<String>,
    /// Where each dataset starts in the joint index, and the total at the end (`parts + 1`).
    starts: Vec<usize>,
    info: DatasetInfo,
    stats: Stats,
    left_out: Vec<String>,
}

impl DatasetSet {
    /// Joins `parts` (each with the name errors and logs use: its Hub id or its folder), in
    /// order. A single dataset is kept as it is, statistics included.
    pub fn new(parts: Vec<(String, Arc<Dataset>)>) -> Result<Self> {
        let Some((_, first)) = parts.first() else {
            return Err(Error::Request("no dataset given".into()));
        };
        let mut info = first.info().clone();
        let label = |i: usize| format!("dataset {i} ({})", parts[i].0);
        // LeRobot's rule: a feature not in every dataset is left out of the samples.
        let mut left_out = Vec::new();
        for (i, (_, dataset)) in parts.iter().enumerate() {
            for feature in &dataset.info().features {
                let key = feature.key.as_str();
                let everywhere = parts.iter().all(|(_, d)| d.info().feature(key).is_some());
                if !everywhere && !left_out.iter().any(|k| k == key) {
                    tracing::warn!(
                        "{}: `{key}` is not in every dataset; left out, as LeRobot's MultiLeRobotDataset does",
                        label(i)
                    );
                    left_out.push(key.to_string());
                }
            }
        }
        info.features.retain(|f| !left_out.iter().any(|k| k == f.key.as_str()));
        if info.features.is_empty() {
            return Err(Error::Request("the datasets have no feature in common".into()));
        }
        if parts.len() > 1 && info.feature(DATASET_INDEX).is_some() {
            return Err(Error::field(
                first.root().join(INFO_PATH),
                format!("features.{DATASET_INDEX}"),
                "is the key that says which dataset a sample comes from when several are read together",
            ));
        }
        for (i, (_, dataset)) in parts.iter().enumerate().skip(1) {
            let here = dataset.info();
            if here.fps != info.fps {
                return Err(Error::field(
                    dataset.root().join(INFO_PATH),
                    "fps",
                    format!(
                        "{} records at {} fps, {} at {}; datasets trained together must share their fps",
                        label(i),
                        here.fps,
                        label(0),
                        info.fps
                    ),
                ));
            }
            for kept in &info.features {
                let other = here.feature(kept.key.as_str()).expect("kept features are in every dataset");
                check_agree(kept, other).map_err(|message| {
                    Error::field(
                        dataset.root().join(INFO_PATH),
                        format!("features.{}", kept.key.as_str()),
                        format!("{}: {message} where {} has {}", label(i), label(0), describe(kept)),
                    )
                })?;
            }
        }
        let stats = if parts.len() == 1 { first.stats().clone() } else { aggregate_kept(&parts, &info)? };
        let mut starts = vec![0];
        for (_, d) in &parts {
            starts.push(starts.last().expect("starts with 0") + d.len());
        }
        info.total_frames = *starts.last().expect("one per dataset and the total");
        info.total_episodes = parts.iter().map(|(_, d)| d.episodes().len()).sum();
        let (names, parts) = parts.into_iter().unzip();
        Ok(Self { parts, names, starts, info, stats, left_out })
    }

    /// The datasets, in order.
    pub fn parts(&self) -> &[Arc<Dataset>] {
        &self.parts
    }

    /// The name of dataset `part` (its Hub id or its folder).
    pub fn name(&self, part: usize) -> &str {
        &self.names[part]
    }

    /// Where dataset `part` starts in the joint index.
    pub fn start(&self, part: usize) -> usize {
        self.starts[part]
    }

    /// Samples in all the datasets together.
    pub fn len(&self) -> usize {
        *self.starts.last().expect("one per dataset and the total")
    }

    /// Whether no dataset has a frame.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The dataset of joint index `index` and the row there.
    pub fn locate(&self, index: usize) -> Option<(usize, usize)> {
        if index >= self.len() {
            return None;
        }
        let part = self.starts.partition_point(|&s| s <= index) - 1;
        Some((part, index - self.starts[part]))
    }

    /// The first dataset's `info.json` with only the features every dataset has, and frame and
    /// episode totals summed.
    pub fn info(&self) -> &DatasetInfo {
        &self.info
    }

    /// The statistics: the dataset's own, or with several datasets those of the features kept,
    /// aggregated as LeRobot's `aggregate_stats` does (count-weighted means, pooled variances,
    /// extreme min and max).
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The features left out because not every dataset has them.
    pub fn left_out(&self) -> &[String] {
        &self.left_out
    }

    /// The task of joint index `index`, from its own dataset's task table.
    pub fn task_of(&self, index: usize) -> Option<&str> {
        let (part, row) = self.locate(index)?;
        Some(self.parts[part].task_of(row))
    }

    /// The episode ranges of every dataset in joint indices, dataset by dataset.
    pub fn episode_ranges(&self) -> Vec<Vec<std::ops::Range<usize>>> {
        self.parts
            .iter()
            .zip(&self.starts)
            .map(|(d, &start)| d.episodes().iter().map(|e| e.frames.start + start..e.frames.end + start).collect())
            .collect()
    }
}

/// The key of the batch tensor that says which dataset each sample came from, as LeRobot's
/// `MultiLeRobotDataset` names it.
pub const DATASET_INDEX: &str = "dataset_index";

/// The statistics of the features kept, aggregated over the datasets as LeRobot's
/// `aggregate_stats` does. A feature some datasets have statistics for must have them in all
/// (with their `count`), or the aggregate would silently be the others'.
fn aggregate_kept(parts: &[(String, Arc<Dataset>)], info: &DatasetInfo) -> Result<Stats> {
    let mut out = Stats::new();
    for kept in info.features.iter().filter(|f| f.dtype != Dtype::String) {
        let key = kept.key.as_str();
        if !parts.iter().any(|(_, d)| d.stats().contains_key(key)) {
            continue;
        }
        let mut each = Vec::with_capacity(parts.len());
        for (i, (name, dataset)) in parts.iter().enumerate() {
            let missing = |what: &str| {
                Error::field(
                    dataset.root().join(STATS_JSON),
                    key,
                    format!(
                        "dataset {i} ({name}) has no {what} for `{key}` where others have them; \
                         compute them with `datasets stats --write`"
                    ),
                )
            };
            let stats = dataset.stats().get(key).ok_or_else(|| missing("statistics"))?;
            stats.count().ok_or_else(|| missing("`count`"))?;
            each.push(Stats::from([(key.to_string(), stats.clone())]));
        }
        let joint = aggregate(&each).map_err(|m| {
            Error::field(parts[0].1.root().join(STATS_JSON), key, format!("cannot be aggregated with the others': {m}"))
        })?;
        out.extend(joint);
    }
    Ok(out)
}

impl From<Arc<Dataset>> for DatasetSet {
    fn from(dataset: Arc<Dataset>) -> Self {
        let name = dataset.root().display().to_string();
        Self::new(vec![(name, dataset)]).expect("one dataset always forms a set")
    }
}

/// What two datasets' versions of one feature must share: kind and shape (float32 and float64
/// agree, both are read as float32; so do integer types, all read as int64).
fn check_agree(kept: &Feature, other: &Feature) -> std::result::Result<(), String> {
    if kind(&kept.dtype) != kind(&other.dtype) {
        return Err(format!("`{}` is {}", kept.key.as_str(), describe(other)));
    }
    let same_shape = match (kept.frame_shape(), other.frame_shape()) {
        (Some(a), Some(b)) => a == b,
        _ => kept.shape == other.shape,
    };
    if !same_shape {
        return Err(format!("`{}` is {}", kept.key.as_str(), describe(other)));
    }
    Ok(())
}

/// The kind a feature is read as.
fn kind(dtype: &Dtype) -> &str {
    match dtype {
        Dtype::Float32 | Dtype::Float64 => "float",
        Dtype::Int(_) => "int",
        Dtype::Bool => "bool",
        Dtype::String => "string",
        Dtype::Image => "image",
        Dtype::Video => "video",
        Dtype::Other(d) => d,
    }
}

/// `float of shape [2]`, `video of shape 3x96x96`, for errors.
fn describe(feature: &Feature) -> String {
    match feature.frame_shape() {
        Some(frame) => format!("{} of shape {frame}", kind(&feature.dtype)),
        None => format!("{} of shape {:?}", kind(&feature.dtype), feature.shape),
    }
}
