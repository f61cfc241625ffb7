//! burn's cubecl backends' own kernels (CUDA, wgpu):
//!
//! - the optimiser pass: the gradients gathered into the flat buffer and the fused update, each
//!   a kernel that takes many parameters per launch (up to [`MAX_PARTS_PER_LAUNCH`], as the
//!   device's bindings allow), where the portable versions are a launch per parameter for the
//!   gather and some twenty of burn's operations per parameter for the update; in mixed
//!   precision the gather casts the half-precision gradients up as it copies them, and the
//!   update writes the new weights' half-precision copies beside them; where the weights are
//!   views of one buffer ([`Kernels::weight_views`]), the update is one launch over it
//!   ([`adam_views_kernel`]), which can also total the squares the gather left as partial sums
//!   and compute the clipping factors itself;
//! - GroupNorm with the activation after it: one launch forward (a cube per group: mean, then
//!   variance, then the output), two backward (the input's gradient, a cube per group; the
//!   scale's and shift's, a cube per channel), where burn's operations take about ten launches
//!   forward and twenty backward; in a half-precision step it reads and writes the compute
//!   dtype, computing in f32;
//! - FiLM, one launch each way, and a bias's gradient along the channels, a cube per channel;
//! - YUV 4:2:0 frames to RGB in one launch, in the decoder's integer arithmetic.
//!
//! With burn's fusion on, the backends are `Fusion` over these, which runs the same kernels as
//! its custom operations (`fusion.rs`).
//!
//! A launch of the gather, or of the update of weights held tensor by tensor, takes up to
//! [`MAX_PARTS_PER_LAUNCH`] parameters. The update gives each one row of cubes (the grid's
//! second axis), as torch's `multi_tensor_apply` hands each block one tensor's chunk: each unit
//! picks its parameter once, by its cube's row, then strides over that parameter's elements. The
//! gather has every unit stride over each of its parameters in turn, so that each cube's sum of
//! squares covers all of them: a launch leaves one partial sum a cube, few enough for every cube
//! of the views' update to total them.
//! (The first version gave one unit to each element of the flat range and had it search the
//! launch's 64 ranges for its own: on an H200 that search, and the gather's decoding of every
//! position through the shape with 64-bit divisions, held the gather at 20 ms and the update at
//! 9 ms for PushT's 263 million parameters, against 0.5 and 1.7 ms of memory traffic.)
#![expect(unsafe_code, reason = "cubecl launches a kernel without bounds checks only through unsafe")]

mod gather;
mod views;

use burn::tensor::ops::{ConvOptions, ConvTransposeOptions, FloatTensor, FloatTensorOps, IntTensor, ModuleOps};
use burn::tensor::{DType, FloatDType, Shape, TensorMetadata};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{BoolElement, CubeBackend, CubeRuntime, FloatElement, IntElement};
use cubecl::CubeDim;
use cubecl::prelude::*;

use self::gather::{clip_partials, gather, gathers_all, partials_len, sizes, total};
use crate::{
    Activation, AdamStep, FlatBuffers, Kernels, PartialSquares, RuntimeLibraries, UpdatedWeights, ViewPlaces,
    ViewTable, ViewsUpdate, Yuv420Terms, portable,
};

/// The most parameters one launch of the gather (or of the update of weights held tensor by
/// tensor) takes, unless [`PARTS_PER_LAUNCH_VAR`] says otherwise: the kernel is unrolled over
/// them, and each is a binding or two. 71 gathers PushT's 212 gradients in three launches, so
/// that its clipping and update take four. Not many more: unrolled over all of PushT's
/// parameters at once, the gather and the update did not finish compiling in 100 s on an H200
/// (bench/RESULTS.md, "Seventh contact"); 64 compiled in every contact, and 71, 11% more code, is
/// yet to be timed on a GPU.
pub const MAX_PARTS_PER_LAUNCH: usize = 71;

/// The variable that sets how many parameters a launch takes at most, 1 to
/// [`PARTS_PER_LAUNCH_LIMIT`], in place of [`MAX_PARTS_PER_LAUNCH`]: so that a GPU machine, which
/// has no compiler for a new build, can time the compilation of other widths (PushT's 212
/// gradients gather in four launches at 64, in two at 106), and a user whose first step compiles
/// too long can narrow it.
pub const PARTS_PER_LAUNCH_VAR: &str = "LEROBOT_RS_PARTS_PER_LAUNCH";

/// The widest [`PARTS_PER_LAUNCH_VAR`] taken. On CUDA each part adds about 36 bytes to a
/// kernel's parameters (its pointer, lengths, shape and strides, its place), whose limit is
/// 32,764 bytes: about 900 parts. 512 keeps well under it, though a gather that wide is known to
/// compile too slowly (it had not finished after 100 s on an H200, bench/RESULTS.md, "Seventh
/// contact").
pub const PARTS_PER_LAUNCH_LIMIT: usize = 512;

/// The parameters a launch takes at most: [`PARTS_PER_LAUNCH_VAR`] where it is set to a number
/// from 1 to [`PARTS_PER_LAUNCH_LIMIT`] (read once), else [`MAX_PARTS_PER_LAUNCH`].
fn parts_per_launch() -> usize {
    static PARTS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *PARTS.get_or_init(|| {
        let Ok(text) = std::env::var(PARTS_PER_LAUNCH_VAR) else { return MAX_PARTS_PER_LAUNCH };
        match text.parse::<usize>() {
            Ok(parts @ 1..=PARTS_PER_LAUNCH_LIMIT) => parts,
            _ => {
                tracing::warn!(
                    "{PARTS_PER_LAUNCH_VAR}={text:?} is not from 1 to {PARTS_PER_LAUNCH_LIMIT}: {MAX_PARTS_PER_LAUNCH}"
                );
                MAX_PARTS_PER_LAUNCH
            }
        }
    })
}

/// The update's scalars ([`crate::AdamConstants`], the average's weight).
#[derive(CubeLaunch, CubeType)]
struct AdamScalars {
    weight_decay: f32,
    one_minus_beta_1: f32,
    beta_2: f32,
    one_minus_beta_2: f32,
    bias_correction_2_sqrt: f32,
    epsilon: f32,
    step_size: f32,
    ema_weight: f32,
}

/// Adam's update of element `j` of the flat buffers, whose weight is `w`, in [`AdamStep`]'s
/// (torch's) order of operations, the decay added only where there is one (as the CPU's pass and
/// the portable operations do): writes the moments and, when `has_average`, the average at `j`
/// in place, and returns the new weight.
#[cube]
#[expect(clippy::too_many_arguments, reason = "a kernel's buffers are its arguments")]
fn adam_element<F: Float>(
    w: F,
    j: usize,
    grads: &Tensor<F>,
    moment_1: &mut Tensor<F>,
    moment_2: &mut Tensor<F>,
    average: &mut Tensor<F>,
    scale: F,
    scalars: &AdamScalars,
    #[comptime] has_weight_decay: bool,
    #[comptime] has_average: bool,
) -> F {
    let mut g = grads[j] * scale;
    if has_weight_decay {
        g += w * F::cast_from(scalars.weight_decay);
    }
    let m = moment_1[j] + (g - moment_1[j]) * F::cast_from(scalars.one_minus_beta_1);
    let v = moment_2[j] * F::cast_from(scalars.beta_2) + g * F::cast_from(scalars.one_minus_beta_2) * g;
    let denominator = F::sqrt(v) / F::cast_from(scalars.bias_correction_2_sqrt) + F::cast_from(scalars.epsilon);
    let w = w + m / denominator * -F::cast_from(scalars.step_size);
    moment_1[j] = m;
    moment_2[j] = v;
    if has_average {
        let ema = F::cast_from(scalars.ema_weight);
        if ema >= F::new(1.0) {
            average[j] = w;
        } else {
            average[j] = average[j] + (w - average[j]) * ema;
        }
    }
    w
}

