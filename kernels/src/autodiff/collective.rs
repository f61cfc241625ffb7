//! [`CollectiveKernels`] under autodiff: the inner backend's, their outputs outside the graph
//! (the trainer sums gradients and weights, which need none).

use burn::backend::Autodiff;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::ops::FloatTensor;

use crate::{Collective, CollectiveKernels, DeviceGroup, Kernels};

impl<B: Kernels, C: CheckpointStrategy> CollectiveKernels for Autodiff<B, C> {
    fn group_device(device: &Self::Device) -> Option<usize> {
        B::group_device(device)
    }

    fn group_collective(
        tensor: FloatTensor<Self>,
        group: &DeviceGroup,
        collective: Collective,
    ) -> Option<Result<FloatTensor<Self>, String>> {
        B::group_collective(Self::inner(tensor), group, collective).map(|r| r.map(Self::from_inner))
    }
}
