//! [`ConvolutionKernels`] on burn's cubecl backends: the runtime's library where it takes the
//! problem ([`RuntimeLibraries`]), burn's convolution otherwise; the bias's gradient in one launch.
#![expect(unsafe_code, reason = "cubecl launches a kernel without bounds checks only through unsafe")]

use burn::tensor::ops::{ConvOptions, ConvTransposeOptions, FloatTensor, ModuleOps};
use burn::tensor::{DType, TensorMetadata};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::{BoolElement, CubeBackend, FloatElement, IntElement};
use cubecl::CubeDim;
use cubecl::prelude::*;

use super::bias::channel_bias_grad_kernel;
use super::launch::UNITS_PER_CUBE;
use super::tensors::empty_like;
use crate::{ConvolutionKernels, RuntimeLibraries, portable};

impl<R: RuntimeLibraries, F: FloatElement, I: IntElement, BT: BoolElement> ConvolutionKernels
    for CubeBackend<R, F, I, BT>
{
    fn has_conv2d_products(dtype: DType) -> bool {
        R::library_takes(dtype)
    }

    fn has_conv1d_products(dtype: DType) -> bool {
        R::library_takes_conv1d(dtype)
    }

    fn prefers_channels_last(dtype: DType) -> bool {
        let _ = dtype;
        crate::channels_last_on()
    }

    fn has_matrix_products(dtype: DType) -> bool {
        R::library_takes_products(dtype)
    }

    fn matrix_product(
        a: FloatTensor<Self>,
        a_transposed: bool,
        b: FloatTensor<Self>,
        b_transposed: bool,
    ) -> FloatTensor<Self> {
        match R::library_product(&a, a_transposed, &b, b_transposed) {
            Some(c) => c,
            None => portable::matrix_product::<Self>(a, a_transposed, b, b_transposed),
        }
    }

    fn conv2d_no_bias(x: FloatTensor<Self>, weight: FloatTensor<Self>, options: ConvOptions<2>) -> FloatTensor<Self> {
        match R::library_conv2d(&x, &weight, &options) {
            Some(y) => y,
            None => <Self as ModuleOps<Self>>::conv2d(x, weight, None, options),
        }
    }

    fn conv2d_input_grad(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self> {
        match R::library_conv2d_input_grad(&x, &weight, &output_grad, &options) {
            Some(dx) => dx,
            None => <Self as ModuleOps<Self>>::conv2d_x_backward(x, weight, output_grad, options),
        }
    }

    fn conv2d_weight_grad(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self> {
        match R::library_conv2d_weight_grad(&x, &weight, &output_grad, &options) {
            Some(dw) => dw,
            None => <Self as ModuleOps<Self>>::conv2d_weight_backward(x, weight, output_grad, options),
        }
    }

    fn conv_transpose2d_no_bias(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        options: ConvTransposeOptions<2>,
    ) -> FloatTensor<Self> {
        match R::library_conv_transpose2d(&x, &weight, &options) {
            Some(y) => y,
            None => <Self as ModuleOps<Self>>::conv_transpose2d(x, weight, None, options),
        }
    }

    fn channel_bias_grad(output_grad: FloatTensor<Self>) -> FloatTensor<Self> {
        let shape = output_grad.shape();
        let channels = if shape.num_dims() >= 2 { shape[1] } else { 0 };
        let fits =
            crate::ops::elements::kernel_float(output_grad.dtype) && channels > 0 && channels <= u16::MAX as usize;
        if !fits || shape.num_elements() == 0 {
            return portable::channel_bias_grad::<Self>(output_grad);
        }
        let output_grad = into_contiguous(output_grad);
        let dtype = output_grad.dtype;
        let bias_grad = empty_like(&output_grad, [channels].into(), dtype);
        let positions = shape.num_elements() / shape[0] / channels;
        // SAFETY: cube `c < C` reads `output_grad` (contiguous, `N·C·S` elements) at
        // `(n·C + c)·S + s` for `n < N`, `s < S`, and writes `bias_grad[c]`, new, of `C`.
        unsafe {
            channel_bias_grad_kernel::launch_unchecked::<R>(
                &output_grad.client,
                CubeCount::new_1d(channels as u32),
                CubeDim::new_1d(UNITS_PER_CUBE),
                output_grad.clone().into_tensor_arg(),
                bias_grad.clone().into_tensor_arg(),
                channels,
                positions,
                dtype.into(),
            );
        }
        bias_grad
    }
}
