//! The update of weights kept as views of one buffer ([`OptimiserKernels::weight_views`](crate::OptimiserKernels::weight_views)): the views, and
//! one launch that updates every parameter through them ([`adam_views_kernel`]).
#![expect(unsafe_code, reason = "cubecl launches a kernel without bounds checks only through unsafe")]

use burn::tensor::DType;
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{BoolElement, CubeBackend, CubeRuntime, FloatElement, IntElement};
use cubecl::CubeDim;
use cubecl::prelude::*;

use super::adam::{AdamState, adam_element, adam_scalars, read_adam_scalars};
use super::launch::UNITS_PER_CUBE;
#[cfg(doc)]
use super::sums::sum_clip_kernel;
use super::sums::{ClipScalars, clip_norm, clip_scalars, clip_scale, cube_total};
use super::tensors::{empty_f32, seen_channels_first};
#[cfg(doc)]
use crate::OptimiserKernels;
use crate::ViewPlaces;
use crate::ops::views::PLACEMENT_VALUES;
use crate::{AdamStep, FlatBuffers, RuntimeLibraries, ViewTable};

/// Every parameter's update in one launch, its weights views of one buffer ([`ViewTable`]): the
/// units stride over the flat buffers' elements `j < len`, each finding its parameter once (a
/// binary search of `ends`) and then walking forward with its stride; the weight of element `j`
/// is `weights[j + shift]` (the parameter's `placement`), or, where the parameter lies
/// channels-last, at its element's channels-last place ([`lying_offset`]), updated in place
/// ([`adam_element`]), and with `has_copies`, `copies` at the same place is the new weight cast
/// to `H`.
///
/// The gradients are multiplied by `scale[0]`, or, with `totals`, by the clipping factor of the
/// total of `partials[..partials_len]` (the gradients' partial squares), which every cube takes
/// in the order [`sum_clip_kernel`] does, and unit 0 writes to `scale[0]`, with the norm to
/// `norm[0]`: the clipping's last launch and the update in one.
#[cube(launch_unchecked)]
#[expect(clippy::too_many_arguments, reason = "a kernel's buffers are its arguments")]
fn adam_views_kernel<F: Float, H: Float, I: Int>(
    weights: &mut Tensor<F>,
    copies: &mut Tensor<H>,
    ends: &Tensor<I>,
    placement: &Tensor<I>,
    parts: usize,
    len: usize,
    grads: &Tensor<F>,
    moment_1: &mut Tensor<F>,
    moment_2: &mut Tensor<F>,
    average: &mut Tensor<F>,
    scale: &mut Tensor<F>,
    norm: &mut Tensor<F>,
    partials: &Tensor<F>,
    partials_len: usize,
    clip: &ClipScalars,
    scalars: &Tensor<f32>,
    #[comptime] has_weight_decay: bool,
    #[comptime] has_average: bool,
    #[comptime] has_copies: bool,
    #[comptime] totals: bool,
    #[comptime] clips: bool,
    #[define(F, H, I)] _dtypes: [StorageType; 3],
) {
    let factor = if totals {
        let n = clip_norm::<F>(cube_total::<F>(partials, partials_len), clip);
        let factor = clip_scale::<F>(n, clip, clips);
        if ABSOLUTE_POS_X == 0 {
            norm[0] = n;
            scale[0] = factor;
        }
        factor
    } else {
        scale[0]
    };
    let scalars = read_adam_scalars(scalars);
    let stride = (CUBE_COUNT_X * CUBE_DIM_X) as usize;
    let mut j = ABSOLUTE_POS_X as usize;
    let mut part = 0;
    let mut past = parts;
    while part < past {
        let middle = (part + past) / 2;
        if usize::cast_from(ends[middle]) > j {
            past = middle;
        } else {
            part = middle + 1;
        }
    }
    while j < len {
        while usize::cast_from(ends[part]) <= j {
            part += 1;
        }
        // Three values a parameter (`PLACEMENT_VALUES`): its shift, channels and positions.
        let shift = usize::cast_from(placement[part * 3]);
        let channels = u32::cast_from(placement[part * 3 + 1]);
        let mut at = j + shift;
        if channels > 1 {
            let mut start = 0;
            if part > 0 {
                start = usize::cast_from(ends[part - 1]);
            }
            let positions = u32::cast_from(placement[part * 3 + 2]);
            at = at - (j - start) + usize::cast_from(lying_offset(u32::cast_from(j - start), channels, positions));
        }
        let w = adam_element::<F>(
            weights[at],
            j,
            grads,
            moment_1,
            moment_2,
            average,
            factor,
            &scalars,
            has_weight_decay,
            has_average,
        );
        weights[at] = w;
        if has_copies {
            copies[at] = H::cast_from(w);
        }
        j += stride;
    }
}

