//! `bench gpu-check`: the GPU path held to the CPU's. The same training step (same initial
//! weights, batch, noise and crops) on a GPU backend and on Flex, in f32 and half precision;
//! checkpoints written on one device resumed on the other; the input pipeline (augmentation,
//! normalisation, crops) on both; YUV 4:2:0 frames converted to RGB on the device, to the
//! decoder's bytes. It runs on the GPU machine from the kit (`scripts/gpu-run.sh
//! checks`); `bench/tests/checks.rs` runs the same checks with the CPU on both sides, where nothing
//! may differ.
//!
//! Tolerances, for f32: the loss and the gradient norm within 1e-3 relative (GPU kernels sum in
//! other orders, and may use TF32 tensor cores for f32 products); each weight after one Adam step
//! at the full learning rate within 2·lr + 1e-5 of the CPU's (Adam's first step moves a weight by
//! about ±lr whatever its gradient's size, so a gradient near zero may move it either way); the
//! training inputs within 1e-4; a run resumed on the other device within 1e-2 of an uninterrupted
//! one after two more steps. Half precision: the loss within 5% of the f32 loss on the device.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail, ensure};
use burn::backend::Autodiff;
use burn::module::AutodiffModule;
use burn::prelude::*;
use clap::Args;
use datasets::synth::{CameraStorage, SynthConfig, write_dataset};
use kernels::{DeviceKind, DeviceTask, Kernels, run_on};
use loader::Batch;
use serde_json::json;
use trainer::lerobot::{EntryValues, StateDict, lerobot_state_dict, load_lerobot_weights};
use trainer::{
    DiffusionConfig, DiffusionModel, InputPipeline, Mode, PolicyFeatures, Precision, StepOutput, StepRunner,
    TrainConfig, TrainData, TrainOutcome, init_model, train,
};
use transforms::{ImageTransformsConfig, Normalizer};

/// Arguments of `bench gpu-check`.
#[derive(Debug, Clone, Args)]
pub struct GpuCheckArgs {
    /// The devices to hold to the CPU: cuda and/or wgpu (the bench must be built with them).
    #[arg(long, value_delimiter = ',', default_value = "cuda")]
    pub devices: Vec<DeviceKind>,
    /// Where the small images-in-parquet dataset and the runs are written.
    #[arg(long, default_value = "target/bench/gpu-check")]
    pub work: PathBuf,
    /// Only the checks whose name holds one of these texts, by commas (`cudnn`: cuDNN's; `cudnn
    /// graph`: its graph API's; `cuda-graph`: a CUDA graph's capture, `cuda-graph-step` the training
    /// step's); every check where absent.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
}

/// The checks run so far: their lines, and the names of those that failed.
struct Checks<'a> {
    only: &'a [String],
    lines: Vec<String>,
    failures: Vec<String>,
}

impl Checks<'_> {
    /// Runs `check`, named `what`, unless `--only` leaves it out, and prints its line.
    fn run(&mut self, what: String, check: impl FnOnce() -> Result<String>) {
        if !self.only.is_empty() && !self.only.iter().any(|only| what.contains(only.as_str())) {
            return;
        }
        let line = check().unwrap_or_else(|e| {
            self.failures.push(what.clone());
            format!("FAILED {what}: {e:#}")
        });
        println!("{line}");
        self.lines.push(line);
    }
}

