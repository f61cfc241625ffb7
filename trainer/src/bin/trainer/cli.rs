//! The `trainer` command line: flags named like `lerobot-train`'s, a config file with the
//! same keys, and the `sample` command.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use burn::backend::Autodiff;
use clap::{Args, Parser, Subcommand};
use datasets::auto_cache::FrameCacheChoice;
use datasets::{Batch as Collated, Dataset, DecoderCache, FrameFormat, Values, WindowSpec, diffusion_delta_timestamps};
use serde_json::{Value, json};
use trainer::{HostObservation, PolicyRunner, Preset, Progress, TrainConfig};
use transforms::{DeviceKind, DeviceTask, Kernels, run_on};

/// Train LeRobot's Diffusion Policy on a LeRobot dataset, fast.
#[derive(Debug, Parser)]
#[command(version, about, args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    train: TrainArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Predict action chunks for dataset frames with a trained checkpoint.
    Sample(SampleArgs),
    /// Write a checkpoint as a LeRobot pretrained policy (model.safetensors, config.json,
    /// pre/post-processors) that LeRobot's `DiffusionPolicy.from_pretrained` loads.
    Export(ExportArgs),
}

/// Training flags (`lerobot-train`'s names; a config file may set the same keys).
#[derive(Debug, Args)]
struct TrainArgs {
    /// Synthesise a small dataset and train a tiny policy on it for a few dozen steps.
    #[arg(long)]
    demo: bool,
    /// Build everything for the dataset, print the parameter count and the resolved
    /// configuration, and exit.
    #[arg(long)]
    dry_run: bool,
    /// A TOML or JSON file with the configuration's keys (flags override it).
    #[arg(long = "config_path")]
    config_path: Option<PathBuf>,
    /// Continue from a checkpoint (an output folder or a checkpoint folder).
    #[arg(long)]
    resume: Option<PathBuf>,
    /// The dataset folder; repeat it to train on several datasets together (with
    /// --dataset.repo_id: where the dataset is or is to be downloaded; with several ids, the
    /// folder holding each as ROOT/OWNER/NAME).
    #[arg(long = "dataset.root")]
    dataset_root: Vec<PathBuf>,
    /// The dataset's Hub id, OWNER/NAME, or several separated by commas: looked for under
    /// HF_LEROBOT_HOME and LeRobot's Hub cache, downloaded from the Hub if missing.
    #[arg(long = "dataset.repo_id")]
    repo_id: Option<String>,
    /// With several datasets, each one's share of an epoch, e.g. 0.7,0.3 (default: every frame
    /// once per epoch, the datasets concatenated as LeRobot's MultiLeRobotDataset).
    #[arg(long = "dataset.weights", value_delimiter = ',')]
    weights: Option<Vec<f64>>,
    /// The Hub revision: a branch, tag or commit (default: LeRobot's codebase version, v3.0).
    #[arg(long = "dataset.revision")]
    revision: Option<String>,
    /// Whether a missing dataset may be downloaded (default true; HF_HUB_OFFLINE=1 forbids it).
    #[arg(long = "dataset.download")]
    download: Option<bool>,
    /// Sample only these episodes: indices and ranges, e.g. 0,3,5..9 (5 to 8) or 10..=12, or
    /// LeRobot's [0, 3, 5]; the statistics stay the whole dataset's.
    #[arg(long = "dataset.episodes")]
    episodes: Option<String>,
    /// Where frames come from: `auto` (default: the dataset's frames decoded once into a cache of
    /// the run's own, under $LEROBOT_RS_FRAME_CACHE or /dev/shm/lerobot-rs-frames, when they fit
    /// the budget), `off` (decoded as read), or a cache folder (`datasets cache`)
    #[arg(long = "frame-cache", alias = "dataset.frame_cache")]
    frame_cache: Option<FrameCacheChoice>,
    /// The most an automatic frame cache may take, in GB (default: half of the free space, and
    /// of the memory available for /dev/shm)
    #[arg(long = "frame-cache-budget", alias = "dataset.frame_cache_budget_gb")]
    frame_cache_budget: Option<f64>,
    /// How video frames travel to the training device: rgb (default, LeRobot's frames) or yuv420
    /// (the decoder's planes, half the bytes, converted to RGB on the device; reads the videos)
    #[arg(long = "frame-encoding", alias = "dataset.frame_encoding")]
    frame_encoding: Option<datasets::FrameEncoding>,
    /// The order of each epoch's samples: lerobot (default, LeRobot's) or blocks (decode-once:
    /// episodes shuffled and taken --sampler.block_episodes at a time, each window's samples
    /// shuffled, each video frame decoded once per epoch into a bounded buffer)
    #[arg(long = "sampler.order")]
    sampler_order: Option<loader::SampleOrder>,
    /// Episodes per window of the blocks order (default 16)
    #[arg(long = "sampler.block_episodes")]
    block_episodes: Option<usize>,
    /// Replace the cameras' mean/std with ImageNet's (default true).
    #[arg(long = "dataset.use_imagenet_stats")]
    use_imagenet_stats: Option<bool>,
    /// Enable LeRobot's image augmentation (default false).
    #[arg(long = "dataset.image_transforms.enable")]
    image_transforms: Option<bool>,
    /// Policy defaults: classic or lerobot-0.6.
    #[arg(long = "policy.preset")]
    preset: Option<Preset>,
    /// Observation steps.
    #[arg(long = "policy.n_obs_steps")]
    n_obs_steps: Option<usize>,
    /// Action horizon.
    #[arg(long = "policy.horizon")]
    horizon: Option<usize>,
    /// Actions executed per prediction.
    #[arg(long = "policy.n_action_steps")]
    n_action_steps: Option<usize>,
    /// Crop HxW, or `none`.
    #[arg(long = "policy.crop_shape")]
    crop_shape: Option<String>,
    /// Resize HxW, or `none`.
    #[arg(long = "policy.resize_shape")]
    resize_shape: Option<String>,
    /// U-Net widths, comma-separated.
    #[arg(long = "policy.down_dims", value_delimiter = ',')]
    down_dims: Option<Vec<usize>>,
    /// torchvision ResNet-18 weights file (.pth or .safetensors).
    #[arg(long = "policy.pretrained_backbone_weights")]
    pretrained_backbone_weights: Option<PathBuf>,
    /// GroupNorm instead of BatchNorm in the backbone.
    #[arg(long = "policy.use_group_norm")]
    use_group_norm: Option<bool>,
    /// One encoder per camera.
    #[arg(long = "policy.use_separate_rgb_encoder_per_camera")]
    separate_encoders: Option<bool>,
    /// DDPM or DDIM.
    #[arg(long = "policy.noise_scheduler_type")]
    noise_scheduler_type: Option<String>,
    /// Inference steps.
    #[arg(long = "policy.num_inference_steps")]
    num_inference_steps: Option<usize>,
    /// epsilon or sample.
    #[arg(long = "policy.prediction_type")]
    prediction_type: Option<String>,
    /// Leave padded actions out of the loss.
    #[arg(long = "policy.do_mask_loss_for_padding")]
    mask_loss: Option<bool>,
    /// Learning rate.
    #[arg(long = "policy.optimizer_lr")]
    lr: Option<f64>,
    /// Warm-up steps.
    #[arg(long = "policy.scheduler_warmup_steps")]
    warmup: Option<usize>,
    /// Samples per batch.
    #[arg(long = "batch_size")]
    batch_size: Option<usize>,
    /// Optimiser steps.
    #[arg(long)]
    steps: Option<usize>,
    /// Loader worker threads.
    #[arg(long = "num_workers")]
    num_workers: Option<usize>,
    /// Batches prepared ahead.
    #[arg(long)]
    prefetch: Option<usize>,
    /// Seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Steps between log lines.
    #[arg(long = "log_freq")]
    log_freq: Option<usize>,
    /// Steps between checkpoints.
    #[arg(long = "save_freq")]
    save_freq: Option<usize>,
    /// Output folder.
    #[arg(long = "output_dir")]
    output_dir: Option<PathBuf>,
    /// cpu, wgpu or cuda.
    #[arg(long)]
    device: Option<DeviceKind>,
    /// Train on N devices of that kind, one replica each (data-parallel; on the CPU, N replicas
    /// share its cores).
    #[arg(long = "num_devices")]
    num_devices: Option<usize>,
    /// The devices to train on, as `cuda:0,cuda:1` (devices 0..N of one kind; choose others with
    /// CUDA_VISIBLE_DEVICES): sets --device and --num_devices.
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["device", "num_devices"])]
    devices: Option<Vec<String>>,
    /// Compute precision: f32, bf16 or f16 (f32 master weights; f16 with loss scaling).
    #[arg(long)]
    precision: Option<trainer::Precision>,
    /// Micro-batches of batch_size per optimiser step.
    #[arg(long = "grad_accum")]
    grad_accum: Option<usize>,
    /// Keep an exponential moving average of the weights (used by `sample` and `export`).
    #[arg(long = "ema.enable")]
    ema_enable: Option<bool>,
    /// Optimiser steps before the EMA starts moving.
    #[arg(long = "ema.update_after_step")]
    ema_update_after_step: Option<usize>,
    /// EMA warm-up inv_gamma.
    #[arg(long = "ema.inv_gamma")]
    ema_inv_gamma: Option<f64>,
    /// EMA warm-up power.
    #[arg(long = "ema.power")]
    ema_power: Option<f64>,
    /// Lowest EMA decay.
    #[arg(long = "ema.min_decay")]
    ema_min_decay: Option<f64>,
    /// Highest EMA decay.
    #[arg(long = "ema.max_decay")]
    ema_max_decay: Option<f64>,
}

