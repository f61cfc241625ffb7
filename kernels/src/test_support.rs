//! What the kernels' tests share: the activations they cover, and how they compare results.

use burn::backend::Flex;
use burn::backend::flex::FlexTensor;
use burn::prelude::*;

use crate::Activation;

/// Every activation a norm can fuse.
pub(crate) const ACTIVATIONS: [Activation; 3] = [Activation::Identity, Activation::Relu, Activation::Mish];

/// The largest difference between `a` and `b`, relative to `b`'s largest magnitude.
pub(crate) fn max_relative<const D: usize>(a: Tensor<Flex, D>, b: Tensor<Flex, D>) -> f32 {
    let scale = b.clone().abs().max().into_scalar().max(1e-6);
    (a - b).abs().max().into_scalar() / scale
}

/// Asserts that each of `ours` is within `bound` of `reference`'s counterpart, relative to the
/// latter's largest magnitude.
pub(crate) fn assert_all_close(ours: &[FlexTensor], reference: &[FlexTensor], bound: f32, case: &str) {
    for (a, b) in ours.iter().zip(reference) {
        let (a, b) = (a.to_contiguous(), b.to_contiguous());
        let (a, b) = (a.as_slice::<f32>().unwrap(), b.as_slice::<f32>().unwrap());
        let scale = b.iter().fold(1e-6f32, |m, v| m.max(v.abs()));
        let worst = a.iter().zip(b).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        assert!(worst / scale < bound, "{case}: {worst} of {scale}");
    }
}
