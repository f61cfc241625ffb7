//! [`GraphKernels`] on burn's cubecl backends: the runtime's capture ([`RuntimeLibraries`]: CUDA
//! graphs on CUDA; none on wgpu).

use burn::prelude::*;
use burn::tensor::TensorMetadata;
use burn::tensor::ops::{BoolTensor, FloatTensor, IntTensor};
use burn::tensor::{BoolStore, DType};
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{BoolElement, CubeBackend, CubeRuntime, FloatElement, IntElement};
use cubecl::bytes::Bytes;

use crate::{CapturedGraph, GraphKernels, RuntimeLibraries};

impl<R: RuntimeLibraries, F: FloatElement, I: IntElement, BT: BoolElement> GraphKernels for CubeBackend<R, F, I, BT> {
    fn capture_graph<T>(device: &Self::Device, mut work: impl FnMut() -> T) -> Result<(CapturedGraph, T), String> {
        // The warm-up's output is dropped as the recorded run begins, its buffers free for it.
        let mut output = None;
        let captured = R::capture_graph(device, &mut || {
            drop(output.take());
            output = Some(work());
        });
        match captured {
            Some(graph) => Ok((graph?, output.expect("the recorded run returned"))),
            None => Err(crate::ops::graph::no_graphs_on(&Self::name(device))),
        }
    }

    fn write_in_place(tensor: &FloatTensor<Self>, data: &TensorData) -> Result<(), String> {
        write_cube(tensor, data)
    }

    fn write_int_in_place(tensor: &IntTensor<Self>, data: &TensorData) -> Result<(), String> {
        write_cube(tensor, data)
    }

    fn write_bool_in_place(tensor: &BoolTensor<Self>, data: &TensorData) -> Result<(), String> {
        // burn's bools are one byte each; the tensor holds them as its backend's store.
        match (data.dtype, tensor.dtype()) {
            (DType::Bool(BoolStore::Native), store @ DType::Bool(_)) => {
                write_cube(tensor, &data.clone().convert_dtype(store))
            }
            _ => write_cube(tensor, data),
        }
    }

    fn writes_in_place() -> bool {
        true
    }
}

/// `data` written into `tensor`'s memory in place, on this thread's stream, where it is of the
/// tensor's shape and dtype and the tensor is contiguous.
fn write_cube<R: CubeRuntime>(tensor: &CubeTensor<R>, data: &TensorData) -> Result<(), String> {
    let (shape, dtype) = (tensor.shape(), tensor.dtype());
    if data.shape != shape || data.dtype != dtype {
        return Err(format!("{:?} {:?} written in place into a tensor of {shape:?} {dtype:?}", data.shape, data.dtype));
    }
    if !tensor.is_contiguous() {
        return Err(format!("written in place into a tensor of {shape:?} that is not contiguous"));
    }
    let bytes = Bytes::from_bytes_vec(data.as_bytes().to_vec());
    tensor.client.write(tensor.handle.clone(), bytes).map_err(|e| format!("written in place: {e}"))
}