/// Runs every check (or those `--only` names) for every device; each line says what was
/// compared and how far apart. An error names the checks that failed (the others still run and
/// print).
pub fn run(args: &GpuCheckArgs) -> Result<Vec<String>> {
    let root = small_dataset(&args.work)?;
    let plain = inputs(&root, false)?;
    let augmented = inputs(&root, true)?;
    let mut checks = Checks { only: &args.only, lines: Vec::new(), failures: Vec::new() };
    for &device in &args.devices {
        checks.run(format!("{device} step"), || check_step(device, &plain, false));
        checks.run(format!("{device} half-precision copies"), || check_half_precision_copies(device, &plain));
        checks.run(format!("{device} inputs"), || check_pipeline(device, &augmented, false));
        checks.run(format!("{device} yuv frames"), || check_yuv_frames(device));
        checks.run(format!("{device} frames on the device"), || check_device_frames(device, &root));
        if device == DeviceKind::Cuda {
            checks.run(format!("{device} yuv frames timed"), || time_yuv_frames(device));
        }
        checks.run(format!("{device} to cpu"), || check_resume(device, DeviceKind::Cpu, &root, false));
        checks.run(format!("cpu to {device}"), || check_resume(DeviceKind::Cpu, device, &root, false));
        // Work captured as one CUDA graph and replayed (kernels' GraphKernels), never yet run on
        // a GPU.
        #[cfg(feature = "cuda")]
        if device == DeviceKind::Cuda {
            checks.run("cuda-graph capture".into(), crate::graph_check::check_cuda_graph);
            checks.run("cuda-graph-step".into(), || {
                use crate::graph_step_check::{Cuda, TinyPolicy, check_cuda_graph_step};
                let runner = |precision| plain.runner::<Cuda>(Default::default(), precision);
                check_cuda_graph_step(&TinyPolicy {
                    runner: &runner,
                    batch: &plain.batch,
                    first_step: plain.first_full_step(),
                })
            });
        }
        #[cfg(feature = "cudnn")]
        if device == DeviceKind::Cuda {
            use crate::cudnn_check::{Expected, check_convolutions};
            use burn::tensor::DType;
            use kernels::cudnn::{Conv1dPath, GraphUse, conv1d_path, use_conv1d, use_graph};
            checks.run("cudnn exact f32".into(), || check_convolutions(DType::F32, false, Expected::Cudnn));
            checks.run("cudnn tf32".into(), || check_convolutions(DType::F32, true, Expected::Cudnn));
            checks.run("cudnn bf16".into(), || check_convolutions(DType::BF16, true, Expected::Cudnn));
            // The graph API's plans wherever one builds (kernels/src/libraries/cudnn/graph.rs).
            let on_graph = |dtype, tf32| {
                use_graph(GraphUse::Only);
                let checked = check_convolutions(dtype, tf32, Expected::GraphPlans);
                use_graph(GraphUse::Off);
                checked
            };
            checks.run("cudnn graph exact f32".into(), || on_graph(DType::F32, false));
            checks.run("cudnn graph tf32".into(), || on_graph(DType::F32, true));
            checks.run("cudnn graph bf16".into(), || on_graph(DType::BF16, true));
            checks.run("cudnn stream ordering".into(), || check_stream_ordering(&plain, Conv1dPath::Cudnn));
            // The encoder's maps channels-last (LEROBOT_RS_CHANNELS_LAST=1): cuDNN's NHWC and
            // KRSC descriptors, never yet run on a GPU.
            use crate::cudnn_check::check_channels_last;
            checks.run("cudnn channels-last tf32".into(), || check_channels_last(DType::F32, true));
            checks.run("cudnn channels-last bf16".into(), || check_channels_last(DType::BF16, true));
            // The 1-D convolutions as cuBLAS's products over the unfolded input
            // (kernels/src/cube/unfold.rs, kernels/src/libraries/cudnn/blas.rs), never yet run on a GPU: last,
            // as a product that faulted would break the context for every check after it, and
            // synchronised around every call, so that a fault is named where it happens.
            let on_cublas = |dtype, tf32| {
                let before = conv1d_path();
                use_conv1d(Conv1dPath::Cublas);
                kernels::cudnn::synchronise_every_call(true);
                let checked = check_convolutions(dtype, tf32, Expected::CublasFor1d);
                kernels::cudnn::synchronise_every_call(false);
                use_conv1d(before);
                checked
            };
            checks.run("cudnn cublas 1-d exact f32".into(), || on_cublas(DType::F32, false));
            checks.run("cudnn cublas 1-d tf32".into(), || on_cublas(DType::F32, true));
            checks.run("cudnn cublas 1-d bf16".into(), || on_cublas(DType::BF16, true));
            checks.run("cudnn cublas 1-d stream ordering".into(), || check_stream_ordering(&plain, Conv1dPath::Cublas));
            // The Linear layers' products in cuBLAS (LEROBOT_RS_LINEAR=cublas,
            // kernels/src/libraries/cudnn/linear.rs), never yet run on a GPU; synchronised
            // around every call, as the 1-D ones above.
            use crate::linear_check::check_linear;
            checks.run("cudnn cublas linear exact f32".into(), || check_linear(DType::F32, false));
            checks.run("cudnn cublas linear tf32".into(), || check_linear(DType::F32, true));
            checks.run("cudnn cublas linear bf16".into(), || check_linear(DType::BF16, true));
        }
    }
    ensure!(checks.failures.is_empty(), "checks failed: {}", checks.failures.join(", "));
    Ok(checks.lines)
}

/// A small images-in-parquet dataset (no FFmpeg needed), written once under `work`.
pub fn small_dataset(work: &Path) -> Result<PathBuf> {
    let root = work.join("dataset");
    if !root.join("meta/info.json").exists() {
        if root.exists() {
            std::fs::remove_dir_all(&root)?;
        }
        let config = SynthConfig {
            episodes: 3,
            min_length: 20,
            max_length: 24,
            storage: CameraStorage::Images,
            ..SynthConfig::default()
        };
        write_dataset(&root, &config).context("writing the check's dataset")?;
    }
    Ok(root)
}

