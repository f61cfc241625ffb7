//! Mixed precision, gradient accumulation and EMA on a real (synthetic, AV1-encoded) dataset,
//! on the Flex CPU backend (which computes in bf16 and f16; NdArray does not).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use burn::backend::{Autodiff, Flex};
use burn::module::{AutodiffModule, Module, ModuleVisitor, Param};
use burn::prelude::*;
use loader::SamplerState;
use serde_json::json;
use trainer::{
    DiffusionModel, Ema, EmaConfig, InputPipeline, LossScaler, Precision, StepRunner, TrainConfig, TrainData,
    init_model, train,
};

type Ad = Autodiff<Flex>;

use crate::common::{scratch, scratch_path, tiny_config, write_synth};

fn dataset() -> &'static Path {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| write_synth(&scratch_path("trainer-speedups-synth")))
}

/// The tiny policy on [`dataset`], one worker, no checkpoints.
fn tiny(output: &Path, steps: usize, extra: serde_json::Value) -> TrainConfig {
    let mut overrides = json!({"log_freq": 5, "num_workers": 1, "save_checkpoint": false});
    trainer::merge(&mut overrides, extra);
    tiny_config(dataset(), output, steps, overrides)
}

/// A runner built as the training loop builds it, and its data.
fn runner(config: &TrainConfig) -> (StepRunner<Ad>, TrainData) {
    let data = TrainData::open(config).unwrap();
    let policy = &config.policy.config;
    let model = init_model::<Ad>(policy, &data.features, config.seed, &Default::default()).unwrap();
    let pipeline = pipeline(config, &data);
    (StepRunner::new(model, policy.clone(), pipeline, config.seed, config.steps, Default::default()), data)
}

/// The input pipeline the training loop builds for `data`.
fn pipeline(config: &TrainConfig, data: &TrainData) -> InputPipeline {
    InputPipeline::new(
        config.policy.config.clone(),
        data.features.clone(),
        data.normalizer(config).unwrap(),
        config.dataset.image_transforms.clone(),
    )
}

/// Every float parameter, flattened in visiting order.
fn weights<B: Backend>(model: &DiffusionModel<B>) -> Vec<f32> {
    struct Gather(Vec<f32>);
    impl<B: Backend> ModuleVisitor<B> for Gather {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            self.0.extend(param.val().into_data().convert::<f32>().to_vec::<f32>().unwrap());
        }
    }
    let mut gather = Gather(Vec::new());
    model.visit(&mut gather);
    gather.0
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

#[test]
fn bf16_training_converges_like_f32() {
    let run = |precision: &str| {
        let out = scratch(&format!("precision-{precision}"));
        let config = tiny(&out, 30, json!({"precision": precision}));
        train::<Ad>(&config, None, Default::default(), |_| {}).unwrap().losses
    };
    let (f32_losses, bf16_losses) = (run("f32"), run("bf16"));
    let last = |l: &[(usize, f64)]| l.last().unwrap().1;
    // Same data, noise and initial weights: the two runs fall together. bf16 keeps 8 bits of
    // mantissa and the trajectories drift apart slowly: the gap seen after 30 steps is about 5%
    // of the loss; the tolerance is 12%.
    assert!(last(&f32_losses) < 0.85 * f32_losses[0].1, "f32 did not learn: {f32_losses:?}");
    assert!(last(&bf16_losses) < 0.85 * bf16_losses[0].1, "bf16 did not learn: {bf16_losses:?}");
    let gap = (last(&bf16_losses) - last(&f32_losses)).abs();
    assert!(gap < 0.12 * last(&f32_losses), "bf16 {bf16_losses:?} vs f32 {f32_losses:?}");
    // But it did compute in bf16: the losses are not bit-identical.
    assert_ne!(f32_losses, bf16_losses);
}

