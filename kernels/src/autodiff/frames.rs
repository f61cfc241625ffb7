//! [`FrameKernels`] under autodiff: the inner backend's, their outputs outside the graph (frames
//! need no gradient; a crop of images that do takes burn's operations).

use burn::backend::Autodiff;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::ops::{FloatTensor, IntTensor};
use burn::tensor::{FloatDType, Shape};

use crate::{FrameKernels, Kernels, Yuv420Terms};

impl<B: Kernels, C: CheckpointStrategy> FrameKernels for Autodiff<B, C> {
    fn has_yuv420_kernel() -> bool {
        B::has_yuv420_kernel()
    }

    fn yuv420_to_rgb(
        planes: IntTensor<Self>,
        frames: usize,
        size: (usize, usize),
        terms: &Yuv420Terms,
        dtype: FloatDType,
    ) -> Option<FloatTensor<Self>> {
        // Frames are the graph's inputs: nothing flows back through them.
        B::yuv420_to_rgb(planes, frames, size, terms, dtype).map(Self::from_inner)
    }

    fn has_crop_kernel() -> bool {
        B::has_crop_kernel()
    }

    fn crop_windows(
        images: FloatTensor<Self>,
        windows: IntTensor<Self>,
        size: (usize, usize),
    ) -> Option<FloatTensor<Self>> {
        // Images on a gradient's path (a tracked leaf, or computed from one) take burn's
        // operations, which carry it.
        if !images.node.requirement.is_none() {
            return None;
        }
        B::crop_windows(Self::inner(images), windows, size).map(Self::from_inner)
    }

    fn upload_u8(bytes: &[u8], shape: Shape, device: &Self::Device) -> Option<IntTensor<Self>> {
        B::upload_u8(bytes, shape, device)
    }

    fn largest_allocation(device: &Self::Device) -> Option<u64> {
        B::largest_allocation(device)
    }
}
