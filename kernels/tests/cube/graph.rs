//! The graph family on wgpu: tensors written in place (how a captured graph's inputs change
//! between replays), and a capture refused with a reason (CUDA graphs are CUDA's; the capture
//! itself is checked on a GPU, `bench gpu-check --only cuda-graph`).

use burn::backend::wgpu::WgpuDevice;
use burn::prelude::*;
use burn::tensor::TensorPrimitive;
use kernels::GraphKernels;

use super::WgpuKernels;
use super::support::values;

/// Written in place, a tensor reads back what was written, as does every tensor on its memory
/// and the work queued after the write, while the work queued before it read the old values;
/// data of another shape or dtype, and a tensor that is not contiguous, are refused with nothing
/// written.
pub(crate) fn a_tensor_written_in_place_is_read_so_by_the_work_after<Gpu: WgpuKernels>() {
    let device = WgpuDevice::default();
    let (old, new) = (values(64, 1.0), values(64, 2.0));
    let input = Tensor::<Gpu, 2>::from_data(TensorData::new(old.clone(), [8, 8]), &device);
    let sharing = input.clone();
    let before = input.clone() * 2.0;
    <Gpu as GraphKernels>::write_in_place(
        &input.clone().into_primitive().tensor(),
        &TensorData::new(new.clone(), [8, 8]),
    )
    .expect("written in place");
    let after = input.clone() * 2.0;
    let read = |t: Tensor<Gpu, 2>| -> Vec<f32> { t.into_data().to_vec().unwrap() };
    let doubled = |v: &[f32]| -> Vec<f32> { v.iter().map(|x| x * 2.0).collect() };
    assert_eq!(read(before), doubled(&old), "the work asked for before the write read the old values");
    assert_eq!(read(after), doubled(&new), "the work asked for after it reads the new ones");
    assert_eq!(read(sharing.clone()), new, "a tensor on the same memory sees them");

    let refused = |tensor: &Tensor<Gpu, 2>, data: TensorData| {
        <Gpu as GraphKernels>::write_in_place(&tensor.clone().into_primitive().tensor(), &data).unwrap_err()
    };
    let wrong_shape = refused(&input, TensorData::new(old.clone(), [4, 16]));
    assert!(wrong_shape.contains("[4, 16]"), "{wrong_shape}");
    let wrong_dtype = refused(&input, TensorData::new(vec![0.5f64; 64], [8, 8]));
    assert!(wrong_dtype.contains("F64"), "{wrong_dtype}");
    let transposed = refused(&input.clone().transpose(), TensorData::new(old.clone(), [8, 8]));
    assert!(transposed.contains("not contiguous"), "{transposed}");
    assert_eq!(read(sharing), new, "nothing was written by a refused write");
}

/// wgpu has no graphs: capturing says so, by the backend's name, and the work is not run.
pub(crate) fn a_capture_on_wgpu_is_refused_with_its_reason<Gpu: WgpuKernels>() {
    let device = WgpuDevice::default();
    let mut runs = 0;
    let refused = <Gpu as GraphKernels>::capture_graph(&device, || {
        runs += 1;
        Tensor::<Gpu, 1>::from_primitive(TensorPrimitive::Float(super::support::primitive::<Gpu>(
            values(4, 0.0),
            &device,
        )))
    })
    .unwrap_err();
    assert!(refused.contains("burn's cuda backend only"), "{refused}");
    assert_eq!(runs, 0, "the work ran on a backend that cannot capture it");
}
