//! The convolutions' family of [`Kernels`](super::Kernels): 2-D convolutions and transposed
//! convolutions without bias and their gradients, the Linear layers' matrix products, the
//! channel bias, and max pooling.

use burn::prelude::*;
use burn::tensor::ops::{ConvOptions, ConvTransposeOptions, FloatTensor, IntTensor, MaxPool2dWithIndices, ModuleOps};
use burn::tensor::{DType, TensorMetadata, TensorPrimitive};

use super::portable;
use super::transposed::transposed_convolution;

/// The convolutions and pooling of a training step, for backend `Self`.
pub trait ConvolutionKernels: Backend {
    /// Whether [`ConvolutionKernels::conv2d_no_bias`] and its gradients are this backend's own
    /// matrix-product kernels for tensors of `dtype` (the CPU's in f32, cuDNN's on cuda), rather
    /// than burn's convolution. A caller that would otherwise build a convolution from burn's matrix
    /// product (the U-Net's 1-D convolutions) takes [`conv2d`] where this holds.
    fn has_conv2d_products(dtype: DType) -> bool {
        let _ = dtype;
        false
    }

    /// Whether a 1-D convolution of `dtype` should be [`conv2d`] of height 1: where
    /// [`ConvolutionKernels::has_conv2d_products`] holds, unless the backend's library is set to leave 1-D
    /// convolutions to the caller's matrix product (`kernels::cudnn::use_conv1d`).
    fn has_conv1d_products(dtype: DType) -> bool {
        Self::has_conv2d_products(dtype)
    }

    /// Whether this backend's convolutions of `dtype` are fastest on channels-last feature maps
    /// (`[N, C, H, W]` views of `[N, H, W, C]` memory), so that a model should keep its maps
    /// that way between them ([`crate::channels_last_on`] on the GPU backends; never on the CPU,
    /// whose kernels copy to channels-first).
    fn prefers_channels_last(dtype: DType) -> bool {
        let _ = dtype;
        false
    }

    /// A 2-D convolution without bias, `x` `[N, C, H, W]` by `weight` `[O, C, kh, kw]`, as
    /// burn's `conv2d` computes it (its implementation, unless the backend has a faster one).
    fn conv2d_no_bias(x: FloatTensor<Self>, weight: FloatTensor<Self>, options: ConvOptions<2>) -> FloatTensor<Self> {
        <Self as ModuleOps<Self>>::conv2d(x, weight, None, options)
    }

