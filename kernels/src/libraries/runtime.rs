//! What a cubecl runtime's vendor libraries and driver give beyond burn, where the build has
//! them (CUDA with the `cudnn` feature): the convolutions in cuDNN, matrix products in cuBLAS, and uploads of frames through
//! page-locked memory (`pinned_upload`); burn's own otherwise. With the `nccl` feature, the sums
//! and broadcasts of a device group in NCCL.

use burn::tensor::ops::{ConvOptions, ConvTransposeOptions};
use burn::tensor::{DType, Shape};
use burn_cubecl::CubeRuntime;
use burn_cubecl::tensor::CubeTensor;

use crate::{CapturedGraph, Collective, DeviceGroup};

/// A cubecl runtime's vendor libraries. Each method returns `None` where there is none, or it
/// does not take the problem: the caller runs burn's operation then.
pub trait RuntimeLibraries: CubeRuntime {
    /// Whether convolutions of `dtype` go to the library.
    fn library_takes(dtype: DType) -> bool {
        let _ = dtype;
        false
    }

    /// Whether 1-D convolutions of `dtype`, as height-1 2-D ones, go to the library too.
    fn library_takes_conv1d(dtype: DType) -> bool {
        Self::library_takes(dtype)
    }

    /// Whether the Linear layers' matrix products of `dtype` go to the library
    /// ([`crate::ConvolutionKernels::has_matrix_products`]).
    fn library_takes_products(dtype: DType) -> bool {
        let _ = dtype;
        false
    }

    /// The matrix product `op(a)·op(b)` of 2-D `a` and `b`, each transposed where asked.
    fn library_product(
        a: &CubeTensor<Self>,
        a_transposed: bool,
        b: &CubeTensor<Self>,
        b_transposed: bool,
    ) -> Option<CubeTensor<Self>> {
        let _ = (a, a_transposed, b, b_transposed);
        None
    }

    /// `x` `[N, C, H, W]` convolved with `w` `[O, C / groups, kh, kw]`, without bias.
    fn library_conv2d(
        x: &CubeTensor<Self>,
        w: &CubeTensor<Self>,
        options: &ConvOptions<2>,
    ) -> Option<CubeTensor<Self>> {
        let _ = (x, w, options);
        None
    }

    /// The gradient of [`RuntimeLibraries::library_conv2d`] with respect to `x`, given the output's.
    fn library_conv2d_input_grad(
        x: &CubeTensor<Self>,
        w: &CubeTensor<Self>,
        output_grad: &CubeTensor<Self>,
        options: &ConvOptions<2>,
    ) -> Option<CubeTensor<Self>> {
        let _ = (x, w, output_grad, options);
        None
    }

    /// The gradient of [`RuntimeLibraries::library_conv2d`] with respect to `w`, given the output's.
    fn library_conv2d_weight_grad(
        x: &CubeTensor<Self>,
        w: &CubeTensor<Self>,
        output_grad: &CubeTensor<Self>,
        options: &ConvOptions<2>,
    ) -> Option<CubeTensor<Self>> {
        let _ = (x, w, output_grad, options);
        None
    }

    /// `x` `[N, C_in, H, W]` by `w` `[C_in, C_out / groups, kh, kw]` in a transposed
    /// convolution, without bias (the input gradient of the convolution it transposes).
    fn library_conv_transpose2d(
        x: &CubeTensor<Self>,
        w: &CubeTensor<Self>,
        options: &ConvTransposeOptions<2>,
    ) -> Option<CubeTensor<Self>> {
        let _ = (x, w, options);
        None
    }

    /// `bytes` on `device` as a contiguous uint8 tensor of `shape`. Also `None` where the
    /// runtime's path failed (said once in the log, and not tried again).
    fn upload_u8(bytes: &[u8], shape: Shape, device: &Self::Device) -> Option<CubeTensor<Self>> {
        let _ = (bytes, shape, device);
        None
    }

    /// `work` run as a warm-up, then captured as one graph on this thread's stream
    /// ([`crate::GraphKernels::capture_graph`]); `None` where the runtime cannot capture.
    fn capture_graph(device: &Self::Device, work: &mut dyn FnMut()) -> Option<Result<CapturedGraph, String>> {
        let _ = (device, work);
        None
    }

