//! The GPU backends' optimiser pass: the gradients gathered into the flat buffer and the fused
//! update, each a cubecl kernel that takes many parameters per launch (up to
//! [`MAX_PARTS_PER_LAUNCH`], as the device's bindings allow), where the portable versions are a
//! launch per parameter for the gather and some twenty of burn's operations per parameter for
//! the update, each its own kernel launch without burn's fusion.
//!
//! It applies to burn's cubecl backends without fusion (the `cuda-untuned` and `wgpu-untuned`
//! builds); with fusion on, the backends are burn's `Fusion` over these and keep the portable
//! version, whose elementwise chain fusion compiles into few kernels.
//!
//! A launch takes up to [`MAX_PARTS_PER_LAUNCH`] parameters, one row of cubes each (the grid's
//! second axis), as torch's `multi_tensor_apply` hands each block one tensor's chunk: each unit
//! picks its parameter once, by its cube's row, then strides over that parameter's elements.
//! (The first version gave one unit to each element of the flat range and had it search the
//! launch's 64 ranges for its own: on an H200 that search, and the gather's decoding of every
//! position through the shape with 64-bit divisions, held the gather at 20 ms and the update at
//! 9 ms for PushT's 263 million parameters, against 0.5 and 1.7 ms of memory traffic.)
#![expect(unsafe_code, reason = "cubecl launches a kernel without bounds checks only through unsafe")]

use std::ops::Range;

use burn::tensor::ops::{ConvOptions, FloatTensor, ModuleOps};
use burn::tensor::{DType, Shape, TensorMetadata};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{BoolElement, CubeBackend, CubeRuntime, FloatElement, IntElement};
use cubecl::CubeDim;
use cubecl::prelude::*;

use crate::{AdamStep, FlatBuffers, Kernels, LibraryConv, portable};

/// The most parameters one launch takes: the kernel is unrolled over them, and each is a
/// binding or two.
pub const MAX_PARTS_PER_LAUNCH: usize = 64;

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

/// The units of cube row `t` stride over parameter `t`'s elements `i`: `updated[t][i]` from its
/// weight and the flat buffers' element `j = starts[t] + i`, in [`AdamStep`]'s (torch's) order of
/// operations, the decay added only where there is one (as the CPU's pass and the portable
/// operations do); the moments and, when `has_average`, the average are updated in place.
#[cube(launch_unchecked)]
#[expect(clippy::too_many_arguments, reason = "a kernel's buffers are its arguments")]
fn adam_kernel<F: Float>(
    weights: &Sequence<Tensor<F>>,
    updated: &mut Sequence<Tensor<F>>,
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
    #[define(F)] _dtype: StorageType,
) {
    let count = comptime!(weights.len());
    let stride = (CUBE_COUNT_X * CUBE_DIM_X) as usize;
    #[unroll]
    for t in 0..count {
        if CUBE_POS_Y as usize == t {
            let (start, len) = (starts[t], lens[t]);
            let mut i = ABSOLUTE_POS_X as usize;
            while i < len {
                let j = start + i;
                let w = weights[t][i];
                let mut g = grads[j] * scale[0];
                if has_weight_decay {
                    g += w * F::cast_from(scalars.weight_decay);
                }
                let m = moment_1[j] + (g - moment_1[j]) * F::cast_from(scalars.one_minus_beta_1);
                let v = moment_2[j] * F::cast_from(scalars.beta_2) + g * F::cast_from(scalars.one_minus_beta_2) * g;
                let denominator =
                    F::sqrt(v) / F::cast_from(scalars.bias_correction_2_sqrt) + F::cast_from(scalars.epsilon);
                let w = w + m / denominator * -F::cast_from(scalars.step_size);
                moment_1[j] = m;
                moment_2[j] = v;
                let out = updated.index_mut(t);
                out[i] = w;
                if has_average {
                    let ema = F::cast_from(scalars.ema_weight);
                    if ema >= F::new(1.0) {
                        average[j] = w;
                    } else {
                        average[j] = average[j] + (w - average[j]) * ema;
                    }
                }
                i += stride;
            }
        }
    }
}

