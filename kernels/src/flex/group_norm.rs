//! The CPU backend's GroupNorm and the activation after it: two passes for the statistics (mean,
//! then variance) and one for the output, forward; one for the sums and one for the input
//! gradient, backward, after one through the activation's derivative unless it is the
//! identity; each group on one task of rayon's pool. Composed of burn's operations, GroupNorm
//! is about ten passes forward and twenty backward over the activations, each on one thread.
//!
//! Sums are accumulated in f64 in a fixed order (each group's by one task, in fixed lanes; `dγ`
//! and `dβ` over the samples in sample order), so a step repeats to the bit.

use burn::backend::flex::FlexTensor;
use burn::tensor::DType;
use rayon::prelude::*;

use super::conv::{contiguous, tensor};
use super::norm_plane::{PlaneNorm, plane_at};
use super::sums::sum_f64;
use crate::Activation;

/// The shape of one GroupNorm this module computes.
#[derive(Debug, Clone, Copy)]
struct Groups {
    /// Samples.
    samples: usize,
    /// Channels.
    channels: usize,
    /// Positions per channel.
    positions: usize,
    /// Groups of channels.
    groups: usize,
}

impl Groups {
    /// The shape of `x` `[N, C, S]` with `gamma` `[C]`, when this module computes it: f32, the
    /// channels a whole number of groups, nothing empty.
    fn of(x: &FlexTensor, gamma: &FlexTensor, groups: usize) -> Option<Self> {
        let [samples, channels, positions]: [usize; 3] = x.layout().shape().as_slice().try_into().ok()?;
        let f32s = x.dtype() == DType::F32 && gamma.dtype() == DType::F32;
        let fits = groups > 0 && channels % groups == 0 && gamma.layout().num_elements() == channels;
        (f32s && fits && samples * channels * positions > 0).then_some(Self { samples, channels, positions, groups })
    }

    /// Channels per group.
    fn channels_per_group(&self) -> usize {
        self.channels / self.groups
    }

    /// Values per group.
    fn group_len(&self) -> usize {
        self.channels_per_group() * self.positions
    }
}

/// GroupNorm's output, through `activation`, and statistics (`[N, groups, 2]`: mean,
/// `1/√(σ² + ε)`), or `None` where burn's operations must compute it.
pub(crate) fn forward(
    x: &FlexTensor,
    gamma: &FlexTensor,
    beta: &FlexTensor,
    groups: usize,
    epsilon: f64,
    activation: Activation,
) -> Option<(FlexTensor, FlexTensor)> {
    let shape = Groups::of(x, gamma, groups)?;
    if beta.dtype() != DType::F32 || beta.layout().num_elements() != shape.channels {
        return None;
    }
    let (x, gamma, beta) = (contiguous(x), contiguous(gamma), contiguous(beta));
    let (len, per_group, positions) = (shape.group_len(), shape.channels_per_group(), shape.positions);
    let mut y = vec![0f32; x.len()];
    let mut stats = vec![0f32; 2 * shape.samples * groups];
    y.par_chunks_mut(len).zip(stats.par_chunks_mut(2)).enumerate().for_each(|(block, (out, stat))| {
        let values = &x[block * len..][..len];
        let mean = sum_f64(values, f64::from) / len as f64;
        let variance = sum_f64(values, |v| (f64::from(v) - mean).powi(2)) / len as f64;
        let (mean, inv_std) = (mean as f32, (1.0 / (variance + epsilon).sqrt()) as f32);
        let first_channel = block % groups * per_group;
        for (k, (out, values)) in out.chunks_mut(positions).zip(values.chunks(positions)).enumerate() {
            let (gamma, beta) = (gamma[first_channel + k], beta[first_channel + k]);
            PlaneNorm { mean, inv_std, gamma, beta }.normalize(out, values, activation);
        }
        stat.copy_from_slice(&[mean, inv_std]);
    });
    let [n, c, s] = [shape.samples, shape.channels, positions];
    Some((tensor(y, [n, c, s]), tensor(stats, [n, groups, 2])))
}