/// The units of cube row `t` stride over parameter `t`'s elements `i`: `weights[t][i]` updated in
/// place (each unit reads its element, then writes it) from itself and the flat buffers' element
/// `j = starts[t] + i` ([`adam_element`]), which also updates the moments and, when
/// `has_average`, the average in place. With `has_copies`, `copies[t][i]` is the new weight cast
/// to `H`, as burn's cast kernel casts it.
#[cube(launch_unchecked)]
#[expect(clippy::too_many_arguments, reason = "a kernel's buffers are its arguments")]
fn adam_kernel<F: Float, H: Float>(
    weights: &mut Sequence<Tensor<F>>,
    copies: &mut Sequence<Tensor<H>>,
    starts: Sequence<usize>,
    lens: Sequence<usize>,
    grads: &Tensor<F>,
    moment_1: &mut Tensor<F>,
    moment_2: &mut Tensor<F>,
    average: &mut Tensor<F>,
    scale: &Tensor<F>,
    scalars: &AdamScalars,
    #[comptime] has_weight_decay: bool,
    #[comptime] has_average: bool,
    #[comptime] has_copies: bool,
    #[define(F, H)] _dtypes: [StorageType; 2],
) {
    let count = comptime!(weights.len());
    let stride = (CUBE_COUNT_X * CUBE_DIM_X) as usize;
    let factor = scale[0];
    #[unroll]
    for t in 0..count {
        if CUBE_POS_Y as usize == t {
            let (start, len) = (starts[t], lens[t]);
            let mut i = ABSOLUTE_POS_X as usize;
            while i < len {
                let w = adam_element::<F>(
                    weights[t][i],
                    start + i,
                    grads,
                    moment_1,
                    moment_2,
                    average,
                    factor,
                    scalars,
                    has_weight_decay,
                    has_average,
                );
                let out = weights.index_mut(t);
                out[i] = w;
                if has_copies {
                    let copy = copies.index_mut(t);
                    copy[i] = H::cast_from(w);
                }
                i += stride;
            }
        }
    }
}

/// The sum of `values[..len]` in one cube, each unit a stride of them, in a fixed order,
/// returned to every unit. A unit keeps four sums, so that four of its loads are in flight at
/// once: with one, the H200 waited on each load in turn, 318 µs for the 217,000 partial sums
/// PushT's gather left when it gave each parameter its own row of cubes.
#[cube]
fn cube_total<F: Float>(values: &Tensor<F>, len: usize) -> F {
    let stride = CUBE_DIM_X as usize;
    let (mut s0, mut s1, mut s2, mut s3) = (F::new(0.0), F::new(0.0), F::new(0.0), F::new(0.0));
    let mut i = UNIT_POS_X as usize;
    while i + 3 * stride < len {
        s0 += values[i];
        s1 += values[i + stride];
        s2 += values[i + 2 * stride];
        s3 += values[i + 3 * stride];
        i += 4 * stride;
    }
    while i < len {
        s0 += values[i];
        i += stride;
    }
    let sum = (s0 + s1) + (s2 + s3);
    let mut partial = SharedMemory::<F>::new(UNITS_PER_CUBE as usize);
    cube_sum::<F>(&mut partial, sum)
}

/// One cube sums `values[..len]` into `total[0]` ([`cube_total`]).
#[cube(launch_unchecked)]
fn sum_kernel<F: Float>(values: &Tensor<F>, len: usize, total: &mut Tensor<F>, #[define(F)] _dtype: StorageType) {
    let all = cube_total::<F>(values, len);
    if UNIT_POS_X == 0 {
        total[0] = all;
    }
}

/// How the gradients are clipped ([`crate::Kernels::clip_factors`]'s arguments, and torch's
/// epsilon).
#[derive(CubeLaunch, CubeType)]
struct ClipScalars {
    max_norm: f32,
    epsilon: f32,
    grad_scale: f32,
}

/// The scalars of a launch that clips to `max_norm` (not at all when it is 0) gradients that
/// carry `grad_scale`.
fn clip_scalars<R: Runtime>(max_norm: f64, grad_scale: f64) -> ClipScalarsLaunch<R> {
    ClipScalarsLaunch::new(max_norm as f32, portable::CLIP_EPSILON as f32, grad_scale as f32)
}

/// The norm of [`crate::Kernels::clip_factors`] from the gradients' `Σ g²`, with the composed
/// operations' roundings, in their order.
#[cube]
fn clip_norm<F: Float>(squares: F, clip: &ClipScalars) -> F {
    let mut n = F::sqrt(squares);
    if clip.grad_scale != 1.0 {
        n /= F::cast_from(clip.grad_scale);
    }
    n
}

/// The scale of [`crate::Kernels::clip_factors`] from the norm `n` ([`clip_norm`]), with the
/// composed operations' roundings, in their order; `clips` when `max_norm` is over 0.
#[cube]
fn clip_scale<F: Float>(n: F, clip: &ClipScalars, #[comptime] clips: bool) -> F {
    let mut factor = F::new(1.0);
    if clips {
        factor = F::min(F::cast_from(clip.max_norm) / (n + F::cast_from(clip.epsilon)), F::new(1.0));
    }
    if clip.grad_scale != 1.0 {
        factor /= F::cast_from(clip.grad_scale);
    }
    factor
}

/// One cube sums the squares' partial sums `values[..len]` ([`cube_total`]) and writes the
/// clipping factors of the total ([`crate::Kernels::clip_factors`]): `norm[0]` ([`clip_norm`])
/// and `scale[0]` ([`clip_scale`]). Of one value (the squares already summed), the total is
/// that value.
#[cube(launch_unchecked)]
fn sum_clip_kernel<F: Float>(
    values: &Tensor<F>,
    len: usize,
    norm: &mut Tensor<F>,
    scale: &mut Tensor<F>,
    clip: &ClipScalars,
    #[comptime] clips: bool,
    #[define(F)] _dtype: StorageType,
) {
    let all = cube_total::<F>(values, len);
    if UNIT_POS_X == 0 {
        let n = clip_norm::<F>(all, clip);
        norm[0] = n;
        scale[0] = clip_scale::<F>(n, clip, clips);
    }
}

/// The activation a norm kernel applies, as a compile-time number ([`Activation`]'s order).
fn activation_code(activation: Activation) -> u32 {
    match activation {
        Activation::Identity => 0,
        Activation::Relu => 1,
        Activation::Mish => 2,
    }
}

/// `activation` (by [`activation_code`]) of `y`, as [`Activation::apply`] computes it.
#[cube]
fn activate<F: Float>(y: F, #[comptime] activation: u32) -> F {
    if comptime!(activation == 1) {
        F::max(y, F::new(0.0))
    } else if comptime!(activation == 2) {
        // Mish as `y · n / (n + 2)`, `n = e^y (e^y + 2)`; the identity above 20.
        let e = F::exp(F::min(y, F::new(20.0)));
        let n = e * (e + F::new(2.0));
        select(y > F::new(20.0), y, y * n / (n + F::new(2.0)))
    } else {
        y
    }
}

/// The sum of every unit's `value` in the cube, by halves in `partial` (one slot per unit; the
/// cube's width a power of two), returned to every unit.
#[cube]
fn cube_sum<F: Float>(partial: &mut SharedMemory<F>, value: F) -> F {
    let unit = UNIT_POS_X as usize;
    partial[unit] = value;
    sync_cube();
    let mut width = CUBE_DIM_X as usize / 2;
    while width > 0 {
        if unit < width {
            partial[unit] = partial[unit] + partial[unit + width];
        }
        sync_cube();
        width /= 2;
    }
    let total = partial[0];
    // No unit overwrites `partial` for the next sum before every unit has read this one.
    sync_cube();
    total
}

