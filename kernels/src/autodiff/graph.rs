//! [`GraphKernels`] under autodiff: the inner backend's capture of the work, autodiff's graph
//! built and run on the host as the work asks.

use burn::backend::Autodiff;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::ops::{BoolTensor, FloatTensor, IntTensor};

use crate::{CapturedGraph, GraphKernels, Kernels};

impl<B: Kernels, C: CheckpointStrategy> GraphKernels for Autodiff<B, C> {
    fn capture_graph<T>(device: &Self::Device, work: impl FnMut() -> T) -> Result<(CapturedGraph, T), String> {
        B::capture_graph(device, work)
    }

    fn write_in_place(tensor: &FloatTensor<Self>, data: &TensorData) -> Result<(), String> {
        B::write_in_place(&Self::inner(tensor.clone()), data)
    }

    fn write_int_in_place(tensor: &IntTensor<Self>, data: &TensorData) -> Result<(), String> {
        B::write_int_in_place(tensor, data)
    }

    fn write_bool_in_place(tensor: &BoolTensor<Self>, data: &TensorData) -> Result<(), String> {
        B::write_bool_in_place(tensor, data)
    }

    fn writes_in_place() -> bool {
        B::writes_in_place()
    }
}
