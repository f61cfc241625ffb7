//! Mixed precision: f32 master weights and optimiser state, with the forward and backward passes
//! run through a half-precision copy of the model: the copies of the weights the last update
//! wrote, leaves of the graph whose gradients the gather casts up ([`Precision::model_from_copies`]),
//! or, before the first update, a copy made inside the autodiff graph (so gradients flow back
//! through the casts to the f32 weights, [`Precision::cast_model`]); and dynamic loss scaling for
//! f16.
//!
//! What stays in f32 inside a half-precision pass: every norm layer (GroupNorm, BatchNorm: their
//! parameters are not cast; they compute in f32, their inputs cast up and back, or read and
//! written in the compute dtype by the GPU's GroupNorm kernels), the spatial softmax, the
//! sinusoidal embedding's arguments and the loss. See ARCHITECTURE.md.

use std::fmt;
use std::str::FromStr;

use burn::module::{Module, ModuleMapper, Param, ParamId};
use burn::prelude::*;
use burn::tensor::FloatDType;
use burn::tensor::backend::AutodiffBackend;
use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::optim::WeightCopies;

/// The dtype the forward and backward passes compute in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// Everything in f32.
    #[default]
    F32,
    /// bfloat16 compute (f32's range; no loss scaling needed).
    Bf16,
    /// float16 compute with dynamic loss scaling.
    F16,
}

impl Precision {
    /// The compute dtype.
    pub fn dtype(self) -> FloatDType {
        match self {
            Self::F32 => FloatDType::F32,
            Self::Bf16 => FloatDType::BF16,
            Self::F16 => FloatDType::F16,
        }
    }

    /// Whether the device `B` can compute in this precision.
    pub fn supported<B: Backend>(self, device: &B::Device) -> bool {
        B::supports_dtype(device, self.dtype().into())
    }

    /// A copy of `model` whose parameters are in this precision, made inside the autodiff
    /// graph (a no-op for f32). Norm layers keep their f32 parameters.
    pub fn cast_model<B: Backend, M: Module<B>>(self, model: &M) -> M {
        match self {
            Self::F32 => model.clone(),
            _ => model.clone().map(&mut OutsideNorms::new(Cast(self.dtype()))),
        }
    }

    /// [`Precision::cast_model`] without its casts: each parameter outside norm layers that has
    /// one of `copies` (the optimiser's update wrote them, [`crate::optim::FlatAdam::step`])
    /// becomes that copy, a leaf of the autodiff graph of its own (trainable as the parameter
    /// was, under the same `ParamId`), so that the gradients come back in this precision and the
    /// f32 weights are not read. The others are cast, as [`Precision::cast_model`] casts them.
    pub fn model_from_copies<B: AutodiffBackend, M: Module<B>>(
        self,
        model: &M,
        copies: &WeightCopies<B::InnerBackend>,
    ) -> M {
        match self {
            Self::F32 => model.clone(),
            _ => model.clone().map(&mut OutsideNorms::new(FromCopies { copies, dtype: self.dtype() })),
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::F32 => "f32",
            Self::Bf16 => "bf16",
            Self::F16 => "f16",
        })
    }
}

impl FromStr for Precision {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "f32" | "fp32" => Ok(Self::F32),
            "bf16" => Ok(Self::Bf16),
            "f16" | "fp16" => Ok(Self::F16),
            _ => Err(Error::Config(format!("unknown precision {s:?}: expected f32, bf16 or f16"))),
        }
    }
}

/// Maps every float parameter outside norm layers with `replace`, keeping its `ParamId`; the
/// norm layers' parameters stay as they are (f32).
struct OutsideNorms<R> {
    replace: R,
    /// How many norm modules the walk is inside.
    norm_depth: usize,
}

impl<R> OutsideNorms<R> {
    fn new(replace: R) -> Self {
        Self { replace, norm_depth: 0 }
    }
}

fn is_norm(container_type: &str) -> bool {
    matches!(container_type, "Struct:GroupNorm" | "Struct:BatchNorm" | "Struct:LayerNorm")
}

/// What replaces a parameter's value outside norm layers ([`OutsideNorms`]).
trait Replace<B: Backend> {
    /// The new value of parameter `id`, whose value was `tensor`.
    fn replace<const D: usize>(&mut self, id: ParamId, tensor: Tensor<B, D>) -> Tensor<B, D>;
}

impl<B: Backend, R: Replace<B>> ModuleMapper<B> for OutsideNorms<R> {
    fn enter_module(&mut self, _name: &str, container_type: &str) {
        if is_norm(container_type) {
            self.norm_depth += 1;
        }
    }

    fn exit_module(&mut self, _name: &str, container_type: &str) {
        if is_norm(container_type) {
            self.norm_depth -= 1;
        }
    }

    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        if self.norm_depth > 0 {
            return param;
        }
        let (id, tensor, mapper) = param.consume();
        Param::from_mapped_value(id, self.replace.replace(id, tensor), mapper)
    }
}

/// Casts to the dtype.
struct Cast(FloatDType);

impl<B: Backend> Replace<B> for Cast {
    fn replace<const D: usize>(&mut self, _id: ParamId, tensor: Tensor<B, D>) -> Tensor<B, D> {
        tensor.cast(self.0)
    }
}

/// The parameter's half-precision copy as a leaf of its own (trainable as the parameter was);
/// without a copy, casts as [`Cast`] does.
struct FromCopies<'a, B: AutodiffBackend> {
    copies: &'a WeightCopies<B::InnerBackend>,
    dtype: FloatDType,
}

