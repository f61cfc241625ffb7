//! [`NormKernels`] on the CPU: GroupNorm and BatchNorm with their activation, one pass each way.

use burn::backend::Flex;
use burn::tensor::ops::FloatTensor;

use crate::{Activation, NormKernels, portable};

impl NormKernels for Flex {
    fn group_norm_forward(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        groups: usize,
        epsilon: f64,
        activation: Activation,
    ) -> Option<(FloatTensor<Self>, FloatTensor<Self>)> {
        super::group_norm::forward(&x, &gamma, &beta, groups, epsilon, activation)
    }

    fn group_norm_backward(
        x: FloatTensor<Self>,
        [gamma, beta]: [FloatTensor<Self>; 2],
        stats: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        groups: usize,
        activation: Activation,
    ) -> [FloatTensor<Self>; 3] {
        match super::group_norm::backward(&x, [&gamma, &beta], &stats, &output_grad, groups, activation) {
            Some(grads) => grads,
            None => portable::group_norm_backward::<Self>(x, [gamma, beta], stats, output_grad, groups, activation),
        }
    }

    fn batch_norm_forward(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        epsilon: f64,
        activation: Activation,
    ) -> Option<(FloatTensor<Self>, FloatTensor<Self>)> {
        super::batch_norm::forward(&x, &gamma, &beta, epsilon, activation)
    }

    fn batch_norm_backward(
        x: FloatTensor<Self>,
        [gamma, beta]: [FloatTensor<Self>; 2],
        stats: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        activation: Activation,
    ) -> [FloatTensor<Self>; 3] {
        match super::batch_norm::backward(&x, [&gamma, &beta], &stats, &output_grad, activation) {
            Some(grads) => grads,
            None => portable::batch_norm_backward::<Self>(x, [gamma, beta], stats, output_grad, activation),
        }
    }
}
