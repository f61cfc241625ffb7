//! One training step, phase by phase: prepare the batch on the device (transforms,
//! normalisation, noise), forward to the loss, backward, clip by the global norm, and the Adam
//! update at the step's learning rate, in f32 or mixed precision, over one or several
//! micro-batches, with an optional EMA of the weights. The training loop ([`crate::train()`])
//! runs [`StepRunner::accumulate`] and [`StepRunner::finish`]; the step-time bench runs the
//! phases one at a time.

use burn::module::AutodiffModule;
use burn::optim::GradientsParams;
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use kernels::{AdamStep, Kernels};
use loader::Batch;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

use crate::device_frames::DeviceFrames;
use crate::ema::Ema;
use crate::error::{Error, Result};
use crate::inputs::{DrawnInputs, InputPipeline, Mode, TrainInputs, UploadedInputs};
use crate::model::{DiffusionModel, HostNoise, TrainingNoise};
use crate::noise::NoiseSchedule;
use crate::optim::{ClipFactors, Clipping, FlatAdam, FlatAdamRecord, FlatLayout, clip_grad_norm, learning_rate};
use crate::parallel::Replica;
use crate::policy_config::DiffusionConfig;
use crate::precision::{LossScaler, Precision, ScaleUpdate};
use crate::seeds::{Purpose, step_seed};
use crate::uploads::{Fresh, Uploads};

mod graph;
mod modes;

pub use modes::{GraphStatus, StepMode};

/// A backend a [`StepRunner`] trains on: burn's autodiff over a backend that has our fused
/// kernels (Flex, and wgpu or CUDA when built with them).
pub trait TrainingBackend: AutodiffBackend<InnerBackend: Kernels> + Kernels {}

impl<B: AutodiffBackend<InnerBackend: Kernels> + Kernels> TrainingBackend for B {}

/// A batch ready for the model, inputs and diffusion noise on the device: what
/// [`StepRunner::prepare`] returns and [`StepRunner::loss`] takes when a step is run phase by phase
/// (as the step-time bench does) rather than by [`StepRunner::step`].
#[derive(Debug, Clone)]
pub struct Prepared<B: Backend> {
    /// Observations, actions and the padding mask.
    pub inputs: TrainInputs<B>,
    /// ε and the timesteps.
    pub noise: TrainingNoise<B>,
    /// Samples in the batch.
    pub samples: usize,
}

/// What one step reports, left on the device (of the inner backend `B`) until read.
#[derive(Debug, Clone)]
pub struct StepOutput<B: Backend> {
    /// The loss (mean over the step's micro-batches), `[1]`.
    pub loss: Tensor<B, 1>,
    /// The global norm of the gradient (over the replicas, their mean) before clipping
    /// (unscaled), `[1]`.
    pub grad_norm: Tensor<B, 1>,
    /// The learning rate used.
    pub lr: f64,
    /// False when f16 gradients overflowed and the update was skipped.
    pub applied: bool,
    /// The f16 loss scale after the step.
    pub loss_scale: Option<f32>,
}

/// Gradients (flat, summed) and losses of the micro-batches of the optimiser step in progress.
struct Pending<B: Backend> {
    grads: Tensor<B, 1>,
    /// The clipping of `grads`, by their squares' partial sums read as they were gathered, when
    /// they are the step's only micro-batch on the only replica (their norm is then final).
    clipping: Option<Clipping<B>>,
    loss: Tensor<B, 1>,
    micro_batches: usize,
}

/// The model, its optimiser and what a step needs to run: one step's engine, which the training
/// loop drives (burn's `Learner` is the whole loop; this is not).
pub struct StepRunner<B: TrainingBackend> {
    /// Always present; taken out only while the optimiser updates it.
    model: Option<DiffusionModel<B>>,
    /// In half precision, the copy of `model` the forward runs through, made of the copies of
    /// the weights the last update wrote ([`Precision::model_from_copies`]); `None` until the
    /// first update, and after the weights change otherwise: the forward then casts them
    /// ([`Precision::cast_model`]).
    compute: Option<DiffusionModel<B>>,
    optim: FlatAdam<B::InnerBackend>,
    config: DiffusionConfig,
    pipeline: InputPipeline,
    schedule: NoiseSchedule,
    seed: u64,
    total_steps: usize,
    device: B::Device,
    precision: Precision,
    scaler: Option<LossScaler>,
    grad_accum: usize,
    ema: Option<Ema<B::InnerBackend>>,
    pending: Option<Pending<B::InnerBackend>>,
    replica: Replica,
    /// The frame caches' frames on the device, where the loader gives their rows
    /// ([`StepRunner::with_device_frames`]).
    frames: Option<DeviceFrames<B>>,
    /// The step fed from kept buffers and captured as a CUDA graph, where asked
    /// ([`StepRunner::with_step_mode`]).
    fed: modes::FedSteps<B>,
}

