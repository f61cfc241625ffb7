//! `bench train-step`: the trainer's step time, phase by phase, on one real batch (the protocol
//! of LeRobot's `../shared/anchors/bench_train.py`, so the two compare), then the real loop with
//! the loader running: steps/s and the share of time spent waiting for data.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use burn::backend::Autodiff;
use burn::prelude::*;
use clap::Args;
use datasets::auto_cache::FrameCacheChoice;
use kernels::{DeviceKind, DeviceTask, Kernels, LaunchLog, run_on};
use loader::SamplerState;
use serde::Serialize;
use serde_json::json;
use trainer::{Precision, Preset, Progress, StepMode, TrainConfig, TrainData, init_model, step_runner};

use crate::dataset_source::DatasetSource;

/// Arguments of `bench train-step`.
#[derive(Debug, Clone, Args)]
pub struct TrainStepArgs {
    /// The dataset, or several trained together.
    #[command(flatten)]
    pub dataset: DatasetSource,
    /// With several datasets, each one's share of an epoch, e.g. 0.7,0.3.
    #[arg(long, value_delimiter = ',')]
    pub weights: Option<Vec<f64>>,
    /// Read frames from this decoded-frame cache.
    #[arg(long)]
    pub frame_cache: Option<PathBuf>,
    /// With --frame-cache: keep its frames in the device's memory, each step gathering its frames
    /// there by their rows (the trainer's `--frames-on-device on`).
    #[arg(long, requires = "frame_cache")]
    pub frames_on_device: bool,
    /// Policy defaults: classic or lerobot-0.6.
    #[arg(long, default_value = "classic")]
    pub preset: Preset,
    /// The tiny policy (U-Net widths 64/128/256, step embedding 64), as `--demo` trains it.
    #[arg(long)]
    pub tiny: bool,
    /// GroupNorm (true) or BatchNorm (false) in the vision backbone, as LeRobot's
    /// `--policy.use_group_norm`; the preset's when left out (classic: GroupNorm).
    #[arg(long)]
    pub use_group_norm: Option<bool>,
    /// Batch sizes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "8")]
    pub batch: Vec<usize>,
    /// Warm-up steps (not timed).
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,
    /// Timed steps on the fixed batch.
    #[arg(long, default_value_t = 5)]
    pub steps: usize,
    /// Steps of the real loop (loader running) after the phase timings; 0 skips it. Where the
    /// epoch would end within them, the rest of it is stepped untimed first.
    #[arg(long, default_value_t = 0)]
    pub loop_steps: usize,
    /// Loader workers of the real loop.
    #[arg(long, default_value_t = 2)]
    pub num_workers: usize,
    /// cpu, wgpu or cuda (the last two need the bench built with that feature).
    #[arg(long, default_value = "cpu")]
    pub device: DeviceKind,
    /// Compute precision: f32, bf16 or f16.
    #[arg(long, default_value = "f32")]
    pub precision: Precision,
    /// Count the kernels each phase launches (wgpu or cuda), from cubecl's own launch log; the
    /// logging costs host time, so the phase times of such a run are not the step's.
    #[arg(long)]
    pub count_launches: bool,
    /// Marks the timed steps as CUDA's profiler range (cuda): Nsight Compute's
    /// `--profile-from-start off` then profiles them alone, whatever launched before.
    #[arg(long)]
    pub profiler_range: bool,
    /// With --count-launches: fail when a step launches more kernels than this (CI's budget).
    #[arg(long, requires = "count_launches")]
    pub max_launches: Option<usize>,
}

/// Mean milliseconds of each phase of a step.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Phases {
    /// Upload, transforms, normalisation and noise.
    pub prepare: f64,
    /// Of `prepare`: the host-to-device copy of the batch's uint8 frames alone.
    pub transfer: f64,
    /// Forward to the loss.
    pub forward: f64,
    /// Backward.
    pub backward: f64,
    /// Global-norm clipping.
    pub clip: f64,
    /// Adam update.
    pub optim: f64,
    /// The whole step.
    pub total: f64,
}

/// Kernels launched in each phase of one step (the last timed one), and by kernel.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Launches {
    /// Upload, transforms, normalisation and noise.
    pub prepare: usize,
    /// Forward to the loss.
    pub forward: usize,
    /// Backward.
    pub backward: usize,
    /// Global-norm clipping.
    pub clip: usize,
    /// Adam update.
    pub optim: usize,
    /// The whole step.
    pub total: usize,
    /// The step's launches by kernel (cubecl's name, with its element types).
    pub by_kernel: BTreeMap<String, usize>,
}

