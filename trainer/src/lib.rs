//! LeRobot's Diffusion Policy in burn, and its training loop.
//!
//! The user's guide to training (the `trainer` tool, its settings, LeRobot interchange) is
//! `docs/training.md` in the repository; several devices and processes, `docs/processes.md`.
//!
//! [`DiffusionModel`] is LeRobot's network (ResNet-18 camera encoders with SpatialSoftmax,
//! global conditioning, the FiLM-conditioned 1-D U-Net) built from a [`DiffusionConfig`] (the
//! `classic` or `lerobot-0.6` defaults) for a dataset's [`PolicyFeatures`]. [`train()`] runs
//! LeRobot's loop as a [`TrainConfig`] says (module `train`: the run's data, its start fresh or
//! resumed, the steps, checkpoints, replicas); each step is a [`StepRunner`]'s — device-side
//! transforms and normalisation ([`InputPipeline`]), DDPM noising ([`NoiseSchedule`]), MSE,
//! backward, global-norm clipping, Adam with L2 decay and the warm-up cosine schedule — with
//! atomic checkpoints ([`checkpoint`]) and exact resume. [`PolicyRunner`] generates actions with
//! LeRobot's queues.
//!
//! ```no_run
//! use burn::backend::{Autodiff, Flex};
//! use trainer::{Preset, TrainConfig, train};
//!
//! let mut config = TrainConfig::defaults(Preset::Classic);
//! config.dataset.root = "/dev/shm/pusht".into();
//! config.steps = 1000;
//! let outcome = train::<Autodiff<Flex>>(&config, None, Default::default(), |_| {})?;
//! println!("final loss {:?}", outcome.losses.last());
//! # Ok::<(), trainer::Error>(())
//! ```

pub mod checkpoint;
pub mod ema;
pub mod lerobot;
pub mod memory;
pub mod metrics;
pub mod model;
pub mod noise;
pub mod optim;
pub mod parallel;
pub mod precision;
pub mod worker;

mod device_frames;
mod error;
mod frame_encoding;
mod inference;
mod inputs;
mod json_patch;
mod policy_config;
mod seeds;
mod step;
mod train;
mod train_config;
mod uploads;

pub use device_frames::{DeviceFrames, FramesOnDevice};
pub use ema::{Ema, EmaConfig};
pub use error::{Error, Result};
pub use frame_encoding::FrameEncodingChoice;
pub use inference::{PolicyRunner, StepObservation};
pub use inputs::{CameraInput, HostObservation, InputPipeline, Mode, TrainInputs};
pub use json_patch::{merge, set_key};
pub use model::{DiffusionModel, Observation, Sampler, TrainingNoise};
pub use noise::{BetaSchedule, NoiseSchedule, PredictionType, SchedulerKind};
pub use policy_config::{DiffusionConfig, PolicyFeatures, Preset};
pub use precision::{LossScaler, Precision};
pub use seeds::{Purpose, step_seed};
pub use step::{GraphStatus, Prepared, StepMode, StepOutput, StepRunner, TrainingBackend};
pub use train::{Progress, Sampled, TrainData, TrainOutcome, init_model, step_runner, train, train_on};
pub use train_config::{DatasetConfig, DatasetRoots, PolicySection, TrainConfig, parse_episode_list};
