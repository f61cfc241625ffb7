//! The fused, flat update against burn's own Adam with torch's global-norm clipping applied
//! parameter by parameter (what the trainer ran before the flat buffers), over 20 steps of a
//! small network's real gradients, with weight decay, clipping that bites and an EMA. burn
//! derives Adam's bias corrections in f32 and we in f64, as torch does (`1 − 0.999` is 1.3e-5
//! off in f32), so each update agrees to 2e-5 of its size, not to the bit;
//! `trainer/tests/reference.rs` holds the update to torch's own numbers at 1e-6.

use burn::backend::{Autodiff, Flex};
use burn::module::{AutodiffModule, Module, ModuleVisitor, Param};
use burn::nn::conv::{Conv1d, Conv1dConfig};
use burn::nn::{Linear, LinearConfig};
use burn::optim::decay::WeightDecayConfig;
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::prelude::*;

use super::*;

type Ad = Autodiff<Flex>;

#[derive(Module, Debug)]
struct Net<B: Backend> {
    conv: Conv1d<B>,
    linear: Linear<B>,
}

impl<B: Backend> Net<B> {
    fn new(device: &B::Device) -> Self {
        Self { conv: Conv1dConfig::new(3, 8, 5).init(device), linear: LinearConfig::new(8 * 12, 4).init(device) }
    }

    fn loss(&self, x: Tensor<B, 3>, y: Tensor<B, 2>) -> Tensor<B, 1> {
        let h = self.conv.forward(x).tanh();
        let [b, c, t] = h.dims();
        (self.linear.forward(h.reshape([b, c * t])) - y).square().mean()
    }
}

fn batch(step: usize, device: &burn::backend::flex::FlexDevice) -> (Tensor<Ad, 3>, Tensor<Ad, 2>) {
    let values = |n: usize, salt: f32| -> Vec<f32> {
        (0..n).map(|i| ((i as f32 * 0.618 + step as f32 * 7.1 + salt).sin() * 1000.0).fract() * 4.0).collect()
    };
    let x = Tensor::from_data(TensorData::new(values(6 * 3 * 16, 0.3), [6, 3, 16]), device);
    let y = Tensor::from_data(TensorData::new(values(6 * 4, 0.9), [6, 4]), device);
    (x, y)
}

fn weights<B: Backend, M: Module<B>>(model: &M) -> Vec<f32> {
    FlatLayout::of(model).gather_weights(model).into_data().to_vec().unwrap()
}

/// torch's `clip_grad_norm_` over separate gradients: the global norm and each gradient scaled.
fn clip_each(model: &Net<Ad>, grads: &mut GradientsParams, max_norm: f32) -> f32 {
    struct Squares<'a>(&'a GradientsParams, f32);
    impl ModuleVisitor<Ad> for Squares<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<Ad, D>>) {
            if let Some(g) = self.0.get::<Flex, D>(param.id) {
                self.1 += g.square().sum().into_scalar();
            }
        }
    }
    struct Scale<'a>(&'a mut GradientsParams, f32);
    impl ModuleVisitor<Ad> for Scale<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<Ad, D>>) {
            if let Some(g) = self.0.remove::<Flex, D>(param.id) {
                self.0.register::<Flex, D>(param.id, g.mul_scalar(self.1));
            }
        }
    }
    let mut squares = Squares(grads, 0.0);
    model.visit(&mut squares);
    let norm = squares.1.sqrt();
    let factor = (max_norm / (norm + 1e-6)).min(1.0);
    model.visit(&mut Scale(grads, factor));
    norm
}

