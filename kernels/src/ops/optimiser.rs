//! The optimiser's family of [`Kernels`](super::Kernels): the gradients gathered into the flat
//! buffer, their norm and clipping, and Adam's update of every parameter (of weights kept as
//! views of one buffer too).

use burn::prelude::*;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{DType, FloatDType, TensorMetadata};

use super::adam::{AdamStep, FlatBuffers, PartialSquares, UpdatedWeights, ViewsUpdate};
use super::portable;
use super::views::{ViewPlaces, ViewTable};

/// The optimiser's fused operations, for backend `Self`: gather, norm, clipping and update.
pub trait OptimiserKernels: Backend {
    /// `Σ x²` of a 1-D float tensor, as a `[1]` f32 tensor left on the device.
    fn sum_of_squares(x: FloatTensor<Self>) -> FloatTensor<Self> {
        portable::sum_of_squares::<Self>(x)
    }

    /// Float tensors of any shapes and layouts laid end to end, each in row-major order, as one
    /// 1-D f32 tensor (the gradients gathered into the flat buffer). `reuse`, a flat buffer of
    /// the same length no longer needed (the previous step's), may be written over instead of
    /// allocating: the CPU's allocator would otherwise hand a gigabyte back to the system every
    /// step and fault its pages in again.
    fn concat_flat(
        parts: Vec<FloatTensor<Self>>,
        reuse: Option<FloatTensor<Self>>,
        device: &Self::Device,
    ) -> FloatTensor<Self> {
        drop(reuse);
        portable::concat_flat::<Self>(parts, device)
    }

    /// [`OptimiserKernels::concat_flat`] and [`OptimiserKernels::sum_of_squares`] of its result, the same values,
    /// in one pass where the backend has one: the gradients' norm read as they are gathered,
    /// not from the gathered buffer again (the norm of one replica's only micro-batch).
    fn concat_flat_with_squares(
        parts: Vec<FloatTensor<Self>>,
        reuse: Option<FloatTensor<Self>>,
        device: &Self::Device,
    ) -> [FloatTensor<Self>; 2] {
        concat_flat_then_squares::<Self>(parts, reuse, device)
    }

    /// torch's `clip_grad_norm_` from the gradients' `Σ g²` (`[1]`, f32): `[norm, scale]`, the
    /// global L2 norm of the gradients divided by `grad_scale` (the factor they carry) and what
    /// the gradients are multiplied by: `min(1, max_norm / (norm + 1e-6))` (1 when `max_norm` is
    /// 0) divided by `grad_scale`. Both `[1]`, left on the device.
    fn clip_factors(squares: FloatTensor<Self>, max_norm: f64, grad_scale: f64) -> [FloatTensor<Self>; 2] {
        portable::clip_factors::<Self>(squares, max_norm, grad_scale)
    }

    /// [`OptimiserKernels::concat_flat_with_squares`] with the squares left as partial sums (1-D f32):
    /// `[flat, partials]`, for [`OptimiserKernels::clip_partial_squares`] or an update that totals them
    /// itself ([`OptimiserKernels::adam_update_views_clipping`]). The GPU backends leave a sum per cube of
    /// the gather's launches; the default, one.
    fn concat_flat_with_partial_squares(
        parts: Vec<FloatTensor<Self>>,
        reuse: Option<FloatTensor<Self>>,
        device: &Self::Device,
    ) -> [FloatTensor<Self>; 2] {
        Self::concat_flat_with_squares(parts, reuse, device)
    }

    /// How many partial sums [`OptimiserKernels::concat_flat_with_partial_squares`] gives for parts of
    /// these element counts and dtypes, in order: 1 by default.
    fn partial_squares_len(parts: &[(usize, DType)], device: &Self::Device) -> usize {
        let _ = (parts, device);
        1
    }

    /// [`OptimiserKernels::clip_factors`] of the total of `squares`' partial sums: `[norm, scale]`. The
    /// GPU backends total and clip in one launch.
    fn clip_partial_squares(squares: &PartialSquares<Self>) -> [FloatTensor<Self>; 2] {
        let partials = squares.partials.clone();
        let total = if partials.shape().num_elements() == 1 { partials } else { Self::float_sum(partials) };
        Self::clip_factors(total, squares.max_norm, squares.grad_scale)
    }

