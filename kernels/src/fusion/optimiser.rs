//! [`OptimiserKernels`] under fusion: the gradients' gather, the clipping and Adam's update as
//! custom operations that run the inner backend's kernels.

use std::marker::PhantomData;

use burn::tensor::Shape;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{DType, FloatDType, TensorMetadata};
use burn_fusion::stream::Operation;
use burn_fusion::{Fusion, FusionBackend};
use burn_ir::{CustomOpIr, OperationOutput};

use super::register::{Handles, inputs_of, put_state, register_custom, register_outputs, shape_and_dtype, take_state};
use crate::{
    AdamStep, FlatBuffers, Kernels, OptimiserKernels, PartialSquares, UpdatedWeights, ViewPlaces, ViewTable,
    ViewsUpdate,
};

/// What [`GatherOp`] gives beside the flat buffer.
#[derive(Debug, Clone, Copy)]
pub(crate) enum GatherOutputs {
    /// The flat buffer alone.
    Flat,
    /// Its `Σ x²` too.
    Squares,
    /// Its squares' `len` partial sums too ([`OptimiserKernels::concat_flat_with_partial_squares`](crate::OptimiserKernels::concat_flat_with_partial_squares)).
    PartialSquares { len: usize },
}

impl GatherOutputs {
    /// The custom operation's name, and the lengths of the 1-D outputs that follow the flat
    /// buffer.
    fn name_and_totals(self) -> (&'static str, Vec<usize>) {
        match self {
            Self::Flat => ("lerobot_rs_gather", vec![]),
            Self::Squares => ("lerobot_rs_gather_squares", vec![1]),
            Self::PartialSquares { len } => ("lerobot_rs_gather_partial_squares", vec![len]),
        }
    }
}

/// Whether the inner backend's gather reads every one of `parts` (at least one).
pub(crate) fn gathers_all<B: FusionBackend>(parts: &[FloatTensor<Fusion<B>>]) -> bool {
    !parts.is_empty() && parts.iter().all(|p| crate::ops::elements::kernel_float(p.dtype))
}

/// `parts` ([`gathers_all`]) registered as one [`GatherOp`]: the flat buffer, then the totals
/// `outputs` names.
pub(crate) fn register_gather<B: FusionBackend + Kernels>(
    parts: Vec<FloatTensor<Fusion<B>>>,
    outputs: GatherOutputs,
) -> Vec<FloatTensor<Fusion<B>>> {
    let (name, totals) = outputs.name_and_totals();
    let total = parts.iter().map(|p| p.shape.num_elements()).sum::<usize>();
    let mut shapes = vec![(Shape::from(vec![total]), DType::F32)];
    shapes.extend(totals.into_iter().map(|len| (Shape::from(vec![len]), DType::F32)));
    let make = |desc| GatherOp::<B> { desc, outputs, backend: PhantomData };
    register_custom::<B, _>(name, parts, shapes, make)
}

/// The gradients' gather as fusion's custom operation: the parts in, the flat buffer out, with
/// what `outputs` names.
#[derive(Debug, Clone)]
pub(crate) struct GatherOp<B> {
    pub(crate) desc: CustomOpIr,
    pub(crate) outputs: GatherOutputs,
    pub(crate) backend: PhantomData<B>,
}

impl<B: FusionBackend + Kernels> Operation<B::FusionRuntime> for GatherOp<B> {
    fn execute(&self, handles: &mut Handles<B>) {
        let parts = inputs_of::<B>(&self.desc, handles);
        let device = B::float_device(&parts[0]);
        let outputs: Vec<FloatTensor<B>> = match self.outputs {
            GatherOutputs::Flat => vec![B::concat_flat(parts, None, &device)],
            GatherOutputs::Squares => B::concat_flat_with_squares(parts, None, &device).into(),
            GatherOutputs::PartialSquares { len } => {
                let [flat, partials] = B::concat_flat_with_partial_squares(parts, None, &device);
                assert_eq!(partials.shape().num_elements(), len, "the partial squares the gather was registered with");
                vec![flat, partials]
            }
        };
        register_outputs::<B>(&self.desc, handles, outputs);
    }
}

/// [`OptimiserKernels::clip_partial_squares`](crate::OptimiserKernels::clip_partial_squares) as fusion's custom operation: `[partials]` in, `[norm,
/// scale]` out.
#[derive(Debug, Clone)]
pub(crate) struct ClipPartialsOp<B> {
    pub(crate) desc: CustomOpIr,
    pub(crate) max_norm: f64,
    pub(crate) grad_scale: f64,
    pub(crate) backend: PhantomData<B>,
}

