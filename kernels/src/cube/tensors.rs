//! New and writable tensors for our kernels' outputs.

use burn::tensor::{DType, Shape};
use burn_cubecl::CubeRuntime;
use burn_cubecl::tensor::CubeTensor;

/// A tensor whose buffer this call may write: the tensor itself when no other handle shares it
/// and it is contiguous, else a contiguous copy.
pub(crate) fn writable<R: CubeRuntime>(tensor: CubeTensor<R>) -> CubeTensor<R> {
    if tensor.can_mut() && tensor.is_contiguous() { tensor } else { tensor.copy() }
}

/// A new contiguous f32 tensor of `shape`, its values unset.
pub(crate) fn empty_f32<R: CubeRuntime>(like: &CubeTensor<R>, shape: Shape) -> CubeTensor<R> {
    empty_like(like, shape, DType::F32)
}

/// A new contiguous tensor of `shape` and `dtype` on `like`'s device, its values unset.
pub(crate) fn empty_like<R: CubeRuntime>(like: &CubeTensor<R>, shape: Shape, dtype: DType) -> CubeTensor<R> {
    let bytes = shape.num_elements() * dtype.size();
    CubeTensor::new_contiguous(like.client.clone(), like.device.clone(), shape, like.client.empty(bytes), dtype)
}
