//! The normalisations' family of [`Kernels`](super::Kernels): GroupNorm and BatchNorm with
//! their activation, and FiLM, each forward and backward in fused passes where the backend has
//! them.

use burn::prelude::*;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{DType, TensorPrimitive};

use super::activation::Activation;
use super::elements::kernel_float;
use super::portable;

/// The normalisations and FiLM of a training step, for backend `Self`.
pub trait NormKernels: Backend {
    /// Whether [`NormKernels::group_norm_forward`] and its backward pass are this backend's own
    /// kernels for every GroupNorm of [`group_norm_dtypes`] that [`group_norm_shape`] accepts, known before they run
    /// (fusion registers them as its custom operations ahead of their execution).
    fn has_group_norm_kernels() -> bool {
        false
    }

    /// GroupNorm of `x` `[N, C, S]` (f32; the GPU backends' kernels also take f16 and bf16,
    /// [`group_norm_dtypes`]) in `groups` groups of channels, scaled by `gamma` and
    /// shifted by `beta` (`[C]`), then `activation`, in one fused pass where the backend has
    /// one: the output and, for the backward pass, each group's mean and `1/√(σ² + ε)`
    /// (`[N, groups, 2]`). `None` where it has none (the caller composes burn's operations).
    fn group_norm_forward(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        groups: usize,
        epsilon: f64,
        activation: Activation,
    ) -> Option<(FloatTensor<Self>, FloatTensor<Self>)> {
        let _ = (x, gamma, beta, groups, epsilon, activation);
        None
    }

    /// The gradients of [`NormKernels::group_norm_forward`] with respect to `x`, `gamma` and `beta`,
    /// given the output's and the statistics the forward pass returned.
    fn group_norm_backward(
        x: FloatTensor<Self>,
        [gamma, beta]: [FloatTensor<Self>; 2],
        stats: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        groups: usize,
        activation: Activation,
    ) -> [FloatTensor<Self>; 3] {
        portable::group_norm_backward::<Self>(x, [gamma, beta], stats, output_grad, groups, activation)
    }

    /// Whether [`NormKernels::film_forward`] and its backward pass are this backend's own kernels
    /// for every FiLM of [`film_dtypes`] that [`film_shape`] accepts, known before they run (fusion registers
    /// them as its custom operations ahead of their execution).
    fn has_film_kernels() -> bool {
        false
    }

    /// FiLM's scale and shift of `x` `[B, C, T]` by `embedding` `[B, 2C]` (both f32, or both
    /// in one half precision), each sample's
    /// scales then its shifts (`y = embedding[.., c]·x + embedding[.., C + c]`), in one launch
    /// where the backend has a kernel for it; `None` where it has none (the caller composes
    /// burn's operations: [`portable::film`]).
    fn film_forward(x: FloatTensor<Self>, embedding: FloatTensor<Self>) -> Option<FloatTensor<Self>> {
        let _ = (x, embedding);
        None
    }

    /// The gradients of [`NormKernels::film_forward`] with respect to `x` and `embedding`, given the
    /// output's.
    fn film_backward(
        x: FloatTensor<Self>,
        embedding: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
    ) -> [FloatTensor<Self>; 2] {
        portable::film_backward::<Self>(x, embedding, output_grad)
    }

    /// BatchNorm in training mode of `x` `[N, C, S]` (f32), normalised by the batch's
    /// statistics of each channel, scaled by `gamma` and shifted by `beta` (`[C]`), in one fused
    /// pass where the backend has one: the output and each channel's mean, `1/√(σ² + ε)` and
    /// biased variance `σ²` (`[C, 3]`; the running statistics are the caller's), the output
    /// passed through `activation`. `None` where it has none (the caller composes burn's
    /// operations).
    fn batch_norm_forward(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        epsilon: f64,
        activation: Activation,
    ) -> Option<(FloatTensor<Self>, FloatTensor<Self>)> {
        let _ = (x, gamma, beta, epsilon, activation);
        None
    }

    /// The gradients of [`NormKernels::batch_norm_forward`] with respect to `x`, `gamma` and
    /// `beta`, given the output's and the statistics the forward pass returned.
    fn batch_norm_backward(
        x: FloatTensor<Self>,
        [gamma, beta]: [FloatTensor<Self>; 2],
        stats: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        activation: Activation,
    ) -> [FloatTensor<Self>; 3] {
        portable::batch_norm_backward::<Self>(x, [gamma, beta], stats, output_grad, activation)
    }
}

/// `[N, C, S]` of a GroupNorm the GPU kernels take: `x` of three dimensions, nothing empty,
/// the channels a whole number of `groups`, `gamma` and `beta` of `C` elements each, and at
/// most 65,535 groups in all and 65,535 channels (a cube each, along one axis of the grid).
pub fn group_norm_shape(x: &[usize], gamma: usize, beta: usize, groups: usize) -> Option<[usize; 3]> {
    let [samples, channels, positions] = <[usize; 3]>::try_from(x).ok()?;
    let fits = groups > 0
        && channels % groups == 0
        && gamma == channels
        && beta == channels
        && samples * channels * positions > 0
        && samples * groups <= u16::MAX as usize
        && channels <= u16::MAX as usize;
    fits.then_some([samples, channels, positions])
}

