//! [`OptimiserKernels`] on burn's cubecl backends: the gather, the clipping and the update as our
//! kernels, many parameters a launch.
#![expect(unsafe_code, reason = "cubecl launches a kernel without bounds checks only through unsafe")]

use burn::tensor::ops::{FloatTensor, FloatTensorOps};
use burn::tensor::{DType, FloatDType};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::{BoolElement, CubeBackend, FloatElement, IntElement};

use super::adam::{kernel_updates, portable_update_each, update_all};
use super::gather::{clip_partials, gather, gathers_all, partials_len, sizes, total};
use super::launch::MAX_PARTIALS_IN_UPDATE;
use crate::{
    AdamStep, FlatBuffers, OptimiserKernels, PartialSquares, RuntimeLibraries, UpdatedWeights, ViewPlaces, ViewTable,
    ViewsUpdate, portable,
};

impl<R: RuntimeLibraries, F: FloatElement, I: IntElement, BT: BoolElement> OptimiserKernels
    for CubeBackend<R, F, I, BT>
{
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
            return crate::ops::optimiser::concat_flat_then_squares::<Self>(parts, reuse, device);
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
            return crate::ops::optimiser::concat_flat_then_squares::<Self>(parts, reuse, device);
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
            return crate::ops::optimiser::update_then_cast::<Self>(weights, offsets, flat, scale, step, copy);
        }
        // SAFETY: `kernel_updates` holds, checked just above.
        unsafe { update_all(weights, offsets, flat, scale, step, Some(copy.into())) }
    }

    fn weight_view_alignment(device: &Self::Device) -> Option<usize> {
        Some(R::client(device).properties().memory.alignment as usize)
    }

    fn weight_views(flat: FloatTensor<Self>, places: &ViewPlaces) -> Vec<FloatTensor<Self>> {
        super::views::weight_views(flat, places)
    }

    fn adam_update_views(
        weights: FloatTensor<Self>,
        copies: Option<FloatTensor<Self>>,
        table: &ViewTable<Self>,
        flat: &mut FlatBuffers<Self>,
        scale: &FloatTensor<Self>,
        step: &AdamStep,
    ) -> (FloatTensor<Self>, Option<FloatTensor<Self>>) {
        super::views::check_views_update(&weights, copies.as_ref(), table, flat, scale);
        // SAFETY: `check_views_update` holds, checked just above.
        let (weights, copies, _) = unsafe {
            super::views::update_views(weights, copies, table, flat, super::views::Scaling::Factor(scale), step)
        };
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
            return crate::ops::optimiser::clip_then_update_views::<Self>(weights, copies, table, flat, squares, step);
        }
        super::views::check_views_update(&weights, copies.as_ref(), table, flat, partials);
        let scaling = super::views::Scaling::Clip { partials, max_norm: *max_norm, grad_scale: *grad_scale };
        // SAFETY: `check_views_update` holds, checked just above.
        let (weights, copies, factors) =
            unsafe { super::views::update_views(weights, copies, table, flat, scaling, step) };
        let [norm, scale] = factors.expect("the clipping's factors, asked for");
        ViewsUpdate { weights, copies, norm, scale }
    }
}