/// Cube `k` normalises group `k` of GroupNorm's `x` `[N, C, S]` (`k = n·groups + g`; its
/// `group_len` values lie contiguous from `k·group_len`): the mean, then the biased variance
/// about it (two passes, as the CPU's), then `y = act((x − μ)·r·γ + β)` with `r = 1/√(σ² + ε)`;
/// `stats[2k]` and `stats[2k + 1]` take `μ` and `r`. `x` and `y` are in `X` (f32, or a
/// half-precision forward's dtype), everything else in `F` (f32), which it computes in.
#[cube(launch_unchecked)]
#[expect(clippy::too_many_arguments, reason = "a kernel's buffers are its arguments")]
fn group_norm_kernel<X: Float, F: Float>(
    x: &Tensor<X>,
    gamma: &Tensor<F>,
    beta: &Tensor<F>,
    y: &mut Tensor<X>,
    stats: &mut Tensor<F>,
    group_len: usize,
    positions: usize,
    channels_per_group: usize,
    groups: usize,
    epsilon: f32,
    #[comptime] activation: u32,
    #[define(X, F)] _dtypes: [StorageType; 2],
) {
    let group = CUBE_POS_X as usize;
    let start = group * group_len;
    let first_channel = (group % groups) * channels_per_group;
    let units = CUBE_DIM_X as usize;
    let mut partial = SharedMemory::<F>::new(UNITS_PER_CUBE as usize);
    let count = F::cast_from(group_len);

    let mut sum = F::new(0.0);
    let mut i = UNIT_POS_X as usize;
    while i < group_len {
        sum += F::cast_from(x[start + i]);
        i += units;
    }
    let mean = cube_sum::<F>(&mut partial, sum) / count;

    let mut squares = F::new(0.0);
    let mut i = UNIT_POS_X as usize;
    while i < group_len {
        let d = F::cast_from(x[start + i]) - mean;
        squares += d * d;
        i += units;
    }
    let variance = cube_sum::<F>(&mut partial, squares) / count;
    let inv_std = F::new(1.0) / F::sqrt(variance + F::cast_from(epsilon));

    let mut i = UNIT_POS_X as usize;
    while i < group_len {
        let channel = first_channel + i / positions;
        let normalised = (F::cast_from(x[start + i]) - mean) * inv_std * gamma[channel] + beta[channel];
        y[start + i] = X::cast_from(activate::<F>(normalised, activation));
        i += units;
    }
    if UNIT_POS_X == 0 {
        stats[2 * group] = mean;
        stats[2 * group + 1] = inv_std;
    }
}

/// The derivative of `activation` (by [`activation_code`]) at `y`, as
/// [`Activation::derivative`] computes it.
#[cube]
fn activation_derivative<F: Float>(y: F, #[comptime] activation: u32) -> F {
    if comptime!(activation == 1) {
        select(y > F::new(0.0), F::new(1.0), F::new(0.0))
    } else if comptime!(activation == 2) {
        // `n / d + y · 4e^y (e^y + 1) / d²`, `n = e^y (e^y + 2)`, `d = n + 2`; 1 above 20.
        let e = F::exp(F::min(y, F::new(20.0)));
        let n = e * (e + F::new(2.0));
        let d = n + F::new(2.0);
        select(y > F::new(20.0), F::new(1.0), n / d + y * F::new(4.0) * e * (e + F::new(1.0)) / (d * d))
    } else {
        F::new(1.0)
    }
}

/// The gradient before the activation at element `at` of channel `channel`: `dy · act'(y)`
/// with `y = x̂·γ + β` recomputed from `x̂`.
#[cube]
fn gradient_before_activation<X: Float, F: Float>(
    output_grad: &Tensor<X>,
    gamma: &Tensor<F>,
    beta: &Tensor<F>,
    at: usize,
    channel: usize,
    x_hat: F,
    #[comptime] activation: u32,
) -> F {
    let dy = F::cast_from(output_grad[at]);
    if comptime!(activation == 0) {
        dy
    } else {
        dy * activation_derivative::<F>(x_hat * gamma[channel] + beta[channel], activation)
    }
}

/// Cube `k` computes GroupNorm's input gradient over group `k` (laid out as in
/// [`group_norm_kernel`]): with `dz` the gradient before the activation and `g = dz·γ`,
/// `dx = r·(g − mean(g) − x̂·mean(g·x̂))`, both means over the group (each a cube sum).
#[cube(launch_unchecked)]
#[expect(clippy::too_many_arguments, reason = "a kernel's buffers are its arguments")]
fn group_norm_input_grad_kernel<X: Float, F: Float>(
    x: &Tensor<X>,
    gamma: &Tensor<F>,
    beta: &Tensor<F>,
    stats: &Tensor<F>,
    output_grad: &Tensor<X>,
    input_grad: &mut Tensor<X>,
    group_len: usize,
    positions: usize,
    channels_per_group: usize,
    groups: usize,
    #[comptime] activation: u32,
    #[define(X, F)] _dtypes: [StorageType; 2],
) {
    let group = CUBE_POS_X as usize;
    let start = group * group_len;
    let first_channel = (group % groups) * channels_per_group;
    let (mean, inv_std) = (stats[2 * group], stats[2 * group + 1]);
    let units = CUBE_DIM_X as usize;
    let mut partial = SharedMemory::<F>::new(UNITS_PER_CUBE as usize);
    let count = F::cast_from(group_len);

    let mut sum_g = F::new(0.0);
    let mut sum_g_x_hat = F::new(0.0);
    let mut i = UNIT_POS_X as usize;
    while i < group_len {
        let channel = first_channel + i / positions;
        let x_hat = (F::cast_from(x[start + i]) - mean) * inv_std;
        let g = gradient_before_activation::<X, F>(output_grad, gamma, beta, start + i, channel, x_hat, activation)
            * gamma[channel];
        sum_g += g;
        sum_g_x_hat += g * x_hat;
        i += units;
    }
    let mean_g = cube_sum::<F>(&mut partial, sum_g) / count;
    let mean_g_x_hat = cube_sum::<F>(&mut partial, sum_g_x_hat) / count;

    let mut i = UNIT_POS_X as usize;
    while i < group_len {
        let channel = first_channel + i / positions;
        let x_hat = (F::cast_from(x[start + i]) - mean) * inv_std;
        let g = gradient_before_activation::<X, F>(output_grad, gamma, beta, start + i, channel, x_hat, activation)
            * gamma[channel];
        input_grad[start + i] = X::cast_from((g - mean_g - x_hat * mean_g_x_hat) * inv_std);
        i += units;
    }
}

/// Cube `c` sums GroupNorm's scale and shift gradients of channel `c` over the samples and
/// positions: `dγ = Σ dz·x̂`, `dβ = Σ dz` (`dz` the gradient before the activation), its units a
/// stride of the channel's `samples·positions` values each, then the cube's halves (a fixed
/// order). (A unit per channel walking them all in turn left a GPU nearly idle on the encoder's
/// maps: 64 channels of 128 samples × 441 positions.)
#[cube(launch_unchecked)]
#[expect(clippy::too_many_arguments, reason = "a kernel's buffers are its arguments")]
fn group_norm_affine_grad_kernel<X: Float, F: Float>(
    x: &Tensor<X>,
    gamma: &Tensor<F>,
    beta: &Tensor<F>,
    stats: &Tensor<F>,
    output_grad: &Tensor<X>,
    gamma_grad: &mut Tensor<F>,
    beta_grad: &mut Tensor<F>,
    samples: usize,
    channels: usize,
    positions: usize,
    channels_per_group: usize,
    #[comptime] activation: u32,
    #[define(X, F)] _dtypes: [StorageType; 2],
) {
    let channel = CUBE_POS_X as usize;
    let groups = channels / channels_per_group;
    let group_of_channel = channel / channels_per_group;
    let mut sum_dz_x_hat = F::new(0.0);
    let mut sum_dz = F::new(0.0);
    let mut k = UNIT_POS_X as usize;
    while k < samples * positions {
        let sample = k / positions;
        let group = sample * groups + group_of_channel;
        let (mean, inv_std) = (stats[2 * group], stats[2 * group + 1]);
        let at = (sample * channels + channel) * positions + k % positions;
        let x_hat = (F::cast_from(x[at]) - mean) * inv_std;
        let dz = gradient_before_activation::<X, F>(output_grad, gamma, beta, at, channel, x_hat, activation);
        sum_dz_x_hat += dz * x_hat;
        sum_dz += dz;
        k += CUBE_DIM_X as usize;
    }
    let mut partial = SharedMemory::<F>::new(UNITS_PER_CUBE as usize);
    let total_dz_x_hat = cube_sum::<F>(&mut partial, sum_dz_x_hat);
    let total_dz = cube_sum::<F>(&mut partial, sum_dz);
    if UNIT_POS_X == 0 {
        gamma_grad[channel] = total_dz_x_hat;
        beta_grad[channel] = total_dz;
    }
}

