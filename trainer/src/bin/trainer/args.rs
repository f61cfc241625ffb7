//! The training flags: named like `lerobot-train`'s, each setting the configuration key of the
//! same dotted name, which a config file may set too.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use anyhow::{Context, Result, bail};
use clap::Args;
use datasets::auto_cache::FrameCacheChoice;
use kernels::DeviceKind;
use serde::Serialize;
use serde_json::{Value, json};
use trainer::Preset;

/// Declares the flags that set configuration keys, each key written once: it is the flag's
/// `--long` name (a flag with a shorter name of its own keeps the key as an alias) and where
/// [`ConfigFlags::overrides`] puts the flag's value, serialised as the configuration reads it.
macro_rules! config_flags {
    ($($(#[$meta:meta])* $field:ident: $ty:ty => $key:literal;)*) => {
        /// The flags that set configuration keys (`lerobot-train`'s names).
        #[derive(Debug, Args)]
        pub struct ConfigFlags {
            $(
                #[arg(long = $key)]
                $(#[$meta])*
                $field: Option<$ty>,
            )*
        }

        impl ConfigFlags {
            /// `--output_dir`, when given.
            pub fn output_dir(&self) -> Option<&PathBuf> {
                self.output_dir.as_ref()
            }

            /// The flags given, as a JSON patch of the configuration: each value at its key.
            pub fn overrides(&self) -> Result<Value> {
                let mut patch = json!({"dataset": {}, "policy": {}});
                $(
                    if let Some(value) = &self.$field {
                        trainer::set_key(&mut patch, $key, serde_json::to_value(value)?);
                    }
                )*
                Ok(patch)
            }
        }
    };
}

config_flags! {
    /// The dataset folder; repeat it to train on several datasets together (with
    /// --dataset.repo_id: where the dataset is or is to be downloaded; with several ids, the
    /// folder holding each as ROOT/OWNER/NAME).
    dataset_root: Vec<PathBuf> => "dataset.root";
    /// The dataset's Hub id, OWNER/NAME, or several separated by commas: looked for under
    /// HF_LEROBOT_HOME and LeRobot's Hub cache, downloaded from the Hub if missing.
    repo_id: String => "dataset.repo_id";
    /// With several datasets, each one's share of an epoch, e.g. 0.7,0.3 (default: every frame
    /// once per epoch, the datasets concatenated as LeRobot's MultiLeRobotDataset).
    #[arg(value_delimiter = ',')]
    weights: Vec<f64> => "dataset.weights";
    /// The Hub revision: a branch, tag or commit (default: LeRobot's codebase version, v3.0).
    revision: String => "dataset.revision";
    /// Whether a missing dataset may be downloaded (default true; HF_HUB_OFFLINE=1 forbids it).
    download: bool => "dataset.download";
    /// Sample only these episodes: indices and ranges, e.g. 0,3,5..9 (5 to 8) or 10..=12, or
    /// LeRobot's [0, 3, 5]; the statistics stay the whole dataset's.
    episodes: EpisodeList => "dataset.episodes";
    /// Where frames come from: `auto` (default: the dataset's frames decoded once into a cache of
    /// the run's own, under $LEROBOT_RS_FRAME_CACHE or /dev/shm/lerobot-rs-frames, when they fit
    /// the budget), `off` (decoded as read), or a cache folder (`datasets cache`)
    #[arg(long = "frame-cache", alias = "dataset.frame_cache")]
    frame_cache: FrameCacheChoice => "dataset.frame_cache";
    /// The most an automatic frame cache may take, in GB (default: half of the free space, and
    /// of the memory available for /dev/shm)
    #[arg(long = "frame-cache-budget", alias = "dataset.frame_cache_budget_gb")]
    frame_cache_budget: f64 => "dataset.frame_cache_budget_gb";
    /// How video frames travel to the training device: auto (default: yuv420 on a GPU when every
    /// camera is a YUV 4:2:0 video, else rgb), rgb (LeRobot's frames, converted on the CPU) or
    /// yuv420 (the decoder's planes, half the bytes, converted to the same RGB on the device)
    #[arg(long = "frame-encoding", alias = "dataset.frame_encoding")]
    frame_encoding: trainer::FrameEncodingChoice => "dataset.frame_encoding";
    /// Keep the frame caches' frames in the device's memory, each step gathering its frames
    /// there: auto (default: on a GPU when every dataset has a frame cache and its frames fit a
    /// quarter of the GPU's memory), on or off (the loader copies them, each step uploads them)
    #[arg(long = "frames-on-device", alias = "dataset.frames_on_device")]
    frames_on_device: trainer::FramesOnDevice => "dataset.frames_on_device";
    /// The order of each epoch's samples: lerobot (default, LeRobot's) or blocks (decode-once:
    /// episodes shuffled and taken --sampler.block_episodes at a time, each window's samples
    /// shuffled, each video frame decoded once per epoch into a bounded buffer)
    sampler_order: loader::SampleOrder => "sampler.order";
    /// Episodes per window of the blocks order (default 16)
    block_episodes: usize => "sampler.block_episodes";
    /// Stream the dataset instead of reading a folder: --dataset.root is then a URL (s3://,
    /// gs://, az://, https://, file://) or --dataset.repo_id is read from the Hub by ranges;
    /// only metadata reaches the disk, the epoch order is the blocks order (default false)
    streaming: bool => "dataset.streaming";
    /// The most video a streamed dataset holds in memory at once, in GB (default 2)
    streaming_buffer_gb: f64 => "dataset.streaming_buffer_gb";
    /// Replace the cameras' mean/std with ImageNet's (default true).
    use_imagenet_stats: bool => "dataset.use_imagenet_stats";
    /// The share of each task's episodes held out for the held-out loss, in [0, 1): the last
    /// ceil(n x share) of each task's (default 0).
    eval_split: f64 => "dataset.eval_split";
    /// Write each checkpoint's policy as LeRobot's pretrained_model/ too (default true).
    save_lerobot_policy: bool => "save_lerobot_policy";
    /// Steps between held-out losses (needs --dataset.eval_split; default 0: never).
    eval_steps: usize => "eval_steps";
    /// The held-out frames an evaluation reads at most (default 0: all; no other value yet).
    max_eval_samples: usize => "max_eval_samples";
    /// Enable LeRobot's image augmentation (default false).
    image_transforms: bool => "dataset.image_transforms.enable";
    /// Policy defaults: classic or lerobot-0.6.
    preset: Preset => "policy.preset";
    /// A LeRobot pretrained policy to fine-tune (its `pretrained_model/` folder, as
    /// lerobot-train's): its config.json gives the hyper-parameters the other `--policy.*`
    /// options do not, its model.safetensors the starting weights.
    policy_path: PathBuf => "policy.path";
    /// Push the policy to the Hub at the end of training (needs --policy.repo_id and HF_TOKEN).
    push_to_hub: bool => "policy.push_to_hub";
    /// The Hub model repository the policy is pushed to, OWNER/NAME.
    policy_repo_id: String => "policy.repo_id";
    /// Make that repository private when it is created.
    private: bool => "policy.private";
    /// Observation steps.
    n_obs_steps: usize => "policy.n_obs_steps";
    /// Action horizon.
    horizon: usize => "policy.horizon";
    /// Actions executed per prediction.
    n_action_steps: usize => "policy.n_action_steps";
    /// Crop HxW, or `none`.
    crop_shape: ImageShape => "policy.crop_shape";
    /// Resize HxW, or `none`.
    resize_shape: ImageShape => "policy.resize_shape";
    /// U-Net widths, comma-separated.
    #[arg(value_delimiter = ',')]
    down_dims: Vec<usize> => "policy.down_dims";
    /// The backbone's starting weights: torchvision's name as LeRobot gives it
    /// (ResNet18_Weights.IMAGENET1K_V1, from torch's hub cache, downloaded when missing), a
    /// ResNet-18 file (.pth or .safetensors), or none.
    pretrained_backbone_weights: NameOrNone => "policy.pretrained_backbone_weights";
    /// GroupNorm instead of BatchNorm in the backbone.
    use_group_norm: bool => "policy.use_group_norm";
    /// One encoder per camera.
    separate_encoders: bool => "policy.use_separate_rgb_encoder_per_camera";
    /// DDPM or DDIM.
    noise_scheduler_type: String => "policy.noise_scheduler_type";
    /// Inference steps.
    num_inference_steps: usize => "policy.num_inference_steps";
    /// epsilon or sample.
    prediction_type: String => "policy.prediction_type";
    /// Leave padded actions out of the loss.
    mask_loss: bool => "policy.do_mask_loss_for_padding";
    /// Learning rate.
    lr: f64 => "policy.optimizer_lr";
    /// Warm-up steps.
    warmup: usize => "policy.scheduler_warmup_steps";
    /// Samples per batch.
    batch_size: usize => "batch_size";
    /// Optimiser steps.
    steps: usize => "steps";
    /// Loader worker threads.
    num_workers: usize => "num_workers";
    /// Batches prepared ahead.
    prefetch: usize => "prefetch";
    /// Seed.
    seed: u64 => "seed";
    /// Steps between log lines.
    log_freq: usize => "log_freq";
    /// Steps between checkpoints.
    save_freq: usize => "save_freq";
    /// Output folder.
    output_dir: PathBuf => "output_dir";
    /// cpu, wgpu or cuda.
    device: DeviceKind => "device";
    /// Train on N devices of that kind, one replica each (data-parallel; on the CPU, N replicas
    /// share its cores).
    num_devices: usize => "num_devices";
    /// Compute precision: f32, bf16 or f16 (f32 master weights; f16 with loss scaling).
    precision: trainer::Precision => "precision";
    /// Micro-batches of batch_size per optimiser step.
    grad_accum: usize => "grad_accum";
    /// Keep an exponential moving average of the weights (used by `sample` and `export`).
    ema_enable: bool => "ema.enable";
    /// Optimiser steps before the EMA starts moving.
    ema_update_after_step: usize => "ema.update_after_step";
    /// EMA warm-up inv_gamma.
    ema_inv_gamma: f64 => "ema.inv_gamma";
    /// EMA warm-up power.
    ema_power: f64 => "ema.power";
    /// Lowest EMA decay.
    ema_min_decay: f64 => "ema.min_decay";
    /// Highest EMA decay.
    ema_max_decay: f64 => "ema.max_decay";
}

/// Training flags (`lerobot-train`'s names; a config file may set the same keys).
#[derive(Debug, Args)]
pub struct TrainArgs {
    /// Synthesise a small dataset and train a tiny policy on it for a few dozen steps.
    #[arg(long)]
    pub demo: bool,
    /// Build everything for the dataset, print the parameter count and the resolved
    /// configuration, and exit.
    #[arg(long)]
    pub dry_run: bool,
    /// A TOML or JSON file with the configuration's keys (flags override it), or LeRobot's own
    /// train_config.json (or the folder holding it), read as LeRobot reads it.
    #[arg(long = "config_path")]
    pub config_path: Option<PathBuf>,
    /// Continue from a checkpoint (an output folder or a checkpoint folder).
    #[arg(long)]
    pub resume: Option<PathBuf>,
    #[command(flatten)]
    pub config: ConfigFlags,
    /// The devices to train on, as `cuda:0,cuda:1` (devices 0..N of one kind; choose others with
    /// CUDA_VISIBLE_DEVICES): sets --device and --num_devices.
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["device", "num_devices"])]
    pub devices: Option<Vec<String>>,
}

impl TrainArgs {
    /// The flags given, as a JSON patch of the configuration.
    pub fn overrides(&self) -> Result<Value> {
        let mut patch = self.config.overrides()?;
        if let Some(devices) = &self.devices {
            let kind = parse_device_list(devices)?;
            trainer::set_key(&mut patch, "device", json!(kind));
            trainer::set_key(&mut patch, "num_devices", json!(devices.len()));
        }
        Ok(patch)
    }

    /// The configuration file's keys, when one is given.
    pub fn config_file(&self) -> Result<Option<Value>> {
        self.config_path.as_deref().map(read_config_file).transpose()
    }
}

/// `--dataset.episodes`: indices and ranges ([`trainer::parse_episode_list`]).
#[derive(Debug, Clone, Serialize)]
#[serde(transparent)]
pub struct EpisodeList(Vec<usize>);

impl FromStr for EpisodeList {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        trainer::parse_episode_list(text).map(Self)
    }
}

