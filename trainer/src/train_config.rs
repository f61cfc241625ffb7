//! The configuration of a training run: dataset, policy, loop and outputs, with the keys of
//! LeRobot's `lerobot-train` where they exist. Resolved from a preset's defaults, a config file
//! and command-line overrides, and saved with every checkpoint.

use std::path::{Path, PathBuf};

use kernels::DeviceKind;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use transforms::ImageTransformsConfig;

use datasets::auto_cache::FrameCacheChoice;
use loader::SampleOrdering;

use crate::device_frames::FramesOnDevice;
use crate::ema::EmaConfig;
use crate::error::{Error, Result};
use crate::frame_encoding::FrameEncodingChoice;
use crate::json_patch::merge;
use crate::policy_config::{DiffusionConfig, Preset};
use crate::precision::Precision;

/// The dataset part of the configuration (LeRobot's `--dataset.*`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DatasetConfig {
    /// The dataset folder, or several trained together (a list). With [`Self::repo_id`]: where
    /// the dataset is or is to be downloaded; with several ids, the folder holding each as
    /// `ROOT/OWNER/NAME` (as LeRobot's `MultiLeRobotDataset`), or one folder per id.
    #[serde(default)]
    pub root: DatasetRoots,
    /// The dataset's Hub id, `OWNER/NAME` (LeRobot's `--dataset.repo_id`), or several separated
    /// by commas: looked for under `HF_LEROBOT_HOME` and in LeRobot's Hub cache, downloaded if
    /// missing ([`datasets::hub`]).
    #[serde(default)]
    pub repo_id: Option<String>,
    /// With several datasets, the share of each epoch each one gets (normalised). Default: every
    /// frame of every dataset once per epoch, as LeRobot's `MultiLeRobotDataset` concatenates
    /// them.
    #[serde(default)]
    pub weights: Option<Vec<f64>>,
    /// The Hub revision (branch, tag or commit). Default: LeRobot's codebase version, v3.0.
    #[serde(default)]
    pub revision: Option<String>,
    /// Whether a dataset named by [`Self::repo_id`] may be downloaded. Default true
    /// (`HF_HUB_OFFLINE=1` forbids it too).
    #[serde(default = "yes")]
    pub download: bool,
    /// Only these episodes are sampled (LeRobot's `--dataset.episodes`); the statistics stay the
    /// whole dataset's, as LeRobot keeps them. Default: all.
    #[serde(default)]
    pub episodes: Option<Vec<usize>>,
    /// Where frames are read from: `auto` (default; a cache of the run's own, made on first use
    /// when the decoded frames fit [`Self::frame_cache_budget_gb`]), `off` (the dataset's videos
    /// and images), or a cache folder (`datasets cache`).
    pub frame_cache: FrameCacheChoice,
    /// The most an automatic frame cache may take, in GB. Default: half of what its filesystem
    /// has free (and of the memory available, for `/dev/shm`).
    #[serde(default)]
    pub frame_cache_budget_gb: Option<f64>,
    /// How video frames travel to the training device: `rgb` (LeRobot's frames, converted on
    /// the CPU), `yuv420`, the decoder's own planes (half the bytes, no conversion on the CPU),
    /// converted to RGB on the device with FFmpeg's arithmetic, so still LeRobot's frames; or
    /// `auto` (default): `yuv420` on a GPU where every camera is such a video, else `rgb`; a
    /// frame cache folder named in `frame_cache` is read in its own encoding, and an automatic
    /// cache that fits only as the policy's resized images (RGB) makes the run read RGB. (An
    /// automatic cache of full-size RGB frames that a CPU run made is not read by a GPU run, which
    /// makes its own of the planes.)
    #[serde(default)]
    pub frame_encoding: FrameEncodingChoice,
    /// Whether the frame caches' frames are kept in the training device's memory, each step
    /// gathering its frames there instead of the loader copying them and the step uploading
    /// them: `auto` (default) on a GPU when every dataset is read from a frame cache and all
    /// its frames fit one of the device's largest buffers (a quarter of a CUDA GPU's memory),
    /// `on` wherever every dataset has a frame cache, `off` never.
    #[serde(default)]
    pub frames_on_device: FramesOnDevice,
    /// The share of each task's episodes held out of training for the held-out loss (LeRobot's
    /// `--dataset.eval_split`, in [0, 1)): the last `ceil(n · eval_split)` episodes of each task
    /// (episodes grouped by their first task). Default 0: none.
    #[serde(default)]
    pub eval_split: f64,
    /// Replace the cameras' mean and std by ImageNet's. Default true.
    pub use_imagenet_stats: bool,
    /// Image augmentation (LeRobot's `image_transforms`). Default: disabled.
    pub image_transforms: ImageTransformsConfig,
    /// Timestamp tolerance in seconds. Default 1e-4.
    pub tolerance_s: f64,
    /// Stream the datasets instead of reading them from folders (LeRobot's
    /// `--dataset.streaming`): each [`Self::root`] is then a URL (`s3://`, `gs://`, `az://`,
    /// `https://`, `file://`; credentials from the store's usual environment), or
    /// [`Self::repo_id`] is read from the Hub by ranges. Metadata is mirrored once, tables read
    /// into memory, videos read into a buffer of [`Self::streaming_buffer_gb`]; nothing else
    /// reaches the disk. The epoch order is the blocks order. Default false.
    #[serde(default)]
    pub streaming: bool,
    /// The most video a streamed dataset holds in memory at once, in GB. Default 2.
    #[serde(default)]
    pub streaming_buffer_gb: Option<f64>,
}

