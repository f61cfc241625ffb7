//! The noise schedule and samplers of diffusers' `DDPMScheduler` and `DDIMScheduler` as LeRobot
//! configures them: `squaredcos_cap_v2` (or `linear`) betas in float32, `add_noise` for
//! training, and the reverse steps (epsilon or sample prediction, clipping, DDPM's
//! `fixed_small` variance, DDIM with η = 0) for inference.

use serde::{Deserialize, Serialize};

/// Which beta schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BetaSchedule {
    /// `ᾱ(t) = cos²(((t + 0.008)/1.008)·π/2)`, betas capped at 0.999 (LeRobot's default).
    SquaredcosCapV2,
    /// Evenly spaced betas from `beta_start` to `beta_end`.
    Linear,
}

/// What the network predicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PredictionType {
    /// The noise (LeRobot's default).
    Epsilon,
    /// The clean action sequence.
    Sample,
}

/// The sampler used at inference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SchedulerKind {
    /// Ancestral DDPM sampling (LeRobot's default).
    #[serde(rename = "DDPM")]
    Ddpm,
    /// Deterministic DDIM sampling (η = 0), for fewer steps.
    #[serde(rename = "DDIM")]
    Ddim,
}

/// A noise schedule with its precomputed products, all float32 as diffusers keeps them.
#[derive(Debug, Clone, PartialEq)]
pub struct NoiseSchedule {
    /// βᵢ.
    pub betas: Vec<f32>,
    /// αᵢ = 1 − βᵢ.
    pub alphas: Vec<f32>,
    /// ᾱᵢ = ∏ αⱼ (j ≤ i).
    pub alphas_cumprod: Vec<f32>,
    /// Predict noise or sample.
    pub prediction: PredictionType,
    /// Clip the predicted clean sample to ±`clip_range`.
    pub clip_sample: bool,
    /// The clipping range.
    pub clip_range: f32,
}

impl NoiseSchedule {
    /// diffusers' schedule for `steps` training timesteps.
    pub fn new(
        schedule: BetaSchedule,
        steps: usize,
        beta_start: f64,
        beta_end: f64,
        prediction: PredictionType,
        clip_sample: bool,
        clip_range: f64,
    ) -> Self {
        let betas: Vec<f32> = match schedule {
            BetaSchedule::SquaredcosCapV2 => {
                let alpha_bar = |t: f64| ((t + 0.008) / 1.008 * std::f64::consts::PI / 2.0).cos().powi(2);
                (0..steps)
                    .map(|i| {
                        let (t1, t2) = (i as f64 / steps as f64, (i + 1) as f64 / steps as f64);
                        (1.0 - alpha_bar(t2) / alpha_bar(t1)).min(0.999) as f32
                    })
                    .collect()
            }
            BetaSchedule::Linear => {
                // torch.linspace(beta_start, beta_end, steps, dtype=float32)
                let (a, b) = (beta_start as f32, beta_end as f32);
                let step = if steps > 1 { (b - a) / (steps - 1) as f32 } else { 0.0 };
                (0..steps)
                    .map(|i| if i < steps / 2 { a + step * i as f32 } else { b - step * (steps - 1 - i) as f32 })
                    .collect()
            }
        };
        let alphas: Vec<f32> = betas.iter().map(|b| 1.0 - b).collect();
        let mut alphas_cumprod = Vec::with_capacity(steps);
        let mut acc = 1.0f32;
        for a in &alphas {
            acc *= a;
            alphas_cumprod.push(acc);
        }
        Self { betas, alphas, alphas_cumprod, prediction, clip_sample, clip_range: clip_range as f32 }
    }

    /// The number of training timesteps.
    pub fn steps(&self) -> usize {
        self.betas.len()
    }

    /// `add_noise` coefficients of timestep `t`: `(√ᾱₜ, √(1 − ᾱₜ))`, so that
    /// `xₜ = √ᾱₜ·x₀ + √(1 − ᾱₜ)·ε`.
    pub fn noise_coefficients(&self, t: usize) -> (f32, f32) {
        let a = self.alphas_cumprod[t];
        (a.sqrt(), (1.0 - a).sqrt())
    }

    /// The inference timesteps for `n` steps, diffusers' "leading" spacing, descending.
    pub fn inference_timesteps(&self, n: usize) -> Vec<usize> {
        let ratio = self.steps() / n.max(1);
        (0..n.min(self.steps())).map(|i| i * ratio).rev().collect()
    }

    /// The timestep before `t` when sampling in `n` steps (negative: the end).
    pub fn previous(&self, t: usize, n: usize) -> i64 {
        t as i64 - (self.steps() / n.max(1)) as i64
    }

