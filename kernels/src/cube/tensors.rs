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

/// The axes that take a channels-first shape `[N, C, d…]` to its channels-last order `[N, d…, C]`.
fn channels_to_last(rank: usize) -> Vec<usize> {
    std::iter::once(0).chain(2..rank).chain(std::iter::once(1)).collect()
}

/// The axes that take a channels-last order `[N, d…, C]` back to `[N, C, d…]`.
fn channels_to_first(rank: usize) -> Vec<usize> {
    std::iter::once(0).chain(std::iter::once(rank - 1)).chain(1..rank - 1).collect()
}

/// Whether `t` `[N, C, d…]` (three dimensions or more) is channels-last in memory: `[N, d…, C]`
/// contiguous seen through a permutation (a weight `[O, C, kh, kw]`: KRSC), and not also
/// channels-first (where ones make the two layouts one).
pub(crate) fn is_channels_last<R: CubeRuntime>(t: &CubeTensor<R>) -> bool {
    let (shape, strides) = (t.meta.shape().as_slice(), &t.meta.strides()[..]);
    if shape.len() < 3 || t.is_contiguous() {
        return false;
    }
    let mut expected = 1;
    for axis in channels_to_last(shape.len()).into_iter().rev() {
        if shape[axis] != 1 && strides[axis] != expected {
            return false;
        }
        expected *= shape[axis];
    }
    true
}

/// `t` `[N, C, d…]` channels-last in memory: itself where it is, else a copy.
pub(crate) fn into_channels_last<R: CubeRuntime>(t: CubeTensor<R>) -> CubeTensor<R> {
    if is_channels_last(&t) {
        return t;
    }
    let rank = t.meta.shape().len();
    permute(into_contiguous(permute(t, &channels_to_last(rank))), &channels_to_first(rank))
}

/// The `[N, C, d…]` view of `lying`, a tensor `[N, d…, C]` (contiguous or not): a permutation of
/// its dimensions, no copy.
pub(crate) fn seen_channels_first<R: CubeRuntime>(lying: CubeTensor<R>) -> CubeTensor<R> {
    let rank = lying.meta.shape().len();
    permute(lying, &channels_to_first(rank))
}

/// A new tensor of `shape` (`[N, C, d…]`) and `dtype` on `like`'s device, channels-last in memory
/// (`[N, d…, C]` contiguous), its values unset.
pub(crate) fn empty_channels_last<R: CubeRuntime>(
    like: &CubeTensor<R>,
    shape: &[usize],
    dtype: DType,
) -> CubeTensor<R> {
    let lying: Vec<usize> = channels_to_last(shape.len()).into_iter().map(|axis| shape[axis]).collect();
    seen_channels_first(empty_like(like, Shape::from(lying), dtype))
}

/// `t` lying channels-last ([`into_channels_last`]) or else contiguous: itself where it already
/// does, else a copy.
pub(crate) fn into_layout<R: CubeRuntime>(t: CubeTensor<R>, channels_last: bool) -> CubeTensor<R> {
    if channels_last { into_channels_last(t) } else { into_contiguous(t) }
}

/// A new tensor of `shape` and `dtype` on `like`'s device, lying channels-last
/// ([`empty_channels_last`]) or else contiguous, its values unset.
pub(crate) fn empty_in_layout<R: CubeRuntime>(
    like: &CubeTensor<R>,
    shape: &[usize],
    dtype: DType,
    channels_last: bool,
) -> CubeTensor<R> {
    if channels_last {
        empty_channels_last(like, shape, dtype)
    } else {
        empty_like(like, Shape::from(shape.to_vec()), dtype)
    }
}