    /// The number a [`DeviceGroup`] knows `device` by, where the runtime's tensors can join one.
    fn group_device(device: &Self::Device) -> Option<usize> {
        let _ = device;
        None
    }

    /// `collective` of `tensor` over `group`'s ranks, on the device's stream.
    fn group_collective(
        tensor: CubeTensor<Self>,
        group: &DeviceGroup,
        collective: Collective,
    ) -> Option<Result<CubeTensor<Self>, String>> {
        let _ = (tensor, group, collective);
        None
    }
}

#[cfg(feature = "wgpu-untuned")]
impl RuntimeLibraries for cubecl::wgpu::WgpuRuntime {}

#[cfg(all(feature = "cuda-untuned", not(feature = "cudnn")))]
impl RuntimeLibraries for cubecl::cuda::CudaRuntime {
    fn capture_graph(device: &Self::Device, work: &mut dyn FnMut()) -> Option<Result<CapturedGraph, String>> {
        Some(super::graph::capture(device, work))
    }
}

#[cfg(feature = "cudnn")]
impl RuntimeLibraries for cubecl::cuda::CudaRuntime {
    fn library_takes(dtype: DType) -> bool {
        super::cudnn::takes(dtype)
    }

    fn library_takes_conv1d(dtype: DType) -> bool {
        super::cudnn::takes_conv1d(dtype)
    }

    fn library_takes_products(dtype: DType) -> bool {
        super::cudnn::takes_products(dtype)
    }

    fn library_product(
        a: &CubeTensor<Self>,
        a_transposed: bool,
        b: &CubeTensor<Self>,
        b_transposed: bool,
    ) -> Option<CubeTensor<Self>> {
        super::cudnn::product(a, a_transposed, b, b_transposed)
    }

    fn library_conv2d(
        x: &CubeTensor<Self>,
        w: &CubeTensor<Self>,
        options: &ConvOptions<2>,
    ) -> Option<CubeTensor<Self>> {
        super::cudnn::conv2d(x, w, options)
    }

    fn library_conv2d_input_grad(
        x: &CubeTensor<Self>,
        w: &CubeTensor<Self>,
        output_grad: &CubeTensor<Self>,
        options: &ConvOptions<2>,
    ) -> Option<CubeTensor<Self>> {
        super::cudnn::conv2d_input_grad(x, w, output_grad, options)
    }

    fn library_conv2d_weight_grad(
        x: &CubeTensor<Self>,
        w: &CubeTensor<Self>,
        output_grad: &CubeTensor<Self>,
        options: &ConvOptions<2>,
    ) -> Option<CubeTensor<Self>> {
        super::cudnn::conv2d_weight_grad(x, w, output_grad, options)
    }

    fn library_conv_transpose2d(
        x: &CubeTensor<Self>,
        w: &CubeTensor<Self>,
        options: &ConvTransposeOptions<2>,
    ) -> Option<CubeTensor<Self>> {
        super::cudnn::conv_transpose2d(x, w, options)
    }

    fn capture_graph(device: &Self::Device, work: &mut dyn FnMut()) -> Option<Result<CapturedGraph, String>> {
        Some(super::graph::capture(device, work))
    }

    fn upload_u8(bytes: &[u8], shape: Shape, device: &Self::Device) -> Option<CubeTensor<Self>> {
        use std::sync::atomic::{AtomicBool, Ordering};
        static FAILED: AtomicBool = AtomicBool::new(false);
        if bytes.is_empty() || FAILED.load(Ordering::Relaxed) {
            return None;
        }
        super::pinned_upload::upload_u8(bytes, shape, device)
            .inspect_err(|e| {
                if !FAILED.swap(true, Ordering::Relaxed) {
                    tracing::warn!("frames uploaded by burn's own path from now on: the pinned upload failed: {e}");
                }
            })
            .ok()
    }

    #[cfg(feature = "nccl")]
    fn group_device(device: &Self::Device) -> Option<usize> {
        Some(device.index)
    }

    #[cfg(feature = "nccl")]
    fn group_collective(
        tensor: CubeTensor<Self>,
        group: &DeviceGroup,
        collective: Collective,
    ) -> Option<Result<CubeTensor<Self>, String>> {
        Some(super::nccl::run(tensor, &group.communicator, collective))
    }
}
