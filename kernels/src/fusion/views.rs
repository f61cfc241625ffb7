//! Weights kept as views of one buffer under fusion: the views, and their update, as fusion's
//! custom operations over the inner backend's (`cube/views.rs`).

use std::marker::PhantomData;

use burn::prelude::*;
use burn::tensor::DType;
use burn::tensor::ops::FloatTensor;
use burn_fusion::stream::Operation;
use burn_fusion::{Fusion, FusionBackend};
use burn_ir::CustomOpIr;

use super::register::{Handles, inputs_of, put_state, register_custom, register_outputs, shape_and_dtype, take_state};
use crate::{AdamStep, FlatBuffers, Kernels, PartialSquares, ViewPlaces, ViewTable, ViewsUpdate};

/// Views of one buffer ([`OptimiserKernels::weight_views`](crate::OptimiserKernels::weight_views)) as fusion's custom operation: the buffer in, the
/// views out, each registered as a tensor of its own, in its parameter's shape, that shares the
/// buffer's memory.
#[derive(Debug, Clone)]
struct WeightViewsOp<B> {
    desc: CustomOpIr,
    places: ViewPlaces,
    backend: PhantomData<B>,
}

impl<B: FusionBackend + Kernels> Operation<B::FusionRuntime> for WeightViewsOp<B> {
    fn execute(&self, handles: &mut Handles<B>) {
        let [flat] =
            <[_; 1]>::try_from(inputs_of::<B>(&self.desc, handles)).unwrap_or_else(|_| unreachable!("one input"));
        register_outputs::<B>(&self.desc, handles, B::weight_views(flat, &self.places));
    }
}

/// The update of weights kept as views as fusion's custom operation: in, the views' buffer, the
/// copies' where one is kept, the table's ends and placement, the gradients, the two moments, the
/// average where one is kept, the scale (or, with `clip`, the partial squares), and the
/// update's scalars where given; out, the views' buffer, the copies', the moments and the
/// average, each written in place (and, with `clip`, the norm and the scale). Registered
/// between two drains of fusion's queue ([`register_adam_views`]).
#[derive(Debug, Clone)]
struct AdamViewsOp<B> {
    desc: CustomOpIr,
    has_copies: bool,
    has_average: bool,
    /// Whether the update's scalars come as its last input ([`FlatBuffers::scalars`]).
    has_scalars: bool,
    /// The clipping (`max_norm`, `grad_scale`) of partial squares, computed by the update.
    clip: Option<(f64, f64)>,
    places: ViewPlaces,
    step: AdamStep,
    backend: PhantomData<B>,
}

impl<B: FusionBackend + Kernels> Operation<B::FusionRuntime> for AdamViewsOp<B> {
    fn execute(&self, handles: &mut Handles<B>) {
        let irs = &self.desc.inputs;
        let table_at = 1 + usize::from(self.has_copies);
        let weights = handles.get_float_tensor::<B>(&irs[0]);
        let copies = self.has_copies.then(|| handles.get_float_tensor::<B>(&irs[1]));
        let ends = handles.get_int_tensor::<B>(&irs[table_at]);
        let placement = handles.get_int_tensor::<B>(&irs[table_at + 1]);
        let table = ViewTable::<B>::from_parts(ends, placement, self.places.clone());
        let mut rest = irs[table_at + 2..].iter().map(|ir| handles.get_float_tensor::<B>(ir));
        let mut next = |what: &str| rest.next().unwrap_or_else(|| panic!("{what} registered as an input"));
        let (grads, moment_1, moment_2) = (next("the gradients"), next("moment 1"), next("moment 2"));
        let average = self.has_average.then(|| next("the average"));
        let scaling = next("the scale or the partial squares");
        let scalars = self.has_scalars.then(|| next("the scalars"));
        let mut flat = FlatBuffers::<B> { grads, moment_1, moment_2, average, scalars };
        let (weights, copies, factors) = match self.clip {
            None => {
                let (weights, copies) = B::adam_update_views(weights, copies, &table, &mut flat, &scaling, &self.step);
                (weights, copies, None)
            }
            Some((max_norm, grad_scale)) => {
                let squares = PartialSquares { partials: scaling, max_norm, grad_scale };
                let ViewsUpdate { weights, copies, norm, scale } =
                    B::adam_update_views_clipping(weights, copies, &table, &mut flat, &squares, &self.step);
                (weights, copies, Some([norm, scale]))
            }
        };
        let outputs = [weights]
            .into_iter()
            .chain(copies)
            .chain([flat.moment_1, flat.moment_2])
            .chain(flat.average)
            .chain(factors.into_iter().flatten());
        register_outputs::<B>(&self.desc, handles, outputs);
    }
}

