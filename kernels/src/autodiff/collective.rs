//! [`CollectiveKernels`] under autodiff: the inner backend's, their outputs outside the graph
//! (the trainer sums gradients and weights, which need none).

use burn::backend::Autodiff;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::ops::FloatTensor;

use crate::{CollectiveKernels, DeviceGroup, Kernels};

impl<B: Kernels, C: CheckpointStrategy> CollectiveKernels for Autodiff<B, C> {
    fn group_device(device: &Self::Device) -> Option<usize> {
        B::group_device(device)
    }

    fn group_all_reduce_sum(
        tensor: FloatTensor<Self>,
        group: &DeviceGroup,
    ) -> Option<Result<FloatTensor<Self>, String>> {
        B::group_all_reduce_sum(Self::inner(tensor), group).map(|r| r.map(Self::from_inner))
    }

    fn group_broadcast(tensor: FloatTensor<Self>, group: &DeviceGroup) -> Option<Result<FloatTensor<Self>, String>> {
        B::group_broadcast(Self::inner(tensor), group).map(|r| r.map(Self::from_inner))
    }
}