impl<B: AutodiffBackend> Replace<B> for FromCopies<'_, B> {
    fn replace<const D: usize>(&mut self, id: ParamId, tensor: Tensor<B, D>) -> Tensor<B, D> {
        let Some(copy) = self.copies.get(&id) else { return tensor.cast(self.dtype) };
        let leaf = Tensor::from_inner(crate::optim::in_shape(copy.clone(), tensor.shape()));
        if tensor.is_require_grad() { leaf.require_grad() } else { leaf }
    }
}

/// Dynamic loss scaling for f16 (PyTorch's `GradScaler` rule): the loss is multiplied by the
/// scale before backward; a step whose gradients are not finite is skipped and halves the
/// scale; `growth_interval` finite steps in a row double it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LossScaler {
    /// The current scale.
    pub scale: f32,
    /// Finite steps since the last change.
    pub good_steps: usize,
    /// Finite steps before the scale doubles.
    pub growth_interval: usize,
}

/// The dynamic loss scaler's state, as a checkpoint keeps it (`training_state.json`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LossScaleState {
    /// The current scale.
    pub scale: f32,
    /// Finite steps since the last change.
    pub good_steps: usize,
}

/// What the scaler decided after a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScaleUpdate {
    /// The gradients were finite and the step applies.
    Apply,
    /// The gradients overflowed: the step is skipped and the scale halved.
    Skip,
}

impl Default for LossScaler {
    fn default() -> Self {
        Self { scale: 65536.0, good_steps: 0, growth_interval: 2000 }
    }
}

impl LossScaler {
    /// A scaler continuing from a checkpoint's state.
    pub fn from_state(state: LossScaleState) -> Self {
        Self { scale: state.scale, good_steps: state.good_steps, ..Self::default() }
    }

    /// The state to checkpoint.
    pub fn state(&self) -> LossScaleState {
        LossScaleState { scale: self.scale, good_steps: self.good_steps }
    }

    /// Updates the scale given whether the (scaled) gradient norm was finite.
    pub fn update(&mut self, finite: bool) -> ScaleUpdate {
        if !finite {
            self.scale = (self.scale * 0.5).max(f32::MIN_POSITIVE);
            self.good_steps = 0;
            return ScaleUpdate::Skip;
        }
        self.good_steps += 1;
        if self.good_steps >= self.growth_interval {
            self.scale = (self.scale * 2.0).min(f32::MAX / 2.0);
            self.good_steps = 0;
        }
        ScaleUpdate::Apply
    }
}

#[cfg(test)]
mod tests {
    use burn::backend::{Autodiff, Flex};
    use burn::nn::{GroupNorm, GroupNormConfig, Linear, LinearConfig};
    use burn::tensor::DType;

    use super::*;

    #[derive(Module, Debug)]
    struct Tiny<B: Backend> {
        linear: Linear<B>,
        norm: GroupNorm<B>,
    }

    #[test]
    fn the_compute_copy_casts_all_but_norms_and_gradients_reach_f32_weights() {
        type B = Autodiff<Flex>;
        let device = Default::default();
        let model =
            Tiny::<B> { linear: LinearConfig::new(4, 4).init(&device), norm: GroupNormConfig::new(2, 4).init(&device) };
        // Lazily initialised parameters must be drawn before the copy (see `materialize`).
        crate::model::materialize(&model);
        for precision in [Precision::Bf16, Precision::F16] {
            assert!(precision.supported::<B>(&device), "Flex computes in {precision}");
            let copy = precision.cast_model(&model);
            assert_eq!(copy.linear.weight.val().dtype(), DType::from(precision.dtype()));
            assert_eq!(copy.norm.gamma.as_ref().unwrap().val().dtype(), DType::F32);
            assert_eq!(copy.linear.weight.id, model.linear.weight.id);

            let x = Tensor::<B, 2>::ones([3, 4], &device).cast(precision.dtype());
            let loss = copy.linear.forward(x).cast(FloatDType::F32).sum();
            let grads = loss.backward();
            let g = model.linear.weight.grad(&grads).expect("the master weight has a gradient");
            assert_eq!(g.dtype(), DType::F32);
            // d(sum(x·W + b))/dW = column sums of x = 3 everywhere.
            let values: Vec<f32> = g.into_data().to_vec().unwrap();
            assert!(values.iter().all(|&v| v == 3.0), "{values:?}");
        }
        assert!(Precision::F32.cast_model(&model).linear.weight.val().dtype() == DType::F32);
    }

    #[test]
    fn the_scaler_skips_and_halves_on_overflow_and_grows_after_good_steps() {
        let mut scaler = LossScaler { growth_interval: 3, ..LossScaler::default() };
        assert_eq!(scaler.update(true), ScaleUpdate::Apply);
        assert_eq!(scaler.update(false), ScaleUpdate::Skip);
        assert_eq!((scaler.scale, scaler.good_steps), (32768.0, 0));
        for _ in 0..2 {
            assert_eq!(scaler.update(true), ScaleUpdate::Apply);
        }
        assert_eq!(scaler.scale, 32768.0);
        scaler.update(true);
        assert_eq!((scaler.scale, scaler.good_steps), (65536.0, 0));
        let restored = LossScaler::from_state(scaler.state());
        assert_eq!((restored.scale, restored.good_steps), (scaler.scale, scaler.good_steps));
    }

    #[test]
    fn precision_names_parse() {
        assert_eq!("bf16".parse::<Precision>().unwrap(), Precision::Bf16);
        assert_eq!("f16".parse::<Precision>().unwrap(), Precision::F16);
        assert!("f8".parse::<Precision>().is_err());
        assert_eq!(Precision::F16.to_string(), "f16");
    }
}