/// The units of cube row `t` stride over part `t`'s elements in row-major order: `flat[starts[t]
/// + i]` is its element `i`, read straight where `contiguous`, else through the part's shape and
/// strides (burn's gradients may be permuted views).
#[cube(launch_unchecked)]
fn gather_kernel<F: Float>(
    parts: &Sequence<Tensor<F>>,
    starts: Sequence<usize>,
    lens: Sequence<usize>,
    flat: &mut Tensor<F>,
    #[comptime] contiguous: bool,
    #[define(F)] _dtype: StorageType,
) {
    let count = comptime!(parts.len());
    let stride = (CUBE_COUNT_X * CUBE_DIM_X) as usize;
    #[unroll]
    for t in 0..count {
        if CUBE_POS_Y as usize == t {
            let part = &parts[t];
            let (start, len) = (starts[t], lens[t]);
            let mut i = ABSOLUTE_POS_X as usize;
            while i < len {
                if contiguous {
                    flat[start + i] = part[i];
                } else {
                    let rank = part.rank();
                    let mut rest = i;
                    let mut at = 0;
                    for k in 0..rank {
                        let dim = rank - 1 - k;
                        let size = part.shape(dim);
                        at += (rest % size) * part.stride(dim);
                        rest /= size;
                    }
                    flat[start + i] = part[at];
                }
                i += stride;
            }
        }
    }
}

/// A tensor whose buffer this call may write: the tensor itself when no other handle shares it
/// and it is contiguous, else a contiguous copy.
fn writable<R: CubeRuntime>(tensor: CubeTensor<R>) -> CubeTensor<R> {
    if tensor.can_mut() && tensor.is_contiguous() { tensor } else { tensor.copy() }
}

/// A new contiguous f32 tensor of `shape`, its values unset.
fn empty_f32<R: CubeRuntime>(like: &CubeTensor<R>, shape: Shape) -> CubeTensor<R> {
    let bytes = shape.num_elements() * size_of::<f32>();
    CubeTensor::new_contiguous(like.client.clone(), like.device.clone(), shape, like.client.empty(bytes), DType::F32)
}

/// The parameters of each launch: consecutive runs of at most [`MAX_PARTS_PER_LAUNCH`], fewer
/// where the device binds fewer buffers to a kernel (`bindings_per_part` each, beside the flat
/// buffers and cubecl's metadata).
fn launches<R: CubeRuntime>(client: &ComputeClient<R>, parts: usize, bindings_per_part: usize) -> Vec<Range<usize>> {
    let bindings = client.properties().hardware.max_bindings as usize;
    let per_launch = (bindings.saturating_sub(8) / bindings_per_part).clamp(1, MAX_PARTS_PER_LAUNCH);
    (0..parts).step_by(per_launch).map(|first| first..(first + per_launch).min(parts)).collect()
}

/// The most cubes a part's row has; beyond them, each unit strides over several elements.
const MAX_CUBES_PER_PART: usize = 1024;

/// Units in a cube, all along x.
const UNITS_PER_CUBE: u32 = 256;

/// A launch's grid over parts of `lens` elements: one row of cubes per part, as many as the
/// longest needs at one element per unit, at most [`MAX_CUBES_PER_PART`].
fn grid(lens: &[usize]) -> (CubeCount, CubeDim) {
    let longest = lens.iter().copied().max().unwrap_or(1).max(1);
    // One row of units (the kernels stride along x alone).
    let cube_dim = CubeDim::new_1d(UNITS_PER_CUBE);
    let cubes = longest.div_ceil(UNITS_PER_CUBE as usize).clamp(1, MAX_CUBES_PER_PART);
    (CubeCount::new_2d(cubes as u32, lens.len() as u32), cube_dim)
}

