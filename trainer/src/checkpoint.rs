//! Checkpoints: the model, the optimiser state, the training state (step, loader position),
//! the resolved configuration and the normalisation statistics, in full precision, written into
//! a temporary folder and renamed into place, so that a crash mid-write leaves the previous
//! checkpoint intact.
//!
//! Layout: `<output>/checkpoints/<step:06>/{model.mpk, optimizer.mpk, training_state.json,
//! config.json, normalizer.json}` and `<output>/checkpoints/last` naming the newest.

use std::path::{Path, PathBuf};

use burn::module::Module;
use burn::prelude::Backend;
use burn::record::{FullPrecisionSettings, NamedMpkBytesRecorder, NamedMpkFileRecorder, Record, Recorder};
use loader::{SampleOrdering, SamplerState};
use serde::{Deserialize, Serialize};
use transforms::Normalizer;

use crate::error::{Error, Result};
use crate::policy_config::PolicyFeatures;
use crate::precision::LossScaleState;

/// Where training stands; with the model and optimiser, all a resumed run needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainingState {
    /// Optimiser steps done.
    pub step: usize,
    /// The loader's position after the last batch used.
    pub sampler: SamplerState,
    /// The run's seed (noise, crops and augmentation derive from it and the step).
    pub seed: u64,
    /// Samples seen.
    pub samples: u64,
    /// The dynamic loss scale of f16 training, when used.
    #[serde(default)]
    pub loss_scale: Option<LossScaleState>,
    /// The fingerprint of each dataset read ([`datasets::frame_cache::fingerprint`]: its
    /// `info.json`, episodes and timestamps), so that a resumed run reads the same data (none
    /// recorded by checkpoints older than several datasets).
    #[serde(default)]
    pub datasets: Vec<u64>,
    /// The datasets' sampling weights, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<Vec<f64>>,
    /// The number of replicas (devices) of a data-parallel run; 1 otherwise. `sampler` is every
    /// replica's position in its own shard (the shards are equally long, so it is the same).
    #[serde(default = "one")]
    pub world_size: usize,
    /// The order of the samples (`--sampler.*`); LeRobot's in checkpoints older than the
    /// blocks order.
    #[serde(default)]
    pub sampler_order: SampleOrdering,
}

fn one() -> usize {
    1
}

/// The recorder that reads every checkpoint file: named MessagePack, full (f32) precision.
pub fn recorder() -> NamedMpkFileRecorder<FullPrecisionSettings> {
    NamedMpkFileRecorder::<FullPrecisionSettings>::new()
}

/// The checkpoints folder of an output folder.
pub fn checkpoints_dir(output: &Path) -> PathBuf {
    output.join("checkpoints")
}

/// The folder of step `step`'s checkpoint under the output folder `output`.
pub fn checkpoint_dir(output: &Path, step: usize) -> PathBuf {
    checkpoints_dir(output).join(step_name(step))
}

/// A checkpoint folder's name: its step, zero-padded to six digits.
fn step_name(step: usize) -> String {
    format!("{step:06}")
}

/// Everything written with a checkpoint besides the model and optimiser.
pub struct CheckpointContents<'a> {
    /// Training state.
    pub state: &'a TrainingState,
    /// The resolved configuration (as JSON).
    pub config: &'a serde_json::Value,
    /// The normalisation statistics.
    pub normalizer: &'a Normalizer,
    /// The features the policy was built for.
    pub features: &'a PolicyFeatures,
}

fn write_json(path: &Path, value: &impl Serialize) -> Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(|e| Error::checkpoint(path, e))? + "\n";
    std::fs::write(path, text).map_err(|e| Error::io(path, e))
}

fn sync_dir_files(dir: &Path) -> Result<()> {
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let path = entry.map_err(|e| Error::io(dir, e))?.path();
        std::fs::File::open(&path).and_then(|f| f.sync_all()).map_err(|e| Error::io(&path, e))?;
    }
    std::fs::File::open(dir).and_then(|f| f.sync_all()).map_err(|e| Error::io(dir, e))
}

