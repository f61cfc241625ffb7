//! [`ConvolutionKernels`] under autodiff: the convolutions, the matrix products, the channel
//! bias and max pooling, each one node of the graph whose backward pass is the inner backend's
//! gradient.

use burn::backend::Autodiff;
use burn::backend::autodiff::NodeId;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::tensor::DType;
use burn::tensor::ops::{ConvOptions, ConvTransposeOptions, FloatTensor, IntTensor, MaxPool2dWithIndices};

use crate::{ConvolutionKernels, Kernels};

/// The convolution's node: the gradients of its input and weight.
#[derive(Debug)]
pub(crate) struct Conv2dNoBias;

impl<B: Kernels> Backward<B, 2> for Conv2dNoBias {
    type State = (NodeId, NodeId, ConvOptions<2>);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, checkpointer: &mut Checkpointer) {
        let [node_x, node_weight] = ops.parents;
        let output_grad = grads.consume::<B>(&ops.node);
        let (x, weight, options) = ops.state;
        let x = checkpointer.retrieve_node_output::<FloatTensor<B>>(x);
        let weight = checkpointer.retrieve_node_output::<FloatTensor<B>>(weight);
        if let Some(node) = node_x {
            let dx = B::conv2d_input_grad(x.clone(), weight.clone(), output_grad.clone(), options.clone());
            grads.register::<B>(node.id, dx);
        }
        if let Some(node) = node_weight {
            grads.register::<B>(node.id, B::conv2d_weight_grad(x, weight, output_grad, options));
        }
    }
}

/// The transposed convolution's node: the gradients of its input and weight.
#[derive(Debug)]
pub(crate) struct ConvTranspose2dNoBias;

impl<B: Kernels> Backward<B, 2> for ConvTranspose2dNoBias {
    type State = (NodeId, NodeId, ConvTransposeOptions<2>);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, checkpointer: &mut Checkpointer) {
        let [node_x, node_weight] = ops.parents;
        let output_grad = grads.consume::<B>(&ops.node);
        let (x, weight, options) = ops.state;
        let x = checkpointer.retrieve_node_output::<FloatTensor<B>>(x);
        let weight = checkpointer.retrieve_node_output::<FloatTensor<B>>(weight);
        if let Some(node) = node_x {
            let dx = B::conv_transpose2d_input_grad(weight.clone(), output_grad.clone(), options.clone());
            grads.register::<B>(node.id, dx);
        }
        if let Some(node) = node_weight {
            grads.register::<B>(node.id, B::conv_transpose2d_weight_grad(x, weight, output_grad, options));
        }
    }
}

/// A matrix product's node, `C = op(A)·op(B)`: each operand's gradient one more product,
/// `dA = dC·op(B)ᵀ` and `dB = op(A)ᵀ·dC`, or their transposes for an operand used transposed.
#[derive(Debug)]
pub(crate) struct MatrixProduct;

impl<B: Kernels> Backward<B, 2> for MatrixProduct {
    /// The operands' checkpoints, and whether each is used transposed.
    type State = (NodeId, NodeId, [bool; 2]);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, checkpointer: &mut Checkpointer) {
        let [node_a, node_b] = ops.parents;
        let output_grad = grads.consume::<B>(&ops.node);
        let (a, b, [a_transposed, b_transposed]) = ops.state;
        let a = checkpointer.retrieve_node_output::<FloatTensor<B>>(a);
        let b = checkpointer.retrieve_node_output::<FloatTensor<B>>(b);
        if let Some(node) = node_a {
            let da = if a_transposed {
                B::matrix_product(b.clone(), b_transposed, output_grad.clone(), true)
            } else {
                B::matrix_product(output_grad.clone(), false, b.clone(), !b_transposed)
            };
            grads.register::<B>(node.id, da);
        }
        if let Some(node) = node_b {
            let db = if b_transposed {
                B::matrix_product(output_grad, true, a, a_transposed)
            } else {
                B::matrix_product(a, !a_transposed, output_grad, false)
            };
            grads.register::<B>(node.id, db);
        }
    }
}

/// A bias added along the second dimension: the gradient passes to the input as it is, and is
/// summed for the bias in one call.
#[derive(Debug)]
pub(crate) struct ChannelBias;

impl<B: Kernels> Backward<B, 2> for ChannelBias {
    type State = ();

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _checkpointer: &mut Checkpointer) {
        let output_grad = grads.consume::<B>(&ops.node);
        let [node_y, node_bias] = ops.parents;
        if let Some(node) = node_bias {
            grads.register::<B>(node.id, B::channel_bias_grad(output_grad.clone()));
        }
        if let Some(node) = node_y {
            grads.register::<B>(node.id, output_grad);
        }
    }
}

