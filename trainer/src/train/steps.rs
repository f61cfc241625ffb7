//! The loop: optimiser steps over the loader's batches (`grad_accum` micro-batches each),
//! metrics every `log_freq` steps, the held-out loss every `eval_steps` (rank 0 alone) and
//! checkpoints when they are due, on every replica of a run (rank 0 logs and writes).

use std::path::Path;
use std::time::Instant;

use burn::prelude::*;
use kernels::Kernels;
use loader::Loader;

use super::checkpoints::CheckpointWriter;
use super::data::Sampled;
use super::data::TrainData;
use super::eval;
use super::outcome::{Progress, TrainOutcome};
use super::start::Start;
use crate::checkpoint::{self, TrainingState};
use crate::error::{Error, Result};
use crate::metrics::{Metrics, MetricsWriter, big_number};
use crate::parallel::Replica;
use crate::precision::LossScaler;
use crate::step::{StepOutput, StepRunner, TrainingBackend};
use crate::train_config::TrainConfig;

/// One replica's run (the whole run with one device): joins the replicas' session, starts or
/// resumes, then steps, logging and checkpointing on rank 0, and leaves the session. After an
/// error it leaves nothing: the supervisor resets the session once a replica fails.
pub(super) fn train_replica<B: TrainingBackend>(
    config: &TrainConfig,
    run: &TrainData,
    resume: Option<&Path>,
    device: B::Device,
    replica: &Replica,
    on_progress: &mut impl FnMut(Progress<'_>),
) -> Result<TrainOutcome> {
    // First: the others wait in the session for every replica to join.
    replica.register::<B::InnerBackend>(&device)?;
    let main = replica.is_main();
    let mut quiet = |_: Progress<'_>| {};
    let report: &mut dyn FnMut(Progress<'_>) = if main { on_progress } else { &mut quiet };
    let Start { runner, mut state, normalizer } =
        Start::<B>::new(config, run, resume, device, replica.world_size(), &mut *report)?;
    let mut runner = runner.with_replica(replica.clone());
    runner.sync_weights()?;
    let mut loader = run.replica_loader(config, state.sampler, replica)?;
    if let Some(bound) = loader.frame_buffer_bound() {
        report(Progress::Line(&format!(
            "sampler: blocks of {} episodes, each video frame decoded once per epoch; their decoded frames take up \
             to {:.2} GB",
            config.sampler.block_episodes,
            bound as f64 / 1e9
        )));
    }

    let num_params = runner.model().num_learnable_params();
    report(Progress::Line(&format!("num_learnable_params={num_params} ({})", big_number(num_params as f64))));
    let mut metrics = if main { Some(MetricsWriter::open(&config.output_dir)?) } else { None };
    let saver = CheckpointWriter::new(config, &normalizer, &run.features)?;
    let sampled = run.sampled();
    if !run.eval_episodes.is_empty() {
        report(Progress::Line(&format!(
            "held out for the eval loss: {} episodes (eval_split {}), training on {}",
            run.eval_episodes.len(),
            config.dataset.eval_split,
            sampled.episodes
        )));
    }

    let mut losses = Vec::new();
    let mut last_checkpoint = None;
    // The newest checkpoint of the run, the one it resumed from first: known on every replica,
    // whichever reports a divergence.
    let mut newest_checkpoint = resume.and_then(|path| checkpoint::resolve(path).ok());
    let mut period = Period::default();
    while state.step < config.steps {
        period.add(state.step + 1, optimiser_step(&mut runner, &mut loader, &mut state, config.grad_accum)?);
        report(Progress::Step(state.step));
        if state.step % config.log_freq == 0 || state.step == config.steps {
            let finite = period.finite(state.step, newest_checkpoint.as_deref());
            // Every replica takes part: the loss logged is the mean over all of them.
            let m = period.take(state.step, state.samples, sampled, replica)?;
            losses.push((state.step, m.loss));
            report(Progress::Line(&m.line()));
            if let Some(metrics) = &mut metrics {
                metrics.write(&m)?;
            }
            finite?;
        }
        if main && eval::due(config, state.step) {
            let loss = eval::held_out_loss(&runner, run, config, state.step)?;
            report(Progress::Line(&format!("step {}: eval_loss={loss:.4}", state.step)));
            if let Some(metrics) = &mut metrics {
                metrics.write_eval(state.step, loss)?;
            }
        }
        if saver.due(state.step) {
            period.finite(state.step, newest_checkpoint.as_deref())?;
            runner.check_replicas_agree()?;
            if main {
                let dir = saver.save(&runner, &state)?;
                report(Progress::Line(&format!("checkpoint {}", dir.display())));
                last_checkpoint = Some(dir);
            }
            newest_checkpoint = Some(checkpoint::checkpoint_dir(&config.output_dir, state.step));
        }
    }
    replica.finish::<B::InnerBackend>()?;
    Ok(TrainOutcome { steps: state.step, losses, checkpoint: last_checkpoint, num_params })
}

/// What one optimiser step did and how long it waited for data and computed.
struct StepDone<B: Backend> {
    output: StepOutput<B>,
    data_s: f64,
    compute_s: f64,
    samples: usize,
}

/// One optimiser step over `grad_accum` batches from `loader`; advances `state`.
fn optimiser_step<B: TrainingBackend>(
    runner: &mut StepRunner<B>,
    loader: &mut Loader,
    state: &mut TrainingState,
    grad_accum: usize,
) -> Result<StepDone<B::InnerBackend>> {
    let (mut data_s, mut compute_s, mut samples) = (0.0, 0.0, 0);
    let mut output = None;
    for micro in 0..grad_accum {
        let waited = Instant::now();
        let batch = loader.next().ok_or(Error::LoaderEnded { step: state.step })??;
        data_s += waited.elapsed().as_secs_f64();
        let computed = Instant::now();
        if grad_accum == 1 {
            // The whole step at once: fed from kept buffers, or replayed as a CUDA graph, where
            // the run asks (`StepMode`).
            output = Some(runner.step(&batch, state.step)?);
        } else {
            runner.accumulate(&batch, state.step, micro)?;
        }
        compute_s += computed.elapsed().as_secs_f64();
        samples += batch.len();
        state.sampler = batch.state();
    }
    let computed = Instant::now();
    let output = match output {
        Some(output) => output,
        None => runner.finish(state.step)?,
    };
    compute_s += computed.elapsed().as_secs_f64();
    state.step += 1;
    // Every replica's batches are as long as this one's (the shards are equally long).
    let samples = samples * runner.replica().world_size();
    state.samples += samples as u64;
    state.loss_scale = runner.loss_scaler().map(LossScaler::state);
    Ok(StepDone { output, data_s, compute_s, samples })
}

/// Sums over one logging period, on the device until read.
struct Period<B: Backend> {
    /// The first step (counted from 1, as logged) added since the norms were last found finite.
    unchecked: Option<usize>,
    loss: Option<Tensor<B, 1>>,
    norm: Option<Tensor<B, 1>>,
    /// The norms of the steps that were applied (an f16 step that overflowed is not).
    applied_norm: Option<Tensor<B, 1>>,
    lr: f64,
    steps: usize,
    samples: usize,
    data_s: f64,
    update_s: f64,
    skipped: usize,
    loss_scale: Option<f32>,
    started: Instant,
}

impl<B: Backend> Default for Period<B> {
    fn default() -> Self {
        Self {
            unchecked: None,
            loss: None,
            norm: None,
            applied_norm: None,
            lr: 0.0,
            steps: 0,
            samples: 0,
            data_s: 0.0,
            update_s: 0.0,
            skipped: 0,
            loss_scale: None,
            started: Instant::now(),
        }
    }
}

impl<B: Kernels> Period<B> {
    /// Adds step `number` (counted from 1).
    fn add(&mut self, number: usize, step: StepDone<B>) {
        let StepDone { output, data_s, compute_s: update_s, samples } = step;
        let add = |acc: Option<Tensor<B, 1>>, x: Tensor<B, 1>| Some(acc.map_or(x.clone(), |a| a + x));
        self.unchecked.get_or_insert(number);
        self.loss = add(self.loss.take(), output.loss);
        if output.applied {
            self.applied_norm = add(self.applied_norm.take(), output.grad_norm.clone());
        }
        self.norm = add(self.norm.take(), output.grad_norm);
        self.lr = output.lr;
        self.skipped += usize::from(!output.applied);
        self.loss_scale = output.loss_scale;
        self.steps += 1;
        self.samples += samples;
        self.data_s += data_s;
        self.update_s += update_s;
    }

    /// An error where a step of the period, `last` the latest, applied a gradient whose norm is
    /// not finite: a NaN or infinite element stays one whatever the clipping factor, and makes
    /// its weight one (a norm that overflows on finite elements alone means gradients beyond
    /// 1e19, a run diverged already). Weights that the update itself takes past f32's range
    /// make the next step's norm infinite: a checkpoint due between the two still saves them.
    /// Reads the norms' sum from the device where steps were added since it was last found
    /// finite. The replicas' norms are the same (their gradients are summed first), so every
    /// replica stops at the same step.
    fn finite(&mut self, last: usize, last_checkpoint: Option<&Path>) -> Result<()> {
        let Some(first) = self.unchecked else { return Ok(()) };
        let Some(sum) = &self.applied_norm else { return Ok(()) };
        if sum.clone().into_scalar().elem::<f32>().is_finite() {
            self.unchecked = None;
            return Ok(());
        }
        Err(Error::Diverged { first, last, last_checkpoint: last_checkpoint.map(Path::to_path_buf) })
    }

    /// The period's metrics (the loss averaged over the replicas: each takes part), and a new
    /// period.
    fn take(&mut self, step: usize, samples: u64, sampled: Sampled, replica: &Replica) -> Result<Metrics> {
        let n = self.steps.max(1) as f64;
        let frames = sampled.frames.max(1) as f64;
        let episode_len = frames / sampled.episodes.max(1) as f64;
        if let Some(loss) = self.loss.take() {
            self.loss = Some(replica.all_reduce_mean(loss)?);
        }
        let scalar = |t: Option<Tensor<B, 1>>| t.map_or(0.0, |t| f64::from(t.into_scalar().elem::<f32>()));
        let m = Metrics {
            step,
            samples,
            episodes: samples as f64 / episode_len,
            epochs: samples as f64 / frames,
            loss: scalar(self.loss.take()) / n,
            grad_norm: scalar(self.norm.take()) / n,
            lr: self.lr,
            update_s: self.update_s / n,
            data_s: self.data_s / n,
            samples_per_s: self.samples as f64 / self.started.elapsed().as_secs_f64().max(1e-9),
            loss_scale: self.loss_scale,
            skipped: self.skipped,
        };
        *self = Self::default();
        Ok(m)
    }
}
