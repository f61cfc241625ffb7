//! One training step, phase by phase: prepare the batch on the device (transforms,
//! normalisation, noise), forward to the loss, backward, clip by the global norm, and the Adam
//! update at the step's learning rate. The training loop runs [`Learner::step`]; the step-time
//! bench runs the phases one at a time.

use burn::optim::adaptor::OptimizerAdaptor;
use burn::optim::{Adam, GradientsParams, Optimizer};
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use loader::Batch;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

use crate::config::DiffusionConfig;
use crate::error::Result;
use crate::inputs::{InputPipeline, Mode, TrainInputs};
use crate::model::{DiffusionModel, TrainingNoise};
use crate::noise::NoiseSchedule;
use crate::optim::{adam, clip_grad_norm, learning_rate};
use crate::seeds::{Purpose, step_seed};

/// The optimiser of a [`DiffusionModel`].
pub type PolicyOptimizer<B> = OptimizerAdaptor<Adam, DiffusionModel<B>, B>;

/// A batch ready for the model: inputs and diffusion noise on the device.
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
    /// The loss, `[1]`.
    pub loss: Tensor<B, 1>,
    /// The global gradient norm before clipping, `[1]`.
    pub grad_norm: Tensor<B, 1>,
    /// The learning rate used.
    pub lr: f64,
}

/// The model, its optimiser and what a step needs to run.
pub struct Learner<B: AutodiffBackend> {
    /// Always present; taken out only while the optimiser updates it.
    model: Option<DiffusionModel<B>>,
    optim: PolicyOptimizer<B>,
    config: DiffusionConfig,
    pipeline: InputPipeline,
    schedule: NoiseSchedule,
    seed: u64,
    total_steps: usize,
    device: B::Device,
}

impl<B: AutodiffBackend> Learner<B> {
    /// A learner for `model`, with a fresh optimiser, that runs `total_steps` steps (the
    /// cosine schedule's length) seeded by `seed`.
    pub fn new(
        model: DiffusionModel<B>,
        config: DiffusionConfig,
        pipeline: InputPipeline,
        seed: u64,
        total_steps: usize,
        device: B::Device,
    ) -> Self {
        let optim = adam(&config).init::<B, DiffusionModel<B>>();
        let schedule = schedule_of(&config);
        Self { model: Some(model), optim, config, pipeline, schedule, seed, total_steps, device }
    }

    /// Continues with the optimiser state of a checkpoint.
    pub fn with_optimizer(mut self, optim: PolicyOptimizer<B>) -> Self {
        self.optim = optim;
        self
    }

    /// The model.
    pub fn model(&self) -> &DiffusionModel<B> {
        self.model.as_ref().expect("the model is only taken during an update")
    }

    /// The optimiser.
    pub fn optimizer(&self) -> &PolicyOptimizer<B> {
        &self.optim
    }

    /// The model, giving the learner up.
    pub fn into_model(self) -> DiffusionModel<B> {
        self.model.expect("the model is only taken during an update")
    }

    /// The device.
    pub fn device(&self) -> &B::Device {
        &self.device
    }

    /// Uploads and transforms `batch` for optimiser step `step` (its crops, augmentation and
    /// noise derive from the seed and the step).
    pub fn prepare(&self, batch: &Batch, step: usize) -> Result<Prepared<B>> {
        let inputs = self.pipeline.train_inputs::<B>(
            batch,
            Mode::Train { seed: step_seed(self.seed, step, Purpose::Augment) },
            &self.device,
        )?;
        let [_, horizon, actions] = inputs.actions.dims();
        let noise = draw_noise::<B>(
            &self.schedule,
            [batch.len(), horizon, actions],
            step_seed(self.seed, step, Purpose::Noise),
            &self.device,
        );
        Ok(Prepared { inputs, noise, samples: batch.len() })
    }

    /// The loss of a prepared batch.
    pub fn loss(&self, prepared: &Prepared<B>) -> Tensor<B, 1> {
        let inputs = &prepared.inputs;
        let mask = self.config.do_mask_loss_for_padding.then(|| inputs.action_is_pad.clone());
        self.model().loss(&inputs.obs, inputs.actions.clone(), &prepared.noise, self.config.prediction_type, mask)
    }

    /// The gradients of `loss` with respect to the model's parameters.
    pub fn gradients(&self, loss: &Tensor<B, 1>) -> GradientsParams {
        GradientsParams::from_grads(loss.backward(), self.model())
    }

    /// Clips `grads` to the configured global norm; returns the norm before clipping.
    pub fn clip(&self, grads: &mut GradientsParams) -> Tensor<B::InnerBackend, 1> {
        clip_grad_norm(self.model(), grads, self.config.grad_clip_norm)
    }

    /// The learning rate of optimiser step `step`.
    pub fn learning_rate(&self, step: usize) -> f64 {
        learning_rate(self.config.optimizer_lr, step, self.config.scheduler_warmup_steps, self.total_steps)
    }

    /// Applies `grads` as optimiser step `step`.
    pub fn update(&mut self, grads: GradientsParams, step: usize) -> f64 {
        let lr = self.learning_rate(step);
        let model = self.model.take().expect("the model is only taken during an update");
        self.model = Some(self.optim.step(lr, model, grads));
        lr
    }

    /// A whole step on `batch` as optimiser step `step`.
    pub fn step(&mut self, batch: &Batch, step: usize) -> Result<StepOutput<B::InnerBackend>> {
        let prepared = self.prepare(batch, step)?;
        let loss = self.loss(&prepared);
        let mut grads = self.gradients(&loss);
        let grad_norm = self.clip(&mut grads);
        let lr = self.update(grads, step);
        Ok(StepOutput { loss: loss.inner().cast(burn::tensor::FloatDType::F32), grad_norm, lr })
    }
}

/// The noise schedule of a configuration.
pub fn schedule_of(config: &DiffusionConfig) -> NoiseSchedule {
    NoiseSchedule::new(
        config.beta_schedule,
        config.num_train_timesteps,
        config.beta_start,
        config.beta_end,
        config.prediction_type,
        config.clip_sample,
        config.clip_sample_range,
    )
}

/// Draws a training batch's noise ε `[B, T, A]` (standard normal) and timesteps (uniform over
/// the schedule) from `seed`, with their `add_noise` coefficients.
pub fn draw_noise<B: Backend>(
    schedule: &NoiseSchedule,
    shape: [usize; 3],
    seed: u64,
    device: &B::Device,
) -> TrainingNoise<B> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let [b, _, _] = shape;
    let eps: Vec<f32> = (0..shape.iter().product::<usize>()).map(|_| StandardNormal.sample(&mut rng)).collect();
    let steps: Vec<usize> = (0..b).map(|_| (rng.next_u64() % schedule.steps() as u64) as usize).collect();
    let (signal, noise): (Vec<f32>, Vec<f32>) = steps.iter().map(|&t| schedule.noise_coefficients(t)).unzip();
    TrainingNoise {
        eps: Tensor::from_data(TensorData::new(eps, shape), device),
        timesteps: Tensor::from_data(TensorData::new(steps.iter().map(|&t| t as f32).collect::<Vec<_>>(), [b]), device),
        signal: Tensor::from_data(TensorData::new(signal, [b, 1, 1]), device),
        noise: Tensor::from_data(TensorData::new(noise, [b, 1, 1]), device),
    }
}