/// An image size, `HxW`, or `none` (serialised as `[H, W]` or `null`).
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(transparent)]
pub struct ImageShape(Option<[usize; 2]>);

impl FromStr for ImageShape {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        if text == "none" {
            return Ok(Self(None));
        }
        let side = |s: &str| s.parse::<usize>().map_err(|e| format!("{text:?}: {s:?} is not a size ({e})"));
        let (h, w) = text.split_once('x').ok_or_else(|| format!("{text:?}: expected HxW or none"))?;
        Ok(Self(Some([side(h)?, side(w)?])))
    }
}

/// A name, or `none` (serialised as a string or `null`).
#[derive(Debug, Clone, Serialize)]
#[serde(transparent)]
pub struct NameOrNone(Option<String>);

impl FromStr for NameOrNone {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        Ok(Self((text != "none").then(|| text.to_string())))
    }
}

/// The kind of a `--devices` list (`cuda:0,cuda:1`, `cpu,cpu`): one kind, ordinals `0..N` in
/// order (a bare kind counts as the next ordinal).
fn parse_device_list(devices: &[String]) -> Result<DeviceKind> {
    let mut kinds = Vec::with_capacity(devices.len());
    for (expected, device) in devices.iter().enumerate() {
        let (kind, ordinal) = match device.split_once(':') {
            Some((kind, ordinal)) => {
                let ordinal: usize =
                    ordinal.parse().with_context(|| format!("--devices: `{device}` has no device number"))?;
                (kind, ordinal)
            }
            None => (device.as_str(), expected),
        };
        if ordinal != expected {
            bail!(
                "--devices: `{device}` is not device {expected}: a run takes devices 0..N of one kind \
                 (choose which GPUs those are with CUDA_VISIBLE_DEVICES)"
            );
        }
        kinds.push(kind.parse::<DeviceKind>()?);
    }
    match kinds.first() {
        Some(first) if kinds.iter().all(|k| k == first) => Ok(*first),
        Some(_) => bail!("--devices: every device must be of one kind, got {}", devices.join(",")),
        None => bail!("--devices: no device"),
    }
}

