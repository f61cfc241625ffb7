//! `meta/info.json`: the dataset's version, sizes, frame rate, path templates and features.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::meta::features::{Feature, FeatureKey};
use crate::meta::json::{Obj, read_json};
use crate::meta::paths::PathTemplate;
use crate::meta::version::CodebaseVersion;

/// Where `info.json` lives inside a dataset.
pub const INFO_PATH: &str = "meta/info.json";

/// The features every LeRobot dataset has, in every version.
pub const DEFAULT_FEATURES: [&str; 5] = ["timestamp", "frame_index", "episode_index", "index", "task_index"];

/// The parsed and checked `meta/info.json`.
#[derive(Debug, Clone)]
pub struct DatasetInfo {
    /// The version, which decides the layout.
    pub version: CodebaseVersion,
    /// `codebase_version` as written.
    pub codebase_version: String,
    /// `robot_type`, if any.
    pub robot_type: Option<String>,
    /// `total_episodes`.
    pub total_episodes: usize,
    /// `total_frames`.
    pub total_frames: usize,
    /// `total_tasks`.
    pub total_tasks: usize,
    /// `chunks_size` (1000 by default).
    pub chunks_size: usize,
    /// Frames per second (an integer in LeRobot's datasets; `30.0` is accepted).
    pub fps: f64,
    /// `splits`, e.g. `{"train": "0:8"}`.
    pub splits: BTreeMap<String, String>,
    /// `data_path`, a Python format template.
    pub data_path: PathTemplate,
    /// `video_path`, when the dataset has video features.
    pub video_path: Option<PathTemplate>,
    /// The features, in the order `info.json` lists them (the order cameras are stacked in).
    pub features: Vec<Feature>,
    /// The whole file as written, unknown keys included.
    pub raw: Map<String, Value>,
}

impl DatasetInfo {
    /// Reads and checks `<root>/meta/info.json`.
    pub fn read(root: &Path) -> Result<Self> {
        let path = root.join(INFO_PATH);
        let value = read_json(&path)?;
        Self::from_json(&path, &value)
    }

    /// Checks parsed `info.json` content; `path` is used in errors.
    pub fn from_json(path: &Path, value: &Value) -> Result<Self> {
        let top = Obj::new(path, "", value)?;
        let codebase_version = top.req_str("codebase_version")?.to_string();
        let version = CodebaseVersion::parse(&codebase_version)
            .ok_or_else(|| Error::UnsupportedVersion { path: path.to_path_buf(), found: codebase_version.clone() })?;

        let fps = top.req_f64("fps")?;
        if !(fps.is_finite() && fps > 0.0) {
            return Err(top.error("fps", format!("must be a positive number, found {fps}")));
        }
        let features_obj = top.req_obj("features")?;
        let mut features = Vec::with_capacity(features_obj.map().len());
        for key in features_obj.map().keys() {
            features.push(Feature::parse(&features_obj, key)?);
        }
        for required in DEFAULT_FEATURES {
            if !features.iter().any(|f| f.key.as_str() == required) {
                return Err(features_obj.error(required, "missing: every LeRobot dataset declares it"));
            }
        }

        let data_path = PathTemplate::parse(top.req_str("data_path")?).map_err(|m| top.error("data_path", m))?;
        let video_path = top
            .opt_str("video_path")?
            .map(|t| PathTemplate::parse(t).map_err(|m| top.error("video_path", m)))
            .transpose()?;
        if video_path.is_none() && features.iter().any(Feature::is_video) {
            return Err(top.error("video_path", "missing, but some features have dtype \"video\""));
        }

        let mut splits = BTreeMap::new();
        if let Some(s) = top.opt_obj("splits")? {
            for (name, range) in s.map() {
                let range = range.as_str().ok_or_else(|| s.error(name, "expected a string like \"0:8\""))?;
                splits.insert(name.clone(), range.to_string());
            }
        }

        let chunks_size = top.opt_usize("chunks_size")?.unwrap_or(1000);
        if chunks_size == 0 {
            return Err(top.error("chunks_size", "must be positive"));
        }

        Ok(DatasetInfo {
            version,
            codebase_version,
            robot_type: top.opt_str("robot_type")?.map(str::to_string),
            total_episodes: top.req_usize("total_episodes")?,
            total_frames: top.req_usize("total_frames")?,
            total_tasks: top.req_usize("total_tasks")?,
            chunks_size,
            fps,
            splits,
            data_path,
            video_path,
            features,
            raw: top.map().clone(),
        })
    }

    /// The feature called `key`.
    pub fn feature(&self, key: &str) -> Option<&Feature> {
        self.features.iter().find(|f| f.key.as_str() == key)
    }

    /// Camera features (video and image), in `info.json` order.
    pub fn camera_keys(&self) -> Vec<&FeatureKey> {
        self.features.iter().filter(|f| f.is_camera()).map(|f| &f.key).collect()
    }

    /// Video features, in `info.json` order.
    pub fn video_keys(&self) -> Vec<&FeatureKey> {
        self.features.iter().filter(|f| f.is_video()).map(|f| &f.key).collect()
    }

    /// Features stored as parquet columns (every feature except videos).
    pub fn column_features(&self) -> impl Iterator<Item = &Feature> {
        self.features.iter().filter(|f| !f.is_video())
    }
}
