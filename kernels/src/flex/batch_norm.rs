//! The CPU backend's BatchNorm in training mode (statistics of the batch) and the activation after
//! it: one pass per channel for the mean, one for the variance and one over the planes for the
//! output, forward; one per channel for the sums and one over the planes for the input gradient,
//! backward, after one through the activation's derivative unless it is the identity. Channels and
//! planes are spread over rayon's pool. burn's module computes it as some ten operations, each a
//! strided walk on one thread (`swap_dims` then `mean_dim`), and records as many for autodiff.
//!
//! Sums are accumulated in f64, each plane's in fixed lanes ([`super::sums`]) and the planes in
//! sample order, so a step repeats to the bit.

use burn::backend::flex::FlexTensor;
use burn::tensor::DType;
use rayon::prelude::*;

use super::conv::{contiguous, tensor};
use super::norm_plane::{PlaneNorm, plane_at};
use super::sums::sum_f64;
use crate::Activation;

/// Values per rayon task at least (whole planes of one sample and channel), where planes are
/// small.
const MIN_VALUES_PER_TASK: usize = 4096;

/// The shape of one BatchNorm this module computes: `[N, C, S]`.
#[derive(Debug, Clone, Copy)]
struct Planes {
    samples: usize,
    channels: usize,
    positions: usize,
}

impl Planes {
    /// The shape of `x` `[N, C, S]` with `gamma` `[C]`, when this module computes it: f32,
    /// nothing empty.
    fn of(x: &FlexTensor, gamma: &FlexTensor) -> Option<Self> {
        let [samples, channels, positions]: [usize; 3] = x.layout().shape().as_slice().try_into().ok()?;
        let f32s = x.dtype() == DType::F32 && gamma.dtype() == DType::F32;
        let fits = gamma.layout().num_elements() == channels;
        (f32s && fits && samples * channels * positions > 0).then_some(Self { samples, channels, positions })
    }

    /// Values per channel (the statistics' count).
    fn per_channel(&self) -> usize {
        self.samples * self.positions
    }

    /// Channel `channel`'s planes of `values`, in sample order.
    fn planes<'a>(&self, values: &'a [f32], channel: usize) -> impl Iterator<Item = &'a [f32]> + 'a {
        let (channels, positions) = (self.channels, self.positions);
        (0..self.samples).map(move |n| &values[(n * channels + channel) * positions..][..positions])
    }

    /// Planes per rayon task, so that a task has some thousands of values.
    fn planes_per_task(&self) -> usize {
        MIN_VALUES_PER_TASK.div_ceil(self.positions)
    }
}

/// BatchNorm's output, through `activation`, with the batch's statistics (`[C, 3]`: mean, `1/√(σ² + ε)`, biased
/// variance `σ²`), or `None` where burn's operations must compute it.
pub(crate) fn forward(
    x: &FlexTensor,
    gamma: &FlexTensor,
    beta: &FlexTensor,
    epsilon: f64,
    activation: Activation,
) -> Option<(FlexTensor, FlexTensor)> {
    let shape = Planes::of(x, gamma)?;
    if beta.dtype() != DType::F32 || beta.layout().num_elements() != shape.channels {
        return None;
    }
    let (x, gamma, beta) = (contiguous(x), contiguous(gamma), contiguous(beta));
    let count = shape.per_channel() as f64;
    let stats: Vec<[f32; 3]> = (0..shape.channels)
        .into_par_iter()
        .map(|c| {
            let mean = shape.planes(&x, c).map(|p| sum_f64(p, f64::from)).sum::<f64>() / count;
            let squares = |p: &[f32]| sum_f64(p, |v| (f64::from(v) - mean).powi(2));
            let variance = shape.planes(&x, c).map(squares).sum::<f64>() / count;
            [mean as f32, (1.0 / (variance + epsilon).sqrt()) as f32, variance as f32]
        })
        .collect();
    let positions = shape.positions;
    let mut y = vec![0f32; x.len()];
    y.par_chunks_mut(positions)
        .zip(x.par_chunks(positions))
        .with_min_len(shape.planes_per_task())
        .enumerate()
        .for_each(|(plane, (out, values))| {
            let c = plane % shape.channels;
            let [mean, inv_std, _] = stats[c];
            PlaneNorm { mean, inv_std, gamma: gamma[c], beta: beta[c] }.normalize(out, values, activation);
        });
    let [n, c, s] = [shape.samples, shape.channels, positions];
    Some((tensor(y, [n, c, s]), tensor(stats.into_flattened(), [c, 3])))
}

