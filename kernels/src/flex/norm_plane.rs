//! The loops GroupNorm and BatchNorm share on the CPU, over one plane (one sample's channel):
//! the output through the activation, the gradient back through it, the sums of the backward
//! pass and the input gradient. One place for the arithmetic keeps the backward's recomputed
//! output rounded as the forward's (a ReLU's mask exact) in both norms.

use super::sums::sum_pairs_f64;
use crate::Activation;

/// One plane's normalisation: its statistics' mean and `1/√(σ² + ε)`, its channel's γ and β.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PlaneNorm {
    pub mean: f32,
    pub inv_std: f32,
    pub gamma: f32,
    pub beta: f32,
}

impl PlaneNorm {
    /// `x̂·γ + β` of each value, as `(v − μ)·(r·γ) + β`, then `f` of it and of the value's index.
    fn for_each_output(self, values: &[f32], mut f: impl FnMut(usize, f32)) {
        let (scale, shift) = (self.inv_std * self.gamma, self.beta);
        for (i, &v) in values.iter().enumerate() {
            f(i, (v - self.mean) * scale + shift);
        }
    }

    /// The plane's output: `activation(x̂·γ + β)`.
    pub(crate) fn normalize(self, out: &mut [f32], values: &[f32], activation: Activation) {
        self.for_each_output(values, |i, y| out[i] = activation.apply(y));
    }

    /// The gradient before the activation, `dy·f'(x̂·γ + β)`, from the output's `output_grad`.
    pub(crate) fn through_activation(
        self,
        pre: &mut [f32],
        values: &[f32],
        output_grad: &[f32],
        activation: Activation,
    ) {
        self.for_each_output(values, |i, y| pre[i] = output_grad[i] * activation.derivative(y));
    }

    /// `Σ dy·x̂` and `Σ dy` over the plane, in f64, for `dy` the gradient before the activation.
    pub(crate) fn gradient_sums(self, values: &[f32], dy: &[f32]) -> [f64; 2] {
        let (mean, inv_std) = (self.mean, self.inv_std);
        sum_pairs_f64(values, dy, |v, d| [f64::from(d * ((v - mean) * inv_std)), f64::from(d)])
    }

    /// The input gradient `r·(dy·γ − mean_g − x̂·mean_gx̂)`, with `dy` the gradient before the
    /// activation: `output_grad`'s, or (`None`) what `dx` holds, overwritten value by value.
    pub(crate) fn input_gradient(
        self,
        dx: &mut [f32],
        values: &[f32],
        output_grad: Option<&[f32]>,
        [mean_g, mean_g_x_hat]: [f32; 2],
    ) {
        let (mean, inv_std, gamma) = (self.mean, self.inv_std, self.gamma);
        for (i, (o, &v)) in dx.iter_mut().zip(values).enumerate() {
            let d = output_grad.map_or(*o, |g| g[i]);
            let x_hat = (v - mean) * inv_std;
            *o = inv_std * (d * gamma - mean_g - x_hat * mean_g_x_hat);
        }
    }
}

/// Plane `index` of `values`, planes of `positions` values laid end to end.
pub(crate) fn plane_at(values: &[f32], index: usize, positions: usize) -> &[f32] {
    &values[index * positions..][..positions]
}