impl<B: FusionBackend + Kernels> Operation<B::FusionRuntime> for ClipPartialsOp<B> {
    fn execute(&self, handles: &mut Handles<B>) {
        let [partials] =
            <[_; 1]>::try_from(inputs_of::<B>(&self.desc, handles)).unwrap_or_else(|_| unreachable!("one input"));
        let squares = PartialSquares { partials, max_norm: self.max_norm, grad_scale: self.grad_scale };
        register_outputs::<B>(&self.desc, handles, B::clip_partial_squares(&squares));
    }
}

/// The fused update as fusion's custom operation: in, the weights, the gradients, the two
/// moments, the average where one is kept, the update's scalars where given, and the scale;
/// out, the new weights, moments and average, then the new weights' copies in `copy` where one
/// is asked for.
#[derive(Debug, Clone)]
pub(crate) struct AdamOp<B> {
    pub(crate) desc: CustomOpIr,
    pub(crate) offsets: Vec<usize>,
    pub(crate) step: AdamStep,
    pub(crate) copy: Option<FloatDType>,
    /// Whether the update's scalars come as the input before the scale ([`FlatBuffers::scalars`]).
    pub(crate) has_scalars: bool,
    pub(crate) backend: PhantomData<B>,
}

impl<B: FusionBackend + Kernels> Operation<B::FusionRuntime> for AdamOp<B> {
    fn execute(&self, handles: &mut Handles<B>) {
        let count = self.offsets.len();
        let mut inputs = inputs_of::<B>(&self.desc, handles);
        let scale = inputs.pop().expect("the scale is the last input");
        let scalars = if self.has_scalars { inputs.pop() } else { None };
        let mut rest = inputs.split_off(count).into_iter();
        let weights = inputs;
        let (grads, moment_1, moment_2) =
            (rest.next().expect("grads"), rest.next().expect("moment 1"), rest.next().expect("moment 2"));
        let mut flat = FlatBuffers::<B> { grads, moment_1, moment_2, average: rest.next(), scalars };
        let UpdatedWeights { weights, copies } =
            crate::adam_update_all_copying::<B>(weights, &self.offsets, &mut flat, &scale, &self.step, self.copy);
        let outputs = weights.into_iter().chain([flat.moment_1, flat.moment_2]).chain(flat.average).chain(copies);
        register_outputs::<B>(&self.desc, handles, outputs);
    }
}

/// [`AdamOp`] registered for the update of `weights` (and their copies in `copy`, where asked).
pub(crate) fn register_adam<B: FusionBackend + Kernels>(
    weights: Vec<FloatTensor<Fusion<B>>>,
    offsets: &[usize],
    flat: &mut FlatBuffers<Fusion<B>>,
    scale: &FloatTensor<Fusion<B>>,
    step: &AdamStep,
    copy: Option<FloatDType>,
) -> UpdatedWeights<Fusion<B>> {
    assert_eq!(weights.len(), offsets.len(), "one offset per parameter");
    crate::ops::adam::check_scalars::<Fusion<B>>(flat);
    if weights.is_empty() {
        return UpdatedWeights { weights, copies: Vec::new() };
    }
    let count = weights.len();
    let state = take_state::<B>(flat);
    let mut outputs: Vec<(Shape, DType)> = weights.iter().chain(&state).map(shape_and_dtype::<B>).collect();
    if let Some(copy) = copy {
        outputs.extend(weights.iter().map(|w| (w.shape.clone(), DType::from(copy))));
    }
    let mut inputs = weights;
    inputs.push(flat.grads.clone());
    inputs.extend(state);
    let has_scalars = flat.scalars.is_some();
    inputs.extend(flat.scalars.clone());
    inputs.push(scale.clone());
    let make =
        |desc| AdamOp::<B> { desc, offsets: offsets.to_vec(), step: *step, copy, has_scalars, backend: PhantomData };
    let mut results = register_custom::<B, _>("lerobot_rs_adam", inputs, outputs, make).into_iter();
    let weights = results.by_ref().take(count).collect();
    put_state::<B>(flat, &mut results);
    UpdatedWeights { weights, copies: results.collect() }
}

impl<B: FusionBackend + Kernels> OptimiserKernels for Fusion<B> {
    fn sum_of_squares(x: FloatTensor<Self>) -> FloatTensor<Self> {
        // In a fixed order, as on cubecl without fusion (burn's whole-tensor sum adds with atomics).
        crate::portable::sum_of_squares_by_rows::<Self>(x)
    }