/// After the first update of a half-precision run, the forward reads the copies of the weights
/// the update wrote, as leaves of their own, instead of casting the f32 weights inside the graph:
/// its gradients come back in half precision (not cast to f32 by the graph), and the loss and
/// the gradients gathered into the flat buffer equal, to the bit, those of the model cast from
/// the same weights, as the first step and LeRobot's autocast compute them.
#[test]
fn half_precision_steps_read_the_updates_copies_and_equal_casting() {
    for precision in [Precision::Bf16, Precision::F16] {
        let out = scratch(&format!("copies-{precision}"));
        let config = tiny(&out, 10, json!({"policy": {"scheduler_warmup_steps": 0}}));
        let (runner, data) = runner(&config);
        let mut runner = runner.with_precision(precision).unwrap();
        let mut loader = data.loader(&config, SamplerState::default()).unwrap();
        runner.step(&loader.next().unwrap().unwrap(), 0).unwrap();
        let batch = loader.next().unwrap().unwrap();
        let prepared = runner.prepare(&batch, 1, 0).unwrap();
        let weight_id = runner.model().unet.step_linear1.weight.id;

        let loss = runner.loss(&prepared);
        let grads = runner.gradients(&loss);
        let grad = grads.get::<Flex, 2>(weight_id).expect("a gradient for the U-Net's first Linear");
        assert_eq!(grad.dtype(), precision.dtype().into(), "{precision}: the gradient of the weights' copy");
        let flat: Vec<f32> = runner.flatten(grads).into_data().to_vec().unwrap();

        let cast = precision.cast_model(runner.model());
        let inputs = &prepared.inputs;
        let mask = config.policy.config.do_mask_loss_for_padding.then(|| inputs.action_is_pad.clone());
        let cast_loss =
            cast.loss(&inputs.obs, inputs.actions.clone(), &prepared.noise, config.policy.config.prediction_type, mask);
        // f16's loss scale, as `gradients` applies it.
        let scale = runner.loss_scaler().map_or(1.0, |s| s.scale);
        let scaled = if scale == 1.0 { cast_loss.clone() } else { cast_loss.clone().mul_scalar(scale) };
        let cast_grads = burn::optim::GradientsParams::from_grads(scaled.backward(), runner.model());
        let cast_flat: Vec<f32> = runner.flatten(cast_grads).into_data().to_vec().unwrap();

        let value = |l: Tensor<Ad, 1>| l.into_scalar().elem::<f32>().to_bits();
        assert_eq!(value(loss), value(cast_loss), "{precision}: the loss");
        assert_eq!(flat.len(), cast_flat.len());
        let differing = flat.iter().zip(&cast_flat).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
        assert_eq!(differing, 0, "{precision}: gradients that differ from the cast model's, of {}", flat.len());
        assert!(flat.iter().any(|&g| g != 0.0), "{precision}: the gradients are not all zero");
    }
}

/// f16 steps through the update's copies, one of them skipped by an overflowing loss scale (no
/// update, so the copies stay those of the weights), equal the same steps run by a runner
/// resumed from the state before them (which casts the weights until its first update): the
/// loss and every weight, to the bit.
#[test]
fn f16_steps_through_the_copies_across_a_skipped_step_equal_a_resumed_run() {
    let out = scratch("copies-skip");
    let config = tiny(&out, 10, json!({"policy": {"scheduler_warmup_steps": 0}}));
    let (runner, data) = runner(&config);
    let mut first = runner.with_precision(Precision::F16).unwrap();
    let mut loader = data.loader(&config, SamplerState::default()).unwrap();
    let batches: Vec<_> = (0..3).map(|_| loader.next().unwrap().unwrap()).collect();
    assert!(first.step(&batches[0], 0).unwrap().applied, "the first step applies, and writes the copies");
    let resumed = StepRunner::new(
        first.model().clone(),
        config.policy.config.clone(),
        pipeline(&config, &data),
        config.seed,
        config.steps,
        Default::default(),
    )
    .with_precision(Precision::F16)
    .unwrap()
    .with_optimizer(first.optimizer().to_record())
    .unwrap();

    let huge = LossScaler { scale: 1e30, ..LossScaler::default() };
    let mut outcomes = Vec::new();
    for runner in [first, resumed] {
        let mut runner = runner.with_loss_scaler(huge);
        assert!(!runner.step(&batches[1], 1).unwrap().applied, "a loss scaled by 1e30 overflows");
        let mut runner = runner.with_loss_scaler(LossScaler::default());
        let out = runner.step(&batches[2], 2).unwrap();
        assert!(out.applied);
        outcomes.push((out.loss.into_scalar().elem::<f32>().to_bits(), weights(runner.model())));
    }
    assert_eq!(outcomes[0].0, outcomes[1].0, "the loss");
    assert!(outcomes[0].1 == outcomes[1].1, "the weights");
}

#[test]
fn an_f16_overflow_skips_the_step_and_halves_the_scale() {
    let out = scratch("f16-overflow");
    let config = tiny(&out, 10, json!({"policy": {"scheduler_warmup_steps": 0}}));
    let (runner, data) = runner(&config);
    let huge = LossScaler { scale: 1e30, ..LossScaler::default() };
    let mut runner = runner.with_precision(Precision::F16).unwrap().with_loss_scaler(huge);
    let mut loader = data.loader(&config, SamplerState::default()).unwrap();
    let batch = loader.next().unwrap().unwrap();
    let before = weights(runner.model());

    let out = runner.step(&batch, 0).unwrap();
    assert!(!out.applied, "a loss scaled by 1e30 overflows f16 gradients");
    assert_eq!(out.loss_scale, Some(5e29));
    assert_eq!(weights(runner.model()), before, "a skipped step leaves the weights alone");
    let loss: f32 = out.loss.into_scalar().elem();
    assert!(loss.is_finite(), "the unscaled loss is still reported: {loss}");

    // With a sane scale the same batch trains.
    let mut runner = runner.with_loss_scaler(LossScaler::default());
    let out = runner.step(&batch, 0).unwrap();
    assert!(out.applied);
    let norm: f32 = out.grad_norm.into_scalar().elem();
    assert!(norm.is_finite() && norm > 0.0, "the unscaled norm: {norm}");
    assert_ne!(weights(runner.model()), before);
}

