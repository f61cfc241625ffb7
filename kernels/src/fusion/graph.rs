//! [`GraphKernels`] under fusion: the inner backend's capture, fusion's queue drained before
//! the capture and after each run of the work, so that what the work asked for reaches the inner
//! backend within the run that records it.

use burn::prelude::*;
use burn::tensor::ops::{BoolTensor, FloatTensor, IntTensor};
use burn_fusion::{Fusion, FusionBackend};

use crate::{CapturedGraph, GraphKernels, GraphReplay, Kernels};

/// A graph captured under fusion, replayed after what fusion queued before the replay (an input
/// written, the last replay's outputs read) has gone to the inner backend.
struct DrainedFirst<R: burn_fusion::FusionRuntime> {
    client: burn_fusion::Client<R>,
    graph: CapturedGraph,
}

impl<R: burn_fusion::FusionRuntime> GraphReplay for DrainedFirst<R> {
    fn replay(&self) -> Result<(), String> {
        self.client.sync(|| ());
        self.graph.replay()
    }
}

impl<B: FusionBackend + Kernels> GraphKernels for Fusion<B> {
    fn capture_graph<T>(device: &Self::Device, mut work: impl FnMut() -> T) -> Result<(CapturedGraph, T), String> {
        let client = burn_fusion::get_client::<B>(device);
        // Each drain hands fusion's queue to the inner backend on this thread's stream, without
        // waiting for the device.
        client.sync(|| ());
        let (graph, output) = B::capture_graph(device, || {
            let output = work();
            client.sync(|| ());
            output
        })?;
        let nodes = graph.nodes();
        Ok((CapturedGraph::new(Box::new(DrainedFirst { client, graph }), nodes), output))
    }

    fn write_in_place(tensor: &FloatTensor<Self>, data: &TensorData) -> Result<(), String> {
        // Resolving runs what fusion queued first, and gives the inner tensor on the same memory.
        let inner = tensor.client.resolve_tensor_float::<B>(tensor.clone());
        B::write_in_place(&inner, data)
    }

    fn write_int_in_place(tensor: &IntTensor<Self>, data: &TensorData) -> Result<(), String> {
        let inner = tensor.client.resolve_tensor_int::<B>(tensor.clone());
        B::write_int_in_place(&inner, data)
    }

    fn write_bool_in_place(tensor: &BoolTensor<Self>, data: &TensorData) -> Result<(), String> {
        let inner = tensor.client.resolve_tensor_bool::<B>(tensor.clone());
        B::write_bool_in_place(&inner, data)
    }

    fn writes_in_place() -> bool {
        B::writes_in_place()
    }
}