impl<B: TrainingBackend> StepRunner<B> {
    /// A runner for `model`, with a fresh optimiser, that runs `total_steps` steps (the
    /// cosine schedule's length) seeded by `seed`; f32, one micro-batch per step, no EMA.
    pub fn new(
        model: DiffusionModel<B>,
        config: DiffusionConfig,
        pipeline: InputPipeline,
        seed: u64,
        total_steps: usize,
        device: B::Device,
    ) -> Self {
        crate::model::materialize(&model);
        let mut optim = FlatAdam::new(&config, FlatLayout::of(&model), &device);
        // Its own copy of the weights where the backend keeps them as views: a model cloned
        // from another runner's shares that runner's buffer, which its updates write.
        let model = optim.bind(model);
        let schedule = config.noise_schedule();
        Self {
            model: Some(model),
            compute: None,
            optim,
            config,
            pipeline,
            schedule,
            seed,
            total_steps,
            device,
            precision: Precision::F32,
            scaler: None,
            grad_accum: 1,
            ema: None,
            pending: None,
            replica: Replica::single(),
            frames: None,
            fed: modes::FedSteps::new(StepMode::Eager),
        }
    }

    /// Gathers the frames of batches that give their rows in the frame caches (the loader's
    /// `frame_rows`) from `frames`, on this runner's device.
    pub fn with_device_frames(mut self, frames: DeviceFrames<B>) -> Self {
        self.frames = Some(frames);
        self
    }

    /// Trains as `replica` of a data-parallel run: the gradients are averaged with the other
    /// replicas' before every update, and this replica's samples draw the noise (and crops) of
    /// their place in the step's global batch. Its weights must equal rank 0's: see
    /// [`StepRunner::sync_weights`].
    pub fn with_replica(mut self, replica: Replica) -> Self {
        self.replica = replica;
        self
    }

    /// Makes the weights rank 0's (a broadcast; nothing with one replica). The EMA, kept from
    /// the weights, follows.
    pub fn sync_weights(&mut self) -> Result<()> {
        if self.replica.world_size() == 1 {
            return Ok(());
        }
        let layout = self.optim.layout();
        let model = self.model.take().expect("the model is only taken during an update");
        let ours = layout.gather_weights(&model.valid());
        let theirs = self.replica.broadcast(ours)?;
        let model = layout.scatter_weights(model, &Tensor::from_inner(theirs));
        self.model = Some(self.optim.bind(model));
        self.compute = None;
        Ok(())
    }

    /// Checks that this replica's weights are rank 0's, to the bit (a broadcast of rank 0's;
    /// nothing with one replica): an error names the rank that drifted.
    pub fn check_replicas_agree(&self) -> Result<()> {
        if self.replica.world_size() == 1 {
            return Ok(());
        }
        let ours = self.optim.layout().gather_weights(&self.model().valid());
        let theirs = self.replica.broadcast(ours.clone())?;
        let same: bool = ours.equal(theirs).all().into_scalar().elem();
        if !same {
            return Err(Error::Replicas(format!(
                "rank {}'s weights differ from rank 0's: the replicas drifted apart",
                self.replica.rank()
            )));
        }
        Ok(())
    }

    /// The replica this runner is (rank 0 of 1 unless [`StepRunner::with_replica`]).
    pub fn replica(&self) -> &Replica {
        &self.replica
    }

    /// Continues with the optimiser state of a checkpoint; an error when it belongs to another
    /// model.
    pub fn with_optimizer(mut self, record: FlatAdamRecord<B::InnerBackend>) -> Result<Self> {
        self.optim = self.optim.load_record(record)?;
        Ok(self)
    }

    /// Computes in `precision` (f16 with a fresh [`LossScaler`]); an error when the device
    /// cannot.
    pub fn with_precision(mut self, precision: Precision) -> Result<Self> {
        if !precision.supported::<B>(&self.device) {
            return Err(Error::Config(format!("this device does not compute in {precision}")));
        }
        self.precision = precision;
        self.scaler = (precision == Precision::F16).then(LossScaler::default);
        self.compute = None;
        Ok(self)
    }