/// One fixed-point term of YUV → RGB ([`crate::FixedPointTerm`]), its shift folded into the
/// multiplier (`multiplier · 2^shift`: the same products, and no left shift of a negative
/// value, which C++ leaves undefined).
#[derive(CubeLaunch, CubeType)]
struct YuvTerm {
    offset: i32,
    multiplier: i32,
}

/// `(value − offset) · multiplier >> 16`, the shift arithmetic.
#[cube]
fn yuv_term(value: i32, term: &YuvTerm) -> i32 {
    ((value - term.offset) * term.multiplier) >> 16
}

/// `value` clamped to [0, 255], over 255.
#[cube]
fn yuv_level<F: Float>(value: i32) -> F {
    let clamped = select(value < 0, 0, select(value > 255, 255, value));
    F::cast_from(clamped) / F::new(255.0)
}

/// The units of the launch stride over the `total` pixels of YUV 4:2:0 frames (`planes`, each
/// frame's luma of `area` bytes, rows of `width`, then its two chroma planes of `chroma_len` bytes, rows of
/// `chroma_width`), each writing its pixel's R, G and B (`rgb`, `[frames, 3, height, width]`)
/// as levels over 255, from its luma and the chroma sample of its 2×2 block, in integers.
#[cube(launch_unchecked)]
#[expect(clippy::too_many_arguments, reason = "a kernel's buffers and sizes are its arguments")]
fn yuv420_kernel<I: Int, F: Float>(
    planes: &Tensor<I>,
    rgb: &mut Tensor<F>,
    total: usize,
    area: usize,
    width: usize,
    chroma_width: usize,
    chroma_len: usize,
    luma: &YuvTerm,
    red_v: &YuvTerm,
    green_u: &YuvTerm,
    green_v: &YuvTerm,
    blue_u: &YuvTerm,
    #[define(I, F)] _dtypes: [StorageType; 2],
) {
    let stride = (CUBE_COUNT_X * CUBE_DIM_X) as usize;
    let mut i = ABSOLUTE_POS_X as usize;
    while i < total {
        let frame = i / area;
        let pixel = i % area;
        let start = frame * (area + 2 * chroma_len);
        let chroma = (pixel / width / 2) * chroma_width + (pixel % width) / 2;
        let y = yuv_term(i32::cast_from(planes[start + pixel]), luma);
        let u = i32::cast_from(planes[start + area + chroma]);
        let v = i32::cast_from(planes[start + area + chroma_len + chroma]);
        let out = frame * 3 * area + pixel;
        rgb[out] = yuv_level::<F>(y + yuv_term(v, red_v));
        rgb[out + area] = yuv_level::<F>(y + yuv_term(u, green_u) + yuv_term(v, green_v));
        rgb[out + 2 * area] = yuv_level::<F>(y + yuv_term(u, blue_u));
        i += stride;
    }
}

/// The units of the launch stride over FiLM's `x` `[B, C, T]` (contiguous, `total` elements):
/// `y = embedding[b, c]·x + embedding[b, C + c]`, `embedding` `[B, 2C]`, in their dtype `F`.
#[cube(launch_unchecked)]
fn film_kernel<F: Float>(
    x: &Tensor<F>,
    embedding: &Tensor<F>,
    y: &mut Tensor<F>,
    total: usize,
    channels: usize,
    positions: usize,
    #[define(F)] _dtype: StorageType,
) {
    let stride = (CUBE_COUNT_X * CUBE_DIM_X) as usize;
    let mut i = ABSOLUTE_POS_X as usize;
    while i < total {
        let row = i / positions;
        let scale_at = row + (row / channels) * channels;
        y[i] = embedding[scale_at] * x[i] + embedding[scale_at + channels];
        i += stride;
    }
}

/// The units of the launch stride over FiLM's rows (sample `b`, channel `c`; `rows` in all),
/// each taking its `positions` in order: `dx = scale·dy`, and the row's `Σ dy·x` and `Σ dy` into
/// `embedding_grad[b, c]` and `embedding_grad[b, C + c]`, summed in `A` (f32: in a
/// half-precision forward, as torch's reductions accumulate).
#[cube(launch_unchecked)]
#[expect(clippy::too_many_arguments, reason = "a kernel's buffers are its arguments")]
fn film_backward_kernel<F: Float, A: Float>(
    x: &Tensor<F>,
    embedding: &Tensor<F>,
    output_grad: &Tensor<F>,
    input_grad: &mut Tensor<F>,
    embedding_grad: &mut Tensor<F>,
    rows: usize,
    channels: usize,
    positions: usize,
    #[define(F, A)] _dtypes: [StorageType; 2],
) {
    let stride = (CUBE_COUNT_X * CUBE_DIM_X) as usize;
    let mut row = ABSOLUTE_POS_X as usize;
    while row < rows {
        let scale_at = row + (row / channels) * channels;
        let scale = embedding[scale_at];
        let mut sum_dy_x = A::new(0.0);
        let mut sum_dy = A::new(0.0);
        for t in 0..positions {
            let at = row * positions + t;
            let dy = output_grad[at];
            input_grad[at] = dy * scale;
            sum_dy_x += A::cast_from(dy) * A::cast_from(x[at]);
            sum_dy += A::cast_from(dy);
        }
        embedding_grad[scale_at] = F::cast_from(sum_dy_x);
        embedding_grad[scale_at + channels] = F::cast_from(sum_dy);
        row += stride;
    }
}

/// Cube `c` sums channel `c` of `output_grad` `[N, C, S]` (contiguous, f32 or a half
/// precision) over the samples and positions in f32, its units a stride each and then the
/// cube's halves, into `bias_grad[c]` (in `output_grad`'s dtype).
#[cube(launch_unchecked)]
fn channel_bias_grad_kernel<F: Float>(
    output_grad: &Tensor<F>,
    bias_grad: &mut Tensor<F>,
    channels: usize,
    positions: usize,
    #[define(F)] _dtype: StorageType,
) {
    let channel = CUBE_POS_X as usize;
    let count = output_grad.len() / channels;
    let mut sum = f32::new(0.0);
    let mut i = UNIT_POS_X as usize;
    while i < count {
        let (sample, position) = (i / positions, i % positions);
        sum += f32::cast_from(output_grad[(sample * channels + channel) * positions + position]);
        i += CUBE_DIM_X as usize;
    }
    let mut partial = SharedMemory::<f32>::new(UNITS_PER_CUBE as usize);
    let total = cube_sum::<f32>(&mut partial, sum);
    if UNIT_POS_X == 0 {
        bias_grad[channel] = F::cast_from(total);
    }
}

