//! The operations written with burn's tensor operations: any backend runs them, and they are the
//! reference the CPU's fused passes are tested against.

use burn::prelude::*;
use burn::tensor::ops::{FloatTensor, IntTensor, MaxPool2dWithIndices};
use burn::tensor::{FloatDType, TensorMetadata, TensorPrimitive};

use crate::{Activation, AdamStep, FlatBuffers};

fn tensor<B: Backend>(primitive: FloatTensor<B>) -> Tensor<B, 1> {
    Tensor::from_primitive(TensorPrimitive::Float(primitive))
}

fn primitive<B: Backend>(tensor: Tensor<B, 1>) -> FloatTensor<B> {
    tensor.into_primitive().tensor()
}

/// [`crate::OptimiserKernels::concat_flat`]: each part reshaped to one dimension (a copy when it is a
/// strided view), cast to f32, concatenated.
pub fn concat_flat<B: Backend>(parts: Vec<FloatTensor<B>>, device: &B::Device) -> FloatTensor<B> {
    if parts.is_empty() {
        return primitive(Tensor::<B, 1>::zeros([0], device));
    }
    let flat: Vec<Tensor<B, 1>> = parts
        .into_iter()
        .map(|part| {
            let n = part.shape().num_elements();
            tensor::<B>(B::float_reshape(part, [n].into())).cast(FloatDType::F32)
        })
        .collect();
    primitive(Tensor::cat(flat, 0))
}

/// [`crate::OptimiserKernels::clip_factors`] in burn's operations, each its own launch on a GPU.
pub fn clip_factors<B: Backend>(squares: FloatTensor<B>, max_norm: f64, grad_scale: f64) -> [FloatTensor<B>; 2] {
    let norm = tensor::<B>(squares).sqrt();
    let norm = if grad_scale == 1.0 { norm } else { norm.div_scalar(grad_scale) };
    let clip = if max_norm > 0.0 {
        (norm.ones_like().mul_scalar(max_norm) / norm.clone().add_scalar(CLIP_EPSILON)).clamp_max(1.0)
    } else {
        norm.ones_like()
    };
    let scale = if grad_scale == 1.0 { clip } else { clip.div_scalar(grad_scale) };
    [primitive(norm), primitive(scale)]
}

/// What torch's `clip_grad_norm_` adds to the norm before dividing by it.
pub const CLIP_EPSILON: f64 = 1e-6;

/// [`crate::ConvolutionKernels::max_pool2d_indexed`]: burn's `max_pool2d_with_indices`, dilation 1, the
/// output size rounded down.
pub fn max_pool2d_indexed<B: Backend>(
    x: FloatTensor<B>,
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
) -> MaxPool2dWithIndices<B> {
    B::max_pool2d_with_indices(x, kernel, stride, padding, [1, 1], false)
}

/// [`crate::ConvolutionKernels::max_pool2d_input_grad`]: burn's `max_pool2d_with_indices_backward`.
pub fn max_pool2d_input_grad<B: Backend>(
    x: FloatTensor<B>,
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
    output_grad: FloatTensor<B>,
    indices: IntTensor<B>,
) -> FloatTensor<B> {
    B::max_pool2d_with_indices_backward(x, kernel, stride, padding, [1, 1], false, output_grad, indices).x_grad
}

/// `Σ x²` in f32, `[1]`.
pub fn sum_of_squares<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    primitive(tensor::<B>(x).cast(FloatDType::F32).square().sum())
}

/// [`sum_of_squares`] in a fixed order: rows of [`SQUARES_ROW`] elements, each summed by one
/// reduction, then the row sums (and what is left past the last whole row). burn's whole-tensor
/// sum on cubecl adds its cubes' parts with atomics, in no fixed order; this gives the same bits
/// on every run.
pub fn sum_of_squares_by_rows<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    let x = tensor::<B>(x).cast(FloatDType::F32);
    let n = x.dims()[0];
    let rows = n / SQUARES_ROW;
    let whole = rows * SQUARES_ROW;
    let tail = (whole < n).then(|| x.clone().slice(whole..n).square().sum_dim(0));
    if rows == 0 {
        return primitive(tail.unwrap_or_else(|| x.sum()));
    }
    let rows_sum = x.slice(0..whole).reshape([rows, SQUARES_ROW]).square().sum_dim(1).reshape([rows]).sum_dim(0);
    primitive(match tail {
        Some(tail) => rows_sum + tail,
        None => rows_sum,
    })
}

