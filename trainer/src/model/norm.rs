//! GroupNorm's and BatchNorm's forward passes: the backend's fused pass where it has one
//! ([`kernels::group_norm`], [`kernels::batch_norm`]; the CPU's, forward and backward),
//! otherwise burn's operations. Composed, GroupNorm is arranged so every large elementwise
//! operation is a per-row scalar broadcast (`[N·C, L] ∘ [N·C, 1]`); burn's own module
//! broadcasts `γ` and `β` as `[1, C, 1…]`, which falls back to a scalar strided walk on the
//! CPU. Same formula as PyTorch: `(x − μ) / √(σ² + ε) · γ + β`, biased variance. Computed in f32
//! whatever the input's dtype (mixed precision), returned in the input's dtype.

use burn::nn::{BatchNorm, GroupNorm};
use burn::prelude::*;
use burn::tensor::{DType, FloatDType};
use kernels::Activation;
use kernels::Kernels;
use kernels::portable::activate;

/// `norm` applied to `x` `[N, C, ...]`, then `activation`: in the backend's fused pass where it
/// has one ([`kernels::group_norm`], the CPU's), otherwise composed of burn's operations.
pub fn group_norm<B: Kernels, const D: usize>(
    norm: &GroupNorm<B>,
    x: Tensor<B, D>,
    activation: Activation,
) -> Tensor<B, D> {
    let dtype = x.dtype();
    let shape = x.shape();
    let (n, c, g) = (shape[0], shape[1], norm.num_groups);
    // `[N, C, S]` as it is (a reshape to its own shape would be a copy under fusion, and lose a
    // channels-last layout), else flattened to it.
    let flat = |x: Tensor<B, D>| match D {
        3 => Tensor::<B, 3>::from_primitive(x.into_primitive()),
        _ => x.reshape([n, c, shape.num_elements() / (n * c)]),
    };
    let unflat = |y: Tensor<B, 3>| match D {
        3 => Tensor::<B, D>::from_primitive(y.into_primitive()),
        _ => y.reshape(shape.clone()),
    };
    if let (Some(gamma), Some(beta)) = (&norm.gamma, &norm.beta) {
        let affine = || [gamma.val(), beta.val()];
        // The GPU's kernels read and write a half-precision input in its own dtype, computing in
        // f32: no casts around them.
        if dtype != DType::F32
            && let Some(y) = kernels::group_norm(flat(x.clone()), affine(), g, norm.epsilon, activation)
        {
            return unflat(y);
        }
        let x = x.clone().cast(FloatDType::F32);
        if let Some(y) = kernels::group_norm(flat(x), affine(), g, norm.epsilon, activation) {
            return unflat(y).cast(dtype);
        }
    }
    let x = x.cast(FloatDType::F32);
    let per_group = shape.num_elements() / (n * g);
    let grouped = x.reshape([n, g, per_group]);
    let mean = grouped.clone().mean_dim(2);
    let centered = grouped - mean;
    let var = centered.clone().square().mean_dim(2);
    let inv_std = var.add_scalar(norm.epsilon).sqrt().recip(); // [n, g, 1]
    let per_channel = centered.reshape([n, c, per_group * g / c]);
    let (scale, shift) = match (&norm.gamma, &norm.beta) {
        (Some(gamma), Some(beta)) => {
            let scale = inv_std * gamma.val().reshape([1, g, c / g]); // [n, g, c/g]
            (scale.reshape([n, c, 1]), Some(beta.val().reshape([1, c, 1]).repeat_dim(0, n)))
        }
        _ => (inv_std.repeat_dim(2, c / g).reshape([n, c, 1]), None),
    };
    let out = per_channel * scale;
    let out = match shift {
        Some(shift) => out + shift,
        None => out,
    };
    activate(out, activation).reshape(shape).cast(dtype)
}

/// `norm` applied to `x` `[N, C, H, W]` as PyTorch's `BatchNorm2d` applies it, then
/// `activation`. In training
/// (under autodiff): normalised by the batch's statistics, in the backend's fused pass where it
/// has one ([`kernels::batch_norm`]), and the running statistics moved towards the batch's mean
/// and *unbiased* variance (burn's module moves them towards the biased one). Otherwise: by the
/// running statistics, as burn's module does.
pub fn batch_norm<B: Kernels>(norm: &BatchNorm<B>, x: Tensor<B, 4>, activation: Activation) -> Tensor<B, 4> {
    let dtype = x.dtype();
    if !B::ad_enabled(&x.device()) {
        // In f32 whatever the compute dtype: the running statistics are f32.
        return activate(norm.forward(x.cast(FloatDType::F32)), activation).cast(dtype);
    }
    let [n, c, h, w] = x.dims();
    let flat = x.cast(FloatDType::F32).reshape([n, c, h * w]);
    let (gamma, beta) = (norm.gamma.val(), norm.beta.val());
    let (y, mean, variance) =
        match kernels::batch_norm(flat.clone(), [gamma.clone(), beta.clone()], norm.epsilon, activation) {
            Some(fused) => fused,
            None => {
                let per_channel =
                    |t: Tensor<B, 3>| t.swap_dims(0, 1).reshape([c, n * h * w]).mean_dim(1).reshape([1, c, 1]);
                let mean = per_channel(flat.clone());
                let centered = flat - mean.clone();
                let variance = per_channel(centered.clone().square());
                let scale = variance.clone().add_scalar(norm.epsilon).sqrt().recip() * gamma.reshape([1, c, 1]);
                let y = activate(centered * scale + beta.reshape([1, c, 1]), activation);
                (y, mean.detach().reshape([c]), variance.detach().reshape([c]))
            }
        };
    let count = (n * h * w) as f64;
    let unbiased = variance.mul_scalar(count / (count - 1.0).max(1.0));
    let momentum = norm.momentum;
    let blend =
        |running: Tensor<B, 1>, batch: Tensor<B, 1>| running.mul_scalar(1.0 - momentum) + batch.mul_scalar(momentum);
    let device = y.device();
    for (running, batch) in [(&norm.running_mean, mean), (&norm.running_var, unbiased)] {
        running.update(blend(running.value_sync().to_device(&device), batch).detach());
        // Committed at once: burn keeps an update per thread until that thread reads it again,
        // and another thread (the next step's, the checkpoint's) would read the value before it.
        running.value_sync();
    }
    y.reshape([n, c, h, w]).cast(dtype)
}