    /// One reverse step on flat data: `sample` at timestep `t`, the network's `output`, and
    /// (for DDPM at t > 0) standard normal `noise`; returns the sample at the previous
    /// timestep. Float32 throughout, in diffusers' order of operations.
    pub fn step(
        &self,
        kind: SchedulerKind,
        output: &[f32],
        t: usize,
        n: usize,
        sample: &[f32],
        noise: Option<&[f32]>,
    ) -> Vec<f32> {
        let prev = self.previous(t, n);
        let alpha_prod_t = self.alphas_cumprod[t];
        let alpha_prod_prev = if prev >= 0 { self.alphas_cumprod[prev as usize] } else { 1.0 };
        let beta_prod_t = 1.0 - alpha_prod_t;
        let clip = |x: f32| if self.clip_sample { x.clamp(-self.clip_range, self.clip_range) } else { x };
        match kind {
            SchedulerKind::Ddpm => {
                let beta_prod_prev = 1.0 - alpha_prod_prev;
                let current_alpha = alpha_prod_t / alpha_prod_prev;
                let current_beta = 1.0 - current_alpha;
                let original_coeff = (alpha_prod_prev.sqrt() * current_beta) / beta_prod_t;
                let sample_coeff = current_alpha.sqrt() * beta_prod_prev / beta_prod_t;
                let std = if t > 0 { ((beta_prod_prev / beta_prod_t * current_beta).max(1e-20)).sqrt() } else { 0.0 };
                output
                    .iter()
                    .zip(sample)
                    .enumerate()
                    .map(|(i, (&o, &x))| {
                        let original = clip(match self.prediction {
                            PredictionType::Epsilon => (x - beta_prod_t.sqrt() * o) / alpha_prod_t.sqrt(),
                            PredictionType::Sample => o,
                        });
                        let mean = original_coeff * original + sample_coeff * x;
                        match noise {
                            Some(z) if t > 0 => mean + std * z[i],
                            _ => mean,
                        }
                    })
                    .collect()
            }
            SchedulerKind::Ddim => output
                .iter()
                .zip(sample)
                .map(|(&o, &x)| {
                    let (original, epsilon) = match self.prediction {
                        PredictionType::Epsilon => ((x - beta_prod_t.sqrt() * o) / alpha_prod_t.sqrt(), o),
                        PredictionType::Sample => (o, (x - alpha_prod_t.sqrt() * o) / beta_prod_t.sqrt()),
                    };
                    let original = clip(original);
                    let direction = (1.0 - alpha_prod_prev).sqrt() * epsilon;
                    alpha_prod_prev.sqrt() * original + direction
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule() -> NoiseSchedule {
        NoiseSchedule::new(BetaSchedule::SquaredcosCapV2, 100, 1e-4, 0.02, PredictionType::Epsilon, true, 1.0)
    }

    #[test]
    fn squaredcos_betas_follow_the_formula() {
        let s = schedule();
        assert_eq!(s.betas.len(), 100);
        let alpha_bar = |t: f64| ((t + 0.008) / 1.008 * std::f64::consts::PI / 2.0).cos().powi(2);
        for i in [0usize, 1, 50, 98, 99] {
            let expected = (1.0 - alpha_bar((i + 1) as f64 / 100.0) / alpha_bar(i as f64 / 100.0)).min(0.999);
            assert!((f64::from(s.betas[i]) - expected).abs() < 1e-7, "beta {i}");
        }
        // Known diffusers values (float32): beta_0 and beta_99 (capped).
        assert!((s.betas[0] - 6.312_816e-4).abs() < 1e-9, "{}", s.betas[0]);
        assert_eq!(s.betas[99], 0.999);
        // ᾱ is the running product of α, decreasing to ~0.
        let prod: f64 = s.alphas[..10].iter().map(|&a| f64::from(a)).product();
        assert!((f64::from(s.alphas_cumprod[9]) - prod).abs() < 1e-6);
        assert!(s.alphas_cumprod.windows(2).all(|w| w[1] < w[0]));
        assert!(s.alphas_cumprod[99] < 1e-4);
    }

    #[test]
    fn inference_timesteps_use_leading_spacing() {
        let s = schedule();
        assert_eq!(s.inference_timesteps(100), (0..100).rev().collect::<Vec<_>>());
        assert_eq!(s.inference_timesteps(10), vec![90, 80, 70, 60, 50, 40, 30, 20, 10, 0]);
        assert_eq!(s.previous(90, 10), 80);
        assert_eq!(s.previous(0, 10), -10);
    }

    #[test]
    fn a_perfect_noise_prediction_recovers_the_clean_sample() {
        // x_t = √ᾱ x0 + √(1−ᾱ) ε; predicting ε exactly gives x0 back in one DDIM step to t = -1.
        let s = schedule();
        let (x0, eps) = (vec![0.3f32, -0.7, 0.9], vec![1.2f32, -0.4, 0.1]);
        let t = 40;
        let (a, b) = s.noise_coefficients(t);
        let xt: Vec<f32> = x0.iter().zip(&eps).map(|(x, e)| a * x + b * e).collect();
        let out = s.step(SchedulerKind::Ddim, &eps, t, 1, &xt, None);
        for (o, x) in out.iter().zip(&x0) {
            assert!((o - x).abs() < 1e-5, "{o} vs {x}");
        }
        // DDPM at t = 0 returns the clean sample's estimate without noise.
        let (a0, b0) = s.noise_coefficients(0);
        let x_0: Vec<f32> = x0.iter().zip(&eps).map(|(x, e)| a0 * x + b0 * e).collect();
        let out = s.step(SchedulerKind::Ddpm, &eps, 0, 100, &x_0, Some(&[9.0, 9.0, 9.0]));
        for (o, x) in out.iter().zip(&x0) {
            assert!((o - x).abs() < 1e-5);
        }
    }

    #[test]
    fn ddpm_adds_fixed_small_variance_noise() {
        let s = schedule();
        let t = 50;
        let zeros = vec![0.0f32; 4];
        let mean = s.step(SchedulerKind::Ddpm, &zeros, t, 100, &[0.5; 4], None);
        let noisy = s.step(SchedulerKind::Ddpm, &zeros, t, 100, &[0.5; 4], Some(&[1.0; 4]));
        let (acp, prev) = (s.alphas_cumprod[t], s.alphas_cumprod[t - 1]);
        let variance = (1.0 - prev) / (1.0 - acp) * (1.0 - acp / prev);
        assert!((noisy[0] - mean[0] - variance.sqrt()).abs() < 1e-6);
    }
}
