//! When a run writes a checkpoint and what goes in it: the model, the optimiser's state, the
//! EMA, the training state, the resolved configuration, the normalisation statistics, the
//! features and, unless turned off, the policy as LeRobot's `pretrained_model/`. The folder's layout and its atomic write are [`crate::checkpoint`]'s.

use std::path::PathBuf;

use burn::module::{AutodiffModule, Module};
use transforms::Normalizer;

use crate::checkpoint::{self, CheckpointContents, TrainingState};
use crate::error::{Error, Result};
use crate::lerobot::{self, LEROBOT_POLICY_DIR};
use crate::policy_config::PolicyFeatures;
use crate::step::{StepRunner, TrainingBackend};
use crate::train_config::TrainConfig;

/// Writes the run's checkpoints: when they are due, and what goes in them beside the weights.
pub(super) struct CheckpointWriter<'a> {
    config: &'a TrainConfig,
    config_json: serde_json::Value,
    normalizer: &'a Normalizer,
    features: &'a PolicyFeatures,
}

impl<'a> CheckpointWriter<'a> {
    /// A writer of `config`'s run, whose inputs are normalised by `normalizer` for `features`.
    pub fn new(config: &'a TrainConfig, normalizer: &'a Normalizer, features: &'a PolicyFeatures) -> Result<Self> {
        let config_json = serde_json::to_value(config).map_err(|e| Error::Config(e.to_string()))?;
        Ok(Self { config, config_json, normalizer, features })
    }

    /// Whether a checkpoint is due after optimiser step `step`: every `save_freq` steps and at
    /// the end.
    pub fn due(&self, step: usize) -> bool {
        let config = self.config;
        config.save_checkpoint
            && (step == config.steps || (config.save_freq > 0 && step.is_multiple_of(config.save_freq)))
    }

    /// Saves the model, optimiser, EMA and `state` atomically; returns the checkpoint folder.
    pub fn save<B: TrainingBackend>(&self, runner: &StepRunner<B>, state: &TrainingState) -> Result<PathBuf> {
        let contents = CheckpointContents {
            state,
            config: &self.config_json,
            normalizer: self.normalizer,
            features: self.features,
        };
        let optim_record = runner.optimizer().to_record();
        let ema = runner.ema_model();
        checkpoint::save::<B, _>(&self.config.output_dir, runner.model(), &contents, |tmp| {
            checkpoint::save_record::<B::InnerBackend, _>(tmp, "optimizer", optim_record)?;
            if self.config.save_lerobot_policy {
                // The policy `trainer export` writes: the EMA of the weights, when kept.
                let policy = ema.clone().unwrap_or_else(|| runner.model().valid());
                let dir = tmp.join(LEROBOT_POLICY_DIR);
                lerobot::export(&policy, &self.config.policy.config, self.features, self.normalizer, &dir)?;
            }
            match ema {
                Some(ema) => checkpoint::save_record::<B::InnerBackend, _>(tmp, "ema", ema.into_record()),
                None => Ok(()),
            }
        })
    }
}