/// The elements of a row of [`sum_of_squares_by_rows`].
pub const SQUARES_ROW: usize = 1 << 16;

/// [`crate::OptimiserKernels::adam_update`], one tensor operation at a time, in torch's order.
pub fn adam_update<B: Backend>(
    weights: FloatTensor<B>,
    flat: &mut FlatBuffers<B>,
    offset: usize,
    scale: &FloatTensor<B>,
    step: &AdamStep,
) -> FloatTensor<B> {
    let c = step.constants();
    let w = tensor::<B>(weights);
    let range = offset..offset + w.dims()[0];
    let mut g = tensor::<B>(flat.grads.clone()).slice(range.clone()) * tensor::<B>(scale.clone());
    if c.weight_decay != 0.0 {
        g = g + w.clone().mul_scalar(c.weight_decay);
    }
    // The buffers are taken out of `flat` (an empty tensor left in their place) so that the
    // range's assignment holds their only handle and can write in place.
    let device = w.device();
    let take = |buffer: &mut FloatTensor<B>| {
        tensor::<B>(std::mem::replace(buffer, primitive(Tensor::<B, 1>::empty([0], &device))))
    };
    let moment_1 = take(&mut flat.moment_1);
    let m = moment_1.clone().slice(range.clone());
    let m = m.clone() + (g.clone() - m).mul_scalar(c.one_minus_beta_1);
    let moment_2 = take(&mut flat.moment_2);
    let v = moment_2.clone().slice(range.clone());
    let v = v.mul_scalar(c.beta_2) + g.clone().mul_scalar(c.one_minus_beta_2) * g;
    let denominator = v.clone().sqrt().div_scalar(c.bias_correction_2_sqrt).add_scalar(c.epsilon);
    let w = w + (m.clone() / denominator).mul_scalar(-c.step_size);
    flat.moment_1 = primitive(moment_1.slice_assign(range.clone(), m));
    flat.moment_2 = primitive(moment_2.slice_assign(range.clone(), v));
    if let (Some(average), Some(weight)) = (&mut flat.average, step.ema_weight) {
        let all = take(average);
        let a = all.clone().slice(range.clone());
        let a = if weight >= 1.0 { w.clone() } else { a.clone() + (w.clone() - a).mul_scalar(weight) };
        *average = primitive(all.slice_assign(range, a));
    }
    primitive(w)
}

/// `activation` of `y`, composed of burn's operations. Mish's softplus is written
/// `relu(y) + ln(1 + e^{−|y|})`, which cannot overflow (burn's `ln(eʸ + 1)` does beyond y ≈ 11
/// in f16).
pub fn activate<B: Backend, const D: usize>(y: Tensor<B, D>, activation: Activation) -> Tensor<B, D> {
    match activation {
        Activation::Identity => y,
        Activation::Relu => burn::tensor::activation::relu(y),
        Activation::Mish => y.clone() * softplus(y).tanh(),
    }
}

/// The derivative of `activation` at `y`, composed of burn's operations.
pub fn activation_derivative<B: Backend, const D: usize>(y: Tensor<B, D>, activation: Activation) -> Tensor<B, D> {
    match activation {
        Activation::Identity => y.ones_like(),
        Activation::Relu => y.greater_elem(0.0).float(),
        Activation::Mish => {
            // tanh(sp(y)) + y · (1 − tanh²(sp(y))) · σ(y), σ being softplus's derivative.
            let t = softplus(y.clone()).tanh();
            let sigmoid = burn::tensor::activation::sigmoid(y.clone());
            t.clone() + y * (t.clone() * t).neg().add_scalar(1.0) * sigmoid
        }
    }
}

/// `ln(1 + eʸ)` as `relu(y) + ln(1 + e^{−|y|})`.
fn softplus<B: Backend, const D: usize>(y: Tensor<B, D>) -> Tensor<B, D> {
    burn::tensor::activation::relu(y.clone()) + y.abs().neg().exp().log1p()
}