    /// Continues the f16 loss scale of a checkpoint (ignored in other precisions).
    pub fn with_loss_scaler(mut self, scaler: LossScaler) -> Self {
        if self.scaler.is_some() {
            self.scaler = Some(scaler);
        }
        self
    }

    /// Sums the gradients of `k` micro-batches per optimiser step.
    pub fn with_grad_accum(mut self, k: usize) -> Self {
        self.grad_accum = k.max(1);
        self
    }

    /// Keeps `ema` updated after every optimiser step; an error when it averages another model.
    pub fn with_ema(mut self, ema: Ema<B::InnerBackend>) -> Result<Self> {
        let (have, want) = (ema.average().dims()[0], self.optim.layout().len());
        if have != want {
            return Err(Error::Config(format!("the EMA averages {have} weights, the model has {want}")));
        }
        self.ema = Some(ema);
        Ok(self)
    }

    /// The model. On burn's cubecl backends its weights are views of the optimiser's buffer,
    /// which each update writes in place ([`FlatAdam::bind`]): a clone shares them and sees
    /// later steps (a runner made from the clone takes its own copy).
    pub fn model(&self) -> &DiffusionModel<B> {
        self.model.as_ref().expect("the model is only taken during an update")
    }

    /// The optimiser.
    pub fn optimizer(&self) -> &FlatAdam<B::InnerBackend> {
        &self.optim
    }

    /// The EMA of the weights, when kept.
    pub fn ema(&self) -> Option<&Ema<B::InnerBackend>> {
        self.ema.as_ref()
    }

    /// The averaged model, when an EMA is kept: the current model with the average's weights
    /// (BatchNorm's running statistics are the current ones, as diffusers copies them).
    pub fn ema_model(&self) -> Option<DiffusionModel<B::InnerBackend>> {
        let ema = self.ema.as_ref()?;
        Some(self.optim.layout().scatter_weights(self.model().valid(), ema.average()))
    }

    /// The f16 loss scaler, when used.
    pub fn loss_scaler(&self) -> Option<&LossScaler> {
        self.scaler.as_ref()
    }

    /// The model, giving the runner up.
    pub fn into_model(self) -> DiffusionModel<B> {
        self.model.expect("the model is only taken during an update")
    }

    /// The device.
    pub fn device(&self) -> &B::Device {
        &self.device
    }

    /// Uploads and transforms `batch`, micro-batch `micro` of optimiser step `step`. Its noise
    /// derives from the seed, the step and each sample's position in the step's global batch
    /// (so `K` micro-batches of `B` on each of `N` replicas draw what one batch of `N·K·B`
    /// draws: the loader deals replica `r` every `N`-th sample from `r`, so sample `i` of
    /// micro-batch `k` is number `(k·B + i)·N + r`); its crops and augmentation from the seed,
    /// the step, `micro` and the rank.
    pub fn prepare(&self, batch: &Batch, step: usize, micro: usize) -> Result<Prepared<B>> {
        let drawn = self.draw(batch, step, micro)?;
        let uploaded = self.upload(&drawn, &mut Fresh::new(&self.device))?;
        Ok(self.transform(&drawn, uploaded))
    }