/// Where element `index` (row-major in `[O, C, positions]`) of a weight lying channels-last
/// (`[O, positions, C]`) lies: [`ViewedWeight::lying_index`](crate::ViewedWeight::lying_index)
/// on the device, in u32 (a parameter's elements are fewer than `i32::MAX`, `ViewPlaces::new`).
#[cube]
fn lying_offset(index: u32, channels: u32, positions: u32) -> u32 {
    let block = channels * positions;
    let within = index % block;
    index - within + (within % positions) * channels + within / positions
}

/// Views of `flat` ([`OptimiserKernels::weight_views`](crate::OptimiserKernels::weight_views)): its memory, from byte `starts[k]·size` on, for
/// `lens[k]` elements, in the parameter's shape, a channels-last one the `[O, C, k…]` view of its
/// `[O, k…, C]` memory ([`ViewedWeight`](crate::ViewedWeight)). A view's binding covers an even
/// number of elements (wgpu binds storage in multiples of four bytes; the padding after each
/// range leaves the room).
pub(super) fn weight_views<R: CubeRuntime>(flat: CubeTensor<R>, places: &ViewPlaces) -> Vec<CubeTensor<R>> {
    let size = flat.dtype.size();
    let total = flat.meta.num_elements();
    let alignment = flat.client.properties().memory.alignment as usize;
    assert!(flat.is_contiguous() && flat.meta.num_dims() == 1, "weight views are of a contiguous 1-D buffer");
    let parts = places.starts().iter().zip(places.lens()).zip(places.weights());
    parts
        .map(|((&start, &len), weight)| {
            let bound = len.next_multiple_of(2);
            assert!(
                (start * size).is_multiple_of(alignment) && start + bound <= total,
                "a weight view at {start} of {len} elements is not aligned to {alignment} bytes within {total}"
            );
            let handle = flat
                .handle
                .clone()
                .offset_start((start * size) as u64)
                .offset_end(((total - start - bound) * size) as u64);
            let lying = weight.lying_shape().into();
            let view = CubeTensor::new_contiguous(flat.client.clone(), flat.device.clone(), lying, handle, flat.dtype);
            if weight.is_channels_last() { seen_channels_first(view) } else { view }
        })
        .collect()
}

/// Checks what [`adam_views_kernel`] reads and writes without bounds checks: the buffers
/// ([`ViewTable::check_update`]), and the weights' and copies' contiguity, which the kernel's
/// indexing assumes. A caller's mistake, so it panics with what does not fit.
pub(super) fn check_views_update<R: RuntimeLibraries, F: FloatElement, I: IntElement, BT: BoolElement>(
    weights: &CubeTensor<R>,
    copies: Option<&CubeTensor<R>>,
    table: &ViewTable<CubeBackend<R, F, I, BT>>,
    flat: &FlatBuffers<CubeBackend<R, F, I, BT>>,
    scale: &CubeTensor<R>,
) {
    table.check_update(weights, copies, flat, scale);
    assert!(weights.is_contiguous(), "the views' buffer is contiguous");
    assert!(copies.is_none_or(CubeTensor::is_contiguous), "the copies' buffer is contiguous");
}

