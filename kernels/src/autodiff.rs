//! [`Kernels`] under autodiff: the convolution and the transposed one, a channel bias,
//! GroupNorm, BatchNorm, FiLM and max pooling each recorded as one operation of the graph, whose
//! backward pass calls the inner backend's gradient kernels (burn's own `conv2d` would call
//! burn's; a composed GroupNorm records some twenty operations). The
//! optimiser's methods keep their defaults here: the trainer calls them on the inner backend.

use burn::backend::Autodiff;
use burn::backend::autodiff::NodeId;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::ops::{ConvOptions, ConvTransposeOptions, FloatTensor, IntTensor, MaxPool2dWithIndices};
use burn::tensor::{DType, FloatDType, Shape};

use crate::{Activation, Kernels, Yuv420Terms};

/// The convolution's node: the gradients of its input and weight.
#[derive(Debug)]
struct Conv2dNoBias;

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
struct ConvTranspose2dNoBias;

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

/// GroupNorm's node: the gradients of its input, γ and β, from the statistics of its forward
/// pass.
#[derive(Debug)]
struct GroupNorm;

impl<B: Kernels> Backward<B, 3> for GroupNorm {
    /// The checkpoints of the input, γ and β, the forward pass's statistics, the number of
    /// groups, the activation.
    type State = (NodeId, [NodeId; 2], FloatTensor<B>, usize, Activation);

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, checkpointer: &mut Checkpointer) {
        let output_grad = grads.consume::<B>(&ops.node);
        let (x, affine, stats, groups, activation) = ops.state;
        let x = checkpointer.retrieve_node_output::<FloatTensor<B>>(x);
        let affine = affine.map(|node| checkpointer.retrieve_node_output::<FloatTensor<B>>(node));
        let gradients = B::group_norm_backward(x, affine, stats, output_grad, groups, activation);
        for (parent, gradient) in ops.parents.into_iter().zip(gradients) {
            if let Some(node) = parent {
                grads.register::<B>(node.id, gradient);
            }
        }
    }
}

/// A bias added along the second dimension: the gradient passes to the input as it is, and is
/// summed for the bias in one call.
#[derive(Debug)]
struct ChannelBias;

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

/// FiLM's node: the gradients of its input and embedding.
#[derive(Debug)]
struct Film;

impl<B: Kernels> Backward<B, 2> for Film {
    type State = (NodeId, NodeId);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, checkpointer: &mut Checkpointer) {
        let output_grad = grads.consume::<B>(&ops.node);
        let (x, embedding) = ops.state;
        let x = checkpointer.retrieve_node_output::<FloatTensor<B>>(x);
        let embedding = checkpointer.retrieve_node_output::<FloatTensor<B>>(embedding);
        let gradients = B::film_backward(x, embedding, output_grad);
        for (parent, gradient) in ops.parents.into_iter().zip(gradients) {
            if let Some(node) = parent {
                grads.register::<B>(node.id, gradient);
            }
        }
    }
}

/// BatchNorm's node (training mode): the gradients of its input, γ and β, from the batch
/// statistics of its forward pass.
#[derive(Debug)]
struct BatchNorm;

impl<B: Kernels> Backward<B, 3> for BatchNorm {
    /// The checkpoints of the input, γ and β, the forward pass's statistics, the activation.
    type State = (NodeId, [NodeId; 2], FloatTensor<B>, Activation);

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, checkpointer: &mut Checkpointer) {
        let output_grad = grads.consume::<B>(&ops.node);
        let (x, affine, stats, activation) = ops.state;
        let x = checkpointer.retrieve_node_output::<FloatTensor<B>>(x);
        let affine = affine.map(|node| checkpointer.retrieve_node_output::<FloatTensor<B>>(node));
        let gradients = B::batch_norm_backward(x, affine, stats, output_grad, activation);
        for (parent, gradient) in ops.parents.into_iter().zip(gradients) {
            if let Some(node) = parent {
                grads.register::<B>(node.id, gradient);
            }
        }
    }
}

/// Max pooling's node: the input's gradient, from the indices of the forward pass's maxima.
#[derive(Debug)]
struct MaxPool2d;

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