/// The real loop's figures.
#[derive(Debug, Clone, Serialize)]
pub struct LoopFigures {
    /// Steps run.
    pub steps: usize,
    /// Samples per second.
    pub samples_per_s: f64,
    /// Mean step time, ms.
    pub step_ms: f64,
    /// Share of the wall time spent waiting for the next batch.
    pub data_wait_share: f64,
}

/// What a run pays before its steps reach their pace.
#[derive(Debug, Clone, Serialize)]
pub struct StartUp {
    /// From the task's start to its first step: the dataset opened, the model initialised on
    /// the device (its kernels compiled, where they are not in the kernel cache), the first
    /// batch loaded and the uploads timed, ms.
    pub setup_ms: f64,
    /// The first step (a warm-up step, outside the timed ones): its kernels compiled where the
    /// cache does not have them, and cuDNN's algorithms searched, ms.
    pub first_step_ms: f64,
}

/// One batch size's measurement.
#[derive(Debug, Clone, Serialize)]
pub struct TrainStepReport {
    /// The device.
    pub device: String,
    /// The policy measured.
    pub policy: String,
    /// Compute precision.
    pub precision: String,
    /// Learnable parameters.
    pub params: usize,
    /// Samples per batch.
    pub batch: usize,
    /// Timed steps.
    pub steps: usize,
    /// Mean phase times, ms.
    pub phases: Phases,
    /// Kernels launched per phase, when counted.
    pub launches: Option<Launches>,
    /// Median step time, ms.
    pub step_ms_median: f64,
    /// Fastest step, ms (the least disturbed by other processes).
    pub step_ms_min: f64,
    /// Samples per second on the fixed batch.
    pub samples_per_s: f64,
    /// The time to the first step and the first step's.
    pub start_up: StartUp,
    /// The losses of every step (warm-up included).
    pub losses: Vec<f64>,
    /// The real loop, when run.
    pub real_loop: Option<LoopFigures>,
    /// What one more step, run whole after the timed ones and one untimed, asked of the device
    /// from the host through the read of its loss (uploads, blocking calls; on a cubecl backend
    /// only). Counters printed "so far" (cuDNN's) include these two steps.
    pub host_traffic: Option<kernels::HostTraffic>,
}

struct Task {
    args: TrainStepArgs,
    batch: usize,
    launch_log: Option<LaunchLog>,
}

impl Task {
    fn config(&self) -> Result<TrainConfig> {
        let mut overrides = json!({
            // The frames the bench names: its cache, or the dataset's own files (never `auto`).
            "dataset": {"root": self.args.dataset.roots, "weights": self.args.weights, "frame_cache": self.args.frame_cache.clone().map_or(FrameCacheChoice::Off, FrameCacheChoice::Dir), "frames_on_device": if self.args.frames_on_device { "on" } else { "off" }},
            // The step's time does not depend on the backbone's starting weights: none are
            // loaded (or downloaded, for lerobot-0.6's ImageNet weights).
            "policy": {"preset": self.args.preset, "pretrained_backbone_weights": null},
            "batch_size": self.batch,
            "precision": self.args.precision,
            "steps": 100_000,
            "num_workers": self.args.num_workers,
        });
        if self.args.tiny {
            overrides["policy"]["down_dims"] = json!([64, 128, 256]);
            overrides["policy"]["diffusion_step_embed_dim"] = json!(64);
        }
        if let Some(group_norm) = self.args.use_group_norm {
            overrides["policy"]["use_group_norm"] = json!(group_norm);
        }
        Ok(TrainConfig::resolve(None, overrides)?)
    }
}

impl DeviceTask for Task {
    type Output = Result<TrainStepReport>;

    fn run<B: Kernels>(self, device: B::Device) -> Result<TrainStepReport> {
        let task_started = Instant::now();
        let config = self.config()?;
        let policy = &config.policy.config;
        let mut print = |progress: Progress<'_>| {
            if let Progress::Line(line) = progress {
                eprintln!("{line}");
            }
        };
        let mut data = TrainData::open(&config)?;
        data.settle_frames_on_device::<B>(&config, &device, &mut print)?;
        let normalizer = data.normalizer(&config)?;
        let model = init_model::<Autodiff<B>>(policy, &data.features, config.seed, &device)?;
        let params = model.num_learnable_params();
        // Set up as training sets it up (the frames uploaded where they stay on the device).
        let mut runner = step_runner::<Autodiff<B>>(&config, &data, model, &normalizer, device.clone(), &mut print)?;
        let mut loader = data.loader(&config, SamplerState::default())?;
        let batch = loader.next().context("the loader gave no batch")??;
        let sync = || B::sync(&device).context("synchronising the device");