fn shape_value(text: &str) -> Result<Value> {
    if text == "none" {
        return Ok(Value::Null);
    }
    let (h, w) = text.split_once('x').with_context(|| format!("{text:?}: expected HxW or none"))?;
    Ok(json!([h.parse::<usize>()?, w.parse::<usize>()?]))
}

impl TrainArgs {
    /// The flags given, as a JSON patch over the configuration.
    fn overrides(&self) -> Result<Value> {
        let mut v = json!({"dataset": {}, "policy": {}});
        let mut set = |path: &[&str], value: Value| {
            let mut at = &mut v;
            for k in &path[..path.len() - 1] {
                at = at.as_object_mut().expect("objects").entry(*k).or_insert_with(|| json!({}));
            }
            at.as_object_mut().expect("an object").insert(path[path.len() - 1].to_string(), value);
        };
        macro_rules! opt {
            ($field:expr, $path:expr) => {
                if let Some(x) = &$field {
                    set(&$path, json!(x));
                }
            };
        }
        if !self.dataset_root.is_empty() {
            set(&["dataset", "root"], json!(self.dataset_root));
        }
        opt!(self.repo_id, ["dataset", "repo_id"]);
        opt!(self.weights, ["dataset", "weights"]);
        opt!(self.revision, ["dataset", "revision"]);
        opt!(self.download, ["dataset", "download"]);
        if let Some(list) = &self.episodes {
            let episodes = trainer::parse_episode_list(list).map_err(|e| anyhow::anyhow!("--dataset.episodes: {e}"))?;
            set(&["dataset", "episodes"], json!(episodes));
        }
        opt!(self.frame_cache, ["dataset", "frame_cache"]);
        opt!(self.frame_cache_budget, ["dataset", "frame_cache_budget_gb"]);
        opt!(self.use_imagenet_stats, ["dataset", "use_imagenet_stats"]);
        opt!(self.sampler_order, ["sampler", "order"]);
        opt!(self.frame_encoding, ["dataset", "frame_encoding"]);
        opt!(self.block_episodes, ["sampler", "block_episodes"]);
        if let Some(enable) = self.image_transforms {
            set(&["dataset", "image_transforms", "enable"], json!(enable));
        }
        if let Some(p) = self.preset {
            set(&["policy", "preset"], serde_json::to_value(p)?);
        }
        opt!(self.n_obs_steps, ["policy", "n_obs_steps"]);
        opt!(self.horizon, ["policy", "horizon"]);
        opt!(self.n_action_steps, ["policy", "n_action_steps"]);
        if let Some(c) = &self.crop_shape {
            set(&["policy", "crop_shape"], shape_value(c)?);
        }
        if let Some(r) = &self.resize_shape {
            set(&["policy", "resize_shape"], shape_value(r)?);
        }
        opt!(self.down_dims, ["policy", "down_dims"]);
        opt!(self.pretrained_backbone_weights, ["policy", "pretrained_backbone_weights"]);
        opt!(self.use_group_norm, ["policy", "use_group_norm"]);
        opt!(self.separate_encoders, ["policy", "use_separate_rgb_encoder_per_camera"]);
        opt!(self.noise_scheduler_type, ["policy", "noise_scheduler_type"]);
        opt!(self.num_inference_steps, ["policy", "num_inference_steps"]);
        opt!(self.prediction_type, ["policy", "prediction_type"]);
        opt!(self.mask_loss, ["policy", "do_mask_loss_for_padding"]);
        opt!(self.lr, ["policy", "optimizer_lr"]);
        opt!(self.warmup, ["policy", "scheduler_warmup_steps"]);
        opt!(self.batch_size, ["batch_size"]);
        opt!(self.steps, ["steps"]);
        opt!(self.num_workers, ["num_workers"]);
        opt!(self.prefetch, ["prefetch"]);
        opt!(self.seed, ["seed"]);
        opt!(self.log_freq, ["log_freq"]);
        opt!(self.save_freq, ["save_freq"]);
        opt!(self.output_dir, ["output_dir"]);
        if let Some(d) = self.device {
            set(&["device"], json!(d.to_string()));
        }
        opt!(self.num_devices, ["num_devices"]);
        if let Some(devices) = &self.devices {
            let kind = parse_device_list(devices)?;
            set(&["device"], json!(kind.to_string()));
            set(&["num_devices"], json!(devices.len()));
        }
        opt!(self.precision, ["precision"]);
        opt!(self.grad_accum, ["grad_accum"]);
        opt!(self.ema_enable, ["ema", "enable"]);
        opt!(self.ema_update_after_step, ["ema", "update_after_step"]);
        opt!(self.ema_inv_gamma, ["ema", "inv_gamma"]);
        opt!(self.ema_power, ["ema", "power"]);
        opt!(self.ema_min_decay, ["ema", "min_decay"]);
        opt!(self.ema_max_decay, ["ema", "max_decay"]);
        Ok(v)
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
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    if path.extension().is_some_and(|e| e == "toml") {
        let value: toml::Value = toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        Ok(serde_json::to_value(value)?)
    } else {
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
    }
}

/// Runs the command line.
pub fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Some(Command::Sample(args)) => sample(&args),
        Some(Command::Export(args)) => export(&args),
        None => train(&cli.train),
    }
}

