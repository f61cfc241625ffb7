//! [`NormKernels`] under fusion: GroupNorm and FiLM, forward and backward, as custom operations
//! that run the inner backend's kernels.

use std::marker::PhantomData;

use burn::tensor::DType;
use burn::tensor::Shape;
use burn::tensor::ops::FloatTensor;
use burn_fusion::stream::Operation;
use burn_fusion::{Fusion, FusionBackend};
use burn_ir::{CustomOpIr, OperationOutput};

use super::register::{Handles, inputs_of, register_custom, register_outputs};
use crate::{Activation, Kernels, NormKernels};

/// GroupNorm with its activation as fusion's custom operation: forward, `[x, γ, β]` in, `[y,
/// stats]` out; backward, `[x, γ, β, stats, dy]` in, `[dx, dγ, dβ]` out.
#[derive(Debug, Clone)]
pub(crate) struct GroupNormOp<B> {
    pub(crate) desc: CustomOpIr,
    pub(crate) backward: bool,
    pub(crate) groups: usize,
    pub(crate) epsilon: f64,
    pub(crate) activation: Activation,
    pub(crate) backend: PhantomData<B>,
}

impl<B: FusionBackend + Kernels> Operation<B::FusionRuntime> for GroupNormOp<B> {
    fn execute(&self, handles: &mut Handles<B>) {
        let inputs = inputs_of::<B>(&self.desc, handles);
        let (groups, activation) = (self.groups, self.activation);
        let outputs: Vec<FloatTensor<B>> = match <[_; 5]>::try_from(inputs) {
            Ok([x, gamma, beta, stats, dy]) if self.backward => {
                B::group_norm_backward(x, [gamma, beta], stats, dy, groups, activation).into()
            }
            Err(inputs) if !self.backward => {
                let [x, gamma, beta] = <[_; 3]>::try_from(inputs).unwrap_or_else(|_| unreachable!("three inputs"));
                let (y, stats) = B::group_norm_forward(x, gamma, beta, groups, self.epsilon, activation)
                    .expect("the inner backend's kernel, checked when registered");
                vec![y, stats]
            }
            _ => unreachable!("each pass is registered with its own inputs"),
        };
        register_outputs::<B>(&self.desc, handles, outputs);
    }
}

/// Whether the inner backend's GroupNorm kernels take these tensors (`[x, γ, β, ..]`, then the
/// backward's statistics and `dy`): of [`crate::group_norm_dtypes`] (`dy` in `x`'s), of a shape
/// [`crate::group_norm_shape`] accepts.
pub(crate) fn takes_group_norm<B: FusionBackend + Kernels>(tensors: &[&FloatTensor<Fusion<B>>], groups: usize) -> bool {
    let [x, gamma, beta] = [tensors[0], tensors[1], tensors[2]];
    let others: Vec<DType> = tensors[1..tensors.len().min(4)].iter().map(|t| t.dtype).collect();
    let output_grad_dtype = tensors.get(4).is_none_or(|dy| dy.dtype == x.dtype);
    B::has_group_norm_kernels()
        && crate::group_norm_dtypes(x.dtype, &others)
        && output_grad_dtype
        && crate::group_norm_shape(x.shape.as_slice(), gamma.shape.num_elements(), beta.shape.num_elements(), groups)
            .is_some()
}

/// FiLM as fusion's custom operation: forward, `[x, embedding]` in, `[y]` out; backward,
/// `[x, embedding, dy]` in, `[dx, d_embedding]` out.
#[derive(Debug, Clone)]
pub(crate) struct FilmOp<B> {
    pub(crate) desc: CustomOpIr,
    pub(crate) backend: PhantomData<B>,
}

impl<B: FusionBackend + Kernels> Operation<B::FusionRuntime> for FilmOp<B> {
    fn execute(&self, handles: &mut Handles<B>) {
        let inputs = inputs_of::<B>(&self.desc, handles);
        let outputs: Vec<FloatTensor<B>> = match <[_; 3]>::try_from(inputs) {
            Ok([x, embedding, dy]) => B::film_backward(x, embedding, dy).into(),
            Err(inputs) => {
                let [x, embedding] = <[_; 2]>::try_from(inputs).unwrap_or_else(|_| unreachable!("two inputs"));
                vec![B::film_forward(x, embedding).expect("the inner backend's kernel, checked when registered")]
            }
        };
        register_outputs::<B>(&self.desc, handles, outputs);
    }
}