/// One dataset folder, or several trained together: written as a path, or a list of paths.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DatasetRoots(pub Vec<PathBuf>);

impl DatasetRoots {
    /// The folders, in order.
    pub fn paths(&self) -> &[PathBuf] {
        &self.0
    }

    /// Whether no folder is given.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<PathBuf> for DatasetRoots {
    fn from(path: PathBuf) -> Self {
        Self(vec![path])
    }
}

impl From<&Path> for DatasetRoots {
    fn from(path: &Path) -> Self {
        path.to_path_buf().into()
    }
}

impl From<&str> for DatasetRoots {
    fn from(path: &str) -> Self {
        PathBuf::from(path).into()
    }
}

impl Serialize for DatasetRoots {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        match self.0.as_slice() {
            [] => "".serialize(serializer),
            [one] => one.serialize(serializer),
            many => many.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for DatasetRoots {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum OneOrMany {
            One(PathBuf),
            Many(Vec<PathBuf>),
        }
        Ok(match OneOrMany::deserialize(deserializer)? {
            OneOrMany::One(path) if path.as_os_str().is_empty() => Self::default(),
            OneOrMany::One(path) => Self(vec![path]),
            OneOrMany::Many(paths) => Self(paths),
        })
    }
}

/// The policy part: a preset and its (possibly overridden) hyper-parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicySection {
    /// Which defaults the hyper-parameters started from. Default classic.
    pub preset: Preset,
    /// A LeRobot pretrained policy to fine-tune (`--policy.path`, a `pretrained_model/` folder):
    /// its `config.json` gives the hyper-parameters the other keys do not, its
    /// `model.safetensors` the starting weights. Default none.
    #[serde(default)]
    pub path: Option<PathBuf>,
    /// Push the policy to the Hub at the end of training (LeRobot's `--policy.push_to_hub`, there
    /// true by default; here false, so that a run never publishes unasked). Needs
    /// [`Self::repo_id`], a token (`HF_TOKEN`) and the `hub` feature.
    #[serde(default)]
    pub push_to_hub: bool,
    /// The model repository it goes to, `OWNER/NAME`.
    #[serde(default)]
    pub repo_id: Option<String>,
    /// Make that repository private when it is created. Default: the Hub's (public).
    #[serde(default)]
    pub private: Option<bool>,
    /// The hyper-parameters.
    #[serde(flatten)]
    pub config: DiffusionConfig,
}

/// Everything a training run needs (the keys of LeRobot's `lerobot-train` where they exist).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainConfig {
    /// `--dataset.*`.
    pub dataset: DatasetConfig,
    /// `--policy.*`.
    pub policy: PolicySection,
    /// Samples per batch. Default 8.
    pub batch_size: usize,
    /// Optimiser steps. Default 100,000.
    pub steps: usize,
    /// Loader worker threads. Default 4.
    pub num_workers: usize,
    /// Batches prepared ahead. Default 4.
    pub prefetch: usize,
    /// Seed of everything random. Default 1000.
    pub seed: u64,
    /// Steps between log lines. Default 200.
    pub log_freq: usize,
    /// Steps between checkpoints (0: only at the end). Default 20,000.
    pub save_freq: usize,
    /// Write checkpoints. Default true.
    pub save_checkpoint: bool,
    /// Where logs, metrics and checkpoints go. Default `outputs/train`.
    pub output_dir: PathBuf,
    /// cpu, wgpu or cuda. Default cpu.
    pub device: DeviceKind,
    /// Devices of `device`'s kind to train on, one replica each (data-parallel; devices `0..N`,
    /// or N replicas sharing the one CPU). Default 1.
    #[serde(default = "one")]
    pub num_devices: usize,
    /// Compute precision: f32, bf16 or f16 (f32 master weights). Default f32.
    #[serde(default)]
    pub precision: Precision,
    /// Micro-batches of `batch_size` per optimiser step. Default 1.
    #[serde(default = "one")]
    pub grad_accum: usize,
    /// Write each checkpoint's policy as LeRobot's `pretrained_model/` too (what `trainer
    /// export` writes: `lerobot-eval --policy.path` and `--policy.path` take it). Default true;
    /// it costs the weights once more in float32 (1.05 GB for PushT's 263 M parameters).
    #[serde(default = "yes")]
    pub save_lerobot_policy: bool,
    /// Steps between held-out losses (LeRobot's `--eval_steps`; needs
    /// [`DatasetConfig::eval_split`]). Default 0: never.
    #[serde(default)]
    pub eval_steps: usize,
    /// The held-out frames each evaluation reads at most (LeRobot's `--max_eval_samples`: the
    /// first `max(1, N / tasks)` held-out frames of each task). Default 0: all of them.
    #[serde(default)]
    pub max_eval_samples: usize,
    /// `--ema.*`: an exponential moving average of the weights. Default off.
    #[serde(default)]
    pub ema: EmaConfig,
    /// `--sampler.*`: the order of each epoch's samples (`order`: `lerobot` or `blocks`) and the
    /// blocks order's episodes per window (`block_episodes`). Default LeRobot's order.
    #[serde(default)]
    pub sampler: SampleOrdering,
}

