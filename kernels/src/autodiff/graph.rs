//! [`GraphKernels`] under autodiff: the inner backend's capture of the work, autodiff's graph
//! built and run on the host as the work asks.

use burn::backend::Autodiff;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::ops::FloatTensor;

use crate::{CapturedGraph, GraphKernels, Kernels};

impl<B: Kernels, C: CheckpointStrategy> GraphKernels for Autodiff<B, C> {
    fn capture_graph<T>(device: &Self::Device, work: impl FnMut() -> T) -> Result<(CapturedGraph, T), String> {
        B::capture_graph(device, work)
    }

    fn write_in_place(tensor: &FloatTensor<Self>, data: &TensorData) -> Result<(), String> {
        B::write_in_place(&Self::inner(tensor.clone()), data)
    }
}
