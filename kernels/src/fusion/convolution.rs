//! [`ConvolutionKernels`] under fusion: the convolutions, the matrix products and a channel
//! bias's gradient as custom operations that run the inner backend's.

use std::marker::PhantomData;

use burn::tensor::DType;
use burn::tensor::Shape;
use burn::tensor::ops::{ConvOptions, ConvTransposeOptions, FloatTensor, ModuleOps, conv::calculate_conv_output_sizes};
use burn_fusion::stream::Operation;
use burn_fusion::{Fusion, FusionBackend};
use burn_ir::{CustomOpIr, OperationOutput};

use super::register::{Handles, inputs_of, register_custom, register_outputs};
use crate::{ConvolutionKernels, Kernels};

/// Which convolution pass a custom operation runs, with its options.
#[derive(Debug, Clone)]
pub(crate) enum Pass {
    Output(ConvOptions<2>),
    InputGrad(ConvOptions<2>),
    WeightGrad(ConvOptions<2>),
    /// A transposed convolution's output (its gradients are the other passes of the
    /// convolution it transposes).
    Transposed(ConvTransposeOptions<2>),
}

/// One convolution pass as fusion's custom operation: inputs `[x, w]` or `[x, w, dy]`, one
/// output.
#[derive(Debug, Clone)]
pub(crate) struct ConvOp<B> {
    pub(crate) desc: CustomOpIr,
    pub(crate) pass: Pass,
    pub(crate) backend: PhantomData<B>,
}

impl<B: FusionBackend + Kernels> Operation<B::FusionRuntime> for ConvOp<B> {
    fn execute(&self, handles: &mut Handles<B>) {
        let inputs = inputs_of::<B>(&self.desc, handles);
        let output = match (self.pass.clone(), <[_; 3]>::try_from(inputs)) {
            (Pass::InputGrad(options), Ok([x, w, dy])) => B::conv2d_input_grad(x, w, dy, options),
            (Pass::WeightGrad(options), Ok([x, w, dy])) => B::conv2d_weight_grad(x, w, dy, options),
            (pass, Err(inputs)) => {
                let [x, w] = <[_; 2]>::try_from(inputs).unwrap_or_else(|_| unreachable!("two inputs registered"));
                match pass {
                    Pass::Output(options) => B::conv2d_no_bias(x, w, options),
                    Pass::Transposed(options) => B::conv_transpose2d_no_bias(x, w, options),
                    _ => unreachable!("the gradients are registered with three inputs"),
                }
            }
            _ => unreachable!("each pass is registered with its own inputs"),
        };
        register_outputs::<B>(&self.desc, handles, vec![output]);
    }
}

/// A channel bias's gradient as fusion's custom operation: `[dy]` in, `[db]` out.
#[derive(Debug, Clone)]
pub(crate) struct ChannelBiasGradOp<B> {
    pub(crate) desc: CustomOpIr,
    pub(crate) backend: PhantomData<B>,
}

impl<B: FusionBackend + Kernels> Operation<B::FusionRuntime> for ChannelBiasGradOp<B> {
    fn execute(&self, handles: &mut Handles<B>) {
        let [output_grad] =
            <[_; 1]>::try_from(inputs_of::<B>(&self.desc, handles)).unwrap_or_else(|_| unreachable!("one input"));
        register_outputs::<B>(&self.desc, handles, vec![B::channel_bias_grad(output_grad)]);
    }
}

/// A matrix product as fusion's custom operation: `[a, b]` in, `op(a)·op(b)` out, each operand
/// transposed where its flag says.
#[derive(Debug, Clone)]
pub(crate) struct MatrixProductOp<B> {
    pub(crate) desc: CustomOpIr,
    pub(crate) transposed: [bool; 2],
    pub(crate) backend: PhantomData<B>,
}

impl<B: FusionBackend + Kernels> Operation<B::FusionRuntime> for MatrixProductOp<B> {
    fn execute(&self, handles: &mut Handles<B>) {
        let [a, b] =
            <[_; 2]>::try_from(inputs_of::<B>(&self.desc, handles)).unwrap_or_else(|_| unreachable!("two inputs"));
        let [a_transposed, b_transposed] = self.transposed;
        register_outputs::<B>(&self.desc, handles, vec![B::matrix_product(a, a_transposed, b, b_transposed)]);
    }
}

impl<B: FusionBackend + Kernels> ConvolutionKernels for Fusion<B> {
    fn has_matrix_products(dtype: DType) -> bool {
        B::has_matrix_products(dtype)
    }

