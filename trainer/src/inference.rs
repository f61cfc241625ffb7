//! Running a trained policy as LeRobot does: `predict_action_chunk` on windows of
//! observations, and `select_action` with its observation and action queues (the first
//! observation copied `n_obs_steps` times; a new chunk of `n_action_steps` actions generated
//! whenever the action queue runs empty).

use std::collections::VecDeque;
use std::path::Path;

use burn::module::Module;
use burn::prelude::*;
use datasets::FrameShape;
use kernels::Kernels;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};
use transforms::Normalizer;

use crate::checkpoint;
use crate::error::{Error, Result};
use crate::inputs::{CameraInput, HostObservation, InputPipeline, Mode};
use crate::model::{DiffusionModel, Sampler};
use crate::noise::NoiseSchedule;
use crate::policy_config::{DiffusionConfig, PolicyFeatures};
use crate::train_config::TrainConfig;

/// One environment step's observation.
#[derive(Debug, Clone, PartialEq)]
pub struct StepObservation {
    /// `observation.state`, `[D]`.
    pub state: Vec<f32>,
    /// Per camera (policy order), a uint8 CHW frame.
    pub images: Vec<Vec<u8>>,
    /// `observation.environment_state`, `[E]`, when the policy uses it.
    pub env_state: Option<Vec<f32>>,
}

/// A trained policy on a device, with LeRobot's queues.
pub struct PolicyRunner<B: Kernels> {
    model: DiffusionModel<B>,
    config: DiffusionConfig,
    features: PolicyFeatures,
    pipeline: InputPipeline,
    schedule: NoiseSchedule,
    rng: ChaCha8Rng,
    device: B::Device,
    observations: VecDeque<StepObservation>,
    actions: VecDeque<Vec<f32>>,
}

impl<B: Kernels> PolicyRunner<B> {
    /// A runner around `model`, drawing its noise from `seed`.
    pub fn new(
        model: DiffusionModel<B>,
        config: DiffusionConfig,
        features: PolicyFeatures,
        normalizer: Normalizer,
        seed: u64,
        device: B::Device,
    ) -> Self {
        let pipeline = InputPipeline::new(config.clone(), features.clone(), normalizer, Default::default());
        let schedule = config.noise_schedule();
        Self {
            model,
            config,
            features,
            pipeline,
            schedule,
            rng: ChaCha8Rng::seed_from_u64(seed),
            device,
            observations: VecDeque::new(),
            actions: VecDeque::new(),
        }
    }

    /// Loads the model, configuration and statistics of a checkpoint (an output folder or a
    /// checkpoint folder). With `ema`, the EMA weights when the checkpoint has them.
    pub fn load(path: &Path, seed: u64, ema: bool, device: B::Device) -> Result<Self> {
        let dir = checkpoint::resolve(path)?;
        let train: TrainConfig = checkpoint::read_json(&dir, "config.json")?;
        let normalizer: Normalizer = checkpoint::read_json(&dir, "normalizer.json")?;
        let features: PolicyFeatures = checkpoint::read_json(&dir, "features.json")?;
        let config = train.policy.config;
        let name = if ema && dir.join("ema.mpk").exists() { "ema" } else { "model" };
        let model = DiffusionModel::<B>::skeleton(&config, &features, &device)
            .load_file(dir.join(name), &checkpoint::recorder(), &device)
            .map_err(|e| Error::checkpoint(&dir, format!("{name}: {e}")))?;
        Ok(Self::new(model, config, features, normalizer, seed, device))
    }

    /// The model, giving the runner up.
    pub fn into_model(self) -> DiffusionModel<B> {
        self.model
    }

    /// The normalisation statistics.
    pub fn normalizer(&self) -> &Normalizer {
        self.pipeline.normalizer()
    }

    /// The policy's features.
    pub fn features(&self) -> &PolicyFeatures {
        &self.features
    }

    /// The configuration.
    pub fn config(&self) -> &DiffusionConfig {
        &self.config
    }