    fn concat_flat(
        parts: Vec<FloatTensor<Self>>,
        reuse: Option<FloatTensor<Self>>,
        device: &Self::Device,
    ) -> FloatTensor<Self> {
        // Fusion's allocator keeps freed buffers: a new flat buffer costs no page faults here.
        drop(reuse);
        if !gathers_all::<B>(&parts) {
            return crate::portable::concat_flat::<Self>(parts, device);
        }
        register_gather::<B>(parts, GatherOutputs::Flat).output()
    }

    fn concat_flat_with_squares(
        parts: Vec<FloatTensor<Self>>,
        reuse: Option<FloatTensor<Self>>,
        device: &Self::Device,
    ) -> [FloatTensor<Self>; 2] {
        if !gathers_all::<B>(&parts) {
            return crate::ops::optimiser::concat_flat_then_squares::<Self>(parts, reuse, device);
        }
        drop(reuse);
        let outputs = register_gather::<B>(parts, GatherOutputs::Squares);
        outputs.try_into().unwrap_or_else(|_| unreachable!("two outputs registered"))
    }

    fn concat_flat_with_partial_squares(
        parts: Vec<FloatTensor<Self>>,
        reuse: Option<FloatTensor<Self>>,
        device: &Self::Device,
    ) -> [FloatTensor<Self>; 2] {
        if !gathers_all::<B>(&parts) {
            return crate::ops::optimiser::concat_flat_then_squares::<Self>(parts, reuse, device);
        }
        drop(reuse);
        let sizes: Vec<(usize, DType)> = parts.iter().map(|p| (p.shape.num_elements(), p.dtype)).collect();
        let len = B::partial_squares_len(&sizes, device);
        let outputs = register_gather::<B>(parts, GatherOutputs::PartialSquares { len });
        outputs.try_into().unwrap_or_else(|_| unreachable!("two outputs registered"))
    }

    fn partial_squares_len(parts: &[(usize, DType)], device: &Self::Device) -> usize {
        B::partial_squares_len(parts, device)
    }

    fn clip_partial_squares(squares: &PartialSquares<Self>) -> [FloatTensor<Self>; 2] {
        let PartialSquares { partials, max_norm, grad_scale } = squares.clone();
        let outputs = vec![(Shape::from(vec![1]), DType::F32); 2];
        let make = |desc| ClipPartialsOp::<B> { desc, max_norm, grad_scale, backend: PhantomData };
        register_custom::<B, _>("lerobot_rs_clip_partial_squares", vec![partials], outputs, make).outputs()
    }

    fn adam_update_all(
        weights: Vec<FloatTensor<Self>>,
        offsets: &[usize],
        flat: &mut FlatBuffers<Self>,
        scale: &FloatTensor<Self>,
        step: &AdamStep,
    ) -> Vec<FloatTensor<Self>> {
        register_adam::<B>(weights, offsets, flat, scale, step, None).weights
    }

    fn adam_update_all_with_copies(
        weights: Vec<FloatTensor<Self>>,
        offsets: &[usize],
        flat: &mut FlatBuffers<Self>,
        scale: &FloatTensor<Self>,
        step: &AdamStep,
        copy: FloatDType,
    ) -> UpdatedWeights<Self> {
        register_adam::<B>(weights, offsets, flat, scale, step, Some(copy))
    }

    fn weight_view_alignment(device: &Self::Device) -> Option<usize> {
        B::weight_view_alignment(device)
    }

    fn weight_views(flat: FloatTensor<Self>, places: &ViewPlaces) -> Vec<FloatTensor<Self>> {
        super::views::register_weight_views::<B>(flat, places)
    }

    fn adam_update_views(
        weights: FloatTensor<Self>,
        copies: Option<FloatTensor<Self>>,
        table: &ViewTable<Self>,
        flat: &mut FlatBuffers<Self>,
        scale: &FloatTensor<Self>,
        step: &AdamStep,
    ) -> (FloatTensor<Self>, Option<FloatTensor<Self>>) {
        let (weights, copies, _) = super::views::register_adam_views::<B>(
            weights,
            copies,
            table,
            flat,
            super::views::Scaling::Factor(scale),
            step,
        );
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
        let (weights, copies, factors) = super::views::register_adam_views::<B>(
            weights,
            copies,
            table,
            flat,
            super::views::Scaling::Clip(squares),
            step,
        );
        let [norm, scale] = factors.expect("the clipping's factors, asked for");
        ViewsUpdate { weights, copies, norm, scale }
    }
}