impl<R: LibraryConv, F: FloatElement, I: IntElement, BT: BoolElement> Kernels for CubeBackend<R, F, I, BT> {
    fn has_conv2d_products(dtype: DType) -> bool {
        R::library_takes(dtype)
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

    fn sum_of_squares(x: FloatTensor<Self>) -> FloatTensor<Self> {
        portable::sum_of_squares_by_rows::<Self>(x)
    }

    fn concat_flat(
        parts: Vec<FloatTensor<Self>>,
        reuse: Option<FloatTensor<Self>>,
        device: &Self::Device,
    ) -> FloatTensor<Self> {
        if parts.is_empty() || parts.iter().any(|p| p.dtype != DType::F32) {
            return portable::concat_flat::<Self>(parts, device);
        }
        let lens: Vec<usize> = parts.iter().map(|p| p.meta.num_elements()).collect();
        let total: usize = lens.iter().sum();
        let flat = match reuse {
            Some(buffer) if buffer.dtype == DType::F32 && buffer.meta.num_elements() == total => writable(buffer),
            _ => empty_f32(&parts[0], [total].into()),
        };
        let starts = crate::starts_of(&lens);
        // Parts without elements take no binding (a buffer of no bytes cannot be bound); the
        // contiguous ones (most gradients) are copied straight, in launches of their own.
        let parts: Vec<(CubeTensor<R>, usize, usize)> =
            parts.into_iter().zip(starts).zip(lens).filter(|(_, n)| *n > 0).map(|((p, s), n)| (p, s, n)).collect();
        let (contiguous, strided): (Vec<_>, Vec<_>) = parts.into_iter().partition(|(p, _, _)| p.is_contiguous());
        let client = flat.client.clone();
        for (group, is_contiguous) in [(contiguous, true), (strided, false)] {
            for range in launches(&client, group.len(), 1) {
                let chunk = &group[range];
                let lens: Vec<usize> = chunk.iter().map(|(_, _, len)| *len).collect();
                let (cube_count, cube_dim) = grid(&lens);
                let mut tensors = SequenceArg::new();
                for (part, _, _) in chunk {
                    tensors.push(part.clone().into_tensor_arg());
                }
                // SAFETY: the units of row `t` write `flat[starts[t] + i]` for `i` below part
                // `t`'s element count, within `total`, the buffer's length (the parts are laid
                // end to end), and read the part at `i` (contiguous) or at `Σ (row-major digit)
                // · stride` over its own shape, within its elements; `flat` is uniquely held and
                // contiguous.
                unsafe {
                    gather_kernel::launch_unchecked::<R>(
                        &client,
                        cube_count,
                        cube_dim,
                        tensors,
                        chunk.iter().map(|(_, start, _)| *start).collect(),
                        lens.into_iter().collect(),
                        flat.clone().into_tensor_arg(),
                        is_contiguous,
                        DType::F32.into(),
                    );
                }
            }
        }
        flat
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
        assert_eq!(weights.len(), offsets.len(), "one offset per parameter");
        // The kernel reads and writes without bounds checks: every flat buffer must hold each
        // parameter's range, in f32, and the scale its one value; anything else takes the
        // portable operations (and their errors), one parameter at a time.
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
        if weights.is_empty() || !fits {
            return weights
                .into_iter()
                .zip(offsets)
                .map(|(w, &offset)| portable::adam_update::<Self>(w, flat, offset, scale, step))
                .collect();
        }
        let take = |buffer: &mut CubeTensor<R>| {
            let empty = empty_f32(buffer, [0].into());
            writable(std::mem::replace(buffer, empty))
        };
        let moment_1 = take(&mut flat.moment_1);
        let moment_2 = take(&mut flat.moment_2);
        let has_average = flat.average.is_some() && step.ema_weight.is_some();
        let average = match &mut flat.average {
            Some(average) if has_average => take(average),
            // Not read: any f32 buffer stands in.
            _ => moment_2.clone(),
        };
        let grads = into_contiguous(flat.grads.clone());
        let scale = into_contiguous(scale.clone());
        let weights: Vec<CubeTensor<R>> = weights.into_iter().map(into_contiguous).collect();
        let updated: Vec<CubeTensor<R>> = weights.iter().map(|w| empty_f32(w, w.shape())).collect();
        let client = grads.client.clone();
        let c = step.constants();
        for range in launches(&client, weights.len(), 2) {
            let starts = &offsets[range.clone()];
            let lens: Vec<usize> = weights[range.clone()].iter().map(|w| w.meta.num_elements()).collect();
            let (cube_count, cube_dim) = grid(&lens);
            let scalars = AdamScalarsLaunch::new(
                c.weight_decay,
                c.one_minus_beta_1,
                c.beta_2,
                c.one_minus_beta_2,
                c.bias_correction_2_sqrt,
                c.epsilon,
                c.step_size,
                step.ema_weight.unwrap_or(0.0),
            );
            let tensors = |list: &[CubeTensor<R>]| {
                let mut sequence = SequenceArg::new();
                for tensor in &list[range.clone()] {
                    sequence.push(tensor.clone().into_tensor_arg());
                }
                sequence
            };
            // SAFETY: the units of row `t` read and write parameter `t` below `lens[t]`, its
            // element count (`weights` and `updated` are contiguous), and the flat buffers below
            // `end`, which each holds (checked above), `scale` at 0; `moment_2` standing in for
            // a missing average is never read; the buffers written are uniquely held
            // ([`writable`], `updated` new) and contiguous, and no two units write one element
            // (the ranges are apart, checked above).
            unsafe {
                adam_kernel::launch_unchecked::<R>(
                    &client,
                    cube_count,
                    cube_dim,
                    tensors(&weights),
                    tensors(&updated),
                    starts.iter().copied().collect(),
                    lens.into_iter().collect(),
                    grads.clone().into_tensor_arg(),
                    moment_1.clone().into_tensor_arg(),
                    moment_2.clone().into_tensor_arg(),
                    average.clone().into_tensor_arg(),
                    scale.clone().into_tensor_arg(),
                    scalars,
                    c.weight_decay != 0.0,
                    has_average,
                    DType::F32.into(),
                );
            }
        }
        flat.moment_1 = moment_1;
        flat.moment_2 = moment_2;
        if has_average {
            flat.average = Some(average);
        }
        updated
    }
}