/// The gradients of BatchNorm (training mode) followed by `activation` with respect to `x`,
/// `gamma` and `beta` (see [`crate::portable::batch_norm_backward`] for the formula), or `None`
/// (burn's operations).
pub(crate) fn backward(
    x: &FlexTensor,
    [gamma, beta]: [&FlexTensor; 2],
    stats: &FlexTensor,
    output_grad: &FlexTensor,
    activation: Activation,
) -> Option<[FlexTensor; 3]> {
    let shape = Planes::of(x, gamma)?;
    let same_shape = output_grad.layout().shape() == x.layout().shape();
    let stats_shape = stats.layout().shape().as_slice() == [shape.channels, 3];
    let beta_fits = beta.dtype() == DType::F32 && beta.layout().num_elements() == shape.channels;
    if output_grad.dtype() != DType::F32 || stats.dtype() != DType::F32 || !same_shape || !stats_shape || !beta_fits {
        return None;
    }
    let (x, gamma, beta) = (contiguous(x), contiguous(gamma), contiguous(beta));
    let (stats, output_grad) = (contiguous(stats), contiguous(output_grad));
    let plane_norm =
        |c: usize| PlaneNorm { mean: stats[3 * c], inv_std: stats[3 * c + 1], gamma: gamma[c], beta: beta[c] };
    let positions = shape.positions;
    let mut dx = vec![0f32; x.len()];
    // The gradient before the activation: the output's itself, or written into `dx` first.
    let identity = activation == Activation::Identity;
    if !identity {
        dx.par_chunks_mut(positions).with_min_len(shape.planes_per_task()).enumerate().for_each(|(plane, dx)| {
            plane_norm(plane % shape.channels).through_activation(
                dx,
                plane_at(&x, plane, positions),
                plane_at(&output_grad, plane, positions),
                activation,
            );
        });
    }
    let dy: &[f32] = if identity { &output_grad } else { &dx };
    // Per channel: Σ dy·x̂ and Σ dy.
    let sums: Vec<[f64; 2]> = (0..shape.channels)
        .into_par_iter()
        .map(|c| {
            let planes = shape.planes(&x, c).zip(shape.planes(dy, c));
            planes.fold([0f64; 2], |[dy_x_hat, dy_sum], (values, dy)| {
                let [a, b] = plane_norm(c).gradient_sums(values, dy);
                [dy_x_hat + a, dy_sum + b]
            })
        })
        .collect();
    let count = shape.per_channel() as f64;
    dx.par_chunks_mut(positions).with_min_len(shape.planes_per_task()).enumerate().for_each(|(plane, dx)| {
        let c = plane % shape.channels;
        let [dy_x_hat, dy_sum] = sums[c];
        let gamma = f64::from(gamma[c]);
        let means = [(gamma * dy_sum / count) as f32, (gamma * dy_x_hat / count) as f32];
        let output_grad = identity.then(|| plane_at(&output_grad, plane, positions));
        plane_norm(c).input_gradient(dx, plane_at(&x, plane, positions), output_grad, means);
    });
    let column = |i: usize| sums.iter().map(|s| s[i] as f32).collect::<Vec<f32>>();
    let [n, c, s] = [shape.samples, shape.channels, positions];
    Some([tensor(dx, [n, c, s]), tensor(column(0), [c]), tensor(column(1), [c])])
}

