//! [`CollectiveKernels`] under fusion: the inner backend's calls on the tensor fusion resolves
//! (its pending operations run first), the result registered as a new tensor.

use burn::tensor::TensorMetadata;
use burn::tensor::ops::FloatTensor;
use burn_fusion::stream::OperationStreams;
use burn_fusion::{Fusion, FusionBackend};
use burn_ir::{InitOperationIr, OperationIr, OperationOutput};

use crate::{Collective, CollectiveKernels, DeviceGroup, Kernels};

/// `tensor` resolved to the inner backend's, after `call`, registered again with fusion; `None`
/// where the inner backend has no device groups (checked first: nothing is resolved then).
fn through_inner<B: FusionBackend + Kernels>(
    tensor: FloatTensor<Fusion<B>>,
    call: impl FnOnce(FloatTensor<B>) -> Option<Result<FloatTensor<B>, String>>,
) -> Option<Result<FloatTensor<Fusion<B>>, String>> {
    B::group_device(tensor.client.device())?;
    let client = tensor.client.clone();
    let inner = client.resolve_tensor_float::<B>(tensor);
    let output = match call(inner)? {
        Ok(output) => output,
        Err(e) => return Some(Err(e)),
    };
    // As fusion's own `float_from_data`: the inner backend's tensor, registered as a new one.
    let (shape, dtype) = (output.shape(), output.dtype());
    let handle = B::float_tensor_handle(output);
    let init = InitOperationIr::create(shape, dtype, || client.register_tensor_handle(handle));
    let op = burn_fusion::NoOp::<B>::new();
    Some(Ok(client.register(OperationStreams::default(), OperationIr::Init(init), op).output()))
}

impl<B: FusionBackend + Kernels> CollectiveKernels for Fusion<B> {
    fn group_device(device: &Self::Device) -> Option<usize> {
        B::group_device(device)
    }

    fn group_collective(
        tensor: FloatTensor<Self>,
        group: &DeviceGroup,
        collective: Collective,
    ) -> Option<Result<FloatTensor<Self>, String>> {
        through_inner::<B>(tensor, |inner| B::group_collective(inner, group, collective))
    }
}
