//! `bench gpu-check`'s check of the training step captured as a CUDA graph (`--only
//! cuda-graph-step`, issue 59's stage 3, docs/plans/cuda-graph.md): the tiny policy on burn's
//! cuda backend (fusion over cubecl, as the trainer's), [`STEPS`] steps three ways from the same
//! weights: eager, fed from kept buffers (`StepMode::DeviceFed`), and captured after
//! [`WARMUP`] fed steps and replayed (`StepMode::Captured`); in f32 and bf16, cuDNN held to
//! deterministic algorithms.
//!
//! Checked: every step's loss and gradient norm, and the weights, both moments and the EMA's
//! average after the last, are the same bits three ways (the fed step against the eager one is checked on lavapipe too; the capture
//! only here). Reported: the graph's nodes by kind, and the milliseconds per step over the last
//! [`TIMED`] steps, eager beside replayed (at this size mostly the host's launches).

use std::time::Instant;

use anyhow::{Result, anyhow, ensure};
use burn::backend::cuda::CudaDevice;
use burn::module::AutodiffModule;
use burn::prelude::*;
use trainer::{Ema, EmaConfig, GraphStatus, Precision, StepMode, StepRunner};

use loader::Batch;

/// The trainer's cuda backend in this build (fusion over cubecl's, with `cuda`).
pub type Cuda = burn::backend::Cuda<f32, i32>;

/// What the check trains: a runner of the tiny policy from the same weights each time it is
/// asked, computing in the precision given; the batch every step trains on; the first step at
/// the full learning rate.
pub struct TinyPolicy<'a> {
    /// A new runner, the same weights each time.
    pub runner: &'a dyn Fn(Precision) -> Result<StepRunner<burn::backend::Autodiff<Cuda>>>,
    /// The batch.
    pub batch: &'a Batch,
    /// The first step after the scheduler's warm-up.
    pub first_step: usize,
}

/// Steps each way.
const STEPS: usize = 10;
/// Fed steps before the capture.
const WARMUP: usize = 3;
/// The last steps, timed.
const TIMED: usize = 5;

/// What a run of [`STEPS`] left: each step's loss and norm, and the weights, both moments and
/// the average after, as bits; the milliseconds per step over the last [`TIMED`]; where its fed
/// steps stand.
struct Trace {
    steps: Vec<(u32, u32)>,
    state: [Vec<u32>; 4],
    ms: f64,
    status: GraphStatus,
}

/// Bits of a float tensor.
fn bits<B: Backend>(tensor: Tensor<B, 1>) -> Result<Vec<u32>> {
    let values = tensor.into_data().to_vec::<f32>().map_err(|e| anyhow!("reading a tensor back: {e:?}"))?;
    Ok(values.iter().map(|v| v.to_bits()).collect())
}

/// [`STEPS`] steps of `policy` in `precision` and `mode`, from the first at the full learning
/// rate; the outputs read after the last (a read would wait on the device between steps).
fn run(policy: &TinyPolicy<'_>, precision: Precision, mode: StepMode) -> Result<Trace> {
    let device = CudaDevice::default();
    let runner = (policy.runner)(precision)?;
    let ema = Ema::new(&runner.model().valid(), EmaConfig::default());
    let mut runner = runner.with_ema(ema)?.with_step_mode(mode);
    let first = policy.first_step;
    let mut outputs = Vec::with_capacity(STEPS);
    let mut started = Instant::now();
    for step in first..first + STEPS {
        if step == first + STEPS - TIMED {
            Cuda::sync(&device)?;
            started = Instant::now();
        }
        outputs.push(runner.step(policy.batch, step)?);
    }
    Cuda::sync(&device)?;
    let ms = started.elapsed().as_secs_f64() * 1e3 / TIMED as f64;
    let mut steps = Vec::with_capacity(STEPS);
    for output in outputs {
        steps.push((bits(output.loss)?[0], bits(output.grad_norm)?[0]));
    }
    let weights = bits(runner.optimizer().layout().gather_weights(&runner.model().valid()))?;
    let record = runner.optimizer().to_record();
    let average = runner.ema().map(|ema| ema.average().clone()).ok_or_else(|| anyhow!("the EMA is kept"))?;
    let state = [weights, bits(record.moment_1)?, bits(record.moment_2)?, bits(average)?];
    Ok(Trace { steps, state, ms, status: runner.graph_status().clone() })
}