/// Max pooling's node: the input's gradient, from the indices of the forward pass's maxima.
#[derive(Debug)]
pub(crate) struct MaxPool2d;

impl<B: Kernels> Backward<B, 1> for MaxPool2d {
    /// The input's checkpoint, the indices, the kernel, stride and padding.
    type State = (NodeId, IntTensor<B>, [[usize; 2]; 3]);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, checkpointer: &mut Checkpointer) {
        let [parent] = ops.parents;
        let output_grad = grads.consume::<B>(&ops.node);
        let (x, indices, [kernel, stride, padding]) = ops.state;
        let x = checkpointer.retrieve_node_output::<FloatTensor<B>>(x);
        if let Some(node) = parent {
            grads.register::<B>(node.id, B::max_pool2d_input_grad(x, kernel, stride, padding, output_grad, indices));
        }
    }
}

impl<B: Kernels, C: CheckpointStrategy> ConvolutionKernels for Autodiff<B, C> {
    fn has_conv2d_products(dtype: DType) -> bool {
        B::has_conv2d_products(dtype)
    }

    fn has_conv1d_products(dtype: DType) -> bool {
        B::has_conv1d_products(dtype)
    }

    fn prefers_channels_last(dtype: DType) -> bool {
        B::prefers_channels_last(dtype)
    }

    fn max_pool2d_indexed(
        x: FloatTensor<Self>,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
    ) -> MaxPool2dWithIndices<Self> {
        let MaxPool2dWithIndices { output, indices } =
            B::max_pool2d_indexed(x.primitive.clone(), kernel, stride, padding);
        let output = match MaxPool2d.prepare::<C>([x.node.clone()]).compute_bound().stateful() {
            OpsKind::Tracked(mut prep) => {
                let x_state = prep.checkpoint(&x);
                prep.finish((x_state, indices.clone(), [kernel, stride, padding]), output)
            }
            OpsKind::UnTracked(prep) => prep.finish(output),
        };
        MaxPool2dWithIndices::new(output, indices)
    }

    fn has_matrix_products(dtype: DType) -> bool {
        B::has_matrix_products(dtype)
    }

    fn matrix_product(
        a: FloatTensor<Self>,
        a_transposed: bool,
        b: FloatTensor<Self>,
        b_transposed: bool,
    ) -> FloatTensor<Self> {
        match MatrixProduct.prepare::<C>([a.node.clone(), b.node.clone()]).compute_bound().stateful() {
            OpsKind::Tracked(mut prep) => {
                let a_state = prep.checkpoint(&a);
                let b_state = prep.checkpoint(&b);
                let c = B::matrix_product(a.primitive, a_transposed, b.primitive, b_transposed);
                prep.finish((a_state, b_state, [a_transposed, b_transposed]), c)
            }
            OpsKind::UnTracked(prep) => {
                prep.finish(B::matrix_product(a.primitive, a_transposed, b.primitive, b_transposed))
            }
        }
    }

    fn add_channel_bias(y: FloatTensor<Self>, bias: FloatTensor<Self>) -> FloatTensor<Self> {
        let sum = B::add_channel_bias(y.primitive, bias.primitive);
        match ChannelBias.prepare::<C>([y.node, bias.node]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => prep.finish((), sum),
            OpsKind::UnTracked(prep) => prep.finish(sum),
        }
    }

    fn conv2d_no_bias(x: FloatTensor<Self>, weight: FloatTensor<Self>, options: ConvOptions<2>) -> FloatTensor<Self> {
        match Conv2dNoBias.prepare::<C>([x.node.clone(), weight.node.clone()]).compute_bound().stateful() {
            OpsKind::Tracked(mut prep) => {
                let x_state = prep.checkpoint(&x);
                let weight_state = prep.checkpoint(&weight);
                let y = B::conv2d_no_bias(x.primitive, weight.primitive, options.clone());
                prep.finish((x_state, weight_state, options), y)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::conv2d_no_bias(x.primitive, weight.primitive, options)),
        }
    }

    fn conv_transpose2d_no_bias(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        options: ConvTransposeOptions<2>,
    ) -> FloatTensor<Self> {
        let parents = [x.node.clone(), weight.node.clone()];
        match ConvTranspose2dNoBias.prepare::<C>(parents).compute_bound().stateful() {
            OpsKind::Tracked(mut prep) => {
                let x_state = prep.checkpoint(&x);
                let weight_state = prep.checkpoint(&weight);
                let y = B::conv_transpose2d_no_bias(x.primitive, weight.primitive, options.clone());
                prep.finish((x_state, weight_state, options), y)
            }
            OpsKind::UnTracked(prep) => {
                prep.finish(B::conv_transpose2d_no_bias(x.primitive, weight.primitive, options))
            }
        }
    }
}