/// The gradient reaching a norm's output before its activation: `dy · f'(x̂·γ + β)`, `x̂`
/// `[N, C, S]`, `gamma` and `beta` `[C]` (nothing to compute for the identity).
fn through_activation<B: Backend>(
    dy: Tensor<B, 3>,
    x_hat: Tensor<B, 3>,
    [gamma, beta]: [Tensor<B, 1>; 2],
    activation: Activation,
) -> Tensor<B, 3> {
    if activation == Activation::Identity {
        return dy;
    }
    let c = gamma.dims()[0];
    let y = x_hat * gamma.reshape([1, c, 1]) + beta.reshape([1, c, 1]);
    dy * activation_derivative(y, activation)
}

/// The gradients of GroupNorm followed by `activation` (`x` `[N, C, S]`, `gamma` and `beta`
/// `[C]`, `stats` each group's mean and `1/√(σ² + ε)`, `[N, groups, 2]`) with respect to `x`,
/// `gamma` and `beta`: with `x̂ = (x − μ)·r`, `dy` the gradient before the activation and
/// `g = dy·γ`, `dx = r·(g − mean(g) − x̂·mean(g·x̂))` over each group, `dγ = Σ dy·x̂` and
/// `dβ = Σ dy` over samples and positions.
pub fn group_norm_backward<B: Backend>(
    x: FloatTensor<B>,
    [gamma, beta]: [FloatTensor<B>; 2],
    stats: FloatTensor<B>,
    output_grad: FloatTensor<B>,
    groups: usize,
    activation: Activation,
) -> [FloatTensor<B>; 3] {
    let float = |t: FloatTensor<B>| TensorPrimitive::Float(t);
    let x = Tensor::<B, 3>::from_primitive(float(x));
    let dy = Tensor::<B, 3>::from_primitive(float(output_grad));
    let gamma = Tensor::<B, 1>::from_primitive(float(gamma));
    let beta = Tensor::<B, 1>::from_primitive(float(beta));
    let stats = Tensor::<B, 3>::from_primitive(float(stats));
    let [n, c, s] = x.dims();
    let per_group = c / groups * s;
    let mean = stats.clone().slice(s![.., .., 0..1]);
    let inv_std = stats.slice(s![.., .., 1..2]);
    let x_hat = (x.reshape([n, groups, per_group]) - mean) * inv_std.clone();
    let x_hat_channels = x_hat.clone().reshape([n, c, s]);
    let dy = through_activation(dy, x_hat_channels.clone(), [gamma.clone(), beta], activation);
    let dgamma = (dy.clone() * x_hat_channels).sum_dim(2).sum_dim(0).reshape([c]);
    let dbeta = dy.clone().sum_dim(2).sum_dim(0).reshape([c]);
    let g = (dy * gamma.reshape([1, c, 1])).reshape([n, groups, per_group]);
    let mean_g = g.clone().mean_dim(2);
    let mean_g_x_hat = (g.clone() * x_hat.clone()).mean_dim(2);
    let dx = (g - mean_g - x_hat * mean_g_x_hat) * inv_std;
    [dx.reshape([n, c, s]).into_primitive().tensor(), primitive(dgamma), primitive(dbeta)]
}

/// The gradients of BatchNorm in training mode followed by `activation` (`x` `[N, C, S]`,
/// `gamma` and `beta` `[C]`, `stats` each channel's mean, `1/√(σ² + ε)` and `σ²`, `[C, 3]`)
/// with respect to `x`, `gamma` and `beta`: with `x̂ = (x − μ)·r` over each channel's
/// `M = N·S` values and `dy` the gradient before the activation, `dβ = Σ dy`, `dγ = Σ dy·x̂` and
/// `dx = γ·r·(dy − dβ/M − x̂·dγ/M)`.
pub fn batch_norm_backward<B: Backend>(
    x: FloatTensor<B>,
    [gamma, beta]: [FloatTensor<B>; 2],
    stats: FloatTensor<B>,
    output_grad: FloatTensor<B>,
    activation: Activation,
) -> [FloatTensor<B>; 3] {
    let float = |t: FloatTensor<B>| TensorPrimitive::Float(t);
    let x = Tensor::<B, 3>::from_primitive(float(x));
    let dy = Tensor::<B, 3>::from_primitive(float(output_grad));
    let gamma = Tensor::<B, 1>::from_primitive(float(gamma));
    let beta = Tensor::<B, 1>::from_primitive(float(beta));
    let stats = Tensor::<B, 2>::from_primitive(float(stats));
    let [n, c, s] = x.dims();
    let per_channel = |column: usize| stats.clone().slice(s![.., column..column + 1]).reshape([1, c, 1]);
    let (mean, inv_std) = (per_channel(0), per_channel(1));
    let x_hat = (x - mean) * inv_std.clone();
    let dy = through_activation(dy, x_hat.clone(), [gamma.clone(), beta], activation);
    let channel_sum = |t: Tensor<B, 3>| t.sum_dim(2).sum_dim(0); // [1, C, 1]
    let dbeta = channel_sum(dy.clone());
    let dgamma = channel_sum(dy.clone() * x_hat.clone());
    let count = (n * s) as f64;
    let centered = dy - dbeta.clone().div_scalar(count) - x_hat * dgamma.clone().div_scalar(count);
    let dx = centered * (inv_std * gamma.reshape([1, c, 1]));
    [dx.into_primitive().tensor(), primitive(dgamma.reshape([c])), primitive(dbeta.reshape([c]))]
}