    /// The gradient of [`ConvolutionKernels::conv2d_no_bias`] with respect to `x`, given the output's.
    fn conv2d_input_grad(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self> {
        <Self as ModuleOps<Self>>::conv2d_x_backward(x, weight, output_grad, options)
    }

    /// The gradient of [`ConvolutionKernels::conv2d_no_bias`] with respect to `weight`, given the output's.
    fn conv2d_weight_grad(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self> {
        <Self as ModuleOps<Self>>::conv2d_weight_backward(x, weight, output_grad, options)
    }

    /// A 2-D transposed convolution without bias, `x` `[N, C_in, H, W]` by `weight`
    /// `[C_in, C_out / groups, kh, kw]`, as burn's `conv_transpose2d` computes it, unless the
    /// backend has a faster one (the input gradient of the convolution it transposes:
    /// [`transposed_convolution`]).
    fn conv_transpose2d_no_bias(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        options: ConvTransposeOptions<2>,
    ) -> FloatTensor<Self> {
        <Self as ModuleOps<Self>>::conv_transpose2d(x, weight, None, options)
    }

    /// The gradient of [`ConvolutionKernels::conv_transpose2d_no_bias`] with respect to `x`, given the
    /// output's: the convolution it transposes applied to `output_grad`, through
    /// [`ConvolutionKernels::conv2d_no_bias`] where the backend has its own convolution
    /// ([`ConvolutionKernels::has_conv2d_products`]), burn's otherwise.
    fn conv_transpose2d_input_grad(
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        options: ConvTransposeOptions<2>,
    ) -> FloatTensor<Self> {
        match transposed_convolution(&options) {
            Some(convolution) if Self::has_conv2d_products(output_grad.dtype()) => {
                Self::conv2d_no_bias(output_grad, weight, convolution)
            }
            _ => <Self as ModuleOps<Self>>::conv_transpose2d_x_backward(weight, output_grad, options),
        }
    }

    /// The gradient of [`ConvolutionKernels::conv_transpose2d_no_bias`] with respect to `weight`, given the
    /// output's: the weight gradient of the convolution it transposes, with `output_grad` as
    /// that convolution's input and `x` as its output gradient, through
    /// [`ConvolutionKernels::conv2d_weight_grad`] where the backend has its own convolution, burn's
    /// otherwise.
    fn conv_transpose2d_weight_grad(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        options: ConvTransposeOptions<2>,
    ) -> FloatTensor<Self> {
        match transposed_convolution(&options) {
            Some(convolution) if Self::has_conv2d_products(output_grad.dtype()) => {
                Self::conv2d_weight_grad(output_grad, weight, x, convolution)
            }
            _ => <Self as ModuleOps<Self>>::conv_transpose2d_weight_backward(x, weight, output_grad, options),
        }
    }

    /// Whether the Linear layers' products of `dtype` are this backend's own
    /// ([`ConvolutionKernels::matrix_product`], [`linear`]): cuBLAS's on cuda where
    /// `LEROBOT_RS_LINEAR=cublas` asks for it (`kernels::cudnn::use_linear`). Elsewhere burn's
    /// `linear` runs, as it always did.
    fn has_matrix_products(dtype: DType) -> bool {
        let _ = dtype;
        false
    }

    /// The matrix product `op(a)·op(b)` of 2-D `a` and `b`, `op` transposing where asked: burn's
    /// `matmul` (its implementation, unless the backend has a faster one: cuBLAS on cuda where
    /// [`ConvolutionKernels::has_matrix_products`] holds). Under autodiff one node, whose
    /// gradients are two more such products.
    fn matrix_product(
        a: FloatTensor<Self>,
        a_transposed: bool,
        b: FloatTensor<Self>,
        b_transposed: bool,
    ) -> FloatTensor<Self> {
        portable::matrix_product::<Self>(a, a_transposed, b, b_transposed)
    }

    /// `y` `[N, C, ..]` plus `bias` `[C]` along its second dimension (a convolution's bias).
    /// Under autodiff one operation of the graph, whose backward pass sums the bias's gradient
    /// in one call ([`ConvolutionKernels::channel_bias_grad`]) where burn's broadcast sums it a dimension
    /// at a time.
    fn add_channel_bias(y: FloatTensor<Self>, bias: FloatTensor<Self>) -> FloatTensor<Self> {
        portable::add_channel_bias::<Self>(y, bias)
    }

    /// The gradient of [`ConvolutionKernels::add_channel_bias`]'s bias: `output_grad` `[N, C, ..]` summed
    /// over every dimension but the second, `[C]`, in its dtype (on burn's cubecl backends one
    /// launch, summing in f32 for the half precisions too).
    fn channel_bias_grad(output_grad: FloatTensor<Self>) -> FloatTensor<Self> {
        portable::channel_bias_grad::<Self>(output_grad)
    }

    /// Max pooling of `x` `[N, C, H, W]` with a `kernel` window moved by `stride` over the input
    /// padded by `padding` (dilation 1, output size rounded down): the output and the index of
    /// each output's maximum in its input plane, as burn's `max_pool2d_with_indices`.
    fn max_pool2d_indexed(
        x: FloatTensor<Self>,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
    ) -> MaxPool2dWithIndices<Self> {
        portable::max_pool2d_indexed::<Self>(x, kernel, stride, padding)
    }

    /// The gradient of [`ConvolutionKernels::max_pool2d_indexed`] with respect to `x`, given the
    /// output's and the indices of the maxima.
    fn max_pool2d_input_grad(
        x: FloatTensor<Self>,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        output_grad: FloatTensor<Self>,
        indices: IntTensor<Self>,
    ) -> FloatTensor<Self> {
        portable::max_pool2d_input_grad::<Self>(x, kernel, stride, padding, output_grad, indices)
    }
}

/// A 2-D convolution, `x` `[N, C, H, W]` by `weight` `[O, C, kh, kw]`, plus `bias` `[O]`: burn's
/// `conv2d`, computed by the backend's [`ConvolutionKernels::conv2d_no_bias`] and, under autodiff, its
/// gradients by [`ConvolutionKernels::conv2d_input_grad`] and [`ConvolutionKernels::conv2d_weight_grad`] (on the CPU,
/// matrix products over chunks of images on every core instead of burn's single-threaded
/// transposed convolution).
pub fn conv2d<B: ConvolutionKernels>(
    x: Tensor<B, 4>,
    weight: Tensor<B, 4>,
    bias: Option<Tensor<B, 1>>,
    options: ConvOptions<2>,
) -> Tensor<B, 4> {
    let y = B::conv2d_no_bias(x.into_primitive().tensor(), weight.into_primitive().tensor(), options);
    let y = Tensor::from_primitive(TensorPrimitive::Float(y));
    match bias {
        Some(bias) => add_channel_bias(y, bias),
        None => y,
    }
}

/// A 2-D transposed convolution, `x` `[N, C_in, H, W]` by `weight` `[C_in, C_out / groups, kh,
/// kw]`, plus `bias` `[C_out]`: burn's `conv_transpose2d`, computed by the backend's
/// [`ConvolutionKernels::conv_transpose2d_no_bias`] and, under autodiff, its gradients by
/// [`ConvolutionKernels::conv_transpose2d_input_grad`] and [`ConvolutionKernels::conv_transpose2d_weight_grad`]
/// (where the backend has its own convolution, its passes: cuDNN's on cuda, the CPU's matrix
/// products, instead of burn's direct kernels).
pub fn conv_transpose2d<B: ConvolutionKernels>(
    x: Tensor<B, 4>,
    weight: Tensor<B, 4>,
    bias: Option<Tensor<B, 1>>,
    options: ConvTransposeOptions<2>,
) -> Tensor<B, 4> {
    let y = B::conv_transpose2d_no_bias(x.into_primitive().tensor(), weight.into_primitive().tensor(), options);
    let y = Tensor::from_primitive(TensorPrimitive::Float(y));
    match bias {
        Some(bias) => add_channel_bias(y, bias),
        None => y,
    }
}

/// burn's `Linear` forward, `x · weight + bias` over `x`'s last dimension (`weight` `[d_input,
/// d_output]`, `bias` `[d_output]`): where the backend has its own products for `x`'s dtype
/// ([`ConvolutionKernels::has_matrix_products`]), `x` seen as one matrix times `weight` in one
/// [`ConvolutionKernels::matrix_product`] (each gradient one more), the bias added by burn;
/// elsewhere burn's `linear` itself.
pub fn linear<B: ConvolutionKernels, const D: usize>(
    x: Tensor<B, D>,
    weight: Tensor<B, 2>,
    bias: Option<Tensor<B, 1>>,
) -> Tensor<B, D> {
    if D < 2 || x.dtype() != weight.dtype() || !B::has_matrix_products(x.dtype()) {
        return burn::tensor::module::linear(x, weight, bias);
    }
    let mut shape = x.shape();
    let [inputs, outputs] = weight.dims();
    assert_eq!(shape[D - 1], inputs, "a Linear layer of {inputs} inputs given {shape:?}");
    let rows = shape.num_elements() / inputs.max(1);
    let matrix = x.reshape([rows, inputs]).into_primitive().tensor();
    let product = B::matrix_product(matrix, false, weight.into_primitive().tensor(), false);
    let y = Tensor::<B, 2>::from_primitive(TensorPrimitive::Float(product));
    let y = match bias {
        Some(bias) => y + bias.unsqueeze::<2>(),
        None => y,
    };
    shape[D - 1] = outputs;
    y.reshape(shape)
}

/// `y` `[N, C, ..]` plus `bias` `[C]` along its second dimension, its bias's gradient summed in
/// one call ([`ConvolutionKernels::add_channel_bias`]).
pub fn add_channel_bias<B: ConvolutionKernels, const D: usize>(y: Tensor<B, D>, bias: Tensor<B, 1>) -> Tensor<B, D> {
    let y = B::add_channel_bias(y.into_primitive().tensor(), bias.into_primitive().tensor());
    Tensor::from_primitive(TensorPrimitive::Float(y))
}

/// Max pooling of `x` `[N, C, H, W]` with a `kernel` window moved by `stride` over the input
/// padded by `padding` (dilation 1, output size rounded down): burn's `max_pool2d`, computed by
/// the backend's [`ConvolutionKernels::max_pool2d_indexed`] and, under autodiff, its gradient by
/// [`ConvolutionKernels::max_pool2d_input_grad`] (on the CPU, one pass per plane on every core).
pub fn max_pool2d<B: ConvolutionKernels>(
    x: Tensor<B, 4>,
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
) -> Tensor<B, 4> {
    let pooled = B::max_pool2d_indexed(x.into_primitive().tensor(), kernel, stride, padding);
    Tensor::from_primitive(TensorPrimitive::Float(pooled.output))
}