#[cfg(test)]
mod tests {
    use burn::backend::{Autodiff, Flex};
    use burn::module::AutodiffModule;
    use burn::nn::{BatchNormConfig, GroupNormConfig};

    use super::*;

    /// In training, BatchNorm normalises by the batch's statistics and moves its running ones
    /// as PyTorch does: by the momentum, towards the batch's mean and *unbiased* variance; in
    /// evaluation it normalises by the running ones. Figures by hand, in f64.
    #[test]
    fn batch_norm_trains_on_the_batch_and_keeps_pytorchs_running_statistics() {
        let device = Default::default();
        let norm = BatchNormConfig::new(2).init::<Autodiff<Flex>>(&device);
        let values: Vec<f32> = (0..2 * 2 * 3).map(|i| ((i * 5 % 7) as f32 - 2.0) * 0.8).collect();
        let x = Tensor::<Autodiff<Flex>, 4>::from_data(TensorData::new(values.clone(), [2, 2, 1, 3]), &device);
        let y: Vec<f32> = batch_norm(&norm, x.clone(), Activation::Identity).into_data().to_vec().unwrap();
        // Channel 1: elements 3..6 of sample 0 and 9..12 of sample 1.
        let channel: Vec<f64> = values[3..6].iter().chain(&values[9..12]).map(|&v| f64::from(v)).collect();
        let mean = channel.iter().sum::<f64>() / 6.0;
        let biased = channel.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / 6.0;
        let unbiased = biased * 6.0 / 5.0;
        let expected = (channel[4] - mean) / (biased + 1e-5).sqrt(); // element 10
        assert!((f64::from(y[10]) - expected).abs() < 1e-5, "output {} vs {expected}", y[10]);
        let running_mean: Vec<f32> = norm.running_mean.value().into_data().to_vec().unwrap();
        let running_var: Vec<f32> = norm.running_var.value().into_data().to_vec().unwrap();
        assert!((f64::from(running_mean[1]) - 0.1 * mean).abs() < 1e-6, "running mean {running_mean:?}");
        let expected_var = 0.9 + 0.1 * unbiased;
        assert!(
            (f64::from(running_var[1]) - expected_var).abs() < 1e-6,
            "running variance {running_var:?} vs {expected_var}"
        );
        // A second step on another thread starts from the first one's running statistics.
        std::thread::scope(|scope| {
            scope.spawn(|| batch_norm(&norm, x.clone(), Activation::Identity));
        });
        let running_var: Vec<f32> = norm.running_var.value().into_data().to_vec().unwrap();
        let expected_var = 0.9 * expected_var + 0.1 * unbiased;
        assert!(
            (f64::from(running_var[1]) - expected_var).abs() < 1e-6,
            "second step {running_var:?} vs {expected_var}"
        );
        // Evaluation: the running statistics, not the batch's.
        let eval: Vec<f32> = batch_norm(&norm.valid(), x.inner(), Activation::Identity).into_data().to_vec().unwrap();
        let expected = (channel[4] - 0.19 * mean) / (expected_var + 1e-5).sqrt();
        assert!((f64::from(eval[10]) - expected).abs() < 1e-5, "evaluation {} vs {expected}", eval[10]);
    }

    #[test]
    fn matches_the_textbook_formula_and_burns_module() {
        let device = Default::default();
        let mut norm = GroupNormConfig::new(2, 4).init::<Flex>(&device);
        let gamma = Tensor::<Flex, 1>::from_floats([0.5, -1.0, 2.0, 1.5], &device);
        let beta = Tensor::<Flex, 1>::from_floats([0.1, 0.2, -0.3, 0.0], &device);
        norm.gamma = Some(burn::module::Param::from_tensor(gamma));
        norm.beta = Some(burn::module::Param::from_tensor(beta));
        let values: Vec<f32> = (0..2 * 4 * 3).map(|i| ((i * 7 % 11) as f32 - 5.0) * 0.37).collect();
        let x = Tensor::<Flex, 3>::from_data(TensorData::new(values.clone(), [2, 4, 3]), &device);
        let ours: Vec<f32> = group_norm(&norm, x.clone(), Activation::Identity).into_data().to_vec().unwrap();
        let burns: Vec<f32> = norm.forward(x).into_data().to_vec().unwrap();
        // By hand, in f64: sample 1, group 0 is channels 0 and 1; element 4 is in channel 1
        // (γ = −1, β = 0.2).
        let group: Vec<f64> = values[12..18].iter().map(|&v| f64::from(v)).collect();
        let mean = group.iter().sum::<f64>() / 6.0;
        let var = group.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / 6.0;
        let (gamma, beta) = (-1.0, 0.2);
        let expected = (group[4] - mean) / (var + 1e-5).sqrt() * gamma + beta;
        assert!((f64::from(ours[16]) - expected).abs() < 1e-5, "{} vs {expected}", ours[16]);
        for (a, b) in ours.iter().zip(&burns) {
            assert!((a - b).abs() < 1e-5, "{a} vs {b}");
        }
    }
}
