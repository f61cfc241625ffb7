//! The gradients gathered into the flat buffer ([`crate::OptimiserKernels::concat_flat`]), with their
//! squares' partial sums: each launch takes up to [`launch_width`] parameters of one or two
//! dtypes (unrolled over them, a binding each: a half-precision step's gradients beside the f32
//! ones of its norms), and every unit strides over each of them in turn, so that each cube's sum
//! of squares covers all of them and a launch leaves one partial sum a cube: few enough for every
//! cube of the views' update to total them (`views.rs`), or for one cube to ([`clip_partials`]).
#![expect(unsafe_code, reason = "cubecl launches a kernel without bounds checks only through unsafe")]

use burn::tensor::DType;
use burn_cubecl::CubeRuntime;
use burn_cubecl::tensor::CubeTensor;
use cubecl::CubeDim;
use cubecl::prelude::*;

use super::launch::{UNITS_PER_CUBE, launch_width};
use super::sums::{clip_scalars, cube_sum, sum_clip_kernel, sum_kernel};
use super::tensors::{empty_f32, writable};
use crate::gather_plan::{GatherLaunch, gather_plan};

/// The most cubes of a gather's launch: enough to fill a large GPU (1,024 cubes of 256 units),
/// few enough that totalling their partial sums in every cube of the update costs little.
const MAX_CUBES_PER_GATHER: usize = 1024;

/// Element `i`, in row-major order, of `part`: read straight where `contiguous`, else through
/// its shape and strides (burn's gradients may be permuted views).
#[cube]
fn row_major_element<F: Float>(part: &Tensor<F>, i: usize, #[comptime] contiguous: bool) -> F {
    let mut at = i;
    if !contiguous {
        let rank = part.rank();
        let mut rest = i;
        at = 0;
        for k in 0..rank {
            let dim = rank - 1 - k;
            let size = part.shape(dim);
            at += (rest % size) * part.stride(dim);
            rest /= size;
        }
    }
    part[at]
}

/// A part's elements `i` (every unit of the launch, striding): `flat[start + i]` is its element
/// `i` in row-major order ([`row_major_element`]), cast from `P` to `F`; returns the sum of the
/// squares of what this unit copied when `squares` (else zero).
#[cube]
fn copy_part<P: Float, F: Float>(
    part: &Tensor<P>,
    start: usize,
    len: usize,
    flat: &mut Tensor<F>,
    #[comptime] contiguous: bool,
    #[comptime] squares: bool,
) -> F {
    let stride = (CUBE_COUNT_X * CUBE_DIM_X) as usize;
    let mut sum = F::new(0.0);
    let mut i = ABSOLUTE_POS_X as usize;
    while i < len {
        let value = F::cast_from(row_major_element::<P>(part, i, contiguous));
        flat[start + i] = value;
        if squares {
            sum += value * value;
        }
        i += stride;
    }
    sum
}

/// Every unit copies its stride of each of `parts` (part `t` into `flat` from `starts[t]`,
/// [`copy_part`]): those before `strided_from` are contiguous, read straight; the others through
/// their shapes and strides. Returns the sum of the squares this unit copied when `squares`.
#[cube]
fn copy_parts<P: Float, F: Float>(
    parts: &Sequence<Tensor<P>>,
    starts: &Sequence<usize>,
    lens: &Sequence<usize>,
    flat: &mut Tensor<F>,
    #[comptime] strided_from: usize,
    #[comptime] squares: bool,
) -> F {
    let count = comptime!(parts.len());
    let mut sum = F::new(0.0);
    #[unroll]
    for t in 0..strided_from {
        sum += copy_part::<P, F>(&parts[t], starts[t], lens[t], flat, true, squares);
    }
    #[unroll]
    for t in strided_from..count {
        sum += copy_part::<P, F>(&parts[t], starts[t], lens[t], flat, false, squares);
    }
    sum
}