    /// LeRobot's `predict_action_chunk` on `obs` (each sample a window of `n_obs_steps`
    /// steps): `[B, n_action_steps, A]` unnormalised actions.
    pub fn predict_chunk(&mut self, obs: &HostObservation<'_>) -> Result<Tensor<B, 3>> {
        self.predict_chunk_from(obs, None)
    }

    /// [`PolicyRunner::predict_chunk`] starting the reverse diffusion from `initial` noise
    /// `[B, horizon, A]` (row-major) when given, as LeRobot's `generate_actions(batch, noise)`.
    pub fn predict_chunk_from(&mut self, obs: &HostObservation<'_>, initial: Option<Vec<f32>>) -> Result<Tensor<B, 3>> {
        let observation = self.pipeline.observation_from_host::<B>(obs, Mode::Eval, None, &self.device)?;
        let shape = [obs.batch, self.config.horizon, self.features.action_dim];
        let initial = match initial {
            Some(noise) if noise.len() == shape.iter().product::<usize>() => noise,
            Some(noise) => {
                return Err(Error::Config(format!("initial noise holds {} values, expected {shape:?}", noise.len())));
            }
            None => (0..shape.iter().product::<usize>()).map(|_| StandardNormal.sample(&mut self.rng)).collect(),
        };
        let rng = &mut self.rng;
        let sampler = Sampler {
            schedule: &self.schedule,
            kind: self.config.noise_scheduler_type,
            steps: self.config.inference_steps(),
            n_action_steps: self.config.n_action_steps,
        };
        let actions = self.model.generate_actions(&observation, initial, shape, &sampler, |_| {
            (0..shape.iter().product::<usize>()).map(|_| StandardNormal.sample(&mut *rng)).collect()
        });
        Ok(self.pipeline.normalizer().unnormalize("action", actions))
    }

    /// Clears the queues (LeRobot's `reset`, at the start of an episode).
    pub fn reset(&mut self) {
        self.observations.clear();
        self.actions.clear();
    }

    /// LeRobot's `select_action` for one step of one environment: queue the observation (the
    /// first one `n_obs_steps` times), generate a chunk when no action is queued, pop one.
    pub fn select_action(&mut self, obs: StepObservation) -> Result<Vec<f32>> {
        if self.observations.is_empty() {
            self.observations.extend(std::iter::repeat_n(obs, self.config.n_obs_steps));
        } else {
            self.observations.push_back(obs);
            while self.observations.len() > self.config.n_obs_steps {
                self.observations.pop_front();
            }
        }
        if self.actions.is_empty() {
            let state: Vec<f32> = self.observations.iter().flat_map(|o| o.state.iter().copied()).collect();
            let env: Option<Vec<f32>> = self
                .features
                .env_state_dim
                .map(|_| self.observations.iter().flat_map(|o| o.env_state.clone().unwrap_or_default()).collect());
            let frames: Vec<Vec<u8>> = (0..self.features.cameras.len())
                .map(|c| self.observations.iter().flat_map(|o| o.images[c].iter().copied()).collect())
                .collect();
            let cameras: Vec<(String, CameraInput<'_>, FrameShape)> = self
                .features
                .cameras
                .iter()
                .zip(&frames)
                .map(|((k, shape), f)| (k.clone(), CameraInput::Frames(f.as_slice()), *shape))
                .collect();
            let host = HostObservation {
                batch: 1,
                state: &state,
                env_state: env.as_deref(),
                cameras,
                encoding: datasets::FrameEncoding::Rgb,
            };
            let chunk: Vec<f32> = self.predict_chunk(&host)?.into_data().convert::<f32>().to_vec().expect("f32 data");
            let a = self.features.action_dim;
            self.actions.extend(chunk.chunks_exact(a).map(<[f32]>::to_vec));
        }
        Ok(self.actions.pop_front().expect("a chunk was just generated"))
    }

    /// Actions still queued.
    pub fn queued_actions(&self) -> usize {
        self.actions.len()
    }
}