/// The tiny policy (U-Net 16/32/64, 32x32 crops) on `root`, writing into `output`.
pub(crate) fn tiny(root: &Path, output: &Path, steps: usize, extra: serde_json::Value) -> Result<TrainConfig> {
    let mut overrides = json!({
        "dataset": {"root": root, "frame_cache": "off"},
        "policy": {"down_dims": [16, 32, 64], "diffusion_step_embed_dim": 16, "crop_shape": [32, 32],
                   "optimizer_lr": 1e-3, "scheduler_warmup_steps": 2},
        "batch_size": 4, "steps": steps, "log_freq": 1, "save_freq": 0, "num_workers": 2, "prefetch": 2, "seed": 7,
        "output_dir": output,
    });
    trainer::merge(&mut overrides, extra);
    Ok(TrainConfig::resolve(None, overrides)?)
}

/// Everything a step needs, on the host: the configuration, the first batch, the normaliser
/// and the initial weights (drawn on the CPU).
pub struct Inputs {
    config: DiffusionConfig,
    features: PolicyFeatures,
    normalizer: Normalizer,
    augment: ImageTransformsConfig,
    batch: Batch,
    weights: StateDict,
    seed: u64,
}

/// What a step on the tiny policy over the dataset at `root` needs, with the training
/// augmentation when `augment` is set.
pub fn inputs(root: &Path, augment: bool) -> Result<Inputs> {
    let mut config = tiny(root, &root.with_file_name("unused"), 10, json!({}))?;
    config.dataset.image_transforms.enable = augment;
    let data = TrainData::open(&config)?;
    let normalizer = data.normalizer(&config)?;
    let batch = data.loader(&config, Default::default())?.next().context("the loader gave no batch")??;
    let policy = config.policy.config.clone();
    let model = init_model::<burn::backend::Flex>(&policy, &data.features, config.seed, &Default::default())?;
    Ok(Inputs {
        weights: host_weights(&model, &policy),
        config: policy,
        features: data.features,
        normalizer,
        augment: config.dataset.image_transforms.clone(),
        batch,
        seed: config.seed,
    })
}

/// The model's weights on the host, under LeRobot's names.
fn host_weights<B: Backend>(model: &DiffusionModel<B>, config: &DiffusionConfig) -> StateDict {
    lerobot_state_dict(model, config, true)
        .into_iter()
        .filter_map(|e| match e.values {
            EntryValues::F32(v) => Some((e.name, (e.shape, v))),
            EntryValues::I64(_) => None,
        })
        .collect()
}

/// What one optimiser step computed.
struct StepResult {
    loss: f32,
    grad_norm: f32,
    weights: StateDict,
}

/// One optimiser step from `inputs` in `precision`, on whichever device it is run on: the first
/// step after the warm-up, where the learning rate is the full one (at step 0 it is 0, and the
/// weights would not move at all).
struct OneStep<'a> {
    inputs: &'a Inputs,
    precision: Precision,
}

impl DeviceTask for OneStep<'_> {
    type Output = Result<StepResult>;

    fn run<B: Kernels>(self, device: B::Device) -> Result<StepResult> {
        let i = self.inputs;
        let fresh = DiffusionModel::<Autodiff<B>>::skeleton(&i.config, &i.features, &device);
        let model = load_lerobot_weights(fresh, &i.config, &i.weights, Path::new("host weights"))?;
        let mut runner = runner_for(i, model, device, self.precision)?;
        let output = runner.step(&i.batch, i.config.scheduler_warmup_steps)?;
        Ok(step_result(output, &runner, &i.config))
    }
}

impl Inputs {
    /// A runner of the tiny policy from these inputs' weights on `device`, computing in
    /// `precision`.
    pub fn runner<B: Kernels>(&self, device: B::Device, precision: Precision) -> Result<StepRunner<Autodiff<B>>> {
        let fresh = DiffusionModel::<Autodiff<B>>::skeleton(&self.config, &self.features, &device);
        let model = load_lerobot_weights(fresh, &self.config, &self.weights, Path::new("host weights"))?;
        runner_for(self, model, device, precision)
    }

    /// The first step at the full learning rate (after the scheduler's warm-up).
    pub fn first_full_step(&self) -> usize {
        self.config.scheduler_warmup_steps
    }
}