/// [`copy_parts`] of `parts` (of dtype `P`, the contiguous ones before `strided_from`) and of
/// `others` (of dtype `Q`, the contiguous ones before `others_strided_from`; none where the
/// launch reads one dtype). With `squares`, each cube also sums the squares of the elements it
/// copied: cube `x` writes its sum to `partials[first_partial + x]` (without, `partials` is not
/// touched).
#[cube(launch_unchecked)]
#[expect(clippy::too_many_arguments, reason = "a kernel's buffers are its arguments")]
fn gather_kernel<P: Float, Q: Float, F: Float>(
    parts: &Sequence<Tensor<P>>,
    starts: Sequence<usize>,
    lens: Sequence<usize>,
    others: &Sequence<Tensor<Q>>,
    other_starts: Sequence<usize>,
    other_lens: Sequence<usize>,
    flat: &mut Tensor<F>,
    partials: &mut Tensor<F>,
    first_partial: usize,
    #[comptime] strided_from: usize,
    #[comptime] others_strided_from: usize,
    #[comptime] squares: bool,
    #[define(P, Q, F)] _dtypes: [StorageType; 3],
) {
    let sum = copy_parts::<P, F>(parts, &starts, &lens, flat, strided_from, squares)
        + copy_parts::<Q, F>(others, &other_starts, &other_lens, flat, others_strided_from, squares);
    if squares {
        let mut partial = SharedMemory::<F>::new(UNITS_PER_CUBE as usize);
        let total = cube_sum::<F>(&mut partial, sum);
        if UNIT_POS_X == 0 {
            partials[first_partial + CUBE_POS_X as usize] = total;
        }
    }
}

/// A part to gather: the tensor, where it starts in the flat buffer, its element count.
type GatherPart<R> = (CubeTensor<R>, usize, usize);

/// Whether [`gather`] takes parts of these element counts and dtypes: some, each f32, or f16 or
/// bf16 (the gradients of a half-precision forward's weights, cast up as they are copied), some
/// elements in all (else the portable operations gather them).
pub(super) fn gathers_all(parts: &[(usize, DType)]) -> bool {
    !parts.is_empty()
        && parts.iter().all(|(_, dtype)| crate::ops::elements::kernel_float(*dtype))
        && parts.iter().any(|(n, _)| *n > 0)
}

/// The element count and dtype of each of `parts`.
pub(super) fn sizes<R: CubeRuntime>(parts: &[CubeTensor<R>]) -> Vec<(usize, DType)> {
    parts.iter().map(|p| (p.meta.num_elements(), p.dtype)).collect()
}

/// The launches of a gather of these parts ([`crate::gather_plan::gather_plan`] at the device's
/// width, [`launch_width`]), each with its cubes: enough for one element a unit of its longest
/// part, at most [`MAX_CUBES_PER_GATHER`] (beyond, each unit strides over several), so that
/// every cube copies some of it.
fn plan<R: CubeRuntime>(client: &ComputeClient<R>, parts: &[(usize, DType)]) -> Vec<(GatherLaunch, usize)> {
    gather_plan(parts, launch_width(client, 1))
        .into_iter()
        .map(|launch| {
            let cubes = launch.longest.div_ceil(UNITS_PER_CUBE as usize).clamp(1, MAX_CUBES_PER_GATHER);
            (launch, cubes)
        })
        .collect()
}

/// The partial sums of squares a gather of these parts leaves ([`gathers_all`] holds): one a
/// cube, in every launch.
pub(super) fn partials_len<R: CubeRuntime>(client: &ComputeClient<R>, parts: &[(usize, DType)]) -> usize {
    plan(client, parts).iter().map(|(_, cubes)| cubes).sum()
}

