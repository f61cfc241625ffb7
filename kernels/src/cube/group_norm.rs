//! GroupNorm with its activation, forward (one launch) and backward (two, three where a channel's
//! scale and shift gradients take several cubes), and the activations as compile-time choices.

use cubecl::prelude::*;

use super::launch::UNITS_PER_CUBE;
use super::sums::cube_sum;
use crate::Activation;

/// The activation a norm kernel applies, as a compile-time number ([`Activation`]'s order).
pub(crate) fn activation_code(activation: Activation) -> u32 {
    match activation {
        Activation::Identity => 0,
        Activation::Relu => 1,
        Activation::Mish => 2,
    }
}

/// `activation` (by [`activation_code`]) of `y`, as [`Activation::apply`] computes it.
#[cube]
pub(crate) fn activate<F: Float>(y: F, #[comptime] activation: u32) -> F {
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

/// Where element `i` of group `group` (`n·groups + g`) of GroupNorm's `x` lies in its buffer:
/// channels-first (`[N, C, S]`), the group's `group_len` values lie contiguous from
/// `group·group_len`, `i` walking each channel's positions in turn; channels-last (`[N, S, C]` in
/// memory), `i` walks the group's channels at each position in turn.
#[cube]
fn group_element(
    group: usize,
    i: usize,
    group_len: usize,
    positions: usize,
    channels_per_group: usize,
    groups: usize,
    #[comptime] channels_last: bool,
) -> usize {
    if comptime!(channels_last) {
        let channels = channels_per_group * groups;
        let sample = group / groups;
        let position = i / channels_per_group;
        (sample * positions + position) * channels + (group % groups) * channels_per_group + i % channels_per_group
    } else {
        group * group_len + i
    }
}

/// The channel of element `i` of group `group`, in the order [`group_element`] walks it.
#[cube]
fn group_channel(
    group: usize,
    i: usize,
    positions: usize,
    channels_per_group: usize,
    groups: usize,
    #[comptime] channels_last: bool,
) -> usize {
    let first = (group % groups) * channels_per_group;
    if comptime!(channels_last) { first + i % channels_per_group } else { first + i / positions }
}

/// Cube `k` normalises group `k` of GroupNorm's `x` `[N, C, S]` (`k = n·groups + g`; its
/// `group_len` values found by [`group_element`], `x` and `y` both channels-first or both
/// channels-last): the mean, then the biased variance about it (two passes, as the CPU's), then
/// `y = act((x − μ)·r·γ + β)` with `r = 1/√(σ² + ε)`; `stats[2k]` and `stats[2k + 1]` take `μ`
/// and `r`. `x` and `y` are in `X` (f32, or a half-precision forward's dtype), everything else
/// in `F` (f32), which it computes in.
#[cube(launch_unchecked)]
#[expect(clippy::too_many_arguments, reason = "a kernel's buffers are its arguments")]
pub(crate) fn group_norm_kernel<X: Float, F: Float>(
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
    #[comptime] channels_last: bool,
    #[define(X, F)] _dtypes: [StorageType; 2],
) {
    let group = CUBE_POS_X as usize;
    let units = CUBE_DIM_X as usize;
    let mut partial = SharedMemory::<F>::new(UNITS_PER_CUBE as usize);
    let count = F::cast_from(group_len);

    let mut sum = F::new(0.0);
    let mut i = UNIT_POS_X as usize;
    while i < group_len {
        let at = group_element(group, i, group_len, positions, channels_per_group, groups, channels_last);
        sum += F::cast_from(x[at]);
        i += units;
    }
    let mean = cube_sum::<F>(&mut partial, sum) / count;

    let mut squares = F::new(0.0);
    let mut i = UNIT_POS_X as usize;
    while i < group_len {
        let at = group_element(group, i, group_len, positions, channels_per_group, groups, channels_last);
        let d = F::cast_from(x[at]) - mean;
        squares += d * d;
        i += units;
    }
    let variance = cube_sum::<F>(&mut partial, squares) / count;
    let inv_std = F::new(1.0) / F::sqrt(variance + F::cast_from(epsilon));

    let mut i = UNIT_POS_X as usize;
    while i < group_len {
        let at = group_element(group, i, group_len, positions, channels_per_group, groups, channels_last);
        let channel = group_channel(group, i, positions, channels_per_group, groups, channels_last);
        let normalised = (F::cast_from(x[at]) - mean) * inv_std * gamma[channel] + beta[channel];
        y[at] = X::cast_from(activate::<F>(normalised, activation));
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
pub(crate) fn activation_derivative<F: Float>(y: F, #[comptime] activation: u32) -> F {
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
pub(crate) fn gradient_before_activation<X: Float, F: Float>(
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
/// [`group_norm_kernel`], `x`, `output_grad` and `input_grad` alike): with `dz` the gradient before the activation and `g = dz·γ`,
/// `dx = r·(g − mean(g) − x̂·mean(g·x̂))`, both means over the group (each a cube sum).
#[cube(launch_unchecked)]
#[expect(clippy::too_many_arguments, reason = "a kernel's buffers are its arguments")]
pub(crate) fn group_norm_input_grad_kernel<X: Float, F: Float>(
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
    #[comptime] channels_last: bool,
    #[define(X, F)] _dtypes: [StorageType; 2],
) {
    let group = CUBE_POS_X as usize;
    let (mean, inv_std) = (stats[2 * group], stats[2 * group + 1]);
    let units = CUBE_DIM_X as usize;
    let mut partial = SharedMemory::<F>::new(UNITS_PER_CUBE as usize);
    let count = F::cast_from(group_len);

    let mut sum_g = F::new(0.0);
    let mut sum_g_x_hat = F::new(0.0);
    let mut i = UNIT_POS_X as usize;
    while i < group_len {
        let at = group_element(group, i, group_len, positions, channels_per_group, groups, channels_last);
        let channel = group_channel(group, i, positions, channels_per_group, groups, channels_last);
        let x_hat = (F::cast_from(x[at]) - mean) * inv_std;
        let g = gradient_before_activation::<X, F>(output_grad, gamma, beta, at, channel, x_hat, activation)
            * gamma[channel];
        sum_g += g;
        sum_g_x_hat += g * x_hat;
        i += units;
    }
    let mean_g = cube_sum::<F>(&mut partial, sum_g) / count;
    let mean_g_x_hat = cube_sum::<F>(&mut partial, sum_g_x_hat) / count;

    let mut i = UNIT_POS_X as usize;
    while i < group_len {
        let at = group_element(group, i, group_len, positions, channels_per_group, groups, channels_last);
        let channel = group_channel(group, i, positions, channels_per_group, groups, channels_last);
        let x_hat = (F::cast_from(x[at]) - mean) * inv_std;
        let g = gradient_before_activation::<X, F>(output_grad, gamma, beta, at, channel, x_hat, activation)
            * gamma[channel];
        input_grad[at] = X::cast_from((g - mean_g - x_hat * mean_g_x_hat) * inv_std);
        i += units;
    }
}

/// Cube `(c, b)` sums GroupNorm's scale and shift gradients of channel `c` over its share `b`
/// of the `blocks` shares of the samples' and positions' values: `dγ = Σ dz·x̂`, `dβ = Σ dz`
/// (`dz` the gradient before the activation), unit `u` of cube `b` taking the values
/// `(b·units + u) + j·blocks·units`, then the cube's halves (a fixed order); it writes element
/// `c·blocks + b` of `gamma_grad` and `beta_grad` (`x` and `output_grad` both channels-first or
/// both channels-last), which [`affine_grad_total_kernel`] adds up in
/// block order where `blocks > 1`. (A unit per channel walking them all in turn left a GPU
/// nearly idle on the encoder's maps, 64 channels of 128 samples × 441 positions; a cube per
/// channel still runs 64 cubes on a GPU of 132 multiprocessors: [`affine_grad_blocks`].)
#[cube(launch_unchecked)]
#[expect(clippy::too_many_arguments, reason = "a kernel's buffers are its arguments")]
pub(crate) fn group_norm_affine_grad_kernel<X: Float, F: Float>(
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
    blocks: usize,
    #[comptime] activation: u32,
    #[comptime] channels_last: bool,
    #[define(X, F)] _dtypes: [StorageType; 2],
) {
    let channel = CUBE_POS_X as usize;
    let block = CUBE_POS_Y as usize;
    let groups = channels / channels_per_group;
    let group_of_channel = channel / channels_per_group;
    let mut sum_dz_x_hat = F::new(0.0);
    let mut sum_dz = F::new(0.0);
    let mut k = block * CUBE_DIM_X as usize + UNIT_POS_X as usize;
    while k < samples * positions {
        let sample = k / positions;
        let group = sample * groups + group_of_channel;
        let (mean, inv_std) = (stats[2 * group], stats[2 * group + 1]);
        let at = if comptime!(channels_last) {
            k * channels + channel
        } else {
            (sample * channels + channel) * positions + k % positions
        };
        let x_hat = (F::cast_from(x[at]) - mean) * inv_std;
        let dz = gradient_before_activation::<X, F>(output_grad, gamma, beta, at, channel, x_hat, activation);
        sum_dz_x_hat += dz * x_hat;
        sum_dz += dz;
        k += blocks * CUBE_DIM_X as usize;
    }
    let mut partial = SharedMemory::<F>::new(UNITS_PER_CUBE as usize);
    let total_dz_x_hat = cube_sum::<F>(&mut partial, sum_dz_x_hat);
    let total_dz = cube_sum::<F>(&mut partial, sum_dz);
    if UNIT_POS_X == 0 {
        gamma_grad[channel * blocks + block] = total_dz_x_hat;
        beta_grad[channel * blocks + block] = total_dz;
    }
}

/// The units of the launch stride over the channels: channel `c`'s scale and shift gradients,
/// the sums of its `blocks` partial sums (elements `c·blocks ..` of the partials, which
/// [`group_norm_affine_grad_kernel`] wrote) in block order.
#[cube(launch_unchecked)]
pub(crate) fn affine_grad_total_kernel<F: Float>(
    gamma_partials: &Tensor<F>,
    beta_partials: &Tensor<F>,
    gamma_grad: &mut Tensor<F>,
    beta_grad: &mut Tensor<F>,
    channels: usize,
    blocks: usize,
    #[define(F)] _dtype: StorageType,
) {
    let stride = (CUBE_COUNT_X * CUBE_DIM_X) as usize;
    let mut channel = ABSOLUTE_POS_X as usize;
    while channel < channels {
        let mut dgamma = F::new(0.0);
        let mut dbeta = F::new(0.0);
        let mut block = 0;
        while block < blocks {
            dgamma += gamma_partials[channel * blocks + block];
            dbeta += beta_partials[channel * blocks + block];
            block += 1;
        }
        gamma_grad[channel] = dgamma;
        beta_grad[channel] = dbeta;
        channel += stride;
    }
}

/// The cubes [`group_norm_affine_grad_kernel`] gives each of `channels` channels of `values`
/// values (samples × positions): enough cubes in all to fill a large GPU (512: an H200 has 132
/// multiprocessors), while each unit of a channel's several cubes sums at least eight values, and
/// at most 64 partial sums a channel for [`affine_grad_total_kernel`] to add; one cube a channel
/// where its values are fewer.
pub(crate) fn affine_grad_blocks(channels: usize, values: usize) -> usize {
    const CUBES_WANTED: usize = 512;
    const VALUES_PER_UNIT: usize = 8;
    const MOST_BLOCKS: usize = 64;
    let for_the_gpu = CUBES_WANTED.div_ceil(channels.max(1));
    let for_the_work = values / (VALUES_PER_UNIT * UNITS_PER_CUBE as usize);
    for_the_gpu.min(for_the_work).clamp(1, MOST_BLOCKS)
}