        // The host-to-device copy alone: every camera's uint8 frames, uploaded and synchronised
        // (none where the frames are on the device).
        let cameras: Vec<(&[u8], [usize; 4])> = data
            .features
            .cameras
            .iter()
            .filter_map(|(key, _)| {
                let bytes = batch.u8(key)?;
                let shape = batch.shape(key)?;
                // `[N, 3, H, W]` of RGB; YUV planes, `[B, (T,) planes]`, as one row of bytes.
                let upload = if shape.len() >= 4 {
                    let leading = shape.len() - 3;
                    [shape[..leading].iter().product(), shape[leading], shape[leading + 1], shape[leading + 2]]
                } else {
                    [1, 1, 1, bytes.len()]
                };
                Some((bytes, upload))
            })
            .collect();
        let mut transfers = Vec::new();
        for _ in 0..self.args.warmup + self.args.steps {
            let t = Instant::now();
            let uploaded: Vec<_> =
                cameras.iter().map(|(bytes, shape)| transforms::frames_to_int::<B>(bytes, *shape, &device)).collect();
            sync()?;
            transfers.push(1e3 * t.elapsed().as_secs_f64());
            drop(uploaded);
        }
        let transfer_ms =
            transfers[self.args.warmup.min(transfers.len() - 1)..].iter().sum::<f64>() / self.args.steps.max(1) as f64;

        let mut phases = Vec::new();
        let mut losses = Vec::new();
        // Launches so far, read after a synchronisation (each phase's count is the difference).
        let launched = || self.launch_log.as_ref().map_or(0, LaunchLog::settled_count);
        let mut launches = None;
        let setup_ms = 1e3 * task_started.elapsed().as_secs_f64();
        let mut first_step_ms = 0.0;
        // Fed from kept buffers or captured as a CUDA graph (`LEROBOT_RS_CUDA_GRAPH`), a step is
        // one piece, timed whole (its phases are not the host's to run apart when replayed).
        let whole_steps = runner.graph_status().mode != StepMode::Eager;
        for step in 0..self.args.warmup + self.args.steps {
            if self.args.profiler_range && step == self.args.warmup {
                sync()?;
                profiler_range(true)?;
            }
            if whole_steps {
                let started = Instant::now();
                let output = runner.step(&batch, step)?;
                sync()?;
                let total = 1e3 * started.elapsed().as_secs_f64();
                if step == 0 {
                    first_step_ms = total;
                }
                losses.push(f64::from(output.loss.into_scalar().elem::<f32>()));
                if step >= self.args.warmup {
                    phases.push([0.0, 0.0, 0.0, 0.0, 0.0, total]);
                }
                continue;
            }
            // Each phase timed from its start to the device's synchronisation after it; the
            // launches counted between phases, outside the times.
            let mut times = [0.0; 6];
            let mut counts = [launched(); 6];
            let mut phase = |i: usize, started: Instant| -> Result<()> {
                sync()?;
                times[i] = 1e3 * started.elapsed().as_secs_f64();
                counts[i + 1] = launched();
                Ok(())
            };
            let started = Instant::now();
            let prepared = runner.prepare(&batch, step, 0)?;
            phase(0, started)?;
            let started = Instant::now();
            let loss = runner.loss(&prepared);
            phase(1, started)?;
            let started = Instant::now();
            let grads = runner.gradients(&loss);
            phase(2, started)?;
            // Clipping: the gradients gathered into the flat buffer, with their squares (the norm
            // and the factors follow here, or, where the weights are views, in the update).
            let started = Instant::now();
            let (grads, clipping) = runner.flatten_and_clip(grads);
            phase(3, started)?;
            let started = Instant::now();
            runner.update(grads, clipping, step);
            phase(4, started)?;
            times[5] = times[..5].iter().sum();
            if step == 0 {
                first_step_ms = times[5];
            }
            if let Some(log) = &self.launch_log {
                launches = Some(step_launches(&counts, log.by_kernel(counts[0])));
            }
            losses.push(f64::from(loss.into_scalar().elem::<f32>()));
            if step >= self.args.warmup {
                phases.push(times);
            }
        }
        if self.args.profiler_range && self.args.steps > 0 {
            profiler_range(false)?;
        }
        if whole_steps {
            println!("step mode: {:?}", runner.graph_status());
        }
        // Two more steps run whole, as training runs them (the timed ones wait for each phase):
        // the first settles what a whole step compiles and plans, the second's traffic is
        // counted through the read of its loss (under fusion its queue runs by then).
        let host_traffic = match kernels::HostTraffic::now().filter(|_| self.args.device != DeviceKind::Cpu) {
            Some(_) => {
                let done = self.args.warmup + self.args.steps;
                let _ = runner.step(&batch, done)?.loss.into_scalar();
                sync()?;
                let before = kernels::HostTraffic::now().unwrap_or_default();
                let _ = runner.step(&batch, done + 1)?.loss.into_scalar();
                Some(kernels::HostTraffic::now().unwrap_or_default().since(&before))
            }
            None => None,
        };
        let n = phases.len().max(1) as f64;
        let mean = |i: usize| phases.iter().map(|p| p[i]).sum::<f64>() / n;
        let mut totals: Vec<f64> = phases.iter().map(|p| p[5]).collect();
        totals.sort_by(f64::total_cmp);
        let phases_mean = Phases {
            prepare: mean(0),
            transfer: transfer_ms,
            forward: mean(1),
            backward: mean(2),
            clip: mean(3),
            optim: mean(4),
            total: mean(5),
        };