    fn matrix_product(
        a: FloatTensor<Self>,
        a_transposed: bool,
        b: FloatTensor<Self>,
        b_transposed: bool,
    ) -> FloatTensor<Self> {
        let rows_of = |shape: &Shape, transposed: bool| {
            <[usize; 2]>::try_from(shape.as_slice()).ok().map(|[r, c]| if transposed { [c, r] } else { [r, c] })
        };
        let (Some([rows, inner]), Some([inner_b, columns])) =
            (rows_of(&a.shape, a_transposed), rows_of(&b.shape, b_transposed))
        else {
            // Not two matrices: burn's own product says what is wrong.
            return crate::portable::matrix_product::<Self>(a, a_transposed, b, b_transposed);
        };
        if inner != inner_b || a.dtype != b.dtype {
            return crate::portable::matrix_product::<Self>(a, a_transposed, b, b_transposed);
        }
        let outputs = vec![(Shape::from(vec![rows, columns]), a.dtype)];
        let make = |desc| MatrixProductOp::<B> { desc, transposed: [a_transposed, b_transposed], backend: PhantomData };
        register_custom::<B, _>("lerobot_rs_matrix_product", vec![a, b], outputs, make).output()
    }

    fn channel_bias_grad(output_grad: FloatTensor<Self>) -> FloatTensor<Self> {
        if output_grad.shape.num_dims() < 2 {
            return crate::portable::channel_bias_grad::<Self>(output_grad);
        }
        let outputs = vec![(Shape::from(vec![output_grad.shape[1]]), output_grad.dtype)];
        let make = |desc| ChannelBiasGradOp::<B> { desc, backend: PhantomData };
        register_custom::<B, _>("lerobot_rs_channel_bias_grad", vec![output_grad], outputs, make).output()
    }

    fn has_conv2d_products(dtype: DType) -> bool {
        B::has_conv2d_products(dtype)
    }

    fn has_conv1d_products(dtype: DType) -> bool {
        B::has_conv1d_products(dtype)
    }

    fn prefers_channels_last(dtype: DType) -> bool {
        B::prefers_channels_last(dtype)
    }

    fn conv2d_no_bias(x: FloatTensor<Self>, weight: FloatTensor<Self>, options: ConvOptions<2>) -> FloatTensor<Self> {
        let (x_shape, w_shape) = (x.shape.clone(), weight.shape.clone());
        let sizes = calculate_conv_output_sizes(
            &[w_shape[2], w_shape[3]],
            &options.stride,
            &options.padding,
            &options.dilation,
            &[x_shape[2], x_shape[3]],
        );
        let shape = Shape::from(vec![x_shape[0], w_shape[0], sizes[0], sizes[1]]);
        let dtype = x.dtype;
        register::<B>(Pass::Output(options), vec![x, weight], shape, dtype)
    }

    fn conv2d_input_grad(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self> {
        let (shape, dtype) = (x.shape.clone(), x.dtype);
        register::<B>(Pass::InputGrad(options), vec![x, weight, output_grad], shape, dtype)
    }

    fn conv2d_weight_grad(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self> {
        let (shape, dtype) = (weight.shape.clone(), weight.dtype);
        register::<B>(Pass::WeightGrad(options), vec![x, weight, output_grad], shape, dtype)
    }

    fn conv_transpose2d_no_bias(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        options: ConvTransposeOptions<2>,
    ) -> FloatTensor<Self> {
        let dims = |shape: &Shape| <[usize; 4]>::try_from(shape.as_slice()).ok();
        let output = dims(&x.shape)
            .zip(dims(&weight.shape))
            .and_then(|(x_shape, weight_shape)| crate::conv_transpose2d_output_shape(x_shape, weight_shape, &options));
        let Some(output) = output else {
            // Shapes with no transposed convolution: burn's own operation says what is wrong.
            return <Self as ModuleOps<Self>>::conv_transpose2d(x, weight, None, options);
        };
        let dtype = x.dtype;
        register::<B>(Pass::Transposed(options), vec![x, weight], Shape::from(output.to_vec()), dtype)
    }
}

/// Registers `pass` over `inputs` (whose first is `x`), giving a tensor of `shape` and `dtype`.
fn register<B: FusionBackend + Kernels>(
    pass: Pass,
    inputs: Vec<FloatTensor<Fusion<B>>>,
    shape: Shape,
    dtype: DType,
) -> FloatTensor<Fusion<B>> {
    let name = match pass {
        Pass::Output(_) => "lerobot_rs_conv2d",
        Pass::InputGrad(_) => "lerobot_rs_conv2d_input_grad",
        Pass::WeightGrad(_) => "lerobot_rs_conv2d_weight_grad",
        Pass::Transposed(_) => "lerobot_rs_conv_transpose2d",
    };
    let make = |desc| ConvOp::<B> { desc, pass, backend: PhantomData };
    register_custom::<B, _>(name, inputs, vec![(shape, dtype)], make).output()
}
