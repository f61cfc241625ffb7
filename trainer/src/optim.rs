//! LeRobot's optimiser: Adam with L2 weight decay (torch's `Adam(weight_decay=...)`), gradient
//! clipping by the global norm of all gradients (burn's `Norm` clipping is per tensor), and
//! diffusers' cosine schedule with linear warm-up, stepped per optimiser step.

use burn::module::{AutodiffModule, ModuleVisitor, Param};
use burn::optim::decay::WeightDecayConfig;
use burn::optim::{AdamConfig, GradientsParams};
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;

use crate::config::DiffusionConfig;

/// Adam as LeRobot's preset configures it (betas, epsilon, L2 weight decay; no clipping: the
/// global-norm clipping is [`clip_grad_norm`]).
pub fn adam(config: &DiffusionConfig) -> AdamConfig {
    AdamConfig::new()
        .with_beta_1(config.optimizer_betas.0 as f32)
        .with_beta_2(config.optimizer_betas.1 as f32)
        .with_epsilon(config.optimizer_eps as f32)
        .with_weight_decay(
            (config.optimizer_weight_decay > 0.0).then(|| WeightDecayConfig::new(config.optimizer_weight_decay as f32)),
        )
}

/// diffusers' `get_cosine_schedule_with_warmup` (0.5 cycles) as a `LambdaLR` on `base`: the
/// learning rate of the optimiser step that follows `step` earlier ones.
pub fn learning_rate(base: f64, step: usize, warmup: usize, total: usize) -> f64 {
    if step < warmup {
        return base * step as f64 / warmup.max(1) as f64;
    }
    let progress = (step - warmup) as f64 / (total.saturating_sub(warmup)).max(1) as f64;
    base * (0.5 * (1.0 + (std::f64::consts::PI * progress).cos())).max(0.0)
}

/// Sums the squares of every parameter's gradient.
struct SquaredNorm<'a, B: AutodiffBackend> {
    grads: &'a mut GradientsParams,
    total: Option<Tensor<B::InnerBackend, 1>>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for SquaredNorm<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        if let Some(g) = self.grads.remove::<B::InnerBackend, D>(param.id) {
            let g = compact(g);
            let s = g.clone().cast(burn::tensor::FloatDType::F32).square().sum();
            self.grads.register::<B::InnerBackend, D>(param.id, g);
            self.total = Some(match self.total.take() {
                Some(t) => t + s,
                None => s,
            });
        }
    }
}

/// A convolution weight's gradient, laid out contiguously.
///
/// burn computes convolution weight gradients as a convolution of swapped inputs and hands them
/// back as a `swap_dims(0, 1)` view. Every later elementwise pass over such a view (the norm,
/// the scaling, each of Adam's operations) walks it element by element on the CPU backend, which
/// cost seconds per step for the U-Net's 250M weights. A batched product with the identity,
/// `[out, in, k] @ [k, k]`, reads the view through the matrix kernel's strides and writes it out
/// contiguously in one pass (exact: every output is one input times 1 plus zeros).
fn compact<B: Backend, const D: usize>(g: Tensor<B, D>) -> Tensor<B, D> {
    if D < 3 {
        return g;
    }
    let shape = g.shape();
    let inner: usize = shape[2..].iter().product();
    let identity = Tensor::<B, 2>::eye(inner, &g.device()).cast(g.dtype()).unsqueeze::<3>();
    g.reshape([shape[0], shape[1], inner]).matmul(identity).reshape(shape)
}

/// Multiplies every parameter's gradient by a `[1]` factor.
struct Scale<'a, B: AutodiffBackend> {
    grads: &'a mut GradientsParams,
    factor: Tensor<B::InnerBackend, 1>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for Scale<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        if let Some(g) = self.grads.remove::<B::InnerBackend, D>(param.id) {
            let factor = self.factor.clone().cast(g.dtype()).reshape([1; D]);
            self.grads.register::<B::InnerBackend, D>(param.id, g * factor);
        }
    }
}

/// torch's `clip_grad_norm_`: the global L2 norm of all gradients (computed in float32), and, when
/// it exceeds `max_norm`, every gradient scaled by `max_norm / (norm + 1e-6)`. Gradients of a
/// loss multiplied by `loss_scale` (f16 training) are divided by it in the same pass, as
/// `GradScaler.unscale_` then `clip_grad_norm_` do. Returns the (unscaled) norm before clipping
/// as a `[1]` tensor, left on the device (reading it synchronises).
pub fn clip_grad_norm<B: AutodiffBackend, M: AutodiffModule<B>>(
    model: &M,
    grads: &mut GradientsParams,
    max_norm: f64,
    loss_scale: f64,
) -> Tensor<B::InnerBackend, 1> {
    let mut visitor = SquaredNorm::<B> { grads: &mut *grads, total: None };
    model.visit(&mut visitor);
    let norm = visitor.total.map_or_else(|| Tensor::zeros([1], &Default::default()), Tensor::sqrt);
    let norm = if loss_scale == 1.0 { norm } else { norm.div_scalar(loss_scale) };
    if max_norm > 0.0 || loss_scale != 1.0 {
        let clip = if max_norm > 0.0 {
            (norm.clone().add_scalar(1e-6).recip() * max_norm).clamp_max(1.0)
        } else {
            norm.ones_like()
        };
        let factor = if loss_scale == 1.0 { clip } else { clip.div_scalar(loss_scale) };
        let mut scale = Scale::<B> { grads, factor };
        model.visit(&mut scale);
    }
    norm
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warmup_then_cosine_like_diffusers() {
        let (base, warmup, total) = (1e-4, 500, 10_000);
        assert_eq!(learning_rate(base, 0, warmup, total), 0.0);
        assert!((learning_rate(base, 250, warmup, total) - 0.5e-4).abs() < 1e-15);
        assert_eq!(learning_rate(base, 500, warmup, total), 1e-4);
        // Half-way through the cosine part the rate is halved, at the end it is zero.
        assert!((learning_rate(base, 500 + 4750, warmup, total) - 0.5e-4).abs() < 1e-12);
        assert!(learning_rate(base, total, warmup, total).abs() < 1e-18);
        // diffusers' lambda written out: max(0, 0.5·(1 + cos(π·2·0.5·progress))).
        let step = 7321;
        let progress = (step - warmup) as f64 / (total - warmup) as f64;
        let expected = base * (0.5 * (1.0 + (std::f64::consts::PI * 0.5 * 2.0 * progress).cos())).max(0.0);
        assert_eq!(learning_rate(base, step, warmup, total), expected);
    }
}
