//! The convolutions of cubecl's backends: a vendor library where the build has one for the
//! runtime (cuDNN on CUDA, with the `cudnn` feature), burn's own convolution otherwise.

use burn::tensor::DType;
use burn::tensor::ops::ConvOptions;
use burn_cubecl::CubeRuntime;
use burn_cubecl::tensor::CubeTensor;

/// A cubecl runtime's vendor convolution library. Each method returns `None` where there is
/// none, or it does not take the problem: the caller runs burn's convolution then.
pub trait LibraryConv: CubeRuntime {
    /// Whether convolutions of `dtype` go to the library.
    fn library_takes(dtype: DType) -> bool {
        let _ = dtype;
        false
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

    /// The gradient of [`LibraryConv::library_conv2d`] with respect to `x`, given the output's.
    fn library_conv2d_input_grad(
        x: &CubeTensor<Self>,
        w: &CubeTensor<Self>,
        output_grad: &CubeTensor<Self>,
        options: &ConvOptions<2>,
    ) -> Option<CubeTensor<Self>> {
        let _ = (x, w, output_grad, options);
        None
    }

    /// The gradient of [`LibraryConv::library_conv2d`] with respect to `w`, given the output's.
    fn library_conv2d_weight_grad(
        x: &CubeTensor<Self>,
        w: &CubeTensor<Self>,
        output_grad: &CubeTensor<Self>,
        options: &ConvOptions<2>,
    ) -> Option<CubeTensor<Self>> {
        let _ = (x, w, output_grad, options);
        None
    }
}

#[cfg(feature = "wgpu-untuned")]
impl LibraryConv for cubecl::wgpu::WgpuRuntime {}

#[cfg(all(feature = "cuda-untuned", not(feature = "cudnn")))]
impl LibraryConv for cubecl::cuda::CudaRuntime {}

#[cfg(feature = "cudnn")]
impl LibraryConv for cubecl::cuda::CudaRuntime {
    fn library_takes(dtype: DType) -> bool {
        crate::cudnn::takes(dtype)
    }

    fn library_conv2d(
        x: &CubeTensor<Self>,
        w: &CubeTensor<Self>,
        options: &ConvOptions<2>,
    ) -> Option<CubeTensor<Self>> {
        crate::cudnn::conv2d(x, w, options)
    }

    fn library_conv2d_input_grad(
        x: &CubeTensor<Self>,
        w: &CubeTensor<Self>,
        output_grad: &CubeTensor<Self>,
        options: &ConvOptions<2>,
    ) -> Option<CubeTensor<Self>> {
        crate::cudnn::conv2d_input_grad(x, w, output_grad, options)
    }

    fn library_conv2d_weight_grad(
        x: &CubeTensor<Self>,
        w: &CubeTensor<Self>,
        output_grad: &CubeTensor<Self>,
        options: &ConvOptions<2>,
    ) -> Option<CubeTensor<Self>> {
        crate::cudnn::conv2d_weight_grad(x, w, output_grad, options)
    }
}