/// What an update of views multiplies the gradients by ([`register_adam_views`]).
pub(super) enum Scaling<'a, B: FusionBackend> {
    /// A `[1]` factor computed before ([`OptimiserKernels::adam_update_views`](crate::OptimiserKernels::adam_update_views)).
    Factor(&'a FloatTensor<Fusion<B>>),
    /// The clipping of the gradients' partial squares, computed by the update
    /// ([`OptimiserKernels::adam_update_views_clipping`](crate::OptimiserKernels::adam_update_views_clipping)).
    Clip(&'a PartialSquares<Fusion<B>>),
}

/// [`WeightViewsOp`] registered for the views of `flat` at `places`.
pub(super) fn register_weight_views<B: FusionBackend + Kernels>(
    flat: FloatTensor<Fusion<B>>,
    places: &ViewPlaces,
) -> Vec<FloatTensor<Fusion<B>>> {
    let outputs = places.weights().iter().map(|weight| (Shape::from(weight.shape().to_vec()), flat.dtype)).collect();
    let make = |desc| WeightViewsOp::<B> { desc, places: places.clone(), backend: PhantomData };
    register_custom::<B, _>("lerobot_rs_weight_views", vec![flat], outputs, make)
}

/// [`AdamViewsOp`] registered for one update of weights kept as views: the views' buffer, the
/// copies' where one is kept, and with [`Scaling::Clip`] the norm and the scale.
pub(super) fn register_adam_views<B: FusionBackend + Kernels>(
    weights: FloatTensor<Fusion<B>>,
    copies: Option<FloatTensor<Fusion<B>>>,
    table: &ViewTable<Fusion<B>>,
    flat: &mut FlatBuffers<Fusion<B>>,
    scaling: Scaling<'_, B>,
    step: &AdamStep,
) -> ViewsRegistered<B> {
    let (scaling, clip) = match scaling {
        Scaling::Factor(scale) => (scale.clone(), None),
        Scaling::Clip(squares) => (squares.partials.clone(), Some((squares.max_norm, squares.grad_scale))),
    };
    // Checked here too, before the operation is queued (the inner update checks again before
    // its launch), so that a caller's mistake panics on the caller's thread, not on fusion's.
    table.check_update(&weights, copies.as_ref(), flat, &scaling);
    crate::ops::adam::check_scalars::<Fusion<B>>(flat);
    let has_copies = copies.is_some();
    let has_average = flat.average.is_some();
    // The moments and the average leave `flat` for the operation (held once, the inner update
    // writes them in place) and come back as its outputs, as the weights' and copies' buffers do.
    let state = take_state::<B>(flat);
    let mut outputs: Vec<_> = [&weights].into_iter().chain(&copies).chain(&state).map(shape_and_dtype::<B>).collect();
    if clip.is_some() {
        outputs.extend(vec![(Shape::from(vec![1]), DType::F32); 2]);
    }
    let mut inputs = vec![weights];
    inputs.extend(copies);
    inputs.extend([table.ends().clone(), table.placement().clone(), flat.grads.clone()]);
    inputs.extend(state);
    let client = scaling.client.clone();
    inputs.push(scaling);
    let has_scalars = flat.scalars.is_some();
    inputs.extend(flat.scalars.clone());
    let places = table.places().clone();
    let make = |desc| AdamViewsOp::<B> {
        desc,
        has_copies,
        has_average,
        has_scalars,
        clip,
        places,
        step: *step,
        backend: PhantomData,
    };
    // Fusion orders operations by the tensors they name, and the model reads the weights through
    // views, tensors this operation does not name: every operation this thread asked for so far
    // (the reads of the weights as they were among them) goes to the inner backend before the
    // update, and the update before any it asks for after (the reads of the new weights). The
    // inner backend runs them in that order on this thread's stream. (Another thread reading
    // the views would not be ordered: the trainer runs a device's steps on one thread.) Each
    // drain waits for fusion to launch what is queued, not for the device.
    client.sync(|| ());
    let mut results = register_custom::<B, _>("lerobot_rs_adam_views", inputs, outputs, make).into_iter();
    client.sync(|| ());
    let weights = results.next().expect("the weights out");
    let copies = has_copies.then(|| results.next().expect("the copies out"));
    put_state::<B>(flat, &mut results);
    let factors = clip.map(|_| [0, 1].map(|_| results.next().expect("the norm and the scale out")));
    (weights, copies, factors)
}

/// What [`register_adam_views`] gives back: the views' buffer, the copies', and the norm and
/// the scale where the update computed them.
type ViewsRegistered<B> = (FloatTensor<Fusion<B>>, Option<FloatTensor<Fusion<B>>>, Option<[FloatTensor<Fusion<B>>; 2]>);