/// A runner of `inputs`' configuration over `model`, computing in `precision`.
fn runner_for<B: Kernels>(
    i: &Inputs,
    model: DiffusionModel<Autodiff<B>>,
    device: B::Device,
    precision: Precision,
) -> Result<StepRunner<Autodiff<B>>> {
    let pipeline = InputPipeline::new(i.config.clone(), i.features.clone(), i.normalizer.clone(), i.augment.clone());
    Ok(StepRunner::new(model, i.config.clone(), pipeline, i.seed, 100, device).with_precision(precision)?)
}

/// What `output`, a step of `runner`, computed, read back.
fn step_result<B: Kernels>(
    output: StepOutput<B>,
    runner: &StepRunner<Autodiff<B>>,
    config: &DiffusionConfig,
) -> StepResult {
    StepResult {
        loss: output.loss.into_scalar().elem(),
        grad_norm: output.grad_norm.into_scalar().elem(),
        weights: host_weights(&runner.model().valid(), config),
    }
}

/// A second half-precision step, two ways: straight after the first, reading the copies of the
/// weights the first update wrote; and by a runner resumed from the first step's weights and
/// optimiser state, which casts the weights as a first step does. Whether the first step
/// applied its update (an f16 overflow skips it, and writes no copies). `None` where the device
/// does not compute in the precision.
struct SecondHalfStep<'a> {
    inputs: &'a Inputs,
    precision: Precision,
}

impl DeviceTask for SecondHalfStep<'_> {
    type Output = Result<Option<(StepResult, StepResult, bool)>>;

    fn run<B: Kernels>(self, device: B::Device) -> Self::Output {
        if !self.precision.supported::<B>(&device) {
            return Ok(None);
        }
        let i = self.inputs;
        let fresh = DiffusionModel::<Autodiff<B>>::skeleton(&i.config, &i.features, &device);
        let model = load_lerobot_weights(fresh, &i.config, &i.weights, Path::new("host weights"))?;
        let mut runner = runner_for(i, model, device.clone(), self.precision)?;
        let first = i.config.scheduler_warmup_steps;
        let applied = runner.step(&i.batch, first)?.applied;
        let mut resumed = runner_for(i, runner.model().clone(), device, self.precision)?
            .with_optimizer(runner.optimizer().to_record())?;
        if let Some(scaler) = runner.loss_scaler() {
            resumed = resumed.with_loss_scaler(*scaler);
        }
        let through_copies = runner.step(&i.batch, first + 1)?;
        let through_copies = step_result(through_copies, &runner, &i.config);
        let cast = resumed.step(&i.batch, first + 1)?;
        Ok(Some((through_copies, step_result(cast, &resumed, &i.config), applied)))
    }
}

/// In bf16 and f16 (where `device` computes in them), the second step through the weights'
/// copies the first update wrote equals, to the bit, the same step resumed from a checkpoint's
/// state (which casts the f32 weights inside the graph): loss, gradient norm and every weight.
/// cuDNN is held to deterministic algorithms meanwhile: its fastest weight-gradient ones sum in a
/// varying order, and a gradient near zero moves Adam's step far from one run to the next.
pub fn check_half_precision_copies(device: DeviceKind, inputs: &Inputs) -> Result<String> {
    let mut line = format!("{device}, the second half-precision step through the update's copies vs resumed");
    for precision in [Precision::Bf16, Precision::F16] {
        #[cfg(feature = "cudnn")]
        kernels::cudnn::deterministic(true);
        let steps = run_on(device, SecondHalfStep { inputs, precision });
        #[cfg(feature = "cudnn")]
        kernels::cudnn::deterministic(false);
        let Some((copies, cast, applied)) = steps?? else {
            line += &format!("; {precision}: not computed here");
            continue;
        };
        let weights = max_weight_difference(&copies.weights, &cast.weights)?;
        line += &format!(
            "; {precision}: loss {} vs {}, grad norm {} vs {}, weights max |Δ| {weights:.2e}{}",
            copies.loss,
            cast.loss,
            copies.grad_norm,
            cast.grad_norm,
            if applied { "" } else { " (the first step overflowed: no copies were written)" }
        );
        let same = copies.loss.to_bits() == cast.loss.to_bits()
            && copies.grad_norm.to_bits() == cast.grad_norm.to_bits()
            && weights == 0.0;
        ensure!(same, "not bit-equal: {line}");
    }
    Ok(line)
}

/// The training inputs of the batch (images after augmentation, normalisation and crop; state;
/// actions) on the host.
struct PipelineOutput<'a> {
    inputs: &'a Inputs,
}