/// Writes a checkpoint of `step` under `output/checkpoints`, atomically, and returns its folder.
/// `extra` writes further records (optimiser, EMA) into the temporary folder first.
pub fn save<B: Backend, M: Module<B>>(
    output: &Path,
    model: &M,
    contents: &CheckpointContents<'_>,
    extra: impl FnOnce(&Path) -> Result<()>,
) -> Result<PathBuf> {
    let root = checkpoints_dir(output);
    std::fs::create_dir_all(&root).map_err(|e| Error::io(&root, e))?;
    let name = step_name(contents.state.step);
    let tmp = root.join(format!(".tmp-{name}-{}", std::process::id()));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
    }
    std::fs::create_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
    let written = (|| -> Result<()> {
        save_record::<B, _>(&tmp, "model", model.clone().into_record())?;
        extra(&tmp)?;
        write_json(&tmp.join("training_state.json"), contents.state)?;
        write_json(&tmp.join("config.json"), contents.config)?;
        write_json(&tmp.join("normalizer.json"), contents.normalizer)?;
        write_json(&tmp.join("features.json"), contents.features)?;
        sync_dir_files(&tmp)
    })();
    if let Err(e) = written {
        // A full disk or an I/O error: leave no half checkpoint behind.
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    let target = root.join(&name);
    if target.exists() {
        std::fs::remove_dir_all(&target).map_err(|e| Error::io(&target, e))?;
    }
    std::fs::rename(&tmp, &target).map_err(|e| Error::io(&target, e))?;
    let last_tmp = root.join(format!(".last-{}", std::process::id()));
    std::fs::write(&last_tmp, format!("{name}\n")).map_err(|e| Error::io(&last_tmp, e))?;
    std::fs::rename(&last_tmp, root.join("last")).map_err(|e| Error::io(root.join("last"), e))?;
    std::fs::File::open(&root).and_then(|f| f.sync_all()).map_err(|e| Error::io(&root, e))?;
    Ok(target)
}

/// Removes what a checkpoint write cut short by a crash or `kill -9` left in `output`: its
/// temporary folders and `last` files, which are never valid checkpoints.
pub fn remove_partial(output: &Path) -> Result<()> {
    let root = checkpoints_dir(output);
    let Ok(entries) = std::fs::read_dir(&root) else { return Ok(()) };
    for entry in entries {
        let path = entry.map_err(|e| Error::io(&root, e))?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if name.starts_with(".tmp-") {
            std::fs::remove_dir_all(&path).map_err(|e| Error::io(&path, e))?;
        } else if name.starts_with(".last-") {
            std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
        }
    }
    Ok(())
}

/// Writes `record` (a model's, an optimiser's) as `<dir>/<name>.mpk`, in the format
/// [`recorder`] reads.
///
/// The record is encoded in memory and written with checked writes, not with burn's file
/// recorder: that one streams through a `BufWriter` whose final flush is dropped unchecked (a
/// disk that fills within the last buffer would leave a short file and no error) and whose
/// errors lose the OS's reason ("No space left on device"). This costs one more copy of the
/// record in host memory while it is written.
pub fn save_record<B: Backend, R: Record<B>>(dir: &Path, name: &str, record: R) -> Result<()> {
    let bytes = Recorder::<B>::record(&NamedMpkBytesRecorder::<FullPrecisionSettings>::new(), record, ())
        .map_err(|e| Error::checkpoint(dir, format!("{name}: {e}")))?;
    let path = dir.join(name).with_extension("mpk");
    std::fs::write(&path, bytes).map_err(|e| Error::io(&path, e))
}

/// Reads `<dir>/<name>.mpk`.
pub fn load_record<B: Backend, R: Record<B>>(dir: &Path, name: &str, device: &B::Device) -> Result<R> {
    Recorder::<B>::load(&recorder(), dir.join(name), device).map_err(|e| Error::checkpoint(dir, format!("{name}: {e}")))
}

/// The checkpoint folder `path` designates: a checkpoint itself, a checkpoints folder or an
/// output folder (the newest checkpoint, by `last`).
pub fn resolve(path: &Path) -> Result<PathBuf> {
    if path.join("training_state.json").exists() {
        return Ok(path.to_path_buf());
    }
    for root in [path.to_path_buf(), checkpoints_dir(path)] {
        let last = root.join("last");
        if last.exists() {
            let name = std::fs::read_to_string(&last).map_err(|e| Error::io(&last, e))?;
            let dir = root.join(name.trim());
            if dir.join("training_state.json").exists() {
                return Ok(dir);
            }
            return Err(Error::checkpoint(&dir, "named by `last` but incomplete or missing"));
        }
    }
    Err(Error::checkpoint(path, "no checkpoint here (expected training_state.json, or checkpoints/last)"))
}

/// Reads a JSON file of a checkpoint.
pub fn read_json<T: for<'de> Deserialize<'de>>(dir: &Path, name: &str) -> Result<T> {
    let path = dir.join(name);
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
    serde_json::from_str(&text).map_err(|e| Error::checkpoint(&path, e))
}
