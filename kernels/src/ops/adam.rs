//! The optimiser's numbers and buffers: one Adam step's scalars, the flat buffers every
//! parameter owns a range of, and what the updates give back.

use burn::prelude::*;
use burn::tensor::ops::FloatTensor;

/// One fused optimiser update's numbers, for every parameter of the step: torch's `Adam` with
/// L2 weight decay (`weight_decay`), as LeRobot trains with it, after clipping.
///
/// Per weight `w` with gradient `g` (its range of [`FlatBuffers::grads`]) and moments `m`, `v`,
/// in torch's order of operations (`_single_tensor_adam`):
/// `g ← g·scale + weight_decay·w` (the scale carries clipping, the loss scale's inverse and,
/// for gradients summed over data-parallel replicas, 1/N), `m ← m + (1−β₁)(g − m)`,
/// `v ← β₂v + (1−β₂)g·g`, `w ← w − lr/(1−β₁ᵗ) · m / (√v / √(1−β₂ᵗ) + ε)`; then, with an average `a`,
/// `a ← a + ema_weight·(w − a)` (`a ← w` when `ema_weight` is 1). Like torch, the scalars are
/// derived in f64 and applied in f32 ([`AdamConstants`]); burn's own Adam derives them in f32,
/// where `1 − 0.999` is 1.3e-5 off.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamStep {
    /// The learning rate of this step.
    pub lr: f64,
    /// Adam's β₁.
    pub beta_1: f64,
    /// Adam's β₂.
    pub beta_2: f64,
    /// Adam's ε.
    pub epsilon: f64,
    /// L2 decay added to the gradient (0: none).
    pub weight_decay: f64,
    /// This update's number, from 1 (bias correction).
    pub time: i32,
    /// `1 − decay` of the moving average, when one is kept.
    pub ema_weight: Option<f32>,
}

/// The f32 constants of one [`AdamStep`], derived in f64 as torch derives them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamConstants {
    /// L2 decay.
    pub weight_decay: f32,
    /// `1 − β₁`.
    pub one_minus_beta_1: f32,
    /// `β₂`.
    pub beta_2: f32,
    /// `1 − β₂`.
    pub one_minus_beta_2: f32,
    /// `√(1 − β₂ᵗ)`.
    pub bias_correction_2_sqrt: f32,
    /// `ε`.
    pub epsilon: f32,
    /// `lr / (1 − β₁ᵗ)`.
    pub step_size: f32,
}

/// How many f32 scalars an update reads from the device ([`AdamStep::scalars`]).
pub const ADAM_SCALARS: usize = 8;

impl AdamStep {
    /// The scalars the cubecl backends' updates read from the device, in their order: the
    /// [`AdamConstants`] (`weight_decay`, `1 − β₁`, `β₂`, `1 − β₂`, `√(1 − β₂ᵗ)`, `ε`,
    /// `lr / (1 − β₁ᵗ)`) and the average's weight (0 where none moves).
    pub fn scalars(&self) -> [f32; ADAM_SCALARS] {
        let c = self.constants();
        [
            c.weight_decay,
            c.one_minus_beta_1,
            c.beta_2,
            c.one_minus_beta_2,
            c.bias_correction_2_sqrt,
            c.epsilon,
            c.step_size,
            self.ema_weight.unwrap_or(0.0),
        ]
    }

    /// The constants the elementwise pass applies.
    pub fn constants(&self) -> AdamConstants {
        AdamConstants {
            weight_decay: self.weight_decay as f32,
            one_minus_beta_1: (1.0 - self.beta_1) as f32,
            beta_2: self.beta_2 as f32,
            one_minus_beta_2: (1.0 - self.beta_2) as f32,
            bias_correction_2_sqrt: (1.0 - self.beta_2.powi(self.time)).sqrt() as f32,
            epsilon: self.epsilon as f32,
            step_size: (self.lr / (1.0 - self.beta_1.powi(self.time))) as f32,
        }
    }
}