    /// Updates one parameter, `weights` (1-D, f32), whose ranges of `flat` start at `offset`, as
    /// [`AdamStep`] says, its gradient multiplied by the `[1]` tensor `scale`; returns the new
    /// weights and updates the moments and the average in place.
    fn adam_update(
        weights: FloatTensor<Self>,
        flat: &mut FlatBuffers<Self>,
        offset: usize,
        scale: &FloatTensor<Self>,
        step: &AdamStep,
    ) -> FloatTensor<Self> {
        portable::adam_update::<Self>(weights, flat, offset, scale, step)
    }

    /// Updates every trainable parameter of a step: `weights[k]` (1-D, f32) owns the ranges of
    /// `flat` that start at `offsets[k]`; returns the new weights in the same order (written over
    /// the given ones where the backend can, and no other handle shares them). The same
    /// numbers as [`OptimiserKernels::adam_update`] on each in turn, which is what it does unless the
    /// backend updates many parameters in one launch.
    fn adam_update_all(
        weights: Vec<FloatTensor<Self>>,
        offsets: &[usize],
        flat: &mut FlatBuffers<Self>,
        scale: &FloatTensor<Self>,
        step: &AdamStep,
    ) -> Vec<FloatTensor<Self>> {
        adam_update_each::<Self>(weights, offsets, flat, scale, step)
    }

    /// [`OptimiserKernels::adam_update_all`], also returning each new weight cast to `copy` (f16 or
    /// bf16: the copy a half-precision forward reads), with the rounding of burn's cast. The
    /// GPU backends write both in one pass; the others update, then cast.
    fn adam_update_all_with_copies(
        weights: Vec<FloatTensor<Self>>,
        offsets: &[usize],
        flat: &mut FlatBuffers<Self>,
        scale: &FloatTensor<Self>,
        step: &AdamStep,
        copy: FloatDType,
    ) -> UpdatedWeights<Self> {
        update_then_cast::<Self>(weights, offsets, flat, scale, step, copy)
    }

    /// The alignment, in bytes, at which this backend keeps weights as views of one flat buffer
    /// ([`OptimiserKernels::weight_views`]) that [`OptimiserKernels::adam_update_views`] updates in one pass over
    /// every parameter; `None` (the default) where it keeps none, and the weights are updated
    /// tensor by tensor ([`OptimiserKernels::adam_update_all`]).
    fn weight_view_alignment(_device: &Self::Device) -> Option<usize> {
        None
    }

    /// Views of the 1-D buffer `flat` (of the places' extent), which share its memory: the `k`-th
    /// is the `k`-th parameter's elements at its place ([`ViewPlaces::new`], made with
    /// [`OptimiserKernels::weight_view_alignment`]), in its shape, lying as its
    /// [`ViewedWeight`](crate::ViewedWeight) says (a channels-last one a permuted view). Only on a backend that keeps views; others panic, as
    /// their alignment (`None`) says.
    fn weight_views(_flat: FloatTensor<Self>, _places: &ViewPlaces) -> Vec<FloatTensor<Self>> {
        panic!("this backend keeps no weight views: OptimiserKernels::weight_view_alignment is None")
    }

    /// [`OptimiserKernels::adam_update_all`] of weights kept as views ([`OptimiserKernels::weight_views`]) of
    /// `weights`, the flat f32 buffer laid out as `table` says, in one pass: written in place,
    /// though the views share it (so that the model reads the new weights), as are `copies`,
    /// the views' buffer of the half-precision copies when one is kept. Every operation the
    /// calling thread asked for before reads the weights as they were, every one after as they
    /// are. Returns both buffers. The same numbers as [`OptimiserKernels::adam_update_all`]. Only on a
    /// backend that keeps views; others panic.
    fn adam_update_views(
        _weights: FloatTensor<Self>,
        _copies: Option<FloatTensor<Self>>,
        _table: &ViewTable<Self>,
        _flat: &mut FlatBuffers<Self>,
        _scale: &FloatTensor<Self>,
        _step: &AdamStep,
    ) -> (FloatTensor<Self>, Option<FloatTensor<Self>>) {
        panic!("this backend keeps no weight views: OptimiserKernels::weight_view_alignment is None")
    }