/// Cubes for a launch whose units stride over `n` items: one unit each, up to the grid's
/// 65,535 cubes along one axis.
pub(crate) fn striding_cubes(n: usize) -> CubeCount {
    CubeCount::new_1d(n.div_ceil(UNITS_PER_CUBE as usize).clamp(1, u16::MAX as usize) as u32)
}

/// A tensor whose buffer this call may write: the tensor itself when no other handle shares it
/// and it is contiguous, else a contiguous copy.
fn writable<R: CubeRuntime>(tensor: CubeTensor<R>) -> CubeTensor<R> {
    if tensor.can_mut() && tensor.is_contiguous() { tensor } else { tensor.copy() }
}

/// A new contiguous f32 tensor of `shape`, its values unset.
fn empty_f32<R: CubeRuntime>(like: &CubeTensor<R>, shape: Shape) -> CubeTensor<R> {
    empty_like(like, shape, DType::F32)
}

/// A new contiguous tensor of `shape` and `dtype` on `like`'s device, its values unset.
pub(crate) fn empty_like<R: CubeRuntime>(like: &CubeTensor<R>, shape: Shape, dtype: DType) -> CubeTensor<R> {
    let bytes = shape.num_elements() * dtype.size();
    CubeTensor::new_contiguous(like.client.clone(), like.device.clone(), shape, like.client.empty(bytes), dtype)
}

/// The most parameters a launch takes: [`parts_per_launch`], fewer where the device binds fewer
/// buffers to a kernel (`bindings_per_part` each, beside the flat buffers and cubecl's metadata).
fn launch_width<R: CubeRuntime>(client: &ComputeClient<R>, bindings_per_part: usize) -> usize {
    let bindings = client.properties().hardware.max_bindings as usize;
    (bindings.saturating_sub(8) / bindings_per_part).clamp(1, parts_per_launch())
}

/// The most cubes a part's row has; beyond them, each unit strides over several elements.
const MAX_CUBES_PER_PART: usize = 1024;

/// The most partial squares every cube of the views' update totals itself
/// ([`Kernels::adam_update_views_clipping`]): 64 loads a unit at most. A gather of PushT leaves a
/// few thousand (three launches of up to 1,024 cubes); narrowed to a few parameters a launch, it
/// can leave far more, and the factors are then computed apart first.
const MAX_PARTIALS_IN_UPDATE: usize = 16_384;

/// Units in a cube, all along x.
pub(crate) const UNITS_PER_CUBE: u32 = 256;

/// A launch's grid over parts of `lens` elements: one row of cubes per part, as many as the
/// longest needs at one element per unit, at most [`MAX_CUBES_PER_PART`].
fn grid(lens: &[usize]) -> (CubeCount, CubeDim) {
    // One row of units (the kernels stride along x alone).
    let cube_dim = CubeDim::new_1d(UNITS_PER_CUBE);
    (CubeCount::new_2d(cubes_per_row(lens) as u32, lens.len() as u32), cube_dim)
}

/// The cubes of each row of [`grid`]`(lens)`.
fn cubes_per_row(lens: &[usize]) -> usize {
    let longest = lens.iter().copied().max().unwrap_or(1).max(1);
    longest.div_ceil(UNITS_PER_CUBE as usize).clamp(1, MAX_CUBES_PER_PART)
}

impl<R: RuntimeLibraries, F: FloatElement, I: IntElement, BT: BoolElement> Kernels for CubeBackend<R, F, I, BT> {
    fn has_conv2d_products(dtype: DType) -> bool {
        R::library_takes(dtype)
    }

    fn has_conv1d_products(dtype: DType) -> bool {
        R::library_takes_conv1d(dtype)
    }

    fn conv2d_no_bias(x: FloatTensor<Self>, weight: FloatTensor<Self>, options: ConvOptions<2>) -> FloatTensor<Self> {
        match R::library_conv2d(&x, &weight, &options) {
            Some(y) => y,
            None => <Self as ModuleOps<Self>>::conv2d(x, weight, None, options),
        }
    }