/// Where `a` and `b` (named) first differ, if they do.
fn same(a: &Trace, b: &Trace, names: &str) -> Result<()> {
    if let Some(step) = (0..STEPS).find(|&i| a.steps[i] != b.steps[i]) {
        let value = |(loss, norm): (u32, u32)| (f32::from_bits(loss), f32::from_bits(norm));
        return Err(anyhow!(
            "{names}: step {step}'s (loss, norm) {:?} against {:?}",
            value(a.steps[step]),
            value(b.steps[step])
        ));
    }
    for (name, (x, y)) in ["weight", "moment 1", "moment 2", "average"].iter().zip(a.state.iter().zip(&b.state)) {
        if let Some(i) = (0..x.len().max(y.len())).find(|&i| x.get(i) != y.get(i)) {
            let value = |v: Option<&u32>| v.map_or(f32::NAN, |&v| f32::from_bits(v));
            return Err(anyhow!("{names}: {name} {i} {} against {}", value(x.get(i)), value(y.get(i))));
        }
    }
    Ok(())
}

/// The three ways in `precision`: the line's part for it.
fn three_ways(policy: &TinyPolicy<'_>, precision: Precision) -> Result<String> {
    let eager = run(policy, precision, StepMode::Eager)?;
    let fed = run(policy, precision, StepMode::DeviceFed)?;
    let captured = run(policy, precision, StepMode::Captured { warmup: WARMUP })?;
    let status = &captured.status;
    ensure!(status.capture_refused.is_none(), "{precision}: the step was not captured: {status:?}");
    let nodes = status.nodes.ok_or_else(|| anyhow!("{precision}: no graph kept: {status:?}"))?;
    ensure!(status.replays == STEPS - WARMUP - 1, "{precision}: {} replays: {status:?}", status.replays);
    ensure!(nodes.memory == 0, "{precision}: the graph kept memory nodes: {nodes:?}");
    let fed_traffic = fed.status.work_traffic;
    same(&fed, &captured, &format!("{precision}, fed against captured"))?;
    same(&eager, &fed, &format!("{precision}, eager against fed"))?;
    Ok(format!(
        "{precision}: {STEPS} steps the same bits three ways; {} kernel, {} copy, {} other nodes; the fed work's \
         traffic {}; {:.2} ms a step eager, {:.2} fed, {:.2} replayed",
        nodes.kernels,
        nodes.copies,
        nodes.other,
        fed_traffic.map_or_else(|| "uncounted".into(), |t| t.to_string()),
        eager.ms,
        fed.ms,
        captured.ms
    ))
}

/// The check's line, or what failed.
pub fn check_cuda_graph_step(policy: &TinyPolicy<'_>) -> Result<String> {
    #[cfg(feature = "cudnn")]
    kernels::cudnn::deterministic(true);
    let checked = [Precision::F32, Precision::Bf16].map(|precision| three_ways(policy, precision));
    #[cfg(feature = "cudnn")]
    kernels::cudnn::deterministic(false);
    // Both precisions' lines, whichever failed: a failure in one says nothing of the other.
    let failed = checked.iter().any(Result::is_err);
    let parts: Vec<String> = checked.into_iter().map(|part| part.unwrap_or_else(|e| format!("{e:#}"))).collect();
    let line = format!("cuda-graph-step: {}", parts.join("; "));
    if failed { Err(anyhow!(line)) } else { Ok(line) }
}
