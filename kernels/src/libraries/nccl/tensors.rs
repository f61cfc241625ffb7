//! NCCL's calls on burn's cuda tensors: their buffers' device pointers, enqueued on the stream
//! cubecl orders their work on, in place where the tensor's buffer is its own.

use burn::tensor::TensorMetadata;
use burn_cubecl::kernel::into_contiguous;

use super::communicator::{Communicator, data_type};
use crate::cube::tensors::empty_like;
use crate::libraries::cudnn::{CudaTensor, buffers, ptr};
use crate::ops::collective_call::Collective;

/// `tensor` after `collective` over `communicator`'s ranks, enqueued on burn's stream: its own
/// buffer where no other tensor shares it, a new one otherwise.
pub(crate) fn run(
    tensor: CudaTensor,
    communicator: &Communicator,
    collective: Collective,
) -> Result<CudaTensor, String> {
    let dtype = tensor.dtype();
    let nccl_type =
        data_type(dtype).ok_or_else(|| format!("NCCL's collective calls take f32, f16 and bf16, not {dtype:?}"))?;
    if tensor.device.index != communicator.device() {
        return Err(format!(
            "a tensor on cuda device {} handed to NCCL's group of device {}",
            tensor.device.index,
            communicator.device()
        ));
    }
    let input = into_contiguous(tensor);
    let output = if input.can_mut() { input.clone() } else { empty_like(&input, input.shape(), dtype) };
    let count = input.shape().num_elements();
    let held = buffers(&[&input, &output], None)?;
    let (send, receive, stream) = (ptr(held.pointers[0]), ptr(held.pointers[1]), held.stream.cast());
    communicator.enqueue(collective, send, receive, count, nccl_type, stream)?;
    drop(held);
    Ok(output)
}
