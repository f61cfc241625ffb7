//! The activation a norm's fused pass applies to its output, and its derivative, which the
//! fused backward pass applies to the output's gradient (the norm's output is recomputed from
//! the statistics, not kept).

/// What follows a norm in its fused pass: nothing, ReLU (ResNet's blocks) or Mish (the U-Net's
/// convolution blocks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Activation {
    /// The norm's output as it is.
    #[default]
    Identity,
    /// `max(y, 0)`.
    Relu,
    /// `y · tanh(softplus(y))`, the identity above 20 (where `tanh(softplus(y))` is 1 in f32).
    Mish,
}

/// Above this, Mish is the identity in f32 (`tanh(20) = 1`; PyTorch's `softplus` switches to
/// the identity there too); below, `e^y` and its square stay finite.
const MISH_LINEAR_ABOVE: f32 = 20.0;

impl Activation {
    /// The activation of `y`.
    #[inline]
    pub fn apply(self, y: f32) -> f32 {
        match self {
            Self::Identity => y,
            Self::Relu => relu(y),
            Self::Mish => mish(y),
        }
    }

    /// The activation's derivative at `y`.
    #[inline]
    pub fn derivative(self, y: f32) -> f32 {
        match self {
            Self::Identity => 1.0,
            Self::Relu => relu_derivative(y),
            Self::Mish => mish_derivative(y),
        }
    }
}

/// `max(y, 0)`; NaN stays NaN, as in PyTorch.
#[inline]
fn relu(y: f32) -> f32 {
    if y < 0.0 { 0.0 } else { y }
}

/// 1 where `y > 0`, else 0 (PyTorch's `threshold_backward`).
#[inline]
fn relu_derivative(y: f32) -> f32 {
    if y > 0.0 { 1.0 } else { 0.0 }
}

/// `tanh(softplus(y))` as `n / (n + 2)` with `n = e^y (e^y + 2)`: one exponential, where
/// PyTorch's composition takes three transcendental functions.
#[inline]
fn mish(y: f32) -> f32 {
    if y > MISH_LINEAR_ABOVE {
        return y;
    }
    let e = y.exp();
    let n = e * (e + 2.0);
    y * n / (n + 2.0)
}

/// `tanh(softplus(y)) + y · 4e^y (e^y + 1) / (n + 2)²`.
#[inline]
fn mish_derivative(y: f32) -> f32 {
    if y > MISH_LINEAR_ABOVE {
        return 1.0;
    }
    let e = y.exp();
    let n = e * (e + 2.0);
    let d = n + 2.0;
    n / d + y * 4.0 * e * (e + 1.0) / (d * d)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Mish in f64 by its definition, `y · tanh(ln(1 + e^y))`, with PyTorch's threshold.
    fn mish_reference(y: f64) -> f64 {
        let softplus = if y > 20.0 { y } else { y.exp().ln_1p() };
        y * softplus.tanh()
    }

    /// Mish and its derivative (against a central difference of the definition) over the range
    /// activations take, both sides of the threshold, and far below zero.
    #[test]
    fn mish_and_its_derivative_match_the_definition() {
        for i in -400..=400 {
            let y = f64::from(i) * 0.06; // −24 .. 24
            let ours = f64::from(Activation::Mish.apply(y as f32));
            let expected = mish_reference(f64::from(y as f32));
            assert!((ours - expected).abs() <= 1e-6 * expected.abs().max(1.0), "mish({y}) = {ours}, not {expected}");
            let h = 1e-4;
            let slope = (mish_reference(y + h) - mish_reference(y - h)) / (2.0 * h);
            let ours = f64::from(Activation::Mish.derivative(y as f32));
            assert!((ours - slope).abs() <= 2e-4, "mish'({y}) = {ours}, not {slope}");
        }
        assert_eq!(Activation::Mish.apply(-200.0), 0.0);
        assert_eq!(Activation::Mish.derivative(-200.0), 0.0);
        assert!(Activation::Mish.apply(f32::NAN).is_nan());
    }

    /// ReLU keeps positives and NaN, zeroes negatives; its derivative is 1 only above zero.
    #[test]
    fn relu_and_its_derivative() {
        assert_eq!(Activation::Relu.apply(2.5), 2.5);
        assert_eq!(Activation::Relu.apply(-2.5), 0.0);
        assert!(Activation::Relu.apply(f32::NAN).is_nan());
        assert_eq!(Activation::Relu.derivative(2.5), 1.0);
        assert_eq!(Activation::Relu.derivative(0.0), 0.0);
        assert_eq!(Activation::Relu.derivative(-1.0), 0.0);
    }
}
