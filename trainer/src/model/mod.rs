//! LeRobot's Diffusion Policy (`DiffusionModel`): camera encoders (one shared or one per
//! camera), global conditioning, the conditional 1-D U-Net, the training loss and the reverse
//! diffusion that generates actions.

pub mod conv1d;
pub mod encoder;
pub mod generator;
pub mod linear;
pub mod norm;
pub mod resnet;
pub mod unet;

use burn::prelude::*;
use kernels::Kernels;

use crate::error::Result;
use crate::noise::{NoiseSchedule, PredictionType, SchedulerKind};
use crate::policy_config::{DiffusionConfig, PolicyFeatures};
use crate::uploads::{Fresh, Uploads};
use encoder::RgbEncoder;
pub use generator::{materialize, with_seeded_generator};
use unet::{ConditionalUnet1d, UnetShape};

/// The network: everything LeRobot's `policy.diffusion` holds.
#[derive(Module, Debug)]
pub struct DiffusionModel<B: Backend> {
    /// `rgb_encoder` (one, shared) or `rgb_encoder.{i}` (one per camera).
    pub rgb_encoder: Vec<RgbEncoder<B>>,
    /// `unet`.
    pub unet: ConditionalUnet1d<B>,
    /// Observation steps.
    pub n_obs_steps: usize,
    /// Cameras.
    pub cameras: usize,
}

/// One batch of model inputs on the device, already normalised, resized and cropped.
#[derive(Debug, Clone)]
pub struct Observation<B: Backend> {
    /// `observation.state`, `[B, S, D]`.
    pub state: Tensor<B, 3>,
    /// Per camera, its frames `[B·S, 3, h, w]` (sample-major, then step).
    pub images: Vec<Tensor<B, 4>>,
    /// `observation.environment_state`, `[B, S, E]`.
    pub env_state: Option<Tensor<B, 3>>,
}

/// How [`DiffusionModel::generate_actions`] runs the reverse diffusion.
#[derive(Debug, Clone, Copy)]
pub struct Sampler<'a> {
    /// The noise schedule.
    pub schedule: &'a NoiseSchedule,
    /// DDPM or DDIM.
    pub kind: SchedulerKind,
    /// Reverse steps.
    pub steps: usize,
    /// Actions kept from the generated sequence.
    pub n_action_steps: usize,
}

/// The diffusion noise of one training batch, drawn on the host from the run's seed.
#[derive(Debug, Clone)]
pub struct TrainingNoise<B: Backend> {
    /// ε, `[B, T, A]`.
    pub eps: Tensor<B, 3>,
    /// The timestep of each sample, as floats `[B]`.
    pub timesteps: Tensor<B, 1>,
    /// `√ᾱₜ` per sample, `[B, 1, 1]`.
    pub signal: Tensor<B, 3>,
    /// `√(1 − ᾱₜ)` per sample, `[B, 1, 1]`.
    pub noise: Tensor<B, 3>,
}

impl<B: Kernels> TrainingNoise<B> {
    /// The noise of a batch from host values: ε `[B, T, A]` (row-major) and each sample's
    /// timestep, with their `add_noise` coefficients from `schedule`.
    ///
    /// # Panics
    ///
    /// When `eps` does not hold `shape`'s values, or `timesteps` is not one per sample.
    pub fn new(
        schedule: &NoiseSchedule,
        eps: Vec<f32>,
        shape: [usize; 3],
        timesteps: &[usize],
        device: &B::Device,
    ) -> Self {
        HostNoise::new(schedule, eps, shape, timesteps)
            .upload(&mut Fresh::new(device))
            .unwrap_or_else(|_| unreachable!("new buffers take any values"))
    }
}

/// The diffusion noise of one training batch on the host, before it goes to the device as
/// [`TrainingNoise`].
#[derive(Debug, Clone, PartialEq)]
pub struct HostNoise {
    eps: Vec<f32>,
    shape: [usize; 3],
    timesteps: Vec<f32>,
    signal: Vec<f32>,
    noise: Vec<f32>,
}

