//! GroupNorm's forward pass: the backend's fused pass where it has one ([`kernels::group_norm`];
//! the CPU's, forward and backward), otherwise burn's operations, arranged so every large
//! elementwise operation is a per-row scalar broadcast (`[N·C, L] ∘ [N·C, 1]`); burn's own
//! module broadcasts `γ` and `β` as `[1, C, 1…]`, which falls back to a scalar strided walk on
//! the CPU. Same formula as PyTorch: `(x − μ) / √(σ² + ε) · γ + β`, biased variance. Computed in
//! f32 whatever the input's dtype (mixed precision), returned in the input's dtype.

use burn::nn::GroupNorm;
use burn::prelude::*;
use burn::tensor::FloatDType;
use kernels::Kernels;

/// `norm` applied to `x` `[N, C, ...]`: in the backend's fused pass where it has one
/// ([`kernels::group_norm`], the CPU's), otherwise composed of burn's operations.
pub fn group_norm<B: Kernels, const D: usize>(norm: &GroupNorm<B>, x: Tensor<B, D>) -> Tensor<B, D> {
    let dtype = x.dtype();
    let x = x.cast(FloatDType::F32);
    let shape = x.shape();
    let (n, c, g) = (shape[0], shape[1], norm.num_groups);
    if let (Some(gamma), Some(beta)) = (&norm.gamma, &norm.beta) {
        let flat = x.clone().reshape([n, c, shape.num_elements() / (n * c)]);
        if let Some(y) = kernels::group_norm(flat, gamma.val(), beta.val(), g, norm.epsilon) {
            return y.reshape(shape).cast(dtype);
        }
    }
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
    out.reshape(shape).cast(dtype)
}

#[cfg(test)]
mod tests {
    use burn::backend::Flex;
    use burn::nn::GroupNormConfig;

    use super::*;

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
        let ours: Vec<f32> = group_norm(&norm, x.clone()).into_data().to_vec().unwrap();
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