fn one() -> usize {
    1
}

fn yes() -> bool {
    true
}

/// More episodes than any dataset holds: a longer range in `--dataset.episodes` is a mistake.
const MAX_EPISODES: usize = 10_000_000;

/// Parses `--dataset.episodes`: indices and ranges separated by commas (`0,3,5..9`, where `a..b`
/// excludes `b` as Python's `range` does and `a..=b` includes it), or LeRobot's list `[0, 3, 5]`.
/// The result is sorted, without repeats.
pub fn parse_episode_list(text: &str) -> std::result::Result<Vec<usize>, String> {
    let inner = text.trim().trim_start_matches('[').trim_end_matches(']');
    let number =
        |part: &str| part.trim().parse::<usize>().map_err(|_| format!("{part:?} in {text:?} is not an episode index"));
    let mut episodes = Vec::new();
    for part in inner.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (start, end) = if let Some((start, end)) = part.split_once("..=") {
            (number(start)?, number(end)?.saturating_add(1))
        } else if let Some((start, end)) = part.split_once("..") {
            (number(start)?, number(end)?)
        } else {
            let episode = number(part)?;
            (episode, episode.saturating_add(1))
        };
        if start >= end || end - start > MAX_EPISODES {
            return Err(format!("{part:?} in {text:?} is an empty or implausibly long range of episodes"));
        }
        episodes.extend(start..end);
    }
    episodes.sort_unstable();
    episodes.dedup();
    if episodes.is_empty() {
        return Err(format!("{text:?} names no episode"));
    }
    Ok(episodes)
}

impl DatasetConfig {
    /// The Hub ids of [`Self::repo_id`], in order (none when the datasets are named by folder).
    pub fn repo_ids(&self) -> Vec<&str> {
        self.repo_id.as_deref().map(datasets::hub::split_ids).unwrap_or_default()
    }

    /// What [`datasets::hub::resolve`] is to find for each dataset named by its Hub id
    /// ([`datasets::DatasetRequest::for_ids`]).
    pub fn hub_requests(&self) -> Result<Vec<datasets::DatasetRequest>> {
        let Some(ids) = &self.repo_id else { return Ok(Vec::new()) };
        let mut requests =
            datasets::DatasetRequest::for_ids(ids, self.root.paths(), self.revision.as_deref(), self.download)?;
        if let [one] = &mut requests[..] {
            one.episodes = self.episodes.clone();
        }
        Ok(requests)
    }

    /// The name each dataset goes by in logs and errors: its Hub id, or its folder.
    pub fn names(&self) -> Vec<String> {
        let ids = self.repo_ids();
        let roots = self.root.paths();
        if ids.len() == roots.len() {
            ids.iter().map(ToString::to_string).collect()
        } else {
            roots.iter().map(|r| r.display().to_string()).collect()
        }
    }
}