impl HostNoise {
    /// ε `[B, T, A]` (row-major) and each sample's timestep, with their `add_noise`
    /// coefficients from `schedule`.
    ///
    /// # Panics
    ///
    /// When `eps` does not hold `shape`'s values, or `timesteps` is not one per sample.
    pub fn new(schedule: &NoiseSchedule, eps: Vec<f32>, shape: [usize; 3], timesteps: &[usize]) -> Self {
        assert_eq!(timesteps.len(), shape[0], "one timestep per sample");
        assert_eq!(eps.len(), shape.iter().product::<usize>(), "ε of shape {shape:?}");
        let (signal, noise) = timesteps.iter().map(|&t| schedule.noise_coefficients(t)).unzip();
        let timesteps = timesteps.iter().map(|&t| t as f32).collect();
        Self { eps, shape, timesteps, signal, noise }
    }

    /// The noise on the device, through `uploads`: ε, the timesteps as floats, `√ᾱₜ` and
    /// `√(1 − ᾱₜ)`, in that order.
    pub(crate) fn upload<B: Kernels>(&self, uploads: &mut impl Uploads<B>) -> Result<TrainingNoise<B>> {
        let b = self.shape[0];
        Ok(TrainingNoise {
            eps: uploads.float(TensorData::new(self.eps.clone(), self.shape))?,
            timesteps: uploads.float(TensorData::new(self.timesteps.clone(), [b]))?,
            signal: uploads.float(TensorData::new(self.signal.clone(), [b, 1, 1]))?,
            noise: uploads.float(TensorData::new(self.noise.clone(), [b, 1, 1]))?,
        })
    }
}

impl<B: Kernels> DiffusionModel<B> {
    /// A freshly initialised model for `features`.
    pub fn new(config: &DiffusionConfig, features: &PolicyFeatures, device: &B::Device) -> Self {
        let keypoints = config.spatial_softmax_num_keypoints;
        let encoders = if features.cameras.is_empty() {
            0
        } else if config.use_separate_rgb_encoder_per_camera {
            features.cameras.len()
        } else {
            1
        };
        let rgb_encoder = (0..encoders)
            .map(|_| {
                RgbEncoder::new(config.encoder_input(features.cameras[0].1), keypoints, config.use_group_norm, device)
            })
            .collect();
        let shape = UnetShape {
            action_dim: features.action_dim,
            down_dims: config.down_dims.clone(),
            kernel_size: config.kernel_size,
            n_groups: config.n_groups,
            step_embed_dim: config.diffusion_step_embed_dim,
            film_scale: config.use_film_scale_modulation,
            global_cond_dim: features.cond_per_step(keypoints) * config.n_obs_steps,
        };
        Self {
            rgb_encoder,
            unet: ConditionalUnet1d::new(&shape, device),
            n_obs_steps: config.n_obs_steps,
            cameras: features.cameras.len(),
        }
    }

    /// The model for `features` with every parameter zero until weights are loaded into it:
    /// building and loading it draws nothing from burn's generator (see [`generator`]).
    pub fn skeleton(config: &DiffusionConfig, features: &PolicyFeatures, device: &B::Device) -> Self {
        generator::undrawn(Self::new(config, features, device))
    }

    /// The parameters the optimiser updates, as LeRobot counts `num_learnable_params`: every
    /// float parameter except BatchNorm's running statistics (buffers in PyTorch).
    pub fn num_learnable_params(&self) -> usize {
        crate::optim::FlatLayout::of(self).len()
    }