/// The demo's configuration: a tiny policy (U-Net widths 64/128/256, 84×84 crop) trained for a
/// few dozen steps on a synthetic PushT-like dataset written to `output/demo-dataset`.
fn demo_overrides(output: &Path) -> Result<Value> {
    // A demo starts over each time: remove what an earlier demo wrote (never anything else).
    let checkpoints = trainer::checkpoint::checkpoints_dir(output);
    if checkpoints.exists() {
        std::fs::remove_dir_all(&checkpoints)?;
    }
    if output.exists() {
        for entry in std::fs::read_dir(output)? {
            let path = entry?.path();
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if name == "metrics.csv" || name.starts_with("events.out.tfevents.") {
                std::fs::remove_file(&path)?;
            }
        }
    }
    let root = output.join("demo-dataset");
    if !root.join("meta/info.json").exists() {
        if root.exists() {
            std::fs::remove_dir_all(&root)?;
        }
        eprintln!("writing a synthetic PushT-like dataset to {}", root.display());
        datasets::synth::write_dataset(
            &root,
            &datasets::synth::SynthConfig {
                episodes: 6,
                min_length: 40,
                max_length: 60,
                // A build without FFmpeg stores the frames as images in parquet, which it reads.
                storage: if cfg!(feature = "video") {
                    datasets::synth::SynthConfig::default().storage
                } else {
                    datasets::synth::CameraStorage::Images
                },
                ..Default::default()
            },
        )?;
    }
    Ok(json!({
        "dataset": {"root": root},
        "policy": {"down_dims": [64, 128, 256], "diffusion_step_embed_dim": 64, "optimizer_lr": 1e-3, "scheduler_warmup_steps": 5},
        "batch_size": 8, "steps": 40, "log_freq": 5, "save_freq": 0, "num_workers": 1,
        "output_dir": output,
    }))
}