        let real_loop = if self.args.loop_steps > 0 {
            // Where the epoch ends within the timed steps, its last, smaller batch would compile
            // kernels and search cuDNN's algorithms inside the timing, as a real run did long
            // before: untimed first, the rest of the epoch.
            let left_in_epoch = loader.sampler().batches_per_epoch().saturating_sub(batch.index_in_epoch() + 1);
            let warmup = if left_in_epoch <= self.args.loop_steps { left_in_epoch } else { 0 };
            for step in 0..warmup {
                let batch = loader.next().context("the loader ended")??;
                let _ = runner.step(&batch, step)?.loss.into_scalar();
            }
            let mut waited = 0.0;
            let started = Instant::now();
            let mut samples = 0;
            for step in 0..self.args.loop_steps {
                let t = Instant::now();
                let batch = loader.next().context("the loader ended")??;
                waited += t.elapsed().as_secs_f64();
                let output = runner.step(&batch, step)?;
                samples += batch.len();
                drop(batch);
                // Read the loss as the training loop does at a log line: one sync per step.
                let _ = output.loss.into_scalar();
            }
            let elapsed = started.elapsed().as_secs_f64();
            Some(LoopFigures {
                steps: self.args.loop_steps,
                samples_per_s: samples as f64 / elapsed,
                step_ms: 1e3 * elapsed / self.args.loop_steps as f64,
                data_wait_share: waited / elapsed,
            })
        } else {
            None
        };
        let policy_name = format!(
            "{}{}, {}",
            serde_json::to_value(self.args.preset)?.as_str().unwrap_or("?"),
            if self.args.tiny { " tiny" } else { "" },
            if policy.use_group_norm { "GroupNorm" } else { "BatchNorm" }
        );
        Ok(TrainStepReport {
            device: self.args.device.to_string(),
            policy: policy_name,
            precision: self.args.precision.to_string(),
            params,
            batch: self.batch,
            steps: phases.len(),
            step_ms_median: totals.get(totals.len() / 2).copied().unwrap_or(0.0),
            step_ms_min: totals.first().copied().unwrap_or(0.0),
            samples_per_s: self.batch as f64 * 1e3 / phases_mean.total.max(1e-9),
            start_up: StartUp { setup_ms, first_step_ms },
            phases: phases_mean,
            launches,
            losses,
            real_loop,
            host_traffic,
        })
    }
}

/// One step's [`Launches`] from the counts after each phase (`counts[0]` before the step) and
/// the step's launches by kernel.
fn step_launches(counts: &[usize; 6], by_kernel: BTreeMap<String, usize>) -> Launches {
    let phase = |i: usize| counts[i + 1] - counts[i];
    Launches {
        prepare: phase(0),
        forward: phase(1),
        backward: phase(2),
        clip: phase(3),
        optim: phase(4),
        total: counts[5] - counts[0],
        by_kernel,
    }
}

