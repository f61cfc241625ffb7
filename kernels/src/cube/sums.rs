//! Sums in one cube (a fixed order, so the same bits every run) and the clipping factors
//! computed from the gradients' squares.

use cubecl::prelude::*;

use super::launch::UNITS_PER_CUBE;
use crate::portable;

/// The sum of `values[..len]` in one cube, each unit a stride of them, in a fixed order,
/// returned to every unit. A unit keeps four sums, so that four of its loads are in flight at
/// once: with one, the H200 waited on each load in turn, 318 µs for the 217,000 partial sums
/// PushT's gather left when it gave each parameter its own row of cubes.
#[cube]
pub(crate) fn cube_total<F: Float>(values: &Tensor<F>, len: usize) -> F {
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
pub(crate) fn sum_kernel<F: Float>(
    values: &Tensor<F>,
    len: usize,
    total: &mut Tensor<F>,
    #[define(F)] _dtype: StorageType,
) {
    let all = cube_total::<F>(values, len);
    if UNIT_POS_X == 0 {
        total[0] = all;
    }
}

/// How the gradients are clipped ([`crate::OptimiserKernels::clip_factors`]'s arguments, and torch's
/// epsilon).
#[derive(CubeLaunch, CubeType)]
pub(crate) struct ClipScalars {
    pub(crate) max_norm: f32,
    pub(crate) epsilon: f32,
    pub(crate) grad_scale: f32,
}

/// The scalars of a launch that clips to `max_norm` (not at all when it is 0) gradients that
/// carry `grad_scale`.
pub(crate) fn clip_scalars<R: Runtime>(max_norm: f64, grad_scale: f64) -> ClipScalarsLaunch<R> {
    ClipScalarsLaunch::new(max_norm as f32, portable::CLIP_EPSILON as f32, grad_scale as f32)
}

/// The norm of [`crate::OptimiserKernels::clip_factors`] from the gradients' `Σ g²`, with the composed
/// operations' roundings, in their order.
#[cube]
pub(crate) fn clip_norm<F: Float>(squares: F, clip: &ClipScalars) -> F {
    let mut n = F::sqrt(squares);
    if clip.grad_scale != 1.0 {
        n /= F::cast_from(clip.grad_scale);
    }
    n
}

/// The scale of [`crate::OptimiserKernels::clip_factors`] from the norm `n` ([`clip_norm`]), with the
/// composed operations' roundings, in their order; `clips` when `max_norm` is over 0.
#[cube]
pub(crate) fn clip_scale<F: Float>(n: F, clip: &ClipScalars, #[comptime] clips: bool) -> F {
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
/// clipping factors of the total ([`crate::OptimiserKernels::clip_factors`]): `norm[0]` ([`clip_norm`])
/// and `scale[0]` ([`clip_scale`]). Of one value (the squares already summed), the total is
/// that value.
#[cube(launch_unchecked)]
pub(crate) fn sum_clip_kernel<F: Float>(
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

/// The sum of every unit's `value` in the cube, by halves in `partial` (one slot per unit; the
/// cube's width a power of two), returned to every unit.
#[cube]
pub(crate) fn cube_sum<F: Float>(partial: &mut SharedMemory<F>, value: F) -> F {
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