impl TrainConfig {
    /// LeRobot's defaults with the policy's `preset`.
    pub fn defaults(preset: Preset) -> Self {
        Self {
            dataset: DatasetConfig {
                root: DatasetRoots::default(),
                repo_id: None,
                weights: None,
                revision: None,
                download: true,
                episodes: None,
                eval_split: 0.0,
                frame_cache: FrameCacheChoice::Auto,
                frame_cache_budget_gb: None,
                frame_encoding: FrameEncodingChoice::Auto,
                frames_on_device: FramesOnDevice::Auto,
                use_imagenet_stats: true,
                image_transforms: ImageTransformsConfig::default(),
                tolerance_s: datasets::DEFAULT_TOLERANCE_S,
                streaming: false,
                streaming_buffer_gb: None,
            },
            policy: PolicySection {
                preset,
                path: None,
                push_to_hub: false,
                repo_id: None,
                private: None,
                config: DiffusionConfig::preset(preset),
            },
            batch_size: 8,
            steps: 100_000,
            num_workers: 4,
            prefetch: 4,
            seed: 1000,
            log_freq: 200,
            save_freq: 20_000,
            save_checkpoint: true,
            save_lerobot_policy: true,
            eval_steps: 0,
            max_eval_samples: 0,
            output_dir: PathBuf::from("outputs/train"),
            device: DeviceKind::Cpu,
            num_devices: 1,
            precision: Precision::F32,
            grad_accum: 1,
            ema: EmaConfig::default(),
            sampler: SampleOrdering::default(),
        }
    }

    /// Resolves a configuration: the preset's defaults, then the pretrained policy's
    /// hyper-parameters where `policy.path` names one, then `file` (JSON), then `overrides`
    /// (JSON), each merged key by key.
    pub fn resolve(file: Option<serde_json::Value>, overrides: serde_json::Value) -> Result<Self> {
        let preset_of =
            |v: &serde_json::Value| v.pointer("/policy/preset").and_then(|p| p.as_str()).map(str::parse::<Preset>);
        let preset = match preset_of(&overrides).or_else(|| file.as_ref().and_then(preset_of)) {
            Some(p) => p?,
            None => Preset::Classic,
        };
        let mut value = serde_json::to_value(Self::defaults(preset)).map_err(|e| Error::Config(e.to_string()))?;
        let mut given = serde_json::Value::Object(Default::default());
        if let Some(file) = file {
            merge(&mut given, file);
        }
        merge(&mut given, overrides);
        if let Some(path) = given.pointer("/policy/path").and_then(|p| p.as_str()) {
            let dir = crate::lerobot::pretrained_policy_dir(Path::new(path))?;
            merge(&mut value, serde_json::json!({"policy": crate::lerobot::policy_from_pretrained(&dir)?}));
            // Absolute, so that a resumed run finds it from anywhere.
            let dir = std::path::absolute(&dir).map_err(|e| Error::io(&dir, e))?;
            merge(&mut given, serde_json::json!({"policy": {"path": dir}}));
        }
        merge(&mut value, given.clone());
        let config: Self = serde_json::from_value(value).map_err(|e| Error::Config(format!("{e}")))?;
        // A misspelt key would otherwise be ignored silently and train with the default.
        let known = serde_json::to_value(&config).map_err(|e| Error::Config(e.to_string()))?;
        let mut unknown = Vec::new();
        unknown_keys(&given, &known, "", &mut unknown);
        if !unknown.is_empty() {
            return Err(Error::Config(format!("unknown configuration key(s): {}", unknown.join(", "))));
        }
        Ok(config)
    }
}

/// The keys of `given` (objects, recursively) that `known` lacks, as dotted paths.
fn unknown_keys(given: &serde_json::Value, known: &serde_json::Value, prefix: &str, out: &mut Vec<String>) {
    let (serde_json::Value::Object(given), serde_json::Value::Object(known)) = (given, known) else {
        return;
    };
    for (key, value) in given {
        let path = format!("{prefix}{key}");
        match known.get(key) {
            None => out.push(path),
            Some(k) => unknown_keys(value, k, &format!("{path}."), out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn episode_lists_take_indices_ranges_and_lerobots_lists() {
        assert_eq!(parse_episode_list("0,3,5..9").unwrap(), vec![0, 3, 5, 6, 7, 8]);
        assert_eq!(parse_episode_list("[4, 1, 1]").unwrap(), vec![1, 4]);
        assert_eq!(parse_episode_list("10..=12").unwrap(), vec![10, 11, 12]);
        for bad in ["", "[]", "a", "1..x", "-1", "5..5", "9..3", "0..=18446744073709551615"] {
            assert!(parse_episode_list(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn every_key_of_the_defaults_may_be_given_even_as_null() {
        let defaults = serde_json::to_value(TrainConfig::defaults(Preset::Classic)).unwrap();
        TrainConfig::resolve(None, defaults).unwrap();
        let config = TrainConfig::resolve(None, serde_json::json!({"dataset": {"weights": null}})).unwrap();
        assert_eq!(config.dataset.weights, None);
        let config = TrainConfig::resolve(None, serde_json::json!({"dataset": {"weights": [0.7, 0.3]}})).unwrap();
        assert_eq!(config.dataset.weights, Some(vec![0.7, 0.3]));
    }
}