impl DeviceTask for PipelineOutput<'_> {
    type Output = Result<Vec<Vec<f32>>>;

    fn run<B: Kernels>(self, device: B::Device) -> Result<Vec<Vec<f32>>> {
        let i = self.inputs;
        let pipeline =
            InputPipeline::new(i.config.clone(), i.features.clone(), i.normalizer.clone(), i.augment.clone());
        let out = pipeline.train_inputs::<B>(&i.batch, Mode::Train { seed: 42 }, None, &device)?;
        let mut all = Vec::new();
        for image in out.obs.images {
            all.push(host(image.into_data())?);
        }
        all.push(host(out.obs.state.into_data())?);
        all.push(host(out.actions.into_data())?);
        Ok(all)
    }
}

/// The training inputs of one batch of the dataset at `root` on `device`, its frames gathered
/// there from the frame cache (`dataset.frames_on_device`), against the same batch's frames
/// copied by the loader and uploaded: bit for bit.
pub fn check_device_frames(device: DeviceKind, root: &Path) -> Result<String> {
    let cache = root.with_file_name("frames");
    let dataset = datasets::Dataset::open(root)?;
    if datasets::frame_cache::FrameCache::open(&cache, &dataset).is_err() {
        datasets::frame_cache::write_frame_cache(&dataset, &cache, &Default::default(), &|_| {})?;
    }
    let on = json!({"dataset": {"frame_cache": cache, "frames_on_device": "on"}});
    let config = tiny(root, &root.with_file_name("unused"), 10, on)?;
    run_on(device, DeviceFramesInputs { config: &config })?
}

struct DeviceFramesInputs<'a> {
    config: &'a TrainConfig,
}

impl DeviceTask for DeviceFramesInputs<'_> {
    type Output = Result<String>;

    fn run<B: Kernels>(self, device: B::Device) -> Result<String> {
        let config = self.config;
        let mut data = TrainData::open(config)?;
        data.settle_frames_on_device::<B>(config, &device, &mut |_| {})?;
        let frames = data.device_frames::<B>(&device)?.context("no frames on the device")?;
        let rows = data.loader(config, Default::default())?.next().context("the loader gave no batch")??;
        data.frames_on_device = false;
        let copied = data.loader(config, Default::default())?.next().context("the loader gave no batch")??;
        ensure!(copied.indices() == rows.indices(), "the two loaders gave other samples");
        let pipeline = InputPipeline::new(
            config.policy.config.clone(),
            data.features.clone(),
            data.normalizer(config)?,
            config.dataset.image_transforms.clone(),
        );
        let gathered = pipeline.train_inputs::<B>(&rows, Mode::Train { seed: 42 }, Some(&frames), &device)?;
        let uploaded = pipeline.train_inputs::<B>(&copied, Mode::Train { seed: 42 }, None, &device)?;
        let mut compared = 0;
        for (a, b) in gathered.obs.images.into_iter().zip(uploaded.obs.images) {
            let (a, b) = (host(a.into_data())?, host(b.into_data())?);
            ensure!(a == b, "the gathered frames' inputs differ from the uploaded frames'");
            compared += a.len();
        }
        ensure!(compared > 0, "no camera compared");
        Ok(format!(
            "frames gathered on the device by their rows ({:.1} MB there) vs copied and uploaded: the {compared} \
             input values bit-equal",
            frames.bytes() as f64 / 1e6
        ))
    }
}

/// The frames `planes` holds as the trainer uploads them (`transforms::yuv420_frames_to_float`:
/// one kernel where the backend has it, burn's operations elsewhere), read back.
struct YuvFrames<'a> {
    planes: &'a [u8],
    frames: usize,
    size: (usize, usize),
}

impl DeviceTask for YuvFrames<'_> {
    type Output = Result<Vec<f32>>;

    fn run<B: Kernels>(self, device: B::Device) -> Result<Vec<f32>> {
        host(transforms::yuv420_frames_to_float::<B>(self.planes, self.frames, self.size, &device).into_data())
    }
}

/// One `aloha-real` batch of frames at batch 64 (64 samples × 2 observation steps × 4 cameras
/// of 480x640, as YUV 4:2:0 planes), each stage of its way to the device timed apart: the
/// upload by burn's `from_data` (uint8 on the device, as on CUDA), and as the trainer uploads
/// (`frames_to_int`: on CUDA with cuDNN a page-locked buffer), also of an eighth of the batch,
/// both holding the host's bytes; then the conversion of the uploaded planes to f32 RGB by the
/// backend's kernel and by burn's operations, which must agree. Mean milliseconds over five
/// repetitions after one to compile. Run on CUDA only: the figures are a GPU server's.
pub fn time_yuv_frames(device: DeviceKind) -> Result<String> {
    run_on(device, YuvTiming { frames: 512, size: (480, 640), repetitions: 5 })?
}

/// [`time_yuv_frames`]'s work on one backend.
struct YuvTiming {
    frames: usize,
    size: (usize, usize),
    repetitions: u32,
}