/// FiLM's scale and shift of `x` `[B, C, T]` by `embedding` `[B, 2C]` (each sample's scales,
/// then its shifts): `y = embedding[.., c]·x + embedding[.., C + c]`, as burn's operations.
pub fn film<B: Backend>(x: Tensor<B, 3>, embedding: Tensor<B, 2>) -> Tensor<B, 3> {
    let [b, c, _] = x.dims();
    let scale = embedding.clone().slice(s![.., 0..c]).reshape([b, c, 1]);
    let shift = embedding.slice(s![.., c..2 * c]).reshape([b, c, 1]);
    scale * x + shift
}

/// The gradients of [`film`] with respect to `x` and `embedding`, given the output's:
/// `dx = scale·dy`, and for each sample and channel `Σ_t dy·x` (the scale's) and `Σ_t dy` (the
/// shift's).
pub fn film_backward<B: Backend>(
    x: FloatTensor<B>,
    embedding: FloatTensor<B>,
    output_grad: FloatTensor<B>,
) -> [FloatTensor<B>; 2] {
    let x = Tensor::<B, 3>::from_primitive(TensorPrimitive::Float(x));
    let embedding = Tensor::<B, 2>::from_primitive(TensorPrimitive::Float(embedding));
    let dy = Tensor::<B, 3>::from_primitive(TensorPrimitive::Float(output_grad));
    let [b, c, _] = x.dims();
    let scale = embedding.slice(s![.., 0..c]).reshape([b, c, 1]);
    let dx = dy.clone() * scale;
    let d_scale = (dy.clone() * x).sum_dim(2).reshape([b, c]);
    let d_shift = dy.sum_dim(2).reshape([b, c]);
    [dx.into_primitive().tensor(), Tensor::cat(vec![d_scale, d_shift], 1).into_primitive().tensor()]
}

/// [`crate::ConvolutionKernels::add_channel_bias`]: `bias` reshaped to `[1, C, 1, ..]` and added, as burn
/// broadcasts it.
pub fn add_channel_bias<B: Backend>(y: FloatTensor<B>, bias: FloatTensor<B>) -> FloatTensor<B> {
    let shape = y.shape();
    let mut bias_shape = vec![1; shape.num_dims()];
    bias_shape[1] = shape[1];
    B::float_add(y, B::float_reshape(bias, bias_shape.into()))
}

/// [`crate::ConvolutionKernels::matrix_product`]: burn's `matmul` of the operands, each
/// transposed (a view: burn's product takes strides) where asked.
pub fn matrix_product<B: Backend>(
    a: FloatTensor<B>,
    a_transposed: bool,
    b: FloatTensor<B>,
    b_transposed: bool,
) -> FloatTensor<B> {
    let op = |t: FloatTensor<B>, transposed: bool| if transposed { B::float_swap_dims(t, 0, 1) } else { t };
    B::float_matmul(op(a, a_transposed), op(b, b_transposed))
}

/// [`crate::ConvolutionKernels::channel_bias_grad`]: `output_grad` summed over each dimension but the
/// second, one after the other (as burn's broadcast sums a bias's gradient), then `[C]`.
pub fn channel_bias_grad<B: Backend>(output_grad: FloatTensor<B>) -> FloatTensor<B> {
    let shape = output_grad.shape();
    let summed = (0..shape.num_dims()).filter(|&dim| dim != 1).fold(output_grad, B::float_sum_dim);
    B::float_reshape(summed, [shape[1]].into())
}
