//! An exponential moving average of the model's weights, by diffusers' `EMAModel` rule (the one
//! the original Diffusion Policy trains with): after optimiser step `n`,
//! `ema ← ema − (1 − decay)·(ema − weights)` with `decay = 1 − (1 + k/inv_gamma)^−power`,
//! `k = n − update_after_step − 1`, clamped to `[min_decay, max_decay]`, and `decay = 0` (a
//! copy) while `k ≤ 0`. The average lives on the inner (non-autodiff) backend, off the graph,
//! as one flat buffer that the optimiser's fused pass blends. BatchNorm's running statistics
//! are copied, not averaged.

use burn::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::DiffusionModel;
use crate::optim::FlatLayout;

/// `--ema.*`: whether to keep an average and its schedule (diffusers' defaults).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmaConfig {
    /// Keep an average. Default false.
    pub enable: bool,
    /// Optimiser steps before the average starts moving (until then it copies). Default 0.
    pub update_after_step: usize,
    /// Default 1.0.
    pub inv_gamma: f64,
    /// Default 0.75.
    pub power: f64,
    /// Default 0.0.
    pub min_decay: f64,
    /// Default 0.9999.
    pub max_decay: f64,
}

impl Default for EmaConfig {
    fn default() -> Self {
        Self { enable: false, update_after_step: 0, inv_gamma: 1.0, power: 0.75, min_decay: 0.0, max_decay: 0.9999 }
    }
}

impl EmaConfig {
    /// Checks the ranges.
    pub fn validate(&self) -> Result<()> {
        let ok = self.inv_gamma > 0.0
            && self.power > 0.0
            && (0.0..=1.0).contains(&self.min_decay)
            && (0.0..=1.0).contains(&self.max_decay)
            && self.min_decay <= self.max_decay;
        if ok {
            Ok(())
        } else {
            Err(Error::Config(format!(
                "ema: need inv_gamma > 0, power > 0 and 0 <= min_decay <= max_decay <= 1, got {self:?}"
            )))
        }
    }

    /// The decay applied after optimiser step `step` (1-based: the first update is step 1).
    pub fn decay(&self, step: usize) -> f64 {
        let k = step as f64 - self.update_after_step as f64 - 1.0;
        if k <= 0.0 {
            return 0.0;
        }
        let decay = 1.0 - (1.0 + k / self.inv_gamma).powf(-self.power);
        decay.min(self.max_decay).max(self.min_decay)
    }
}

/// The average of the trainable weights, flat (in the optimiser's layout), blended by the
/// optimiser's fused update; [`crate::StepRunner::ema_model`] gives it back as a model.
#[derive(Debug, Clone)]
pub struct Ema<B: Backend> {
    average: Tensor<B, 1>,
    config: EmaConfig,
}

impl<B: Backend> Ema<B> {
    /// Starts (or continues) an average at `model`'s weights.
    pub fn new(model: &DiffusionModel<B>, config: EmaConfig) -> Self {
        Self { average: FlatLayout::of(model).gather_weights(model), config }
    }

    /// The averaged weights, flat.
    pub fn average(&self) -> &Tensor<B, 1> {
        &self.average
    }

    /// The weight of the average's blend after optimiser step `step` (1-based), `1 − decay`.
    pub(crate) fn weight(&self, step: usize) -> f32 {
        (1.0 - self.config.decay(step)) as f32
    }

    /// The averaged weights, flat, for the update to blend in place.
    pub(crate) fn average_mut(&mut self) -> &mut Tensor<B, 1> {
        &mut self.average
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decay_follows_diffusers() {
        let config = EmaConfig::default();
        // diffusers: step = max(0, n − update_after_step − 1); 0 → decay 0.
        assert_eq!(config.decay(1), 0.0);
        // n = 2: 1 − 2^−0.75.
        assert!((config.decay(2) - (1.0 - 2f64.powf(-0.75))).abs() < 1e-15);
        assert!((config.decay(101) - (1.0 - 101f64.powf(-0.75))).abs() < 1e-15);
        // Large n reaches the cap.
        assert_eq!(config.decay(10_000_000), 0.9999);
        let later = EmaConfig { update_after_step: 10, min_decay: 0.5, ..EmaConfig::default() };
        assert_eq!(later.decay(11), 0.0);
        assert_eq!(later.decay(12), 0.5); // 1 − 2^−0.75 ≈ 0.405, raised to min_decay
        assert!(EmaConfig { max_decay: 1.5, ..EmaConfig::default() }.validate().is_err());
    }
}