impl<B: Kernels, C: CheckpointStrategy> Kernels for Autodiff<B, C> {
    fn has_conv2d_products(dtype: DType) -> bool {
        B::has_conv2d_products(dtype)
    }

    fn has_conv1d_products(dtype: DType) -> bool {
        B::has_conv1d_products(dtype)
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

    fn group_norm_forward(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        groups: usize,
        epsilon: f64,
        activation: Activation,
    ) -> Option<(FloatTensor<Self>, FloatTensor<Self>)> {
        let (y, stats) = B::group_norm_forward(
            x.primitive.clone(),
            gamma.primitive.clone(),
            beta.primitive.clone(),
            groups,
            epsilon,
            activation,
        )?;
        let parents = [x.node.clone(), gamma.node.clone(), beta.node.clone()];
        let y = match GroupNorm.prepare::<C>(parents).compute_bound().stateful() {
            OpsKind::Tracked(mut prep) => {
                let x_state = prep.checkpoint(&x);
                let affine = [prep.checkpoint(&gamma), prep.checkpoint(&beta)];
                prep.finish((x_state, affine, stats.clone(), groups, activation), y)
            }
            OpsKind::UnTracked(prep) => prep.finish(y),
        };
        Some((y, Self::from_inner(stats)))
    }

    fn add_channel_bias(y: FloatTensor<Self>, bias: FloatTensor<Self>) -> FloatTensor<Self> {
        let sum = B::add_channel_bias(y.primitive, bias.primitive);
        match ChannelBias.prepare::<C>([y.node, bias.node]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => prep.finish((), sum),
            OpsKind::UnTracked(prep) => prep.finish(sum),
        }
    }

    fn has_film_kernels() -> bool {
        B::has_film_kernels()
    }

    fn has_yuv420_kernel() -> bool {
        B::has_yuv420_kernel()
    }

    fn yuv420_to_rgb(
        planes: IntTensor<Self>,
        frames: usize,
        size: (usize, usize),
        terms: &Yuv420Terms,
        dtype: FloatDType,
    ) -> Option<FloatTensor<Self>> {
        // Frames are the graph's inputs: nothing flows back through them.
        B::yuv420_to_rgb(planes, frames, size, terms, dtype).map(Self::from_inner)
    }

    fn upload_u8(bytes: &[u8], shape: Shape, device: &Self::Device) -> Option<IntTensor<Self>> {
        B::upload_u8(bytes, shape, device)
    }

    fn largest_allocation(device: &Self::Device) -> Option<u64> {
        B::largest_allocation(device)
    }

    fn film_forward(x: FloatTensor<Self>, embedding: FloatTensor<Self>) -> Option<FloatTensor<Self>> {
        let y = B::film_forward(x.primitive.clone(), embedding.primitive.clone())?;
        let y = match Film.prepare::<C>([x.node.clone(), embedding.node.clone()]).compute_bound().stateful() {
            OpsKind::Tracked(mut prep) => {
                let state = (prep.checkpoint(&x), prep.checkpoint(&embedding));
                prep.finish(state, y)
            }
            OpsKind::UnTracked(prep) => prep.finish(y),
        };
        Some(y)
    }

    fn batch_norm_forward(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        epsilon: f64,
        activation: Activation,
    ) -> Option<(FloatTensor<Self>, FloatTensor<Self>)> {
        let (y, stats) = B::batch_norm_forward(
            x.primitive.clone(),
            gamma.primitive.clone(),
            beta.primitive.clone(),
            epsilon,
            activation,
        )?;
        let parents = [x.node.clone(), gamma.node.clone(), beta.node.clone()];
        let y = match BatchNorm.prepare::<C>(parents).compute_bound().stateful() {
            OpsKind::Tracked(mut prep) => {
                let x_state = prep.checkpoint(&x);
                let affine = [prep.checkpoint(&gamma), prep.checkpoint(&beta)];
                prep.finish((x_state, affine, stats.clone(), activation), y)
            }
            OpsKind::UnTracked(prep) => prep.finish(y),
        };
        Some((y, Self::from_inner(stats)))
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