/// Runs the measurement for every batch size.
pub fn run(args: &TrainStepArgs) -> Result<Vec<TrainStepReport>> {
    let roots = args.dataset.resolve()?.into_iter().map(|(_, root)| root).collect();
    let args = &TrainStepArgs { dataset: DatasetSource::folders(roots), ..args.clone() };
    let launch_log = match (args.count_launches, args.device) {
        (false, _) => None,
        (true, DeviceKind::Cpu) => bail!("--count-launches counts cubecl's kernels: use --device wgpu or cuda"),
        (true, _) => {
            let path = std::env::temp_dir().join(format!("lerobot-rs-launches-{}.log", std::process::id()));
            Some(LaunchLog::start(&path).map_err(anyhow::Error::msg)?)
        }
    };
    let reports = args
        .batch
        .iter()
        .map(|&batch| {
            let report = run_on(args.device, Task { args: args.clone(), batch, launch_log: launch_log.clone() })??;
            // Each cell as it ends: a sweep cut short by a time limit keeps what it measured.
            eprintln!("{}", render(&report));
            let StartUp { setup_ms, first_step_ms } = report.start_up;
            eprintln!("start-up: {setup_ms:.0} ms to the first step, which took {first_step_ms:.0} ms");
            if let Some(traffic) = &report.host_traffic {
                eprintln!("host traffic of one whole step and the read of its loss: {traffic}");
            }
            #[cfg(feature = "cudnn")]
            if args.device == DeviceKind::Cuda {
                let (round_trips, pointers) = kernels::cudnn::pointer_round_trips();
                eprintln!(
                    "cuDNN so far: {} algorithm searches ({} chose another algorithm in their second round), \
                     {} passes on algorithms earlier runs kept; {} passes of 1-D convolutions as cuBLAS's products; \
                     {} of the Linear layers' products in cuBLAS; \
                     {round_trips} blocking round trips for {pointers} buffers' device pointers",
                    kernels::cudnn::searches(),
                    kernels::cudnn::second_round_changes(),
                    kernels::cudnn::earlier_runs_choices(),
                    kernels::cudnn::blas_calls(),
                    kernels::cudnn::product_calls()
                );
            }
            if let Some(launches) = &report.launches {
                eprintln!("{}", render_launches(launches));
                if let Some(budget) = args.max_launches.filter(|&budget| launches.total > budget) {
                    bail!("a step launched {} kernels, more than the budget of {budget}", launches.total);
                }
            }
            Ok(report)
        })
        .collect();
    if let Some(log) = &launch_log {
        log.remove();
    }
    reports
}

/// One line: the kernels each phase launched.
pub fn render_launches(l: &Launches) -> String {
    format!(
        "launches per step: {} (prepare {}, forward {}, backward {}, clip {}, optim {}); {} distinct kernels",
        l.total,
        l.prepare,
        l.forward,
        l.backward,
        l.clip,
        l.optim,
        l.by_kernel.len()
    )
}

/// The header of [`render`]'s rows.
pub const HEADER: &str = "| device | policy | precision | batch | step ms (mean / median) | samples/s | prepare | forward | backward | clip | optim | real loop samples/s | data wait |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|";

/// One markdown row.
pub fn render(r: &TrainStepReport) -> String {
    let p = &r.phases;
    let (loop_rate, wait) = r.real_loop.as_ref().map_or(("-".to_string(), "-".to_string()), |l| {
        (format!("{:.1}", l.samples_per_s), format!("{:.1}%", 100.0 * l.data_wait_share))
    });
    format!(
        "| {} | {} | {} | {} | {:.0} / {:.0} | {:.1} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {loop_rate} | {wait} |",
        r.device,
        r.policy,
        r.precision,
        r.batch,
        p.total,
        r.step_ms_median,
        r.samples_per_s,
        p.prepare,
        p.forward,
        p.backward,
        p.clip,
        p.optim
    )
}

/// Starts (`on`) or stops CUDA's profiler range on the first GPU ([`TrainStepArgs::profiler_range`]).
#[cfg(feature = "cudnn")]
fn profiler_range(on: bool) -> Result<()> {
    kernels::cudnn::profiler_range(0, on).map_err(|why| anyhow::anyhow!("CUDA's profiler range: {why}"))
}

/// Without CUDA: the error that says so.
#[cfg(not(feature = "cudnn"))]
fn profiler_range(_on: bool) -> Result<()> {
    anyhow::bail!("--profiler-range marks a CUDA profiler range: it needs the bench built with `cuda`")
}