fn train(args: &TrainArgs) -> Result<()> {
    let file = args.config_path.as_deref().map(read_config_file).transpose()?;
    let mut overrides = args.overrides()?;
    if args.demo {
        let output = args.output_dir.clone().unwrap_or_else(|| PathBuf::from("outputs/demo"));
        let mut demo = demo_overrides(&output)?;
        // Explicit flags still win over the demo's choices.
        trainer::merge(&mut demo, overrides);
        overrides = demo;
    }
    let mut config = TrainConfig::resolve(file, overrides)?;
    let requests = config.dataset.hub_requests()?;
    if !requests.is_empty() {
        let roots = requests.iter().map(|r| Ok(datasets::hub::resolve_on_terminal(r)?.root)).collect::<Result<_>>()?;
        config.dataset.root = trainer::DatasetRoots(roots);
    }
    if config.dataset.root.is_empty() {
        bail!(
            "no dataset: pass --dataset.root DIR or --dataset.repo_id OWNER/NAME (or --demo to try on a synthetic one)"
        );
    }
    // One of several processes (mpirun, srun): MPI stays initialised while `launch` lives.
    let launch = trainer::parallel::launch()?;
    let processes = launch.processes();
    std::fs::create_dir_all(&config.output_dir).with_context(|| format!("creating {}", config.output_dir.display()))?;
    let resolved = serde_json::to_string_pretty(&config)?;
    if processes.is_main() {
        std::fs::write(config.output_dir.join("train_config.json"), &resolved)?;
    }
    if args.dry_run {
        let n = run_on(config.device, DryRun { config: config.clone() })??;
        println!("num_learnable_params={n} ({})", trainer::metrics::big_number(n as f64));
        println!("{resolved}");
        return Ok(());
    }
    let outcome = run_on(config.device, Train { config: config.clone(), resume: args.resume.clone(), processes })??;
    if !processes.is_main() {
        return Ok(());
    }
    if let (Some(first), Some(last)) = (outcome.losses.first(), outcome.losses.last()) {
        println!("loss {:.4} at step {} → {:.4} at step {}", first.1, first.0, last.1, last.0);
    }
    if let Some(dir) = outcome.checkpoint {
        println!("last checkpoint: {}", dir.display());
    }
    Ok(())
}