/// The optimiser's flat f32 buffers, all of one length, each parameter owning the same range
/// in every one of them.
#[derive(Debug)]
pub struct FlatBuffers<B: Backend> {
    /// Every parameter's gradient (read).
    pub grads: FloatTensor<B>,
    /// Adam's first moment.
    pub moment_1: FloatTensor<B>,
    /// Adam's second moment.
    pub moment_2: FloatTensor<B>,
    /// The moving average of the weights, when one is kept.
    pub average: Option<FloatTensor<B>>,
    /// The update's scalars already on the device, `[ADAM_SCALARS]` f32 as
    /// [`AdamStep::scalars`] gives them: the cubecl backends' updates read them where they
    /// would upload the step's own (a captured step's update reads a buffer written before each
    /// replay); the CPU's update reads the step's.
    pub scalars: Option<FloatTensor<B>>,
}

impl<B: Backend> FlatBuffers<B> {
    /// Buffers of `len` zeros (with an average of zeros when `average`).
    pub fn zeros(len: usize, average: bool, device: &B::Device) -> Self {
        let zeros = || Tensor::<B, 1>::zeros([len], device).into_primitive().tensor();
        Self { grads: zeros(), moment_1: zeros(), moment_2: zeros(), average: average.then(zeros), scalars: None }
    }
}

/// Checks that `flat`'s scalars, where given, are what the updates read: `[ADAM_SCALARS]` f32.
///
/// # Panics
///
/// When they are not (a caller's mistake, named on the caller's thread rather than fusion's).
#[cfg(any(feature = "wgpu-untuned", feature = "cuda-untuned"))]
pub(crate) fn check_scalars<B: Backend>(flat: &FlatBuffers<B>) {
    use burn::tensor::TensorMetadata;
    if let Some(scalars) = &flat.scalars {
        let (shape, dtype) = (scalars.shape(), scalars.dtype());
        assert!(
            shape.num_elements() == ADAM_SCALARS && dtype == burn::tensor::DType::F32,
            "an update's scalars are [{ADAM_SCALARS}] f32, not {shape:?} {dtype:?}"
        );
    }
}

/// What [`OptimiserKernels::adam_update_all_with_copies`](crate::OptimiserKernels::adam_update_all_with_copies) returns: the new f32 weights and their
/// half-precision copies, each in the order the weights came in.
#[derive(Debug)]
pub struct UpdatedWeights<B: Backend> {
    /// The new weights, f32.
    pub weights: Vec<FloatTensor<B>>,
    /// The new weights in the half precision asked for.
    pub copies: Vec<FloatTensor<B>>,
}

/// The gradients' `Σ g²` as partial sums still to be totalled, with the clipping to apply by it
/// ([`OptimiserKernels::concat_flat_with_partial_squares`](crate::OptimiserKernels::concat_flat_with_partial_squares)): what [`OptimiserKernels::adam_update_views_clipping`](crate::OptimiserKernels::adam_update_views_clipping)
/// totals and clips by in its own launch, one launch fewer than the factors first.
#[derive(Debug, Clone)]
pub struct PartialSquares<B: Backend> {
    /// 1-D f32: partial sums of the gradients' squares, whose total, taken in the backend's
    /// fixed order, is `Σ g²` ([`OptimiserKernels::partial_squares_len`](crate::OptimiserKernels::partial_squares_len) of them).
    pub partials: FloatTensor<B>,
    /// The norm to clip to; 0 for none ([`OptimiserKernels::clip_factors`](crate::OptimiserKernels::clip_factors)).
    pub max_norm: f64,
    /// The factor the gradients carry ([`OptimiserKernels::clip_factors`](crate::OptimiserKernels::clip_factors)).
    pub grad_scale: f64,
}

/// What [`OptimiserKernels::adam_update_views_clipping`](crate::OptimiserKernels::adam_update_views_clipping) gives back.
#[derive(Debug)]
pub struct ViewsUpdate<B: Backend> {
    /// The views' buffer, written in place.
    pub weights: FloatTensor<B>,
    /// The copies' buffer, written in place, where one is kept.
    pub copies: Option<FloatTensor<B>>,
    /// The gradients' norm, `[1]` ([`OptimiserKernels::clip_factors`](crate::OptimiserKernels::clip_factors)).
    pub norm: FloatTensor<B>,
    /// The factor the gradients were multiplied by, `[1]` ([`OptimiserKernels::clip_factors`](crate::OptimiserKernels::clip_factors)).
    pub scale: FloatTensor<B>,
}