/// The gradients of GroupNorm followed by `activation` with respect to `x`, `gamma` and `beta`
/// (see [`crate::portable::group_norm_backward`] for the formula), or `None` (burn's
/// operations).
pub(crate) fn backward(
    x: &FlexTensor,
    [gamma, beta]: [&FlexTensor; 2],
    stats: &FlexTensor,
    output_grad: &FlexTensor,
    groups: usize,
    activation: Activation,
) -> Option<[FlexTensor; 3]> {
    let shape = Groups::of(x, gamma, groups)?;
    let same_shape = output_grad.layout().shape() == x.layout().shape();
    let beta_fits = beta.dtype() == DType::F32 && beta.layout().num_elements() == shape.channels;
    if output_grad.dtype() != DType::F32 || stats.dtype() != DType::F32 || !same_shape || !beta_fits {
        return None;
    }
    let (x, gamma, beta) = (contiguous(x), contiguous(gamma), contiguous(beta));
    let (stats, output_grad) = (contiguous(stats), contiguous(output_grad));
    let (len, per_group, positions) = (shape.group_len(), shape.channels_per_group(), shape.positions);
    let mut dx = vec![0f32; x.len()];
    // Per sample and channel: Σ dy·x̂ and Σ dy.
    let mut sums = vec![[0f64; 2]; shape.samples * shape.channels];
    dx.par_chunks_mut(len).zip(sums.par_chunks_mut(per_group)).enumerate().for_each(|(block, (dx, sums))| {
        let (mean, inv_std) = (stats[2 * block], stats[2 * block + 1]);
        let (values, output_grad) = (&x[block * len..][..len], &output_grad[block * len..][..len]);
        let first_channel = block % groups * per_group;
        let plane =
            |k: usize| PlaneNorm { mean, inv_std, gamma: gamma[first_channel + k], beta: beta[first_channel + k] };
        // The gradient before the activation: the output's itself, or written into `dx` first.
        let identity = activation == Activation::Identity;
        if !identity {
            for (k, dx) in dx.chunks_mut(positions).enumerate() {
                plane(k).through_activation(
                    dx,
                    plane_at(values, k, positions),
                    plane_at(output_grad, k, positions),
                    activation,
                );
            }
        }
        let dy: &[f32] = if identity { output_grad } else { dx };
        let (mut mean_g, mut mean_g_x_hat) = (0f64, 0f64);
        for (k, sum) in sums.iter_mut().enumerate() {
            let [dy_x_hat, dy_sum] = plane(k).gradient_sums(plane_at(values, k, positions), plane_at(dy, k, positions));
            *sum = [dy_x_hat, dy_sum];
            let gamma = f64::from(gamma[first_channel + k]);
            mean_g += gamma * dy_sum;
            mean_g_x_hat += gamma * dy_x_hat;
        }
        let means = [(mean_g / len as f64) as f32, (mean_g_x_hat / len as f64) as f32];
        for (k, dx) in dx.chunks_mut(positions).enumerate() {
            let output_grad = identity.then(|| plane_at(output_grad, k, positions));
            plane(k).input_gradient(dx, plane_at(values, k, positions), output_grad, means);
        }
    });
    let per_channel = |i: usize| {
        (0..shape.channels)
            .map(|c| (0..shape.samples).map(|n| sums[n * shape.channels + c][i]).sum::<f64>() as f32)
            .collect::<Vec<f32>>()
    };
    let [n, c, s] = [shape.samples, shape.channels, positions];
    Some([tensor(dx, [n, c, s]), tensor(per_channel(0), [c]), tensor(per_channel(1), [c])])
}

#[cfg(test)]
mod tests {
    use burn::backend::{Autodiff, Flex};
    use burn::module::Param;
    use burn::nn::GroupNormConfig;
    use burn::prelude::*;
    use burn::tensor::Distribution;

    use crate::portable::activate;
    use crate::test_support::{ACTIVATIONS, assert_all_close, max_relative};

    type Ad = Autodiff<Flex>;