struct DryRun {
    config: TrainConfig,
}

impl DeviceTask for DryRun {
    type Output = Result<usize>;
    fn run<B: Kernels>(self, device: B::Device) -> Result<usize> {
        let data = trainer::TrainData::open(&self.config)?;
        let model = trainer::init_model::<B>(&self.config.policy.config, &data.features, self.config.seed, &device)?;
        Ok(model.num_learnable_params())
    }
}

struct Train {
    config: TrainConfig,
    resume: Option<PathBuf>,
    processes: trainer::parallel::Processes,
}

impl DeviceTask for Train {
    type Output = Result<trainer::TrainOutcome>;
    fn run<B: Kernels>(self, device: B::Device) -> Result<trainer::TrainOutcome> {
        let bar = indicatif::ProgressBar::new(self.config.steps as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} steps  {per_sec}  eta {eta}  {msg}")
                .expect("a valid template"),
        );
        // Processes that share a machine take the devices after those of the ones before them.
        let (count, skipped) = (self.config.num_devices, self.config.num_devices * self.processes.local_rank());
        let devices = trainer::parallel::devices_from(&device, skipped + count).split_off(skipped);
        let outcome =
            trainer::train_on::<Autodiff<B>>(
                &self.config,
                self.resume.as_deref(),
                devices,
                |progress| match progress {
                    // A hidden bar (output not a terminal) prints nothing: log lines go to stdout then.
                    Progress::Line(line) if bar.is_hidden() => println!("{line}"),
                    Progress::Line(line) => bar.println(line),
                    Progress::Step(step) => {
                        if !bar.message().is_empty() {
                            bar.set_message("");
                        }
                        bar.set_position(step as u64);
                    }
                    Progress::FrameCache { done, total } => {
                        bar.set_message(format!("frame cache {done}/{total} frames"));
                    }
                },
            );
        bar.finish_and_clear();
        Ok(outcome?)
    }
}

/// Arguments of `trainer sample`.
#[derive(Debug, Args)]
struct SampleArgs {
    /// The checkpoint (an output folder or a checkpoint folder).
    #[arg(long)]
    checkpoint: PathBuf,
    /// The dataset whose frames to observe.
    #[arg(long)]
    root: PathBuf,
    /// Frame indices, comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    indices: Vec<usize>,
    /// The safetensors file to write.
    #[arg(long)]
    out: PathBuf,
    /// Seed of the diffusion noise.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Use the trained weights even when the checkpoint has an EMA of them.
    #[arg(long)]
    no_ema: bool,
    /// Start the reverse diffusion from the `noise` tensor `[B, horizon, A]` of this
    /// safetensors file (to compare with LeRobot's `generate_actions(batch, noise)`).
    #[arg(long)]
    initial_noise: Option<PathBuf>,
    /// cpu, wgpu or cuda.
    #[arg(long, default_value = "cpu")]
    device: DeviceKind,
}

struct Sample<'a> {
    args: &'a SampleArgs,
}