/// Whether the inner backend's FiLM kernels take these tensors (`[x, embedding, ..]`): of
/// [`crate::film_dtypes`], of shapes [`crate::film_shape`] accepts.
pub(crate) fn takes_film<B: FusionBackend + Kernels>(tensors: &[&FloatTensor<Fusion<B>>]) -> bool {
    B::has_film_kernels()
        && crate::film_dtypes(&tensors.iter().map(|t| t.dtype).collect::<Vec<_>>())
        && crate::film_shape(tensors[0].shape.as_slice(), tensors[1].shape.as_slice()).is_some()
}

impl<B: FusionBackend + Kernels> NormKernels for Fusion<B> {
    fn has_group_norm_kernels() -> bool {
        B::has_group_norm_kernels()
    }

    fn group_norm_forward(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        groups: usize,
        epsilon: f64,
        activation: Activation,
    ) -> Option<(FloatTensor<Self>, FloatTensor<Self>)> {
        if !takes_group_norm::<B>(&[&x, &gamma, &beta], groups) {
            return None;
        }
        let outputs = vec![(x.shape.clone(), x.dtype), (Shape::from(vec![x.shape[0], groups, 2]), DType::F32)];
        let make = |desc| GroupNormOp::<B> { desc, backward: false, groups, epsilon, activation, backend: PhantomData };
        let [y, stats] =
            register_custom::<B, _>("lerobot_rs_group_norm", vec![x, gamma, beta], outputs, make).outputs();
        Some((y, stats))
    }

    fn group_norm_backward(
        x: FloatTensor<Self>,
        [gamma, beta]: [FloatTensor<Self>; 2],
        stats: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        groups: usize,
        activation: Activation,
    ) -> [FloatTensor<Self>; 3] {
        let takes = takes_group_norm::<B>(&[&x, &gamma, &beta, &stats, &output_grad], groups)
            && output_grad.shape == x.shape
            && stats.shape.num_elements() == x.shape[0] * groups * 2;
        if !takes {
            return crate::portable::group_norm_backward::<Self>(
                x,
                [gamma, beta],
                stats,
                output_grad,
                groups,
                activation,
            );
        }
        let outputs = [&x, &gamma, &beta].map(|t| (t.shape.clone(), t.dtype)).to_vec();
        let make =
            |desc| GroupNormOp::<B> { desc, backward: true, groups, epsilon: 0.0, activation, backend: PhantomData };
        let inputs = vec![x, gamma, beta, stats, output_grad];
        register_custom::<B, _>("lerobot_rs_group_norm_backward", inputs, outputs, make).outputs()
    }

    fn has_film_kernels() -> bool {
        B::has_film_kernels()
    }

    fn film_forward(x: FloatTensor<Self>, embedding: FloatTensor<Self>) -> Option<FloatTensor<Self>> {
        if !takes_film::<B>(&[&x, &embedding]) {
            return None;
        }
        let outputs = vec![(x.shape.clone(), x.dtype)];
        let make = |desc| FilmOp::<B> { desc, backend: PhantomData };
        Some(register_custom::<B, _>("lerobot_rs_film", vec![x, embedding], outputs, make).output())
    }

    fn film_backward(
        x: FloatTensor<Self>,
        embedding: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
    ) -> [FloatTensor<Self>; 2] {
        if !(takes_film::<B>(&[&x, &embedding, &output_grad]) && output_grad.shape == x.shape) {
            return crate::portable::film_backward::<Self>(x, embedding, output_grad);
        }
        let outputs = [&x, &embedding].map(|t| (t.shape.clone(), t.dtype)).to_vec();
        let make = |desc| FilmOp::<B> { desc, backend: PhantomData };
        register_custom::<B, _>("lerobot_rs_film_backward", vec![x, embedding, output_grad], outputs, make).outputs()
    }
}