#[cfg(test)]
mod tests {
    use burn::backend::{Autodiff, Flex};
    use burn::module::Param;
    use burn::nn::BatchNormConfig;
    use burn::prelude::*;
    use burn::tensor::Distribution;

    use crate::portable::activate;
    use crate::test_support::{ACTIVATIONS, assert_all_close, max_relative};

    type Ad = Autodiff<Flex>;

    /// The fused forward and backward passes equal burn's `BatchNorm` module in training mode,
    /// followed by the activation composed of burn's operations, and its autodiff gradients
    /// (input, γ, β), and the statistics are the batch's, for planes of many positions, of fewer
    /// than a lane's, and of one, and each activation.
    #[test]
    fn matches_burns_batch_norm_and_its_gradients() {
        let device = Default::default();
        for (samples, channels, positions) in [(3, 8, 49), (2, 5, 3), (16, 4, 1), (1, 3, 100)] {
            for activation in ACTIVATIONS {
                let mut norm = BatchNormConfig::new(channels).init::<Ad>(&device);
                let gamma = Tensor::<Ad, 1>::random([channels], Distribution::Uniform(0.5, 1.5), &device);
                let beta = Tensor::<Ad, 1>::random([channels], Distribution::Default, &device);
                norm.gamma = Param::from_tensor(gamma);
                norm.beta = Param::from_tensor(beta);
                let x = Tensor::<Ad, 3>::random([samples, channels, positions], Distribution::Default, &device);
                let x = (x * 3.0 + 0.5).detach().require_grad();
                let reference = activate(norm.forward(x.clone()), activation);
                let (gamma, beta) = (norm.gamma.val(), norm.beta.val());
                let (ours, mean, variance) =
                    crate::batch_norm(x.clone(), [gamma.clone(), beta.clone()], norm.epsilon, activation)
                        .expect("Flex has a fused BatchNorm");
                let weights = Tensor::<Ad, 3>::random(reference.dims(), Distribution::Default, &device);
                let grads_ref = (reference.clone() * weights.clone()).sum().backward();
                let grads_ours = (ours.clone() * weights).sum().backward();
                let case = format!("{samples}x{channels}x{positions}, {activation:?}");
                assert!(max_relative(ours.inner(), reference.inner()) < 1e-5, "{case}: forward");
                let per_channel = x.clone().inner().swap_dims(0, 1).reshape([channels, samples * positions]);
                let expected_mean = per_channel.clone().mean_dim(1).reshape([channels]);
                let expected_variance = per_channel.var_bias(1).reshape([channels]);
                assert!(max_relative(mean.inner(), expected_mean) < 1e-5, "{case}: mean");
                assert!(max_relative(variance.inner(), expected_variance) < 1e-5, "{case}: variance");
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
        let (samples, channels, positions) = (3, 6, 11);
        let x = Tensor::<Flex, 3>::random([samples, channels, positions], Distribution::Default, &device);
        let gamma = Tensor::<Flex, 1>::random([channels], Distribution::Default, &device);
        let beta = Tensor::<Flex, 1>::random([channels], Distribution::Default, &device);
        let dy = Tensor::<Flex, 3>::random([samples, channels, positions], Distribution::Default, &device);
        let prim3 = |t: &Tensor<Flex, 3>| t.clone().into_primitive().tensor();
        let prim1 = |t: &Tensor<Flex, 1>| t.clone().into_primitive().tensor();
        for activation in ACTIVATIONS {
            let (_, stats) = super::forward(&prim3(&x), &prim1(&gamma), &prim1(&beta), 1e-5, activation).unwrap();
            let affine = [prim1(&gamma), prim1(&beta)];
            let fused = super::backward(&prim3(&x), [&affine[0], &affine[1]], &stats, &prim3(&dy), activation).unwrap();
            let portable =
                crate::portable::batch_norm_backward::<Flex>(prim3(&x), affine, stats, prim3(&dy), activation);
            assert_all_close(&fused, &portable, 1e-5, &format!("{activation:?}"));
        }
    }
}
