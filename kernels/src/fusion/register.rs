//! Fusion's custom operations, registered: their inputs and outputs, and the optimiser's state
//! taken out of its buffers and put back.

use burn::prelude::*;
use burn::tensor::DType;
use burn::tensor::Shape;
use burn::tensor::ops::{FloatTensor, FloatTensorOps};
use burn_fusion::stream::{Operation, OperationStreams};
use burn_fusion::{Fusion, FusionBackend, FusionRuntime};
use burn_ir::{CustomOpIr, HandleContainer, OperationIr, TensorIr};

use crate::FlatBuffers;

/// The handles fusion gives a custom operation to read its inputs from and write its outputs to.
pub(crate) type Handles<B> = HandleContainer<<<B as FusionBackend>::FusionRuntime as FusionRuntime>::FusionHandle>;

/// The inner backend's tensors of `desc`'s inputs, in order.
pub(crate) fn inputs_of<B: FusionBackend>(desc: &CustomOpIr, handles: &mut Handles<B>) -> Vec<FloatTensor<B>> {
    desc.inputs.iter().map(|t| handles.get_float_tensor::<B>(t)).collect()
}

/// Registers `outputs` as `desc`'s outputs, in order.
pub(crate) fn register_outputs<B: FusionBackend>(
    desc: &CustomOpIr,
    handles: &mut Handles<B>,
    outputs: impl IntoIterator<Item = FloatTensor<B>>,
) {
    for (ir, tensor) in desc.outputs.iter().zip(outputs) {
        handles.register_float_tensor::<B>(&ir.id, tensor);
    }
}

/// Registers the custom operation `make` builds from its description, named `name`, over
/// `inputs` (on one device): its outputs, new tensors of `outputs`' shapes and dtypes.
pub(crate) fn register_custom<B: FusionBackend, O: Operation<B::FusionRuntime> + 'static>(
    name: &'static str,
    inputs: Vec<FloatTensor<Fusion<B>>>,
    outputs: Vec<(Shape, DType)>,
    make: impl FnOnce(CustomOpIr) -> O,
) -> Vec<FloatTensor<Fusion<B>>> {
    let client = inputs[0].client.clone();
    let streams = OperationStreams::with_inputs(inputs.iter());
    let outputs: Vec<TensorIr> = outputs
        .into_iter()
        .map(|(shape, dtype)| TensorIr::uninit(client.create_empty_handle(), shape, dtype))
        .collect();
    let inputs: Vec<TensorIr> = inputs.into_iter().map(burn_fusion::FusionTensor::into_ir).collect();
    let desc = CustomOpIr::new(name, &inputs, &outputs);
    client.register(streams, OperationIr::Custom(desc.clone()), make(desc))
}

/// A tensor's shape and dtype: what an operation that writes it in place gives back.
pub(crate) fn shape_and_dtype<B: FusionBackend>(tensor: &FloatTensor<Fusion<B>>) -> (Shape, DType) {
    (tensor.shape.clone(), tensor.dtype)
}

/// The moments and, where one is kept, the average, taken out of `flat` for an update that
/// writes them in place (so that it holds them once), in that order; empty tensors hold their
/// places until [`put_state`] puts the update's outputs back.
pub(crate) fn take_state<B: FusionBackend>(flat: &mut FlatBuffers<Fusion<B>>) -> Vec<FloatTensor<Fusion<B>>> {
    let take = |buffer: &mut FloatTensor<Fusion<B>>| {
        let device = Fusion::<B>::float_device(buffer);
        let empty = Tensor::<Fusion<B>, 1>::empty([0], &device).into_primitive().tensor();
        std::mem::replace(buffer, empty)
    };
    let mut state = vec![take(&mut flat.moment_1), take(&mut flat.moment_2)];
    state.extend(flat.average.as_mut().map(take));
    state
}

/// The update's new moments and average, the next of `outputs` in [`take_state`]'s order, put
/// back into `flat`.
pub(crate) fn put_state<B: FusionBackend>(
    flat: &mut FlatBuffers<Fusion<B>>,
    outputs: &mut impl Iterator<Item = FloatTensor<Fusion<B>>>,
) {
    flat.moment_1 = outputs.next().expect("moment 1 out");
    flat.moment_2 = outputs.next().expect("moment 2 out");
    if flat.average.is_some() {
        flat.average = Some(outputs.next().expect("the average out"));
    }
}