impl DeviceTask for YuvTiming {
    type Output = Result<String>;

    fn run<B: Kernels>(self, device: B::Device) -> Result<String> {
        let (frames, (height, width)) = (self.frames, self.size);
        let frame_len = kernels::yuv420_frame_len(height, width);
        let planes: Vec<u8> = (0..frames * frame_len).map(|k| ((k * 7919) % 251) as u8).collect();
        let shape = |frames: usize| [frames, 1, 1, frame_len];
        let upload =
            |frames: usize| transforms::frames_to_int::<B>(&planes[..frames * frame_len], shape(frames), &device);
        let from_data = |frames: usize| {
            let data = TensorData::new(planes[..frames * frame_len].to_vec(), shape(frames));
            Tensor::<B, 4, Int>::from_data(data, (&device, burn::tensor::DType::U8))
        };
        let uploaded = upload(frames);
        {
            let read = |t: Tensor<B, 4, Int>| t.into_data().convert::<u8>().into_vec::<u8>();
            let (ours, burns) = (read(uploaded.clone()), read(from_data(frames)));
            let (ours, burns) =
                (ours.map_err(|e| anyhow::anyhow!("{e:?}"))?, burns.map_err(|e| anyhow::anyhow!("{e:?}"))?);
            ensure!(ours == planes && burns == planes, "the uploaded planes are not the host's bytes");
        }
        let kernel = || transforms::yuv420_planes_to_rgb(uploaded.clone(), self.size);
        let operations = || transforms::yuv420_to_rgb_by_operations(uploaded.clone(), self.size);
        let differing = {
            let (a, b) = (host(kernel().into_data())?, host(operations().into_data())?);
            a.iter().zip(&b).filter(|&(x, y)| x != y).count()
        };
        let sync = || B::sync(&device).context("synchronising the device");
        let repetitions = self.repetitions;
        let from_data_ms = mean_ms(repetitions, &sync, || from_data(frames))?;
        let from_data_eighth_ms = mean_ms(repetitions, &sync, || from_data(frames / 8))?;
        let upload_ms = mean_ms(repetitions, &sync, || upload(frames))?;
        let eighth_ms = mean_ms(repetitions, &sync, || upload(frames / 8))?;
        let kernel_ms = mean_ms(repetitions, &sync, kernel)?;
        let operations_ms = mean_ms(repetitions, &sync, operations)?;
        let bytes = (frames * frame_len) as f64;
        let rate = |bytes: f64, ms: f64| format!("{ms:.1} ms, {:.1} GB/s", bytes / ms / 1e6);
        let line = format!(
            "{frames} YUV 4:2:0 frames of {height}x{width} ({:.0} MB of planes): \
             upload by burn's from_data {} (an eighth: {}), as the trainer uploads {} (an eighth: {}), \
             both the host's bytes; to RGB on the device from uploaded planes: kernel {kernel_ms:.2} ms \
             ({:.0} GB/s of planes read and RGB written), burn's operations {operations_ms:.2} ms; \
             {differing} levels differ",
            bytes / 1e6,
            rate(bytes, from_data_ms),
            rate(bytes / 8.0, from_data_eighth_ms),
            rate(bytes, upload_ms),
            rate(bytes / 8.0, eighth_ms),
            (bytes + (frames * 3 * height * width * 4) as f64) / kernel_ms / 1e6,
        );
        ensure!(differing == 0, "{line}");
        Ok(line)
    }
}

/// Mean milliseconds of `work` over `repetitions`, after one run to compile its kernels; each
/// result is kept until the device has finished it.
fn mean_ms<T>(repetitions: u32, sync: &dyn Fn() -> Result<()>, work: impl Fn() -> T) -> Result<f64> {
    let first = work();
    sync()?;
    drop(first);
    let start = std::time::Instant::now();
    for _ in 0..repetitions {
        let result = work();
        sync()?;
        drop(result);
    }
    Ok(start.elapsed().as_secs_f64() * 1e3 / f64::from(repetitions))
}

/// YUV 4:2:0 frames converted on `device` as the trainer converts them (on a GPU the
/// `yuv420_to_rgb` kernel, on the CPU burn's operations) give the decoder's RGB bytes, every
/// one: every luma value under every (U, V) pair, at an even and an odd width.
pub fn check_yuv_frames(device: DeviceKind) -> Result<String> {
    let mut line = format!("{device}, YUV 4:2:0 frames to RGB vs the decoder's converter");
    for (height, width) in [(512, 512), (512, 509)] {
        let (planes, expected) = datasets::video::bt601::check_frames(height, width);
        let levels = run_on(device, YuvFrames { planes: &planes, frames: 2, size: (height, width) })??;
        ensure!(levels.len() == expected.len(), "{line}: {} levels for {} bytes", levels.len(), expected.len());
        let differing = levels.iter().zip(&expected).filter(|&(l, &e)| (l * 255.0).round() != f32::from(e)).count();
        line += &format!("; {height}x{width}: {differing} of {} levels differ", levels.len());
        ensure!(differing == 0, "{line}");
    }
    Ok(line)
}