    fn conv2d_input_grad(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self> {
        match R::library_conv2d_input_grad(&x, &weight, &output_grad, &options) {
            Some(dx) => dx,
            None => <Self as ModuleOps<Self>>::conv2d_x_backward(x, weight, output_grad, options),
        }
    }

    fn conv2d_weight_grad(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self> {
        match R::library_conv2d_weight_grad(&x, &weight, &output_grad, &options) {
            Some(dw) => dw,
            None => <Self as ModuleOps<Self>>::conv2d_weight_backward(x, weight, output_grad, options),
        }
    }

    fn conv_transpose2d_no_bias(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        options: ConvTransposeOptions<2>,
    ) -> FloatTensor<Self> {
        match R::library_conv_transpose2d(&x, &weight, &options) {
            Some(y) => y,
            None => <Self as ModuleOps<Self>>::conv_transpose2d(x, weight, None, options),
        }
    }

    fn has_group_norm_kernels() -> bool {
        true
    }

    fn group_norm_forward(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        groups: usize,
        epsilon: f64,
        activation: Activation,
    ) -> Option<(FloatTensor<Self>, FloatTensor<Self>)> {
        if !crate::group_norm_dtypes(x.dtype, &[gamma.dtype, beta.dtype]) {
            return None;
        }
        let [samples, channels, positions] =
            crate::group_norm_shape(x.shape().as_slice(), gamma.meta.num_elements(), beta.meta.num_elements(), groups)?;
        let (x, gamma, beta) = (into_contiguous(x), into_contiguous(gamma), into_contiguous(beta));
        let y = empty_like(&x, x.shape(), x.dtype);
        let stats = empty_f32(&x, [samples, groups, 2].into());
        let channels_per_group = channels / groups;
        // SAFETY: cube `k < samples·groups` reads `x` and writes `y` at `k·group_len + i` for
        // `i < group_len`, within their `samples·channels·positions` elements (both
        // contiguous, `y` new), `gamma` and `beta` at channels below `channels` (their
        // lengths, checked), and writes `stats` at `2k` and `2k + 1`, within its
        // `samples·groups·2`; no two cubes write one element.
        unsafe {
            group_norm_kernel::launch_unchecked::<R>(
                &x.client,
                CubeCount::new_1d((samples * groups) as u32),
                CubeDim::new_1d(UNITS_PER_CUBE),
                x.clone().into_tensor_arg(),
                gamma.into_tensor_arg(),
                beta.into_tensor_arg(),
                y.clone().into_tensor_arg(),
                stats.clone().into_tensor_arg(),
                channels_per_group * positions,
                positions,
                channels_per_group,
                groups,
                epsilon as f32,
                activation_code(activation),
                [x.dtype.into(), DType::F32.into()],
            );
        }
        Some((y, stats))
    }

    fn group_norm_backward(
        x: FloatTensor<Self>,
        [gamma, beta]: [FloatTensor<Self>; 2],
        stats: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        groups: usize,
        activation: Activation,
    ) -> [FloatTensor<Self>; 3] {
        let shape = x.shape();
        let sizes =
            crate::group_norm_shape(shape.as_slice(), gamma.meta.num_elements(), beta.meta.num_elements(), groups);
        let takes_dtypes =
            output_grad.dtype == x.dtype && crate::group_norm_dtypes(x.dtype, &[gamma.dtype, beta.dtype, stats.dtype]);
        let fits = |[samples, _, _]: &[usize; 3]| {
            stats.meta.num_elements() == samples * groups * 2 && output_grad.shape() == shape
        };
        let Some([samples, channels, positions]) = sizes.filter(|sizes| takes_dtypes && fits(sizes)) else {
            return portable::group_norm_backward::<Self>(x, [gamma, beta], stats, output_grad, groups, activation);
        };
        let [x, gamma, beta, stats, output_grad] = [x, gamma, beta, stats, output_grad].map(into_contiguous);
        let input_grad = empty_like(&x, shape, x.dtype);
        let dtypes = [x.dtype.into(), DType::F32.into()];
        let gamma_grad = empty_f32(&x, [channels].into());
        let beta_grad = empty_f32(&x, [channels].into());
        let channels_per_group = channels / groups;
        let client = x.client.clone();
        let code = activation_code(activation);
        // SAFETY: as the forward pass's: cube `k < samples·groups` reads `x` and
        // `output_grad` (the same shape, checked) and writes `input_grad` at `k·group_len + i`,
        // `i < group_len`, all contiguous; `stats` at `2k + 1` at most, within its
        // `samples·groups·2` (checked); `gamma` and `beta` below `channels`.
        unsafe {
            group_norm_input_grad_kernel::launch_unchecked::<R>(
                &client,
                CubeCount::new_1d((samples * groups) as u32),
                CubeDim::new_1d(UNITS_PER_CUBE),
                x.clone().into_tensor_arg(),
                gamma.clone().into_tensor_arg(),
                beta.clone().into_tensor_arg(),
                stats.clone().into_tensor_arg(),
                output_grad.clone().into_tensor_arg(),
                input_grad.clone().into_tensor_arg(),
                channels_per_group * positions,
                positions,
                channels_per_group,
                groups,
                code,
                dtypes,
            );
        }
        // SAFETY: cube `c < channels` reads channel `c` of every sample of `x` and
        // `output_grad`, `stats` of its groups, within their lengths, and writes element `c` of
        // `gamma_grad` and `beta_grad`, new, of `channels` elements.
        unsafe {
            group_norm_affine_grad_kernel::launch_unchecked::<R>(
                &client,
                CubeCount::new_1d(channels as u32),
                CubeDim::new_1d(UNITS_PER_CUBE),
                x.into_tensor_arg(),
                gamma.into_tensor_arg(),
                beta.into_tensor_arg(),
                stats.into_tensor_arg(),
                output_grad.into_tensor_arg(),
                gamma_grad.clone().into_tensor_arg(),
                beta_grad.clone().into_tensor_arg(),
                samples,
                channels,
                positions,
                channels_per_group,
                code,
                dtypes,
            );
        }
        [input_grad, gamma_grad, beta_grad]
    }

    fn channel_bias_grad(output_grad: FloatTensor<Self>) -> FloatTensor<Self> {
        let shape = output_grad.shape();
        let channels = if shape.num_dims() >= 2 { shape[1] } else { 0 };
        let fits = crate::kernel_float(output_grad.dtype) && channels > 0 && channels <= u16::MAX as usize;
        if !fits || shape.num_elements() == 0 {
            return portable::channel_bias_grad::<Self>(output_grad);
        }
        let output_grad = into_contiguous(output_grad);
        let dtype = output_grad.dtype;
        let bias_grad = empty_like(&output_grad, [channels].into(), dtype);
        let positions = shape.num_elements() / shape[0] / channels;
        // SAFETY: cube `c < C` reads `output_grad` (contiguous, `N·C·S` elements) at
        // `(n·C + c)·S + s` for `n < N`, `s < S`, and writes `bias_grad[c]`, new, of `C`.
        unsafe {
            channel_bias_grad_kernel::launch_unchecked::<R>(
                &output_grad.client,
                CubeCount::new_1d(channels as u32),
                CubeDim::new_1d(UNITS_PER_CUBE),
                output_grad.clone().into_tensor_arg(),
                bias_grad.clone().into_tensor_arg(),
                channels,
                positions,
                dtype.into(),
            );
        }
        bias_grad
    }

    fn has_film_kernels() -> bool {
        true
    }

    fn has_yuv420_kernel() -> bool {
        true
    }

    fn yuv420_to_rgb(
        planes: IntTensor<Self>,
        frames: usize,
        (height, width): (usize, usize),
        terms: &Yuv420Terms,
        dtype: FloatDType,
    ) -> Option<FloatTensor<Self>> {
        if !crate::yuv::yuv420_kernel_takes(planes.meta.num_elements(), frames, (height, width)) {
            return None;
        }
        let planes = into_contiguous(planes);
        let rgb = empty_like(&planes, Shape::new([frames, 3, height, width]), dtype.into());
        let total = frames * height * width;
        let chroma_width = width.div_ceil(2);
        let term = |t: crate::FixedPointTerm| YuvTermLaunch::new(t.offset, t.multiplier << t.shift);
        // SAFETY: unit `i < total` (pixel `p` of frame `f`, `f < frames`) reads `planes` at
        // `f·frame_len` plus `p` and two chroma offsets under `frame_len` (the planes hold
        // `frames · frame_len` values, contiguous; checked), and writes `rgb` at `f·3·H·W + p`
        // plus `0`, `H·W` and `2·H·W`: within `[frames, 3, H, W]`, new and contiguous.
        unsafe {
            yuv420_kernel::launch_unchecked::<R>(
                &planes.client,
                striding_cubes(total),
                CubeDim::new_1d(UNITS_PER_CUBE),
                planes.clone().into_tensor_arg(),
                rgb.clone().into_tensor_arg(),
                total,
                height * width,
                width,
                chroma_width,
                height.div_ceil(2) * chroma_width,
                term(terms.luma),
                term(terms.red_v),
                term(terms.green_u),
                term(terms.green_v),
                term(terms.blue_u),
                [planes.dtype.into(), rgb.dtype.into()],
            );
        }
        Some(rgb)
    }

    fn upload_u8(bytes: &[u8], shape: Shape, device: &Self::Device) -> Option<IntTensor<Self>> {
        R::upload_u8(bytes, shape, device)
    }

    fn film_forward(x: FloatTensor<Self>, embedding: FloatTensor<Self>) -> Option<FloatTensor<Self>> {
        let takes_dtypes = crate::film_dtypes(&[x.dtype, embedding.dtype]);
        let [_, channels, positions] =
            crate::film_shape(x.shape().as_slice(), embedding.shape().as_slice()).filter(|_| takes_dtypes)?;
        let [x, embedding] = [x, embedding].map(into_contiguous);
        let total = x.meta.num_elements();
        let y = empty_like(&x, x.shape(), x.dtype);
        // SAFETY: unit `i < total` reads `x` at `i` and `embedding` at `b·2C + c` and
        // `b·2C + C + c` (`b < B`, `c < C`: within `[B, 2C]`, checked by `film_shape`), and writes
        // `y` at `i`; all contiguous, `y` new, of `x`'s shape.
        unsafe {
            film_kernel::launch_unchecked::<R>(
                &x.client,
                striding_cubes(total),
                CubeDim::new_1d(UNITS_PER_CUBE),
                x.clone().into_tensor_arg(),
                embedding.into_tensor_arg(),
                y.clone().into_tensor_arg(),
                total,
                channels,
                positions,
                y.dtype.into(),
            );
        }
        Some(y)
    }

    fn film_backward(
        x: FloatTensor<Self>,
        embedding: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
    ) -> [FloatTensor<Self>; 2] {
        let takes_dtypes = crate::film_dtypes(&[x.dtype, embedding.dtype, output_grad.dtype]);
        let sizes = crate::film_shape(x.shape().as_slice(), embedding.shape().as_slice());
        let Some([samples, channels, positions]) = sizes.filter(|_| takes_dtypes && output_grad.shape() == x.shape())
        else {
            return portable::film_backward::<Self>(x, embedding, output_grad);
        };
        let [x, embedding, output_grad] = [x, embedding, output_grad].map(into_contiguous);
        let input_grad = empty_like(&x, x.shape(), x.dtype);
        let embedding_grad = empty_like(&x, embedding.shape(), x.dtype);
        let dtypes = [x.dtype.into(), DType::F32.into()];
        let rows = samples * channels;
        // SAFETY: unit `row < B·C` reads and writes its row's `T` elements of `x`,
        // `output_grad` and `input_grad` (all `[B, C, T]`, contiguous; checked), and reads and
        // writes `embedding` and `embedding_grad` (`[B, 2C]`) at `b·2C + c` and `b·2C + C + c`.
        unsafe {
            film_backward_kernel::launch_unchecked::<R>(
                &x.client,
                striding_cubes(rows),
                CubeDim::new_1d(UNITS_PER_CUBE),
                x.clone().into_tensor_arg(),
                embedding.into_tensor_arg(),
                output_grad.into_tensor_arg(),
                input_grad.clone().into_tensor_arg(),
                embedding_grad.clone().into_tensor_arg(),
                rows,
                channels,
                positions,
                dtypes,
            );
        }
        [input_grad, embedding_grad]
    }

    fn sum_of_squares(x: FloatTensor<Self>) -> FloatTensor<Self> {
        portable::sum_of_squares_by_rows::<Self>(x)
    }

    fn concat_flat(
        parts: Vec<FloatTensor<Self>>,
        reuse: Option<FloatTensor<Self>>,
        device: &Self::Device,
    ) -> FloatTensor<Self> {
        if !gathers_all(&sizes(&parts)) {
            return portable::concat_flat::<Self>(parts, device);
        }
        gather(parts, reuse, false).0
    }

    fn concat_flat_with_squares(
        parts: Vec<FloatTensor<Self>>,
        reuse: Option<FloatTensor<Self>>,
        device: &Self::Device,
    ) -> [FloatTensor<Self>; 2] {
        if !gathers_all(&sizes(&parts)) {
            return crate::concat_flat_then_squares::<Self>(parts, reuse, device);
        }
        let (flat, partials) = gather(parts, reuse, true);
        [flat, total(partials.expect("the partial sums, asked for"))]
    }

    fn concat_flat_with_partial_squares(
        parts: Vec<FloatTensor<Self>>,
        reuse: Option<FloatTensor<Self>>,
        device: &Self::Device,
    ) -> [FloatTensor<Self>; 2] {
        if !gathers_all(&sizes(&parts)) {
            return crate::concat_flat_then_squares::<Self>(parts, reuse, device);
        }
        let (flat, partials) = gather(parts, reuse, true);
        [flat, partials.expect("the partial sums, asked for")]
    }

    fn partial_squares_len(parts: &[(usize, DType)], device: &Self::Device) -> usize {
        if !gathers_all(parts) {
            return 1;
        }
        partials_len(&R::client(device), parts)
    }

    fn clip_partial_squares(squares: &PartialSquares<Self>) -> [FloatTensor<Self>; 2] {
        let partials = &squares.partials;
        if partials.dtype != DType::F32 || partials.meta.num_dims() != 1 || partials.meta.num_elements() == 0 {
            return portable::clip_factors::<Self>(
                Self::float_sum(partials.clone()),
                squares.max_norm,
                squares.grad_scale,
            );
        }
        clip_partials(into_contiguous(partials.clone()), squares.max_norm, squares.grad_scale)
    }

    fn clip_factors(squares: FloatTensor<Self>, max_norm: f64, grad_scale: f64) -> [FloatTensor<Self>; 2] {
        if squares.dtype != DType::F32 || squares.meta.num_elements() != 1 {
            return portable::clip_factors::<Self>(squares, max_norm, grad_scale);
        }
        clip_partials(into_contiguous(squares), max_norm, grad_scale)
    }

    fn adam_update(
        weights: FloatTensor<Self>,
        flat: &mut FlatBuffers<Self>,
        offset: usize,
        scale: &FloatTensor<Self>,
        step: &AdamStep,
    ) -> FloatTensor<Self> {
        let mut updated = Self::adam_update_all(vec![weights], &[offset], flat, scale, step);
        updated.pop().expect("one parameter in, one out")
    }

    fn adam_update_all(
        weights: Vec<FloatTensor<Self>>,
        offsets: &[usize],
        flat: &mut FlatBuffers<Self>,
        scale: &FloatTensor<Self>,
        step: &AdamStep,
    ) -> Vec<FloatTensor<Self>> {
        if !kernel_updates(&weights, offsets, flat, scale, None) {
            return portable_update_each(weights, offsets, flat, scale, step);
        }
        // SAFETY: `kernel_updates` holds, checked just above.
        unsafe { update_all(weights, offsets, flat, scale, step, None) }.weights
    }

    fn adam_update_all_with_copies(
        weights: Vec<FloatTensor<Self>>,
        offsets: &[usize],
        flat: &mut FlatBuffers<Self>,
        scale: &FloatTensor<Self>,
        step: &AdamStep,
        copy: FloatDType,
    ) -> UpdatedWeights<Self> {
        if !kernel_updates(&weights, offsets, flat, scale, Some(copy.into())) {
            return crate::update_then_cast::<Self>(weights, offsets, flat, scale, step, copy);
        }
        // SAFETY: `kernel_updates` holds, checked just above.
        unsafe { update_all(weights, offsets, flat, scale, step, Some(copy.into())) }
    }

    fn weight_view_alignment(device: &Self::Device) -> Option<usize> {
        Some(R::client(device).properties().memory.alignment as usize)
    }

    fn largest_allocation(device: &Self::Device) -> Option<u64> {
        Some(R::client(device).properties().memory.max_page_size)
    }

    fn weight_views(flat: FloatTensor<Self>, places: &ViewPlaces) -> Vec<FloatTensor<Self>> {
        views::weight_views(flat, places.starts(), places.lens())
    }

    fn adam_update_views(
        weights: FloatTensor<Self>,
        copies: Option<FloatTensor<Self>>,
        table: &ViewTable<Self>,
        flat: &mut FlatBuffers<Self>,
        scale: &FloatTensor<Self>,
        step: &AdamStep,
    ) -> (FloatTensor<Self>, Option<FloatTensor<Self>>) {
        views::check_views_update(&weights, copies.as_ref(), table, flat, scale);
        // SAFETY: `check_views_update` holds, checked just above.
        let (weights, copies, _) =
            unsafe { views::update_views(weights, copies, table, flat, views::Scaling::Factor(scale), step) };
        (weights, copies)
    }

    fn adam_update_views_clipping(
        weights: FloatTensor<Self>,
        copies: Option<FloatTensor<Self>>,
        table: &ViewTable<Self>,
        flat: &mut FlatBuffers<Self>,
        squares: &PartialSquares<Self>,
        step: &AdamStep,
    ) -> ViewsUpdate<Self> {
        let PartialSquares { partials, max_norm, grad_scale } = squares;
        if partials.meta.num_elements() > MAX_PARTIALS_IN_UPDATE {
            // Too many for every cube to total (a gather narrowed to few parameters a launch):
            // the factors first, in a launch of their own, to the same bits.
            return crate::clip_then_update_views::<Self>(weights, copies, table, flat, squares, step);
        }
        views::check_views_update(&weights, copies.as_ref(), table, flat, partials);
        let scaling = views::Scaling::Clip { partials, max_norm: *max_norm, grad_scale: *grad_scale };
        // SAFETY: `check_views_update` holds, checked just above.
        let (weights, copies, factors) = unsafe { views::update_views(weights, copies, table, flat, scaling, step) };
        let [norm, scale] = factors.expect("the clipping's factors, asked for");
        ViewsUpdate { weights, copies, norm, scale }
    }
}

/// The buffers an update writes beside the weights, taken out of the optimiser's
/// [`FlatBuffers`] for the launch (each then held once, [`writable`]) and put back after.
struct AdamState<R: CubeRuntime> {
    moment_1: CubeTensor<R>,
    moment_2: CubeTensor<R>,
    /// The average, or where none moves, the second moment standing in (never read).
    average: CubeTensor<R>,
    /// Whether the step moves the average.
    has_average: bool,
}

impl<R: CubeRuntime> AdamState<R> {
    /// The moments and, where `step` moves one, the average, taken out of `flat`.
    fn take<F: FloatElement, I: IntElement, BT: BoolElement>(
        flat: &mut FlatBuffers<CubeBackend<R, F, I, BT>>,
        step: &AdamStep,
    ) -> Self {
        let take = |buffer: &mut CubeTensor<R>| {
            let empty = empty_f32(buffer, [0].into());
            writable(std::mem::replace(buffer, empty))
        };
        let moment_1 = take(&mut flat.moment_1);
        let moment_2 = take(&mut flat.moment_2);
        let has_average = flat.average.is_some() && step.ema_weight.is_some();
        let average = match &mut flat.average {
            Some(average) if has_average => take(average),
            _ => moment_2.clone(),
        };
        Self { moment_1, moment_2, average, has_average }
    }

    /// Puts the buffers back into `flat`, updated.
    fn put_back<F: FloatElement, I: IntElement, BT: BoolElement>(
        self,
        flat: &mut FlatBuffers<CubeBackend<R, F, I, BT>>,
    ) {
        flat.moment_1 = self.moment_1;
        flat.moment_2 = self.moment_2;
        if self.has_average {
            flat.average = Some(self.average);
        }
    }
}

/// The scalars of an update's launch: `step`'s constants and the average's weight.
fn adam_scalars<R: Runtime>(step: &AdamStep) -> AdamScalarsLaunch<R> {
    let c = step.constants();
    AdamScalarsLaunch::new(
        c.weight_decay,
        c.one_minus_beta_1,
        c.beta_2,
        c.one_minus_beta_2,
        c.bias_correction_2_sqrt,
        c.epsilon,
        c.step_size,
        step.ema_weight.unwrap_or(0.0),
    )
}

/// [`portable::adam_update`] on each parameter in turn.
fn portable_update_each<R: RuntimeLibraries, F: FloatElement, I: IntElement, BT: BoolElement>(
    weights: Vec<CubeTensor<R>>,
    offsets: &[usize],
    flat: &mut FlatBuffers<CubeBackend<R, F, I, BT>>,
    scale: &CubeTensor<R>,
    step: &AdamStep,
) -> Vec<CubeTensor<R>> {
    weights
        .into_iter()
        .zip(offsets)
        .map(|(w, &offset)| portable::adam_update::<CubeBackend<R, F, I, BT>>(w, flat, offset, scale, step))
        .collect()
}

/// Whether [`adam_kernel`] takes these tensors, and copies in `copy`. It reads and writes
/// without bounds checks: every flat buffer must hold each parameter's range, in f32, and the
/// scale its one value; anything else takes the portable operations (and their errors), one
/// parameter at a time.
fn kernel_updates<R: RuntimeLibraries, F: FloatElement, I: IntElement, BT: BoolElement>(
    weights: &[CubeTensor<R>],
    offsets: &[usize],
    flat: &FlatBuffers<CubeBackend<R, F, I, BT>>,
    scale: &CubeTensor<R>,
    copy: Option<DType>,
) -> bool {
    assert_eq!(weights.len(), offsets.len(), "one offset per parameter");
    let ends: Vec<usize> = weights.iter().zip(offsets).map(|(w, &offset)| offset + w.meta.num_elements()).collect();
    let end = ends.iter().copied().max().unwrap_or(0);
    let holds_ranges = |t: &CubeTensor<R>| t.dtype == DType::F32 && t.meta.num_elements() >= end;
    // Each unit writes its element's moments: the ranges must come in order, apart.
    let apart = (1..offsets.len()).all(|k| ends[k - 1] <= offsets[k]);
    let fits = apart
        && weights.iter().all(|w| w.dtype == DType::F32 && w.meta.num_elements() > 0)
        && scale.dtype == DType::F32
        && scale.meta.num_elements() >= 1
        && [&flat.grads, &flat.moment_1, &flat.moment_2].into_iter().chain(flat.average.as_ref()).all(holds_ranges);
    let copies_fit = copy.is_none_or(|dtype| matches!(dtype, DType::F16 | DType::BF16));
    !weights.is_empty() && fits && copies_fit
}

/// The update of every parameter by [`adam_kernel`], in as few launches as the device's bindings
/// allow, with the new weights' copies in `copy` when one is asked for.
///
/// # Safety
/// [`kernel_updates`] holds for these tensors and `copy`: the kernel reads and writes them
/// without bounds checks.
unsafe fn update_all<R: RuntimeLibraries, F: FloatElement, I: IntElement, BT: BoolElement>(
    weights: Vec<CubeTensor<R>>,
    offsets: &[usize],
    flat: &mut FlatBuffers<CubeBackend<R, F, I, BT>>,
    scale: &CubeTensor<R>,
    step: &AdamStep,
    copy: Option<DType>,
) -> UpdatedWeights<CubeBackend<R, F, I, BT>> {
    let state = AdamState::take(flat, step);
    let grads = into_contiguous(flat.grads.clone());
    let scale = into_contiguous(scale.clone());
    // Written in place: the trainer hands over the model's only handles (a shared one is copied
    // first), so a step allocates no new weights.
    let weights: Vec<CubeTensor<R>> = weights.into_iter().map(|w| writable(into_contiguous(w))).collect();
    // Every parameter gets its copy (the norm layers' too, which the forward leaves in f32:
    // a few kilobytes, where leaving them out would split the launches).
    let copy_dtype = copy.unwrap_or(DType::F32);
    let copies: Vec<CubeTensor<R>> = match copy {
        Some(dtype) => weights.iter().map(|w| empty_like(w, w.shape(), dtype)).collect(),
        None => Vec::new(),
    };
    let client = grads.client.clone();
    let bindings_per_part = if copy.is_some() { 2 } else { 1 };
    for range in crate::gather_plan::even_runs(weights.len(), launch_width(&client, bindings_per_part)) {
        let starts = &offsets[range.clone()];
        let lens: Vec<usize> = weights[range.clone()].iter().map(|w| w.meta.num_elements()).collect();
        let (cube_count, cube_dim) = grid(&lens);
        let tensors = |list: &[CubeTensor<R>]| {
            let mut sequence = SequenceArg::new();
            for tensor in &list[range.clone()] {
                sequence.push(tensor.clone().into_tensor_arg());
            }
            sequence
        };
        // Of another element type than `tensors`' (empty without copies).
        let mut copies_sequence = SequenceArg::new();
        for tensor in copies.get(range.clone()).unwrap_or_default() {
            copies_sequence.push(tensor.clone().into_tensor_arg());
        }
        // SAFETY: the units of row `t` read and write parameter `t` below `lens[t]`, its
        // element count (`weights` and, with copies, `copies` are contiguous, of the same
        // shapes), and the flat buffers in that parameter's range, which each holds, and `scale`
        // at 0 (the caller checked both: `kernel_updates`); `moment_2` standing in for a missing
        // average is never read; the buffers written are uniquely held ([`writable`], `copies`
        // new) and contiguous, no two units write one element (the ranges are apart,
        // `kernel_updates`), and each unit reads a weight before it writes it.
        unsafe {
            adam_kernel::launch_unchecked::<R>(
                &client,
                cube_count,
                cube_dim,
                tensors(&weights),
                copies_sequence,
                starts.iter().copied().collect(),
                lens.into_iter().collect(),
                grads.clone().into_tensor_arg(),
                state.moment_1.clone().into_tensor_arg(),
                state.moment_2.clone().into_tensor_arg(),
                state.average.clone().into_tensor_arg(),
                scale.clone().into_tensor_arg(),
                adam_scalars(step),
                step.constants().weight_decay != 0.0,
                state.has_average,
                copy.is_some(),
                [DType::F32.into(), copy_dtype.into()],
            );
        }
    }
    state.put_back(flat);
    UpdatedWeights { weights, copies }
}