    /// [`StepRunner::prepare`]'s work on the host: `batch` checked, its crops, augmentation and
    /// noise drawn.
    fn draw<'a>(&self, batch: &'a Batch, step: usize, micro: usize) -> Result<DrawnStep<'a>> {
        let (rank, world) = (self.replica.rank(), self.replica.world_size());
        let draw = (micro * world + rank) as u64;
        let augment = step_seed(self.seed, step, Purpose::Augment) ^ draw.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let inputs = self.pipeline.draw::<B>(batch, Mode::Train { seed: augment }, self.frames.as_ref())?;
        let noise = draw_noise(
            &self.schedule,
            inputs.action_shape(),
            step_seed(self.seed, step, Purpose::Noise),
            SamplePositions { first: micro * batch.len(), stride: world, offset: rank },
        );
        Ok(DrawnStep { inputs, noise, samples: batch.len() })
    }

    /// What `drawn` puts on the device, through `uploads`: the batch's values, then the noise's.
    fn upload(&self, drawn: &DrawnStep<'_>, uploads: &mut impl Uploads<B>) -> Result<UploadedStep<B>> {
        let inputs = self.pipeline.upload(&drawn.inputs, uploads)?;
        let noise = drawn.noise.upload(uploads)?;
        Ok(UploadedStep { inputs, noise })
    }

    /// [`StepRunner::prepare`]'s work on the device, from what was drawn and uploaded.
    fn transform(&self, drawn: &DrawnStep<'_>, uploaded: UploadedStep<B>) -> Prepared<B> {
        let inputs = self.pipeline.transform(&drawn.inputs, uploaded.inputs, self.frames.as_ref());
        Prepared { inputs, noise: uploaded.noise, samples: drawn.samples }
    }

    /// The loss of a prepared batch (f32), computed through a copy of the model in the compute
    /// precision.
    pub fn loss(&self, prepared: &Prepared<B>) -> Tensor<B, 1> {
        let inputs = &prepared.inputs;
        let mask = self.config.do_mask_loss_for_padding.then(|| inputs.action_is_pad.clone());
        let model = match &self.compute {
            Some(compute) => compute.clone(),
            None => self.precision.cast_model(self.model()),
        };
        model.loss(&inputs.obs, inputs.actions.clone(), &prepared.noise, self.config.prediction_type, mask)
    }

    /// The loss of `batch` as LeRobot's held-out loss computes it: the model in evaluation mode
    /// (BatchNorm's running statistics, centre crops), no gradients, fresh noise and timesteps
    /// (drawn from the run's seed, the optimiser step `step` and the batch's position `index` in
    /// the evaluation, so that the same run gives the same figure).
    pub fn eval_loss(&self, batch: &Batch, step: usize, index: usize) -> Result<Tensor<B::InnerBackend, 1>> {
        let inputs = self.pipeline.train_inputs::<B::InnerBackend>(batch, Mode::Eval, None, &self.device)?;
        let [_, horizon, actions] = inputs.actions.dims();
        let noise = draw_noise(
            &self.schedule,
            [batch.len(), horizon, actions],
            step_seed(self.seed, step, Purpose::EvalNoise) ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            SamplePositions { first: 0, stride: 1, offset: 0 },
        );
        let noise = noise.upload::<B::InnerBackend>(&mut Fresh::new(&self.device))?;
        let mask = self.config.do_mask_loss_for_padding.then(|| inputs.action_is_pad.clone());
        let model = self.precision.cast_model(&self.model().valid());
        Ok(model.loss(&inputs.obs, inputs.actions, &noise, self.config.prediction_type, mask))
    }

    /// The gradients of one micro-batch's `loss` with respect to the parameters (of the model
    /// [`StepRunner::loss`] ran through: in half precision after the first update, the weights'
    /// half-precision copies): of `loss / K`, times the loss scale in f16.
    pub fn gradients(&self, loss: &Tensor<B, 1>) -> GradientsParams {
        let factor = f64::from(self.scaler.map_or(1.0, |s| s.scale)) / self.grad_accum as f64;
        let scaled = if factor == 1.0 { loss.clone() } else { loss.clone().mul_scalar(factor) };
        GradientsParams::from_grads(scaled.backward(), self.compute.as_ref().unwrap_or(self.model()))
    }

    /// `grads` gathered into one flat buffer, in the optimiser's layout.
    pub fn flatten(&mut self, mut grads: GradientsParams) -> Tensor<B::InnerBackend, 1> {
        self.fed.drop_graph();
        let reuse = self.optim.take_spare();
        let model = self.model.as_ref().expect("the model is only taken during an update");
        self.optim.layout().gather_grads(model, &mut grads, reuse, &self.device)
    }

    /// The global norm of the replicas' mean gradient (unscaled, before clipping), whose sum
    /// over the replicas is the flat `grads`, and the factor that clips it to the configured
    /// norm and undoes the loss scale and the sum.
    pub fn clip(&self, grads: &Tensor<B::InnerBackend, 1>) -> Clipping<B::InnerBackend> {
        clip_grad_norm(grads, self.config.grad_clip_norm, self.grad_scale()).into()
    }

    /// `grads` gathered into the flat buffer and, where they are the step's whole gradient
    /// ([`StepRunner::gathers_final_gradients`]), their clipping, from their squares read in the
    /// same pass and left as partial sums: the update totals them and clips in its own launch
    /// where the weights are views of one buffer (else they are totalled first).
    fn flatten_with_clipping(
        &mut self,
        mut grads: GradientsParams,
    ) -> (Tensor<B::InnerBackend, 1>, Option<Clipping<B::InnerBackend>>) {
        if !self.gathers_final_gradients() {
            return (self.flatten(grads), None);
        }
        let reuse = self.optim.take_spare();
        let model = self.model.as_ref().expect("the model is only taken during an update");
        let (max_norm, grad_scale) = (self.config.grad_clip_norm, self.grad_scale());
        let (grads, squares) =
            self.optim.layout().gather_grads_with_squares(model, &mut grads, reuse, &self.device, max_norm, grad_scale);
        (grads, Some(Clipping::Squares(squares)))
    }

    /// [`StepRunner::flatten`] then [`StepRunner::clip`]: for a step of one micro-batch on one
    /// replica (what [`StepRunner::step`] does then) the squares are read as the gradients are
    /// gathered, one pass over them fewer, and left for the update to total where it can
    /// ([`Clipping::Squares`]).
    pub fn flatten_and_clip(
        &mut self,
        grads: GradientsParams,
    ) -> (Tensor<B::InnerBackend, 1>, Clipping<B::InnerBackend>) {
        self.fed.drop_graph();
        let (grads, clipping) = self.flatten_with_clipping(grads);
        let clipping = clipping.unwrap_or_else(|| self.clip(&grads));
        (grads, clipping)
    }

    /// Whether one micro-batch's gathered gradients are the step's whole gradient: no
    /// accumulation, one replica. Their norm can then be read as they are gathered.
    fn gathers_final_gradients(&self) -> bool {
        self.grad_accum == 1 && self.replica.world_size() == 1
    }

    /// The factor the flat gradients carry: the f16 loss scale times the replicas summed.
    fn grad_scale(&self) -> f64 {
        f64::from(self.scaler.map_or(1.0, |s| s.scale)) * self.replica.world_size() as f64
    }

    /// The learning rate of optimiser step `step`.
    pub fn learning_rate(&self, step: usize) -> f64 {
        learning_rate(self.config.optimizer_lr, step, self.config.scheduler_warmup_steps, self.total_steps)
    }

    /// Applies the flat `grads`, clipped by `clipping`, as optimiser step `step`, and moves the
    /// EMA in the same pass. Returns the learning rate and the clipping's factors (computed by
    /// the update where `clipping` left them to it).
    pub fn update(
        &mut self,
        grads: Tensor<B::InnerBackend, 1>,
        clipping: Clipping<B::InnerBackend>,
        step: usize,
    ) -> (f64, ClipFactors<B::InnerBackend>) {
        self.fed.drop_graph();
        let lr = self.learning_rate(step);
        let adam = self.next_update(step);
        self.optim.advance();
        (lr, self.apply_update(grads, clipping, &adam, None))
    }

    /// The numbers of the update of optimiser step `step`, the next one: its learning rate, and
    /// the average's weight where an EMA is kept.
    fn next_update(&self, step: usize) -> AdamStep {
        let ema_weight = self.ema.as_ref().map(|ema| ema.weight(step + 1));
        self.optim.next_step(self.learning_rate(step), ema_weight)
    }

    /// Applies the flat `grads`, clipped by `clipping`, as the update `adam` says (not counted:
    /// [`FlatAdam::advance`]), and moves the EMA in the same pass; with `scalars`, the update
    /// reads `adam`'s scalars from that buffer ([`FlatAdam::apply`]). Returns the clipping's
    /// factors.
    fn apply_update(
        &mut self,
        grads: Tensor<B::InnerBackend, 1>,
        clipping: Clipping<B::InnerBackend>,
        adam: &AdamStep,
        scalars: Option<Tensor<B::InnerBackend, 1>>,
    ) -> ClipFactors<B::InnerBackend> {
        // The last update's half-precision model goes first: it shares the norm layers' weights,
        // which the CPU's update writes in place only where it holds them alone, and its copies
        // are freed before the update allocates the next ones (on the GPU backends the copies
        // are views of a buffer the update writes in place, kept between steps).
        self.compute = None;
        let model = self.model.take().expect("the model is only taken during an update");
        let average = self.ema.as_mut().map(Ema::average_mut);
        // In half precision the update writes the weights' copies too: the next forward reads
        // them instead of casting every weight again (and its backward casting every gradient
        // back).
        let copy = (self.precision != Precision::F32).then(|| self.precision.dtype());
        let (model, copies, factors) = self.optim.apply(model, grads, clipping, adam, scalars, average, copy);
        if copy.is_some() {
            self.compute = Some(self.precision.model_from_copies(&model, &copies));
        }
        self.model = Some(model);
        factors
    }

    /// Forward and backward of micro-batch `micro` of optimiser step `step`; its gradients wait
    /// for [`StepRunner::finish`].
    pub fn accumulate(&mut self, batch: &Batch, step: usize, micro: usize) -> Result<()> {
        self.fed.drop_graph();
        let prepared = self.prepare(batch, step, micro)?;
        let loss = self.loss(&prepared);
        let (grads, clipping) = self.flatten_with_clipping(self.gradients(&loss));
        let loss = loss.inner();
        self.pending = Some(match self.pending.take() {
            None => Pending { grads, clipping, loss, micro_batches: 1 },
            Some(p) => Pending {
                grads: p.grads + grads,
                clipping: None,
                loss: p.loss + loss,
                micro_batches: p.micro_batches + 1,
            },
        });
        Ok(())
    }

    /// Ends optimiser step `step`: sums the gradients over the replicas, clips their mean
    /// and updates, unless f16 gradients overflowed (then the step is skipped and the loss
    /// scale halved). An error only when another replica failed.
    pub fn finish(&mut self, step: usize) -> Result<StepOutput<B::InnerBackend>> {
        let mut pending = self.pending.take().expect("accumulate() comes before finish()");
        pending.grads = self.replica.all_reduce_sum(pending.grads)?;
        let clipping = pending.clipping.take().unwrap_or_else(|| self.clip(&pending.grads));
        // With a loss scaler the host reads the norm before the update (an overflow skips it).
        let (applied, clipping) = match &mut self.scaler {
            Some(scaler) => {
                let factors = clipping.factors();
                let norm: f32 = factors.norm.clone().into_scalar().elem();
                (scaler.update(norm.is_finite()) == ScaleUpdate::Apply, Clipping::Factors(factors))
            }
            None => (true, clipping),
        };
        let (lr, factors) = if applied {
            self.update(pending.grads, clipping, step)
        } else {
            (self.learning_rate(step), clipping.factors())
        };
        Ok(StepOutput {
            loss: pending.loss.div_scalar(pending.micro_batches as f64),
            grad_norm: factors.norm,
            lr,
            applied,
            loss_scale: self.scaler.map(|s| s.scale),
        })
    }
}