/// Reads a TOML or JSON configuration file.
fn read_config_file(path: &Path) -> Result<Value> {
    let lerobots = path.join("train_config.json");
    let path = if path.is_dir() && lerobots.is_file() { lerobots.as_path() } else { path };
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    if path.extension().is_some_and(|e| e == "toml") {
        let value: toml::Value = toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        return Ok(serde_json::to_value(value)?);
    }
    let value: Value = serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    if !trainer::lerobot::is_lerobot_train_config(&value) {
        return Ok(value);
    }
    let read = trainer::lerobot::from_lerobot_train_config(&value, path)?;
    if !read.ignored.is_empty() {
        eprintln!("{}: LeRobot's {} change nothing here: ignored", path.display(), read.ignored.join(", "));
    }
    Ok(read.config)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Flags {
        #[command(flatten)]
        train: TrainArgs,
    }

    fn overrides(args: &[&str]) -> Value {
        Flags::try_parse_from([&["trainer"], args].concat()).unwrap().train.overrides().unwrap()
    }

    #[test]
    fn each_flag_sets_the_key_of_its_name_as_the_configuration_reads_it() {
        let patch = overrides(&[
            "--dataset.root=a",
            "--dataset.root=b",
            "--dataset.episodes=0,3..5",
            "--frame-cache=off",
            "--dataset.frame_cache_budget_gb=2.5",
            "--policy.crop_shape=84x96",
            "--policy.resize_shape=none",
            "--policy.down_dims=64,128",
            "--policy.pretrained_backbone_weights=none",
            "--sampler.order=blocks",
            "--dataset.image_transforms.enable=true",
            "--policy.preset=lerobot-0.6",
            "--devices=cuda:0,cuda:1",
            "--ema.enable=true",
        ]);
        assert_eq!(
            patch,
            json!({
                "dataset": {
                    "root": ["a", "b"], "episodes": [0, 3, 4], "frame_cache": "off", "frame_cache_budget_gb": 2.5,
                    "image_transforms": {"enable": true},
                },
                "policy": {
                    "crop_shape": [84, 96], "resize_shape": null, "down_dims": [64, 128],
                    "pretrained_backbone_weights": null, "preset": "lerobot-0.6",
                },
                "sampler": {"order": "blocks"},
                "device": "cuda", "num_devices": 2,
                "ema": {"enable": true},
            })
        );
    }

    #[test]
    fn every_flag_names_a_key_of_the_configuration() {
        let mut args = Vec::new();
        for arg in <Flags as clap::CommandFactory>::command().get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            args.push(match long {
                "demo" | "dry-run" | "config_path" | "resume" | "devices" => continue,
                // Names a folder that resolving reads (trainer/tests/cpu/policy_path.rs).
                "policy.path" => continue,
                "policy.repo_id" => format!("--{long}=me/policy"),
                "dataset.episodes" => format!("--{long}=1"),
                "policy.crop_shape" | "policy.resize_shape" => format!("--{long}=8x8"),
                "frame-cache" => format!("--{long}=auto"),
                "frame-encoding" => format!("--{long}=rgb"),
                "frames-on-device" => format!("--{long}=off"),
                "sampler.order" => format!("--{long}=lerobot"),
                "policy.preset" => format!("--{long}=classic"),
                "device" => format!("--{long}=cpu"),
                "precision" => format!("--{long}=f32"),
                "policy.noise_scheduler_type" => format!("--{long}=DDIM"),
                "policy.prediction_type" => format!("--{long}=sample"),
                "dataset.root" | "dataset.repo_id" | "dataset.revision" | "output_dir" => format!("--{long}=x"),
                "policy.pretrained_backbone_weights" => format!("--{long}=x"),
                _ => match arg.get_possible_values().is_empty() {
                    true => format!("--{long}=1"),
                    false => format!("--{long}=true"),
                },
            });
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let patch = overrides(&args);
        // A key the configuration lacks is refused by name when resolved.
        trainer::TrainConfig::resolve(None, patch).unwrap();
    }
}