    /// LeRobot's `_prepare_global_conditioning`: per observation step `[state, camera features
    /// (camera-major), env state]`, flattened step-major to `[B, S·F]`.
    /// Computed in the dtype of the U-Net's weights.
    pub fn global_conditioning(&self, obs: &Observation<B>) -> Tensor<B, 2> {
        let dtype = self.unet.step_linear1.weight.val().dtype();
        let [b, s, _] = obs.state.dims();
        let mut parts = vec![obs.state.clone().cast(dtype)];
        if !obs.images.is_empty() {
            let features = if self.rgb_encoder.len() == 1 && self.cameras > 1 {
                // Shared encoder: one call on all cameras, in (sample, step, camera) order.
                let [n, c, h, w] = obs.images[0].dims();
                let stacked = Tensor::stack::<5>(obs.images.clone(), 1).reshape([n * self.cameras, c, h, w]);
                self.rgb_encoder[0].forward(stacked)
            } else {
                let per_camera: Vec<Tensor<B, 2>> =
                    obs.images.iter().zip(self.rgb_encoder.iter().cycle()).map(|(x, e)| e.forward(x.clone())).collect();
                let [n, f] = per_camera[0].dims();
                Tensor::stack::<3>(per_camera, 1).reshape([n * self.cameras, f])
            };
            let [_, f] = features.dims();
            parts.push(features.reshape([b, s, self.cameras * f]));
        }
        if let Some(env) = &obs.env_state {
            parts.push(env.clone().cast(dtype));
        }
        let cond = Tensor::cat(parts, 2);
        let [_, _, f] = cond.dims();
        cond.reshape([b, s * f])
    }

    /// The training loss: noise the (normalised) actions, predict, MSE against ε (or the
    /// actions), over every element or, with `pad_mask`, over the steps inside the episode. The
    /// noising and the loss run in f32 whatever the weights' dtype.
    pub fn loss(
        &self,
        obs: &Observation<B>,
        actions: Tensor<B, 3>,
        noise: &TrainingNoise<B>,
        prediction: PredictionType,
        pad_mask: Option<Tensor<B, 2, Bool>>,
    ) -> Tensor<B, 1> {
        let cond = self.global_conditioning(obs);
        let noisy = actions.clone() * noise.signal.clone() + noise.eps.clone() * noise.noise.clone();
        let pred = self.unet.forward(noisy, noise.timesteps.clone(), cond).cast(burn::tensor::FloatDType::F32);
        let target = match prediction {
            PredictionType::Epsilon => noise.eps.clone(),
            PredictionType::Sample => actions,
        };
        let squared = (pred - target).powi_scalar(2);
        match pad_mask {
            None => squared.mean(),
            Some(is_pad) => {
                // LeRobot 0.6: sum(loss · valid) / max(valid steps · A, 1).
                let [b, t, a] = squared.dims();
                let valid = is_pad.bool_not().float().reshape([b, t, 1]);
                let count = valid.clone().sum().mul_scalar(a as f64).clamp_min(1.0);
                (squared * valid).sum() / count
            }
        }
    }

    /// LeRobot's `generate_actions`: reverse diffusion from `initial` noise `[B, T, A]` (host,
    /// row-major) with `sampler`, then the `n_action_steps` actions from step `n_obs_steps − 1`.
    /// `step_noise(i)` gives the DDPM noise of reverse step `i`.
    pub fn generate_actions(
        &self,
        obs: &Observation<B>,
        initial: Vec<f32>,
        shape: [usize; 3],
        sampler: &Sampler<'_>,
        mut step_noise: impl FnMut(usize) -> Vec<f32>,
    ) -> Tensor<B, 3> {
        let device = obs.state.device();
        let cond = self.global_conditioning(obs);
        let [b, _, _] = shape;
        let mut sample = initial;
        for (i, t) in sampler.schedule.inference_timesteps(sampler.steps).into_iter().enumerate() {
            let x = Tensor::<B, 3>::from_data(TensorData::new(sample.clone(), shape), &device);
            let steps = Tensor::<B, 1>::from_data(TensorData::new(vec![t as f32; b], [b]), &device);
            let output: Vec<f32> =
                self.unet.forward(x, steps, cond.clone()).into_data().convert::<f32>().to_vec().expect("f32 data");
            let z = (sampler.kind == SchedulerKind::Ddpm && t > 0).then(|| step_noise(i));
            sample = sampler.schedule.step(sampler.kind, &output, t, sampler.steps, &sample, z.as_deref());
        }
        let actions = Tensor::<B, 3>::from_data(TensorData::new(sample, shape), &device);
        let start = self.n_obs_steps - 1;
        actions.slice(s![.., start..start + sampler.n_action_steps, ..])
    }
}
