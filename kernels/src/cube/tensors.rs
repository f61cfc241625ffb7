//! New and writable tensors for our kernels' outputs.

use burn::tensor::{DType, Shape};
use burn_cubecl::CubeRuntime;
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::ops::permute;
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

/// Whether `t` `[N, C, S]` is channels-last in memory: `[N, S, C]` contiguous seen through a
/// permutation (strides `[S·C, 1, C]`), and not also channels-first (where one channel or one
/// position makes the two layouts one).
pub(crate) fn is_channels_last_3d<R: CubeRuntime>(t: &CubeTensor<R>) -> bool {
    match (t.meta.shape().as_slice(), &t.meta.strides()[..]) {
        (&[_, c, s], &[outer, channel, position]) => {
            outer == s * c && channel == 1 && position == c && !t.is_contiguous()
        }
        _ => false,
    }
}

/// `t` `[N, C, S]` channels-last in memory: itself where it is, else a copy.
pub(crate) fn into_channels_last_3d<R: CubeRuntime>(t: CubeTensor<R>) -> CubeTensor<R> {
    if is_channels_last_3d(&t) {
        return t;
    }
    permute(into_contiguous(permute(t, &[0, 2, 1])), &[0, 2, 1])
}

/// A new tensor `[N, C, S]` of `dtype` on `like`'s device, channels-last in memory (`[N, S, C]`
/// contiguous), its values unset.
pub(crate) fn empty_channels_last_3d<R: CubeRuntime>(
    like: &CubeTensor<R>,
    [n, c, s]: [usize; 3],
    dtype: DType,
) -> CubeTensor<R> {
    permute(empty_like(like, [n, s, c].into(), dtype), &[0, 2, 1])
}