    /// [`OptimiserKernels::adam_update_views`] by the clipping of `squares` (the gradients' partial
    /// squares, [`OptimiserKernels::concat_flat_with_partial_squares`]): the update totals them and
    /// computes the factors itself where the backend can (one launch for the clipping's last
    /// step and the update), else [`OptimiserKernels::clip_partial_squares`] first. Returns both
    /// buffers, and the `[norm, scale]` of [`OptimiserKernels::clip_partial_squares`], to the bit.
    fn adam_update_views_clipping(
        weights: FloatTensor<Self>,
        copies: Option<FloatTensor<Self>>,
        table: &ViewTable<Self>,
        flat: &mut FlatBuffers<Self>,
        squares: &PartialSquares<Self>,
        step: &AdamStep,
    ) -> ViewsUpdate<Self> {
        clip_then_update_views::<Self>(weights, copies, table, flat, squares, step)
    }
}

/// [`OptimiserKernels::adam_update_all`], with the new weights' copies in `copy` where one is asked for
/// ([`OptimiserKernels::adam_update_all_with_copies`]; none otherwise).
pub fn adam_update_all_copying<B: OptimiserKernels>(
    weights: Vec<FloatTensor<B>>,
    offsets: &[usize],
    flat: &mut FlatBuffers<B>,
    scale: &FloatTensor<B>,
    step: &AdamStep,
    copy: Option<FloatDType>,
) -> UpdatedWeights<B> {
    match copy {
        Some(copy) => B::adam_update_all_with_copies(weights, offsets, flat, scale, step, copy),
        None => UpdatedWeights { weights: B::adam_update_all(weights, offsets, flat, scale, step), copies: Vec::new() },
    }
}

/// [`OptimiserKernels::adam_update_all_with_copies`] in two passes, the update then burn's cast: where a
/// backend has no single pass (and the GPU backends' fallback for tensors their kernel declines).
pub(crate) fn update_then_cast<B: OptimiserKernels>(
    weights: Vec<FloatTensor<B>>,
    offsets: &[usize],
    flat: &mut FlatBuffers<B>,
    scale: &FloatTensor<B>,
    step: &AdamStep,
    copy: FloatDType,
) -> UpdatedWeights<B> {
    let weights = B::adam_update_all(weights, offsets, flat, scale, step);
    let copies = weights.iter().map(|w| B::float_cast(w.clone(), copy)).collect();
    UpdatedWeights { weights, copies }
}

/// [`OptimiserKernels::adam_update_all`] one parameter at a time ([`OptimiserKernels::adam_update`]).
fn adam_update_each<B: OptimiserKernels>(
    weights: Vec<FloatTensor<B>>,
    offsets: &[usize],
    flat: &mut FlatBuffers<B>,
    scale: &FloatTensor<B>,
    step: &AdamStep,
) -> Vec<FloatTensor<B>> {
    assert_eq!(weights.len(), offsets.len(), "one offset per parameter");
    weights
        .into_iter()
        .zip(offsets)
        .map(|(weights, &offset)| B::adam_update(weights, flat, offset, scale, step))
        .collect()
}

/// [`OptimiserKernels::adam_update_views_clipping`] in two steps: [`OptimiserKernels::clip_partial_squares`], then
/// [`OptimiserKernels::adam_update_views`] by its scale (the default, and the GPU backends' way where the
/// partial sums are too many for every cube of the update to total).
pub(crate) fn clip_then_update_views<B: OptimiserKernels>(
    weights: FloatTensor<B>,
    copies: Option<FloatTensor<B>>,
    table: &ViewTable<B>,
    flat: &mut FlatBuffers<B>,
    squares: &PartialSquares<B>,
    step: &AdamStep,
) -> ViewsUpdate<B> {
    let [norm, scale] = B::clip_partial_squares(squares);
    let (weights, copies) = B::adam_update_views(weights, copies, table, flat, &scale, step);
    ViewsUpdate { weights, copies, norm, scale }
}

/// [`OptimiserKernels::concat_flat`], then [`OptimiserKernels::sum_of_squares`] of the gathered buffer: two passes,
/// where a backend has no single one (and the fallback of Flex and of the GPU backends for parts
/// their passes cannot read).
pub(crate) fn concat_flat_then_squares<B: OptimiserKernels>(
    parts: Vec<FloatTensor<B>>,
    reuse: Option<FloatTensor<B>>,
    device: &B::Device,
) -> [FloatTensor<B>; 2] {
    let flat = B::concat_flat(parts, reuse, device);
    let squares = B::sum_of_squares(flat.clone());
    [flat, squares]
}