/// `parts` ([`gathers_all`] of them) laid end to end in one f32 buffer (over `reuse` where it has
/// their length), by [`gather_kernel`], in the launches of [`plan`]; with `squares`, also the
/// squares' partial sums, read as the parts are copied: one per cube of each launch
/// ([`partials_len`]), each summed in a fixed order, so that their total, taken in a fixed order
/// too, repeats to the bit.
pub(super) fn gather<R: CubeRuntime>(
    parts: Vec<CubeTensor<R>>,
    reuse: Option<CubeTensor<R>>,
    squares: bool,
) -> (CubeTensor<R>, Option<CubeTensor<R>>) {
    let sizes = sizes(&parts);
    let lens: Vec<usize> = sizes.iter().map(|(n, _)| *n).collect();
    let total_len: usize = lens.iter().sum();
    // The kernel addresses in 32 bits (cubecl's default), as the update of views does.
    assert!(u32::try_from(total_len).is_ok(), "a gather of {total_len} values: more than 32-bit addressing reaches");
    let flat = match reuse {
        Some(buffer) if buffer.dtype == DType::F32 && buffer.meta.num_elements() == total_len => writable(buffer),
        _ => empty_f32(&parts[0], [total_len].into()),
    };
    let client = flat.client.clone();
    let starts = crate::ops::elements::starts_of(&lens);
    let plan = plan(&client, &sizes);
    let partials_len: usize = if squares { plan.iter().map(|(_, cubes)| cubes).sum() } else { 0 };
    // Without squares, one slot the kernel leaves alone: a buffer of no bytes cannot be bound,
    // nor `flat` twice.
    let partials = empty_f32(&flat, [partials_len.max(1)].into());
    let mut first_partial = 0;
    for (GatherLaunch { dtypes, parts: indices, split, .. }, cubes) in plan {
        // Each dtype's parts, the contiguous ones (most gradients, copied straight) first.
        let group = |indices: &[usize]| {
            let mut group: Vec<GatherPart<R>> =
                indices.iter().map(|&k| (parts[k].clone(), starts[k], lens[k])).collect();
            group.sort_by_key(|(part, _, _)| !part.is_contiguous());
            let strided_from = group.iter().take_while(|(part, _, _)| part.is_contiguous()).count();
            (group, strided_from)
        };
        let (first, strided_from) = group(&indices[..split]);
        let (second, others_strided_from) = group(&indices[split..]);
        let (mut tensors, mut others) = (SequenceArg::new(), SequenceArg::new());
        for (part, _, _) in &first {
            tensors.push(part.clone().into_tensor_arg());
        }
        for (part, _, _) in &second {
            others.push(part.clone().into_tensor_arg());
        }
        // SAFETY: every unit writes `flat[start + i]` for each part's `start` and `i` below its
        // element count, within `total_len`, the buffer's length (the parts are laid end to end),
        // and reads the part at `i` (the contiguous ones, before their group's `strided_from`)
        // or at `Σ (row-major digit) · stride` over its own shape, within its elements; `flat`
        // is uniquely held and contiguous. With squares, cube `x` writes
        // `partials[first_partial + x]`, below `partials_len`: each launch's slots follow the
        // previous one's, `cubes` of them.
        unsafe {
            gather_kernel::launch_unchecked::<R>(
                &client,
                CubeCount::new_1d(cubes as u32),
                CubeDim::new_1d(UNITS_PER_CUBE),
                tensors,
                first.iter().map(|(_, start, _)| *start).collect(),
                first.iter().map(|(_, _, len)| *len).collect(),
                others,
                second.iter().map(|(_, start, _)| *start).collect(),
                second.iter().map(|(_, _, len)| *len).collect(),
                flat.clone().into_tensor_arg(),
                partials.clone().into_tensor_arg(),
                first_partial,
                strided_from,
                others_strided_from,
                squares,
                [dtypes[0].into(), dtypes[1].into(), DType::F32.into()],
            );
        }
        if squares {
            first_partial += cubes;
        }
    }
    (flat, squares.then_some(partials))
}

/// The total of `partials` (1-D f32) in one cube, in a fixed order ([`sum_kernel`]): a `[1]`
/// tensor.
pub(super) fn total<R: CubeRuntime>(partials: CubeTensor<R>) -> CubeTensor<R> {
    let squares = empty_f32(&partials, [1].into());
    let len = partials.meta.num_elements();
    // SAFETY: one cube reads `partials` below its length and writes `squares[0]`, new.
    unsafe {
        sum_kernel::launch_unchecked::<R>(
            &partials.client,
            CubeCount::new_1d(1),
            CubeDim::new_1d(UNITS_PER_CUBE),
            partials.clone().into_tensor_arg(),
            len,
            squares.clone().into_tensor_arg(),
            DType::F32.into(),
        );
    }
    squares
}

/// The clipping factors ([`crate::OptimiserKernels::clip_factors`]) of the total of `partials` (1-D f32),
/// in one launch of one cube ([`sum_clip_kernel`]): `[norm, scale]`.
pub(super) fn clip_partials<R: CubeRuntime>(
    partials: CubeTensor<R>,
    max_norm: f64,
    grad_scale: f64,
) -> [CubeTensor<R>; 2] {
    let [norm, scale] = [0, 1].map(|_| empty_f32(&partials, [1].into()));
    let len = partials.meta.num_elements();
    // SAFETY: one cube reads `partials` below its length and writes `norm[0]` and `scale[0]`,
    // new.
    unsafe {
        sum_clip_kernel::launch_unchecked::<R>(
            &partials.client,
            CubeCount::new_1d(1),
            CubeDim::new_1d(UNITS_PER_CUBE),
            partials.clone().into_tensor_arg(),
            len,
            norm.clone().into_tensor_arg(),
            scale.clone().into_tensor_arg(),
            clip_scalars(max_norm, grad_scale),
            max_norm > 0.0,
            DType::F32.into(),
        );
    }
    [norm, scale]
}