fn host(data: TensorData) -> Result<Vec<f32>> {
    data.convert::<f32>().to_vec::<f32>().map_err(|e| anyhow::anyhow!("reading a tensor back: {e:?}"))
}

fn relative(a: f32, b: f32) -> f32 {
    if a.is_finite() && b.is_finite() { (a - b).abs() / b.abs().max(1e-12) } else { f32::INFINITY }
}

/// The largest |a − b| over every weight; infinite where one is not finite.
fn max_weight_difference(a: &StateDict, b: &StateDict) -> Result<f32> {
    ensure!(a.len() == b.len(), "{} tensors against {}", a.len(), b.len());
    let mut worst = 0f32;
    for (name, (shape, values)) in a {
        let (other_shape, other) = b.get(name).with_context(|| format!("`{name}` is missing"))?;
        ensure!(shape == other_shape, "`{name}`: shape {shape:?} against {other_shape:?}");
        for (x, y) in values.iter().zip(other) {
            worst = worst.max(if x.is_finite() && y.is_finite() { (x - y).abs() } else { f32::INFINITY });
        }
    }
    Ok(worst)
}

/// The f32 step on `device` against the step on the CPU, then the half-precision steps on
/// `device` against its f32 step. `exact`: nothing may differ (the CPU against itself).
pub fn check_step(device: DeviceKind, inputs: &Inputs, exact: bool) -> Result<String> {
    let cpu = run_on(DeviceKind::Cpu, OneStep { inputs, precision: Precision::F32 })??;
    let other = run_on(device, OneStep { inputs, precision: Precision::F32 })??;
    let (loss, norm) = (relative(other.loss, cpu.loss), relative(other.grad_norm, cpu.grad_norm));
    let weights = max_weight_difference(&other.weights, &cpu.weights)?;
    let lr = inputs.config.optimizer_lr as f32;
    let moved = max_weight_difference(&cpu.weights, &inputs.weights)?;
    ensure!(moved > lr / 2.0, "the step did not move the weights ({moved}): nothing was compared");
    let mut line = format!(
        "{device} vs cpu, f32 step: loss {} vs {} (relative {loss:.2e}), grad norm {} vs {} ({norm:.2e}), \
         weights max |Δ| {weights:.2e} (lr {lr:.0e})",
        other.loss, cpu.loss, other.grad_norm, cpu.grad_norm
    );
    if exact {
        ensure!(loss == 0.0 && norm == 0.0 && weights == 0.0, "{line}");
        return Ok(line);
    }
    ensure!(loss <= 1e-3 && norm <= 1e-3, "{line}");
    ensure!(weights <= 2.0 * lr + 1e-5, "{line}");
    for precision in [Precision::Bf16, Precision::F16] {
        let half = run_on(device, OneStep { inputs, precision })??;
        let gap = relative(half.loss, other.loss);
        line += &format!("; {precision} loss {} ({gap:.2e} from f32)", half.loss);
        ensure!(gap <= 0.05, "{line}");
    }
    Ok(line)
}

/// The f32 step on cuda with cuDNN (and, on `conv1d`'s path, cuBLAS) on burn's stream and no
/// host synchronisation, against the same step synchronised before and after every library call,
/// cuDNN held to deterministic algorithms: bit for bit where two unsynchronised runs are; where
/// they are not (an operation that sums in a varying order), within four times their spread, far
/// below what reading a buffer before it is written would do (a step moves the weights by about
/// the learning rate).
#[cfg(feature = "cudnn")]
fn check_stream_ordering(inputs: &Inputs, conv1d: kernels::cudnn::Conv1dPath) -> Result<String> {
    use kernels::cudnn::{Conv1dPath, conv1d_path, use_conv1d};
    let before = conv1d_path();
    use_conv1d(conv1d);
    let checked = stream_ordering(inputs);
    use_conv1d(before);
    let (line, blas) = checked?;
    ensure!(conv1d != Conv1dPath::Cublas || blas > 0, "no 1-D convolution of the step ran in cuBLAS: {line}");
    Ok(if conv1d == Conv1dPath::Cublas { format!("{line} ({blas} products in cuBLAS)") } else { line })
}

