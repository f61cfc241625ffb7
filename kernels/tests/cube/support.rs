//! Values, tensors and comparisons the checks share.

use burn::backend::wgpu::WgpuDevice;
use burn::prelude::*;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{FloatDType, TensorMetadata, TensorPrimitive};
use kernels::FlatBuffers;

pub(crate) fn values(n: usize, seed: f32) -> Vec<f32> {
    (0..n).map(|i| ((i as f32 * 0.7548 + seed).sin() * 43758.547).fract() - 0.5).collect()
}

pub(crate) fn primitive<B: Backend>(values: Vec<f32>, device: &B::Device) -> FloatTensor<B> {
    let n = values.len();
    Tensor::<B, 1>::from_data(TensorData::new(values, [n]), device).into_primitive().tensor()
}

pub(crate) fn read<B: Backend>(t: &FloatTensor<B>) -> Vec<f32> {
    Tensor::<B, 1>::from_primitive(TensorPrimitive::Float(t.clone())).into_data().to_vec().unwrap()
}

use super::WgpuKernels;

/// The largest difference between `a` and `b` relative to the larger magnitude (or 1e-3 for
/// values near zero).
pub(crate) fn max_relative(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(a, b)| (a - b).abs() / a.abs().max(b.abs()).max(1e-3)).fold(0.0, f32::max)
}

/// The buffers of `len` weights, the same on both backends.
pub(crate) fn buffers<B: Backend>(len: usize, device: &B::Device) -> FlatBuffers<B> {
    FlatBuffers {
        grads: primitive::<B>(values(len, 1.0), device),
        moment_1: primitive::<B>(values(len, 2.0).iter().map(|v| v * 1e-2).collect(), device),
        moment_2: primitive::<B>(values(len, 3.0).iter().map(|v| v * v * 1e-3).collect(), device),
        average: Some(primitive::<B>(values(len, 4.0), device)),
        scalars: None,
    }
}

/// The bytes of a tensor of any dtype.
pub(crate) fn bytes<B: Backend>(t: &FloatTensor<B>) -> Vec<u8> {
    Tensor::<B, 1>::from_primitive(TensorPrimitive::Float(t.clone())).into_data().as_bytes().to_vec()
}

/// The half precisions the device computes in (f16 at least: lavapipe has it).
pub(crate) fn half_dtypes<Gpu: WgpuKernels>(device: &WgpuDevice) -> Vec<FloatDType> {
    let supported: Vec<FloatDType> =
        [FloatDType::F16, FloatDType::BF16].into_iter().filter(|&d| Gpu::supports_dtype(device, d.into())).collect();
    assert!(supported.contains(&FloatDType::F16), "the wgpu device computes in f16");
    supported
}

/// The largest difference between `a` and `b` relative to the largest magnitude in `b`.
pub(crate) fn max_error_relative_to_largest(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    let largest = b.iter().fold(0f32, |m, v| m.max(v.abs())).max(f32::MIN_POSITIVE);
    a.iter().zip(b).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max) / largest
}

/// `values` as a `[N, C, S]` tensor's primitive.
pub(crate) fn primitive_3d<B: Backend>(values: Vec<f32>, [n, c, s]: [usize; 3], device: &B::Device) -> FloatTensor<B> {
    Tensor::<B, 1>::from_data(TensorData::new(values, [n * c * s]), device).reshape([n, c, s]).into_primitive().tensor()
}

/// The values of a tensor of any rank, in order.
pub(crate) fn read_any<B: Backend>(t: FloatTensor<B>) -> Vec<f32> {
    let n = t.shape().num_elements();
    read::<B>(&Tensor::<B, 1>::from_primitive(TensorPrimitive::Float(t)).reshape([n]).into_primitive().tensor())
}