/// What an update of views multiplies the gradients by.
pub(super) enum Scaling<'a, R: CubeRuntime> {
    /// A `[1]` factor computed before ([`OptimiserKernels::adam_update_views`](crate::OptimiserKernels::adam_update_views)).
    Factor(&'a CubeTensor<R>),
    /// The clipping of the gradients' partial squares (1-D f32), computed in the update's launch
    /// ([`OptimiserKernels::adam_update_views_clipping`](crate::OptimiserKernels::adam_update_views_clipping)).
    Clip { partials: &'a CubeTensor<R>, max_norm: f64, grad_scale: f64 },
}

/// [`OptimiserKernels::adam_update_views`](crate::OptimiserKernels::adam_update_views) by [`adam_views_kernel`], in one launch; with
/// [`Scaling::Clip`], [`OptimiserKernels::adam_update_views_clipping`](crate::OptimiserKernels::adam_update_views_clipping), whose `[norm, scale]` it returns
/// too.
///
/// # Safety
/// [`check_views_update`] holds: the kernel reads and writes without bounds checks.
pub(super) unsafe fn update_views<R: RuntimeLibraries, F: FloatElement, I: IntElement, BT: BoolElement>(
    weights: CubeTensor<R>,
    copies: Option<CubeTensor<R>>,
    table: &ViewTable<CubeBackend<R, F, I, BT>>,
    flat: &mut FlatBuffers<CubeBackend<R, F, I, BT>>,
    scaling: Scaling<'_, R>,
    step: &AdamStep,
) -> ViewsUpdated<R> {
    let state = AdamState::take(flat, step);
    let grads = into_contiguous(flat.grads.clone());
    let one = || empty_f32(&grads, [1].into());
    // Without the clipping, new tensors of one value stand in for the norm and the partial
    // squares, never read or written (a buffer cannot be bound twice).
    let (scale, partials, (max_norm, grad_scale), totals) = match scaling {
        Scaling::Factor(scale) => (into_contiguous(scale.clone()), one(), (0.0, 1.0), false),
        Scaling::Clip { partials, max_norm, grad_scale } => {
            (one(), into_contiguous(partials.clone()), (max_norm, grad_scale), true)
        }
    };
    let norm = one();
    let (ends, placement) = (into_contiguous(table.ends().clone()), into_contiguous(table.placement().clone()));
    let client = grads.client.clone();
    let cubes = table.places().len().div_ceil(UNITS_PER_CUBE as usize).clamp(1, MAX_CUBES_PER_VIEWS_UPDATE);
    // Not written without copies: the weights stand in, of another dtype than the kernel's `H`
    // only in name (never read or written).
    let copy_dtype = copies.as_ref().map_or(DType::F32, |c| c.dtype);
    let copies_arg = copies.as_ref().unwrap_or(&weights).clone().into_tensor_arg();
    let partials_len = partials.meta.num_elements();
    let scalars = adam_scalars(step, flat, &weights);
    // SAFETY: the units read the step's scalars below their 8 (`adam_scalars`), read and write
    // the flat buffers below the table's length, which each holds, the scale at 0 (or, totalling, the partial squares below their length, and write
    // the norm and the scale at 0, each new), the tables below `parts` (the last end is the
    // length, so the walk stops there), and the views' buffers at places inside the table's
    // extent, which they hold (`check_views_update`; the places are apart, `ViewPlaces::new`,
    // and the tables int32 values below `i32::MAX`, `ViewTable::new`); the weights and copies
    // are written in place through views that only read them outside this launch, the moments
    // and average are uniquely held ([`writable`]) and contiguous, and no two units touch one
    // element.
    unsafe {
        adam_views_kernel::launch_unchecked::<R>(
            &client,
            CubeCount::new_1d(cubes as u32),
            CubeDim::new_1d(UNITS_PER_CUBE),
            weights.clone().into_tensor_arg(),
            copies_arg,
            ends.clone().into_tensor_arg(),
            placement.clone().into_tensor_arg(),
            table.places().parts(),
            table.places().len(),
            grads.into_tensor_arg(),
            state.moment_1.clone().into_tensor_arg(),
            state.moment_2.clone().into_tensor_arg(),
            state.average.clone().into_tensor_arg(),
            scale.clone().into_tensor_arg(),
            norm.clone().into_tensor_arg(),
            partials.into_tensor_arg(),
            partials_len,
            clip_scalars(max_norm, grad_scale),
            scalars.into_tensor_arg(),
            step.constants().weight_decay != 0.0,
            state.has_average,
            copies.is_some(),
            totals,
            max_norm > 0.0,
            [DType::F32.into(), copy_dtype.into(), ends.dtype.into()],
        );
    }
    state.put_back(flat);
    (weights, copies, totals.then_some([norm, scale]))
}

/// What [`update_views`] gives back: the views' buffer, the copies', and with [`Scaling::Clip`]
/// the norm and the scale.
pub(super) type ViewsUpdated<R> = (CubeTensor<R>, Option<CubeTensor<R>>, Option<[CubeTensor<R>; 2]>);

const _: () = assert!(PLACEMENT_VALUES == 3, "adam_views_kernel reads three placement values a parameter");

/// The most cubes of [`adam_views_kernel`]'s launch: enough to fill a large GPU (1,024 cubes of
/// 256 units), few enough that each unit updates many elements for its one search.
const MAX_CUBES_PER_VIEWS_UPDATE: usize = 1024;