/// Whether the GPU backends' GroupNorm kernels take an input of `x` (and its gradient's) dtype
/// with parameters and statistics of `others`: f32, or f16 or bf16 (a half-precision forward,
/// read and written in its dtype, computed in f32), with everything else f32.
pub fn group_norm_dtypes(x: DType, others: &[DType]) -> bool {
    kernel_float(x) && others.iter().all(|&d| d == DType::F32)
}

/// `[B, C, T]` of a FiLM the GPU kernels take: `x` of three dimensions, nothing empty, and
/// `embedding` `[B, 2C]`.
pub fn film_shape(x: &[usize], embedding: &[usize]) -> Option<[usize; 3]> {
    match (x, embedding) {
        (&[b, c, t], &[eb, ec]) if b * c * t > 0 && eb == b && ec == 2 * c => Some([b, c, t]),
        _ => None,
    }
}

/// Whether the GPU backends' FiLM kernels take tensors of `dtypes`: all f32, or all f16 or all
/// bf16 (a half-precision forward's).
pub fn film_dtypes(dtypes: &[DType]) -> bool {
    dtypes.first().is_some_and(|&first| kernel_float(first) && dtypes.iter().all(|&d| d == first))
}

/// FiLM's scale and shift of `x` `[B, C, T]` by `embedding` `[B, 2C]` (each sample's scales,
/// then its shifts), in the backend's kernel and, under autodiff, its backward kernel
/// ([`NormKernels::film_forward`], [`NormKernels::film_backward`]): one launch each way where burn's
/// operations take about four forward and nine backward. Elsewhere burn's operations
/// ([`portable::film`]).
pub fn film<B: NormKernels>(x: Tensor<B, 3>, embedding: Tensor<B, 2>) -> Tensor<B, 3> {
    match B::film_forward(x.clone().into_primitive().tensor(), embedding.clone().into_primitive().tensor()) {
        Some(y) => Tensor::from_primitive(TensorPrimitive::Float(y)),
        None => portable::film(x, embedding),
    }
}

/// GroupNorm of `x` `[N, C, S]` (f32; on the GPU backends also f16 or bf16, read and written in
/// its dtype, computed in f32) in `groups` groups, scaled by `gamma` and shifted by
/// `beta` (`[C]`), as PyTorch computes it (`(x − μ) / √(σ² + ε) · γ + β`, biased variance),
/// then `activation`, in the backend's fused pass and, under autodiff, its fused backward pass
/// ([`NormKernels::group_norm_forward`], [`NormKernels::group_norm_backward`]). `None` where the backend
/// has none: compose burn's operations then.
pub fn group_norm<B: NormKernels>(
    x: Tensor<B, 3>,
    [gamma, beta]: [Tensor<B, 1>; 2],
    groups: usize,
    epsilon: f64,
    activation: Activation,
) -> Option<Tensor<B, 3>> {
    let (x, gamma, beta) =
        (x.into_primitive().tensor(), gamma.into_primitive().tensor(), beta.into_primitive().tensor());
    let (y, _stats) = B::group_norm_forward(x, gamma, beta, groups, epsilon, activation)?;
    Some(Tensor::from_primitive(TensorPrimitive::Float(y)))
}

/// BatchNorm in training mode of `x` `[N, C, S]` (f32): normalised by each channel's mean and
/// biased variance over the batch and positions, scaled by `gamma` and shifted by `beta`
/// (`[C]`), as PyTorch computes it, then `activation`, in the backend's fused pass and, under
/// autodiff, its fused backward pass ([`NormKernels::batch_norm_forward`],
/// [`NormKernels::batch_norm_backward`]). Returns the output and the batch's mean and biased
/// variance per channel (`[C]`, outside the graph), from which the caller updates the running
/// statistics. `None` where the backend has none: compose burn's operations then.
pub fn batch_norm<B: NormKernels>(
    x: Tensor<B, 3>,
    [gamma, beta]: [Tensor<B, 1>; 2],
    epsilon: f64,
    activation: Activation,
) -> Option<(Tensor<B, 3>, Tensor<B, 1>, Tensor<B, 1>)> {
    let (x, gamma, beta) =
        (x.into_primitive().tensor(), gamma.into_primitive().tensor(), beta.into_primitive().tensor());
    let (y, stats) = B::batch_norm_forward(x, gamma, beta, epsilon, activation)?;
    let stats = Tensor::<B, 2>::from_primitive(TensorPrimitive::Float(stats));
    let channels = stats.dims()[0];
    let column = |i: usize| stats.clone().slice(s![.., i..i + 1]).reshape([channels]);
    Some((Tensor::from_primitive(TensorPrimitive::Float(y)), column(0), column(2)))
}