/// [`check_stream_ordering`] on the 1-D convolutions' path as set, with the count of cuBLAS's
/// products its steps ran.
#[cfg(feature = "cudnn")]
fn stream_ordering(inputs: &Inputs) -> Result<(String, u64)> {
    let blas = kernels::cudnn::blas_calls();
    let step = |synchronise| {
        kernels::cudnn::synchronise_every_call(synchronise);
        let result = run_on(DeviceKind::Cuda, OneStep { inputs, precision: Precision::F32 });
        kernels::cudnn::synchronise_every_call(false);
        result
    };
    kernels::cudnn::deterministic(true);
    let calls = kernels::cudnn::calls();
    let runs = (|| -> Result<_> { Ok((step(false)??, step(false)??, step(true)??)) })();
    kernels::cudnn::deterministic(false);
    let (first, second, synchronised) = runs?;
    ensure!(kernels::cudnn::calls() > calls, "no convolution of the step ran in cuDNN");
    let apart = |a: &StepResult, b: &StepResult| -> Result<f32> {
        Ok(max_weight_difference(&a.weights, &b.weights)?
            .max((a.loss - b.loss).abs())
            .max((a.grad_norm - b.grad_norm).abs()))
    };
    let (noise, gap) = (apart(&first, &second)?, apart(&synchronised, &first)?);
    let line = format!(
        "cuda step, deterministic cuDNN unsynchronised vs synchronised around every call: max |Δ| {gap:.2e} \
         (two unsynchronised runs: {noise:.2e}); loss {} vs {}",
        first.loss, synchronised.loss
    );
    let blas = kernels::cudnn::blas_calls() - blas;
    if noise == 0.0 {
        ensure!(gap == 0.0, "not bit-equal: {line}");
        return Ok((format!("{line}; bit-equal"), blas));
    }
    ensure!(gap <= 4.0 * noise, "{line}");
    Ok((format!("{line}; the step is not bit-deterministic here, compared within 4x its spread"), blas))
}

/// The training inputs on `device` against the CPU's.
pub fn check_pipeline(device: DeviceKind, inputs: &Inputs, exact: bool) -> Result<String> {
    let cpu = run_on(DeviceKind::Cpu, PipelineOutput { inputs })??;
    let other = run_on(device, PipelineOutput { inputs })??;
    ensure!(cpu.len() == other.len(), "{} tensors against {}", other.len(), cpu.len());
    let mut worst = 0f32;
    for (a, b) in cpu.iter().zip(&other) {
        ensure!(a.len() == b.len(), "a tensor of {} values against {}", b.len(), a.len());
        for (x, y) in a.iter().zip(b) {
            worst = worst.max(if y.is_finite() { (x - y).abs() } else { f32::INFINITY });
        }
    }
    let line = format!("{device} vs cpu: training inputs (augmented, normalised, cropped) max |Δ| {worst:.2e}");
    ensure!(if exact { worst == 0.0 } else { worst <= 1e-4 }, "{line}");
    Ok(line)
}

/// Two steps on `first`, resumed for two more on `second`, against four on `second` alone.
pub fn check_resume(first: DeviceKind, second: DeviceKind, root: &Path, exact: bool) -> Result<String> {
    struct Train(TrainConfig, Option<PathBuf>);
    impl DeviceTask for Train {
        type Output = trainer::Result<TrainOutcome>;
        fn run<B: Kernels>(self, device: B::Device) -> trainer::Result<TrainOutcome> {
            train::<Autodiff<B>>(&self.0, self.1.as_deref(), device, |_| {})
        }
    }
    let fresh = |name: String| -> Result<PathBuf> {
        let dir = root.with_file_name(name);
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        Ok(dir)
    };
    let extra = json!({"save_freq": 2});
    let out = fresh(format!("resume-{first}-{second}"))?;
    run_on(first, Train(tiny(root, &out, 2, extra.clone())?, None))??;
    let resumed = run_on(second, Train(tiny(root, &out, 4, extra.clone())?, Some(out.clone())))??;
    let whole = fresh(format!("whole-{first}-{second}"))?;
    let straight = run_on(second, Train(tiny(root, &whole, 4, extra)?, None))??;
    let last = |o: &TrainOutcome| o.losses.last().map(|l| l.1 as f32);
    let (Some(a), Some(b)) = (last(&resumed), last(&straight)) else { bail!("a run logged no loss") };
    let line = format!("{first} → {second}: loss at step 4 {a}, uninterrupted on {second} {b}");
    ensure!(resumed.steps == 4, "{line}: the resumed run ended at step {}", resumed.steps);
    ensure!(if exact { a == b } else { relative(a, b) <= 1e-2 }, "{line}");
    Ok(line)
}