    /// The fused forward and backward passes equal burn's `GroupNorm` module, followed by the
    /// activation composed of burn's operations, and its autodiff gradients (input, γ, β), for
    /// one group, several, and one channel per group, and each activation.
    #[test]
    fn matches_burns_group_norm_and_its_gradients() {
        let device = Default::default();
        for (samples, channels, positions, groups) in [(3, 8, 10, 2), (2, 16, 49, 1), (2, 6, 5, 6), (1, 32, 3, 8)] {
            for activation in ACTIVATIONS {
                let mut norm = GroupNormConfig::new(groups, channels).init::<Ad>(&device);
                let gamma = Tensor::<Ad, 1>::random([channels], Distribution::Uniform(0.5, 1.5), &device);
                let beta = Tensor::<Ad, 1>::random([channels], Distribution::Default, &device);
                norm.gamma = Some(Param::from_tensor(gamma.clone()));
                norm.beta = Some(Param::from_tensor(beta.clone()));
                let x = Tensor::<Ad, 3>::random([samples, channels, positions], Distribution::Default, &device);
                let x = (x * 3.0 + 0.5).detach().require_grad();
                let reference = activate(norm.forward(x.clone()), activation);
                let gamma = norm.gamma.as_ref().unwrap().val();
                let beta = norm.beta.as_ref().unwrap().val();
                let ours =
                    crate::group_norm(x.clone(), [gamma.clone(), beta.clone()], groups, norm.epsilon, activation)
                        .expect("Flex has a fused GroupNorm");
                let weights = Tensor::<Ad, 3>::random(reference.dims(), Distribution::Default, &device);
                let grads_ref = (reference.clone() * weights.clone()).sum().backward();
                let grads_ours = (ours.clone() * weights).sum().backward();
                let case = format!("{samples}x{channels}x{positions} in {groups} groups, {activation:?}");
                assert!(max_relative(ours.inner(), reference.inner()) < 1e-5, "{case}: forward");
                let (dx, dx_ref) = (x.grad(&grads_ours).unwrap(), x.grad(&grads_ref).unwrap());
                assert!(max_relative(dx, dx_ref) < 1e-4, "{case}: input gradient");
                for (p, what) in [(&gamma, "gamma"), (&beta, "beta")] {
                    let (a, b) = (p.grad(&grads_ours).unwrap(), p.grad(&grads_ref).unwrap());
                    assert!(max_relative(a, b) < 1e-4, "{case}: {what} gradient");
                }
            }
        }
    }

    /// The portable backward pass (the trait's default, for a backend that adds only a fused
    /// forward pass) equals the fused one, for each activation.
    #[test]
    fn the_portable_backward_equals_the_fused_one() {
        let device = Default::default();
        let (samples, channels, positions, groups) = (2, 8, 7, 4);
        let x = Tensor::<Flex, 3>::random([samples, channels, positions], Distribution::Default, &device);
        let gamma = Tensor::<Flex, 1>::random([channels], Distribution::Default, &device);
        let beta = Tensor::<Flex, 1>::random([channels], Distribution::Default, &device);
        let dy = Tensor::<Flex, 3>::random([samples, channels, positions], Distribution::Default, &device);
        let prim3 = |t: &Tensor<Flex, 3>| t.clone().into_primitive().tensor();
        let prim1 = |t: &Tensor<Flex, 1>| t.clone().into_primitive().tensor();
        for activation in ACTIVATIONS {
            let (_, stats) =
                super::forward(&prim3(&x), &prim1(&gamma), &prim1(&beta), groups, 1e-5, activation).unwrap();
            let affine = [prim1(&gamma), prim1(&beta)];
            let fused =
                super::backward(&prim3(&x), [&affine[0], &affine[1]], &stats, &prim3(&dy), groups, activation).unwrap();
            let portable =
                crate::portable::group_norm_backward::<Flex>(prim3(&x), affine, stats, prim3(&dy), groups, activation);
            assert_all_close(&fused, &portable, 1e-5, &format!("{activation:?}"));
        }
    }
}