#[test]
fn k_micro_batches_update_like_one_batch_of_k_times_b() {
    // No crop and no augmentation (their draws are per micro-batch) and GroupNorm (BatchNorm's
    // statistics depend on the batch): then only the summation order differs.
    let extra =
        |batch: usize| json!({"batch_size": batch, "policy": {"crop_shape": null, "scheduler_warmup_steps": 0}});
    let (big_out, small_out) = (scratch("accum-big"), scratch("accum-small"));
    let big = tiny(&big_out, 10, extra(4));
    let small = TrainConfig { grad_accum: 2, ..tiny(&small_out, 10, extra(2)) };
    assert!(big.policy.config.use_group_norm);

    let (mut one, data) = runner(&big);
    let batch = data.loader(&big, SamplerState::default()).unwrap().next().unwrap().unwrap();
    let whole = one.step(&batch, 0).unwrap();

    let (two, data) = runner(&small);
    let mut two = two.with_grad_accum(2);
    let mut loader = data.loader(&small, SamplerState::default()).unwrap();
    for micro in 0..2 {
        let half = loader.next().unwrap().unwrap();
        assert_eq!(half.indices(), &batch.indices()[2 * micro..2 * micro + 2], "the loaders deal the same samples");
        two.accumulate(&half, 0, micro).unwrap();
    }
    let split = two.finish(0).unwrap();

    let scalar = |t: Tensor<Flex, 1>| f64::from(t.into_scalar().elem::<f32>());
    let (l1, l2) = (scalar(whole.loss), scalar(split.loss));
    assert!((l1 - l2).abs() < 1e-5 * l1, "loss {l1} vs {l2}");
    let (n1, n2) = (scalar(whole.grad_norm), scalar(split.grad_norm));
    assert!((n1 - n2).abs() < 1e-4 * n1, "gradient norm {n1} vs {n2}");
    // Adam's first update is ±lr·g/(|g| + ε) per weight: equal wherever |g| ≫ ε.
    let (w1, w2) = (weights(one.model()), weights(two.model()));
    let close = w1.iter().zip(&w2).filter(|(a, b)| (*a - *b).abs() <= 1e-6).count();
    assert!(close as f64 >= 0.999 * w1.len() as f64, "{close} of {} weights agree", w1.len());
    assert!(max_abs_diff(&w1, &w2) <= 2.0 * 1e-3 + 1e-6);
    assert_ne!(w1, weights(runner(&big).0.model()), "the step changed the weights");
}

#[test]
fn the_ema_follows_diffusers_rule_and_is_checkpointed() {
    let out = scratch("ema-rule");
    let config = tiny(&out, 10, json!({"policy": {"scheduler_warmup_steps": 0}}));
    let (runner, data) = runner(&config);
    let ema = Ema::new(&runner.model().valid(), EmaConfig { enable: true, ..EmaConfig::default() });
    let mut runner = runner.with_ema(ema).unwrap();
    let mut loader = data.loader(&config, SamplerState::default()).unwrap();

    runner.step(&loader.next().unwrap().unwrap(), 0).unwrap();
    let after_one = weights(runner.model());
    // Optimiser step 1: decay 0, the average is a copy.
    assert_eq!(weights(&runner.ema_model().unwrap()), after_one);

    runner.step(&loader.next().unwrap().unwrap(), 1).unwrap();
    let after_two = weights(runner.model());
    let decay = 1.0 - 2f64.powf(-0.75);
    let expected: Vec<f32> =
        after_one.iter().zip(&after_two).map(|(e, w)| e + (1.0 - decay as f32) * (w - e)).collect();
    let average = weights(&runner.ema_model().unwrap());
    assert!(max_abs_diff(&average, &expected) < 1e-6);
    assert_ne!(average, after_two);

    // A run with --ema.enable checkpoints the average, and `sample` prefers it.
    let out = scratch("ema-run");
    let run = TrainConfig { save_checkpoint: true, steps: 3, ..tiny(&out, 3, json!({"ema": {"enable": true}})) };
    train::<Ad>(&run, None, Default::default(), |_| {}).unwrap();
    let dir = out.join("checkpoints/000003");
    assert!(dir.join("ema.mpk").exists());
    let with_ema = trainer::PolicyRunner::<Flex>::load(&out, 0, true, Default::default()).unwrap().into_model();
    let raw = trainer::PolicyRunner::<Flex>::load(&out, 0, false, Default::default()).unwrap().into_model();
    assert_ne!(weights(&with_ema), weights(&raw));
}