/// Where a micro-batch's samples stand in the optimiser step's global batch: sample `i` is
/// number `(first + i)·stride + offset`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SamplePositions {
    /// The micro-batch's first sample among this replica's samples of the step.
    pub first: usize,
    /// The number of replicas.
    pub stride: usize,
    /// This replica's rank.
    pub offset: usize,
}

impl SamplePositions {
    fn of(self, i: usize) -> u64 {
        ((self.first + i) * self.stride + self.offset) as u64
    }
}

/// Draws a training batch's noise on the host: ε `[B, T, A]` (standard normal) and timesteps
/// (uniform over the schedule). Sample `i` draws from ChaCha8 stream `positions.of(i)` of
/// `seed`, so a sample's noise depends on its position in the optimiser step's global batch
/// only, not on how the step is split into micro-batches and replicas.
fn draw_noise(schedule: &NoiseSchedule, shape: [usize; 3], seed: u64, positions: SamplePositions) -> HostNoise {
    let [b, t, a] = shape;
    let mut eps = Vec::with_capacity(b * t * a);
    let mut steps = Vec::with_capacity(b);
    for i in 0..b {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(positions.of(i));
        eps.extend((0..t * a).map(|_| -> f32 { StandardNormal.sample(&mut rng) }));
        steps.push((rng.next_u64() % schedule.steps() as u64) as usize);
    }
    HostNoise::new(schedule, eps, shape, &steps)
}

/// A micro-batch as the host prepares it ([`StepRunner::prepare`]'s first part): its inputs and
/// noise drawn, nothing on the device yet.
struct DrawnStep<'a> {
    inputs: DrawnInputs<'a>,
    noise: HostNoise,
    samples: usize,
}

/// What went to the device for a micro-batch, before the device's work on it.
#[derive(Clone)]
struct UploadedStep<B: Backend> {
    inputs: UploadedInputs<B>,
    noise: TrainingNoise<B>,
}
