//! [`NormKernels`] under autodiff: GroupNorm, BatchNorm and FiLM, each one node of the graph whose
//! backward pass is the inner backend's fused gradient.

use burn::backend::Autodiff;
use burn::backend::autodiff::NodeId;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::ops::FloatTensor;

use crate::{Activation, Kernels, NormKernels};

/// GroupNorm's node: the gradients of its input, γ and β, from the statistics of its forward
/// pass.
#[derive(Debug)]
pub(crate) struct GroupNorm;

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

/// FiLM's node: the gradients of its input and embedding.
#[derive(Debug)]
pub(crate) struct Film;

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
pub(crate) struct BatchNorm;

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

impl<B: Kernels, C: CheckpointStrategy> NormKernels for Autodiff<B, C> {
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

    fn has_film_kernels() -> bool {
        B::has_film_kernels()
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
}
