//! LeRobot's optimiser over flat buffers: gradient clipping by the global norm of all gradients
//! (torch's `clip_grad_norm_`), Adam with L2 weight decay (torch's `Adam(weight_decay=...)`) and
//! diffusers' cosine schedule with linear warm-up, stepped per optimiser step.
//!
//! The gradients are gathered into one flat buffer ([`FlatLayout`]), so that their norm is one
//! reduction, and clipping, decay, Adam and the EMA blend are one pass over every parameter
//! ([`kernels::OptimiserKernels::adam_update_all`]) and that buffer and the flat moments ([`FlatAdam`]). The
//! same buffer is what a data-parallel run reduces across devices, in one call per step.
//!
//! On burn's cubecl backends the model's weights are views of one buffer of their own, which the
//! update writes in one launch for every parameter ([`FlatAdam::bind`], `views.rs`).

mod adam;
mod copies;
mod flat;
mod take;
mod trainable;
mod views;

pub use adam::{FlatAdam, FlatAdamRecord};
pub use copies::WeightCopies;
pub use flat::FlatLayout;

use burn::prelude::*;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{TensorMetadata, TensorPrimitive};
use kernels::{Kernels, PartialSquares};

/// diffusers' `get_cosine_schedule_with_warmup` (0.5 cycles) as a `LambdaLR` on `base`: the
/// learning rate of the optimiser step that follows `step` earlier ones.
pub fn learning_rate(base: f64, step: usize, warmup: usize, total: usize) -> f64 {
    if step < warmup {
        return base * step as f64 / warmup.max(1) as f64;
    }
    let progress = (step - warmup) as f64 / (total.saturating_sub(warmup)).max(1) as f64;
    base * (0.5 * (1.0 + (std::f64::consts::PI * progress).cos())).max(0.0)
}

/// A flat gradient's global norm and the factor that clips it.
#[derive(Debug, Clone)]
pub struct ClipFactors<B: Backend> {
    /// The global L2 norm of the (unscaled) gradients before clipping, `[1]`.
    pub norm: Tensor<B, 1>,
    /// What the flat gradients are multiplied by: the clipping factor divided by the factor
    /// the gradients carry (`grad_scale` of [`clip_grad_norm`]), `[1]`.
    pub scale: Tensor<B, 1>,
}

/// A flat gradient's clipping, as an update takes it: the factors computed, or the gradients'
/// squares as partial sums, still to be totalled ([`FlatLayout::gather_grads_with_squares`]);
/// the update then totals them and clips in its own launch where the weights are views of one
/// buffer ([`OptimiserKernels::adam_update_views_clipping`](kernels::OptimiserKernels::adam_update_views_clipping)), one launch fewer.
#[derive(Debug, Clone)]
pub enum Clipping<B: Backend> {
    /// The norm and the factor, computed.
    Factors(ClipFactors<B>),
    /// The gradients' partial squares, and how to clip by them.
    Squares(PartialSquares<B>),
}

impl<B: Kernels> Clipping<B> {
    /// The norm and the factor, computed now if they were left to the update.
    pub fn factors(self) -> ClipFactors<B> {
        match self {
            Self::Factors(factors) => factors,
            Self::Squares(squares) => {
                let [norm, scale] = B::clip_partial_squares(&squares).map(float);
                ClipFactors { norm, scale }
            }
        }
    }
}

impl<B: Backend> From<ClipFactors<B>> for Clipping<B> {
    fn from(factors: ClipFactors<B>) -> Self {
        Self::Factors(factors)
    }
}

/// torch's `clip_grad_norm_` on a flat gradient: the global L2 norm (in float32) and, when it
/// exceeds `max_norm` (> 0), the factor `max_norm / (norm + 1e-6)`, of the gradients divided
/// by `grad_scale`: the factor they carry, the f16 loss scale times the number of data-parallel
/// replicas whose gradients were summed. The division is folded into the factor, as
/// `GradScaler.unscale_` then `clip_grad_norm_` do for the loss scale. Nothing is read back to
/// the host.
pub fn clip_grad_norm<B: Kernels>(grads: &Tensor<B, 1>, max_norm: f64, grad_scale: f64) -> ClipFactors<B> {
    let squares = B::sum_of_squares(grads.clone().into_primitive().tensor());
    let [norm, scale] = B::clip_factors(squares, max_norm, grad_scale).map(float);
    ClipFactors { norm, scale }
}

/// `weights` as a tensor of `shape`: itself where it has that shape already (a view of the
/// weights' buffer, which may lie channels-last, `views.rs`), else 1-D weights reshaped.
pub(crate) fn in_shape<B: Backend, const D: usize>(weights: FloatTensor<B>, shape: Shape) -> Tensor<B, D> {
    if weights.shape() == shape {
        assert_eq!(shape.num_dims(), D, "weights of {shape:?} as a tensor of rank {D}");
        Tensor::from_primitive(TensorPrimitive::Float(weights))
    } else {
        float::<B>(weights).reshape(shape)
    }
}

/// A 1-D tensor of a backend's float primitive.
fn float<B: Backend>(primitive: FloatTensor<B>) -> Tensor<B, 1> {
    Tensor::from_primitive(TensorPrimitive::Float(primitive))
}

#[cfg(test)]
mod tests;