#[test]
fn the_fused_update_equals_burns_adam_with_torchs_clipping_over_20_steps() {
    let device = Default::default();
    let config = crate::policy_config::DiffusionConfig {
        optimizer_lr: 1e-3,
        optimizer_weight_decay: 1e-3,
        ..crate::policy_config::DiffusionConfig::new()
    };
    let (max_norm, ema_weight) = (0.5, 0.3);
    // Weights from a formula (burn's random initialisation is process-wide, shared with the
    // tests running beside this one).
    let start = Net::<Ad>::new(&device);
    let layout = FlatLayout::of(&start);
    let formula: Vec<f32> = (0..layout.len()).map(|i| ((i as f32 * 0.377).sin() * 917.0).fract() * 0.3).collect();
    let start = layout.scatter_weights(start, &Tensor::from_data(TensorData::new(formula, [layout.len()]), &device));

    let mut reference = start.clone();
    let mut adam = AdamConfig::new()
        .with_beta_1(config.optimizer_betas.0 as f32)
        .with_beta_2(config.optimizer_betas.1 as f32)
        .with_epsilon(config.optimizer_eps as f32)
        .with_weight_decay(Some(WeightDecayConfig::new(config.optimizer_weight_decay as f32)))
        .init::<Ad, Net<Ad>>();
    let mut reference_average = weights(&start.valid());

    let mut fused = start.clone();
    let mut flat_adam = FlatAdam::<Flex>::new(&config, layout.clone(), &device);
    let mut average = layout.gather_weights(&fused.valid());

    let (mut clipped_steps, mut moved) = (0, 0.0);
    // How far each weight may differ after `steps` steps: 2e-5 of the distance Adam may have
    // moved it (Σ lr), plus one f32 rounding of the weight per step.
    let close = |a: &[f32], b: &[f32], moved: f64, steps: usize| -> f32 {
        let ulp = f32::EPSILON * steps as f32;
        a.iter().zip(b).map(|(a, b)| (a - b).abs() / (2e-5 * moved as f32 + ulp * b.abs())).fold(0.0, f32::max)
    };
    for step in 0..20 {
        let lr = config.optimizer_lr * (1.0 + step as f64) / 20.0;
        moved += lr;
        let (x, y) = batch(step, &device);

        let mut grads = GradientsParams::from_grads(reference.loss(x.clone(), y.clone()).backward(), &reference);
        let norm = clip_each(&reference, &mut grads, max_norm as f32);
        clipped_steps += usize::from(norm > max_norm as f32);
        reference = adam.step(lr, reference, grads);
        let live = weights(&reference.valid());
        for (a, w) in reference_average.iter_mut().zip(&live) {
            *a += (w - *a) * ema_weight;
        }

        let mut grads = GradientsParams::from_grads(fused.loss(x, y).backward(), &fused);
        let flat = layout.gather_grads(&fused, &mut grads, flat_adam.take_spare(), &device);
        let clipping = clip_grad_norm(&flat, max_norm, 1.0);
        let fused_norm: f32 = clipping.norm.clone().into_scalar();
        assert!((fused_norm - norm).abs() <= 1e-6 * norm, "step {step}: norm {fused_norm} vs {norm}");
        fused = flat_adam.step(fused, flat, clipping.into(), lr, Some((&mut average, ema_weight)), None).0;

        let worst = close(&weights(&fused.valid()), &weights(&reference.valid()), moved, step + 1);
        assert!(worst <= 1.0, "step {step}: weights differ by {worst} of the tolerance");
    }
    assert!(clipped_steps >= 5, "clipping bit in {clipped_steps} of 20 steps");
    let average: Vec<f32> = average.into_data().to_vec().unwrap();
    let worst = close(&average, &reference_average, moved, 20);
    assert!(worst <= 1.0, "the averages differ by {worst} of the tolerance");
    assert_ne!(weights(&fused.valid()), weights(&start.valid()));
    assert_eq!(flat_adam.time(), 20);
}

#[test]
fn warmup_then_cosine_like_diffusers() {
    let (base, warmup, total) = (1e-4, 500, 10_000);
    assert_eq!(learning_rate(base, 0, warmup, total), 0.0);
    assert!((learning_rate(base, 250, warmup, total) - 0.5e-4).abs() < 1e-15);
    assert_eq!(learning_rate(base, 500, warmup, total), 1e-4);
    // Half-way through the cosine part the rate is halved, at the end it is zero.
    assert!((learning_rate(base, 500 + 4750, warmup, total) - 0.5e-4).abs() < 1e-12);
    assert!(learning_rate(base, total, warmup, total).abs() < 1e-18);
    // diffusers' lambda written out: max(0, 0.5·(1 + cos(π·2·0.5·progress))).
    let step = 7321;
    let progress = (step - warmup) as f64 / (total - warmup) as f64;
    let expected = base * (0.5 * (1.0 + (std::f64::consts::PI * 0.5 * 2.0 * progress).cos())).max(0.0);
    assert_eq!(learning_rate(base, step, warmup, total), expected);
}
