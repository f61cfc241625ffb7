//! Helpers shared by the trainer's integration tests: scratch folders, a small synthetic
//! dataset and the tiny policy configuration they train.
#![allow(dead_code, reason = "each test binary uses a part of these")]

pub mod lerobot_model;

use std::path::{Path, PathBuf};

use datasets::synth::{SynthConfig, write_dataset};
use serde_json::json;
use trainer::TrainConfig;

/// `name` under the test target's scratch folder.
pub fn scratch_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(name)
}

/// `name` under the scratch folder, emptied (not created), and removed again when the test
/// that made it passes (see [`Scratch`]).
pub fn scratch(name: &str) -> Scratch {
    let dir = scratch_path(name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).unwrap();
    }
    Scratch(dir)
}

/// A scratch folder that is removed when dropped, unless the test is failing (then it is kept to
/// look at). A tiny policy's checkpoint is 130 MB: kept, the trainer's tests would leave ~5 GB
/// behind, and CI's disk is not always that big.
pub struct Scratch(PathBuf);

impl Scratch {
    /// The folder's path, owned.
    pub fn to_path_buf(&self) -> PathBuf {
        self.0.clone()
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for Scratch {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_os_str()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            // A folder that cannot be removed only costs disk space.
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// A fresh PushT-like dataset at `root`: 3 episodes of 20 frames, 96×96 AV1.
pub fn write_synth(root: &Path) -> PathBuf {
    write_fresh(root, 3, 20)
}

/// A fresh dataset at `root` for the data-parallel tests: 2 episodes of 27 frames, so 40
/// sampleable frames (7 dropped at each end), which batches of 4 (or 2 per replica) cut into 10
/// whole steps an epoch.
pub fn write_forty_frames(root: &Path) -> PathBuf {
    write_fresh(root, 2, 27)
}

/// A fresh PushT-like dataset at `root` (whatever was there removed): `episodes` episodes of
/// `frames` frames each.
fn write_fresh(root: &Path, episodes: usize, frames: usize) -> PathBuf {
    if root.exists() {
        std::fs::remove_dir_all(root).unwrap();
    }
    let config = SynthConfig { episodes, min_length: frames, max_length: frames, ..SynthConfig::default() };
    write_dataset(root, &config).unwrap();
    root.to_path_buf()
}

/// Cuts the last third off the video file of `root`'s second episode (shared with the first:
/// the decoder fails at the second episode's frames); returns the file's path.
pub fn cut_second_episode_video(root: &Path) -> PathBuf {
    let ds = datasets::Dataset::open(root).unwrap();
    let video = root.join(&ds.episodes()[1].videos[0].file);
    drop(ds);
    let bytes = std::fs::read(&video).unwrap();
    std::fs::write(&video, &bytes[..bytes.len() * 2 / 3]).unwrap();
    video
}

/// The data-parallel tests' tiny policy on `root`: `batch` per replica, `steps` steps, logs and
/// checkpoints every 5, no crops (their draws are per micro-batch); `extra` merged over it.
pub fn data_parallel_config(
    root: &Path,
    output: &Path,
    steps: usize,
    batch: usize,
    extra: serde_json::Value,
) -> TrainConfig {
    let mut overrides = json!({
        "batch_size": batch, "num_workers": 1, "log_freq": 5, "save_freq": 5,
        "policy": {"crop_shape": null, "scheduler_warmup_steps": 0}
    });
    trainer::merge(&mut overrides, extra);
    tiny_config(root, output, steps, overrides)
}

/// `w1 − w2` measured: the fraction of weights within 1e-6, the largest difference, and the
/// norm of the difference relative to `w1`'s.
pub fn compare(w1: &[f32], w2: &[f32]) -> (f64, f32, f64) {
    let norm = |v: &mut dyn Iterator<Item = f32>| v.map(|x| f64::from(x).powi(2)).sum::<f64>().sqrt();
    let close = w1.iter().zip(w2).filter(|(a, b)| (*a - *b).abs() <= 1e-6).count() as f64 / w1.len() as f64;
    let max = w1.iter().zip(w2).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
    let relative = norm(&mut w1.iter().zip(w2).map(|(a, b)| a - b)) / norm(&mut w1.iter().copied());
    (close, max, relative)
}

/// One sample's observation of the synthetic dataset's camera (`observation.image`): `state` and
/// `frames` (RGB) over the policy's observation steps.
pub fn one_sample<'a>(state: &'a [f32], frames: &'a [u8], shape: datasets::FrameShape) -> trainer::HostObservation<'a> {
    trainer::HostObservation {
        batch: 1,
        state,
        env_state: None,
        cameras: vec![("observation.image".into(), trainer::CameraInput::Frames(frames), shape)],
        encoding: datasets::FrameEncoding::Rgb,
    }
}

/// A tiny policy (U-Net 16/32/64, 32×32 crops) that trains in milliseconds a step on `root`,
/// with `extra` merged over the defaults.
pub fn tiny_config(root: &Path, output: &Path, steps: usize, extra: serde_json::Value) -> TrainConfig {
    let mut overrides = json!({
        // The dataset's own files: these tests are about training on them (the automatic frame
        // cache has tests of its own).
        "dataset": {"root": root, "frame_cache": "off"},
        "policy": {"down_dims": [16, 32, 64], "diffusion_step_embed_dim": 16, "crop_shape": [32, 32], "optimizer_lr": 1e-3, "scheduler_warmup_steps": 2},
        "batch_size": 4, "steps": steps, "log_freq": 2, "save_freq": 0, "num_workers": 2, "prefetch": 2, "seed": 7,
        "output_dir": output,
    });
    trainer::merge(&mut overrides, extra);
    TrainConfig::resolve(None, overrides).unwrap()
}

/// Every weight (the trained ones, not an EMA) of the checkpoint at `path`: an output folder
/// (its newest checkpoint) or a checkpoint folder. Values, not the record's bytes, which also
/// hold parameter ids that differ per process.
pub fn checkpoint_weights(path: &Path) -> Vec<f32> {
    use burn::module::{Module, ModuleVisitor, Param};
    struct Gather(Vec<f32>);
    impl<B: burn::prelude::Backend> ModuleVisitor<B> for Gather {
        fn visit_float<const D: usize>(&mut self, param: &Param<burn::prelude::Tensor<B, D>>) {
            self.0.extend(param.val().into_data().to_vec::<f32>().unwrap());
        }
    }
    let model =
        trainer::PolicyRunner::<burn::backend::Flex>::load(path, 0, false, Default::default()).unwrap().into_model();
    let mut gather = Gather(Vec::new());
    model.visit(&mut gather);
    gather.0
}

/// The `trainer` tool, with its automatic frame caches under the scratch folder: tests never
/// leave caches in the user's /dev/shm.
#[cfg(feature = "cli")]
pub fn trainer_command() -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_trainer"));
    command.env(datasets::auto_cache::FRAME_CACHE_VAR, scratch_path("frame-caches"));
    command
}
