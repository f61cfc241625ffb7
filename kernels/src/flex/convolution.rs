//! [`ConvolutionKernels`] on the CPU: the convolutions as matrix products over chunks of images
//! (`conv`), max pooling a plane a task (`pool`).

use burn::backend::Flex;
use burn::tensor::DType;
use burn::tensor::ops::{ConvOptions, ConvTransposeOptions, FloatTensor, IntTensor, MaxPool2dWithIndices, ModuleOps};

use crate::{ConvolutionKernels, conv_transpose2d_output_shape, portable, transposed_convolution};

impl ConvolutionKernels for Flex {
    fn max_pool2d_indexed(
        x: FloatTensor<Self>,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
    ) -> MaxPool2dWithIndices<Self> {
        match super::pool::max_pool2d(&x, kernel, stride, padding) {
            Some((output, indices)) => MaxPool2dWithIndices::new(output, indices),
            None => portable::max_pool2d_indexed::<Self>(x, kernel, stride, padding),
        }
    }

    fn max_pool2d_input_grad(
        x: FloatTensor<Self>,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        output_grad: FloatTensor<Self>,
        indices: IntTensor<Self>,
    ) -> FloatTensor<Self> {
        match super::pool::max_pool2d_backward(&x, kernel, stride, padding, &output_grad, &indices) {
            Some(dx) => dx,
            None => portable::max_pool2d_input_grad::<Self>(x, kernel, stride, padding, output_grad, indices),
        }
    }

    fn has_conv2d_products(dtype: DType) -> bool {
        dtype == DType::F32
    }

    fn conv2d_no_bias(x: FloatTensor<Self>, weight: FloatTensor<Self>, options: ConvOptions<2>) -> FloatTensor<Self> {
        match super::conv::conv2d(&x, &weight, &options) {
            Some(y) => y,
            None => super::conv::burn_conv2d(x, weight, options),
        }
    }

    fn conv2d_input_grad(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self> {
        let dx = super::conv::f32_dims4(&x)
            .and_then(|input| super::conv::conv2d_input_grad(input, &weight, &output_grad, &options));
        match dx {
            Some(dx) => dx,
            None => <Self as ModuleOps<Self>>::conv2d_x_backward(x, weight, output_grad, options),
        }
    }

    fn conv_transpose2d_no_bias(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        options: ConvTransposeOptions<2>,
    ) -> FloatTensor<Self> {
        // The input gradient of the convolution transposed, with `x` as its output gradient.
        let y = super::conv::f32_dims4(&x).zip(super::im2col::dims4(&weight)).and_then(|(x_shape, weight_shape)| {
            let output = conv_transpose2d_output_shape(x_shape, weight_shape, &options)?;
            super::conv::conv2d_input_grad(output, &weight, &x, &transposed_convolution(&options)?)
        });
        match y {
            Some(y) => y,
            None => <Self as ModuleOps<Self>>::conv_transpose2d(x, weight, None, options),
        }
    }

    fn conv2d_weight_grad(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self> {
        match super::conv::conv2d_weight_grad(&x, &weight, &output_grad, &options) {
            Some(dw) => dw,
            None => <Self as ModuleOps<Self>>::conv2d_weight_backward(x, weight, output_grad, options),
        }
    }
}