impl DeviceTask for Sample<'_> {
    type Output = Result<(Vec<f32>, [usize; 3])>;
    fn run<B: Kernels>(self, device: B::Device) -> Result<(Vec<f32>, [usize; 3])> {
        let args = self.args;
        let mut runner = PolicyRunner::<B>::load(&args.checkpoint, args.seed, !args.no_ema, device)?;
        let dataset = Dataset::open(&args.root)?;
        let n_obs = runner.config().n_obs_steps;
        let deltas: datasets::DeltaTimestamps =
            diffusion_delta_timestamps(dataset.info(), n_obs, runner.config().horizon)
                .into_iter()
                .filter(|(k, _)| k.starts_with("observation."))
                .collect();
        let windows = WindowSpec::from_delta_timestamps(&deltas, dataset.info(), dataset.options().tolerance_s)?;
        let mut decoders = DecoderCache::default();
        let samples = args
            .indices
            .iter()
            .map(|&i| dataset.get(i, &windows, &mut decoders, FrameFormat::Uint8))
            .collect::<datasets::Result<Vec<_>>>()?;
        let batch = Collated::collate(&samples)?;
        let f32s = |k: &str| -> Result<&[f32]> {
            match &batch.tensors.get(k).with_context(|| format!("the dataset has no `{k}`"))?.values {
                Values::F32(v) => Ok(v),
                _ => bail!("`{k}` is not float"),
            }
        };
        let cameras = runner
            .features()
            .cameras
            .iter()
            .map(|(k, shape)| {
                match &batch.tensors.get(k).with_context(|| format!("the dataset has no camera `{k}`"))?.values {
                    Values::U8(v) => Ok((k.clone(), v.as_slice(), *shape)),
                    _ => bail!("`{k}` is not uint8"),
                }
            })
            .collect::<Result<Vec<_>>>()?;
        let env =
            if runner.features().env_state_dim.is_some() { Some(f32s("observation.environment_state")?) } else { None };
        let host = HostObservation {
            batch: args.indices.len(),
            state: f32s("observation.state")?,
            env_state: env,
            cameras,
            encoding: datasets::FrameEncoding::Rgb,
        };
        let initial = args.initial_noise.as_deref().map(read_noise).transpose()?;
        let actions = runner.predict_chunk_from(&host, initial)?;
        let dims = actions.dims();
        Ok((actions.into_data().convert::<f32>().to_vec().expect("f32 data"), dims))
    }
}

/// The float32 `noise` tensor of a safetensors file.
fn read_noise(path: &Path) -> Result<Vec<f32>> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let tensors =
        safetensors::SafeTensors::deserialize(&bytes).with_context(|| format!("parsing {}", path.display()))?;
    let noise = tensors.tensor("noise").with_context(|| format!("{}: no `noise` tensor", path.display()))?;
    if noise.dtype() != safetensors::Dtype::F32 {
        bail!("{}: `noise` is {:?}, expected F32", path.display(), noise.dtype());
    }
    Ok(noise.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
}

fn sample(args: &SampleArgs) -> Result<()> {
    let (actions, shape) = run_on(args.device, Sample { args })??;
    let mut tensors = BTreeMap::new();
    tensors.insert("action".to_string(), datasets::Tensor::new(shape.to_vec(), Values::F32(actions)));
    tensors.insert(
        "index".to_string(),
        datasets::Tensor::new(vec![args.indices.len()], Values::I64(args.indices.iter().map(|&i| i as i64).collect())),
    );
    let batch = Collated { tensors, tasks: Vec::new() };
    let mut meta = BTreeMap::new();
    meta.insert("checkpoint".to_string(), args.checkpoint.display().to_string());
    meta.insert("seed".to_string(), args.seed.to_string());
    batch.write_safetensors(&args.out, &meta)?;
    println!("wrote {} action chunks of shape {:?} to {}", args.indices.len(), &shape[1..], args.out.display());
    Ok(())
}

/// Arguments of `trainer export`.
#[derive(Debug, Args)]
struct ExportArgs {
    /// The checkpoint (an output folder or a checkpoint folder).
    #[arg(long)]
    checkpoint: PathBuf,
    /// The folder to write.
    #[arg(long)]
    out: PathBuf,
    /// Export the trained weights even when the checkpoint has an EMA of them.
    #[arg(long)]
    no_ema: bool,
}

fn export(args: &ExportArgs) -> Result<()> {
    let runner = PolicyRunner::<burn::backend::Flex>::load(&args.checkpoint, 0, !args.no_ema, Default::default())?;
    let (config, features, normalizer) =
        (runner.config().clone(), runner.features().clone(), runner.normalizer().clone());
    let model = runner.into_model();
    trainer::lerobot::export(&model, &config, &features, &normalizer, &args.out)?;
    println!("wrote a LeRobot Diffusion Policy to {}", args.out.display());
    Ok(())
}
