//! The noise schedule, both samplers, the learning-rate schedule, global-norm clipping and Adam
//! against the libraries LeRobot uses: values computed by diffusers 0.39 and torch 2.11
//! (`tests/fixtures/diffusers/make_fixture.py`, `tests/fixtures/torch_adam/make_fixture.py`).

use burn::backend::{Autodiff, Flex};
use burn::module::{Module, Param};
use burn::optim::GradientsParams;
use burn::prelude::*;
use serde_json::Value;
use trainer::optim::{FlatLayout, clip_grad_norm, learning_rate};
use trainer::{BetaSchedule, NoiseSchedule, PredictionType, SchedulerKind};

fn reference() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/diffusers/reference.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("the diffusers fixture")).expect("valid JSON")
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array().expect("an array").iter().map(|x| x.as_f64().expect("a number") as f32).collect()
}

fn schedule(prediction: PredictionType) -> NoiseSchedule {
    NoiseSchedule::new(BetaSchedule::SquaredcosCapV2, 100, 1e-4, 0.02, prediction, true, 1.0)
}

fn assert_close(ours: &[f32], theirs: &[f32], tolerance: f32, what: &str) {
    assert_eq!(ours.len(), theirs.len(), "{what}: length");
    for (i, (a, b)) in ours.iter().zip(theirs).enumerate() {
        assert!((a - b).abs() <= tolerance * (1.0 + b.abs()), "{what}[{i}]: ours {a}, diffusers {b}");
    }
}

#[test]
fn squaredcos_schedule_matches_diffusers() {
    let r = reference();
    let s = schedule(PredictionType::Epsilon);
    // Betas are computed in float64 and rounded, as diffusers does: identical.
    assert_eq!(s.betas, floats(&r["betas"]));
    assert_close(&s.alphas_cumprod, &floats(&r["alphas_cumprod"]), 1e-6, "alphas_cumprod");
}

#[test]
fn add_noise_matches_diffusers() {
    let r = reference();
    let s = schedule(PredictionType::Epsilon);
    let (sample, noise) = (floats(&r["sample"]), floats(&r["model_output"]));
    let per_sample = sample.len() / 2;
    let timesteps: Vec<usize> =
        r["add_noise"]["timesteps"].as_array().unwrap().iter().map(|t| t.as_u64().unwrap() as usize).collect();
    let ours: Vec<f32> = (0..sample.len())
        .map(|i| {
            let (signal, sigma) = s.noise_coefficients(timesteps[i / per_sample]);
            sample[i] * signal + noise[i] * sigma
        })
        .collect();
    assert_close(&ours, &floats(&r["add_noise"]["noisy"]), 1e-6, "noisy");
}

#[test]
fn ddpm_and_ddim_steps_match_diffusers() {
    let r = reference();
    let (sample, output) = (floats(&r["sample"]), floats(&r["model_output"]));
    let steps = r["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 12);
    for case in steps {
        let kind = if case["kind"] == "DDPM" { SchedulerKind::Ddpm } else { SchedulerKind::Ddim };
        let prediction = if case["prediction"] == "epsilon" { PredictionType::Epsilon } else { PredictionType::Sample };
        let n = case["inference_steps"].as_u64().unwrap() as usize;
        let t = case["t"].as_u64().unwrap() as usize;
        let s = schedule(prediction);
        let expected_timesteps: Vec<usize> =
            case["timesteps"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect();
        assert_eq!(s.inference_timesteps(n), expected_timesteps, "{kind:?} timesteps");
        let noise = floats(&case["noise"]);
        let ours = s.step(kind, &output, t, n, &sample, Some(&noise));
        assert_close(&ours, &floats(&case["prev_sample"]), 2e-6, &format!("{kind:?} {prediction:?} t={t}"));
    }
}

#[test]
fn learning_rate_follows_diffusers_cosine_with_warmup() {
    let r = reference();
    let lr = &r["lr"];
    let (base, warmup, total) =
        (lr["base"].as_f64().unwrap(), lr["warmup"].as_u64().unwrap() as usize, lr["total"].as_u64().unwrap() as usize);
    for (step, expected) in lr["by_step"].as_object().unwrap() {
        let step: usize = step.parse().unwrap();
        let ours = learning_rate(base, step, warmup, total);
        let expected = expected.as_f64().unwrap();
        assert!((ours - expected).abs() <= 1e-15 + 1e-9 * expected, "step {step}: ours {ours}, torch {expected}");
    }
}

#[derive(Module, Debug)]
struct TwoParams<B: Backend> {
    matrix: Param<Tensor<B, 2>>,
    vector: Param<Tensor<B, 1>>,
}

type Ad = Autodiff<Flex>;

#[test]
fn clipping_uses_the_global_norm_like_torch() {
    let r = reference();
    let device = Default::default();
    for case in r["clip"].as_array().unwrap() {
        let model = TwoParams::<Ad> {
            matrix: Param::from_tensor(Tensor::zeros([5, 3], &device)),
            vector: Param::from_tensor(Tensor::zeros([7], &device)),
        };
        let grads_in: Vec<Vec<f32>> = case["grads"].as_array().unwrap().iter().map(floats).collect();
        let mut grads = GradientsParams::new();
        grads.register::<Flex, 2>(
            model.matrix.id,
            Tensor::from_data(TensorData::new(grads_in[0].clone(), [5, 3]), &device),
        );
        grads.register::<Flex, 1>(
            model.vector.id,
            Tensor::from_data(TensorData::new(grads_in[1].clone(), [7]), &device),
        );
        let flat = FlatLayout::of(&model).gather_grads(&model, &mut grads, None, &device);
        let clipping = clip_grad_norm(&flat, 10.0, 1.0);
        let norm = clipping.norm.into_scalar();
        let expected = case["norm"].as_f64().unwrap() as f32;
        assert!((norm - expected).abs() < 1e-5 * expected, "norm {norm} vs {expected}");
        let clipped = case["clipped"].as_array().unwrap();
        let clipped_flat: Vec<f32> = (flat * clipping.scale).into_data().to_vec().unwrap();
        let (matrix, vector) = clipped_flat.split_at(15);
        assert_close(matrix, &floats(&clipped[0]), 1e-6, "clipped matrix");
        assert_close(vector, &floats(&clipped[1]), 1e-6, "clipped vector");
    }
}

/// 20 steps of clipping and Adam with L2 decay, fused over flat buffers, against torch's.
#[test]
fn the_fused_update_follows_torchs_clipping_and_adam() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/torch_adam/reference.json");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(path).expect("the torch fixture")).unwrap();
    let device = Default::default();
    let start: Vec<Vec<f32>> = r["start"].as_array().unwrap().iter().map(floats).collect();
    let mut model = TwoParams::<Ad> {
        matrix: Param::from_tensor(Tensor::from_data(TensorData::new(start[0].clone(), [5, 3]), &device)),
        vector: Param::from_tensor(Tensor::from_data(TensorData::new(start[1].clone(), [7]), &device)),
    };
    let betas = floats(&r["betas"]);
    let config = trainer::DiffusionConfig {
        optimizer_betas: (f64::from(betas[0]), f64::from(betas[1])),
        optimizer_eps: r["eps"].as_f64().unwrap(),
        optimizer_weight_decay: r["weight_decay"].as_f64().unwrap(),
        ..trainer::DiffusionConfig::new()
    };
    let layout = FlatLayout::of(&model);
    let mut adam = trainer::optim::FlatAdam::<Flex>::new(&config, layout.clone(), &device);
    let (mut clipped, mut worst) = (0, 0.0f32);
    for (i, step) in r["steps"].as_array().unwrap().iter().enumerate() {
        let grads_in: Vec<Vec<f32>> = step["grads"].as_array().unwrap().iter().map(floats).collect();
        let flat: Vec<f32> = grads_in.concat();
        let flat = Tensor::<Flex, 1>::from_data(TensorData::new(flat, [22]), &device);
        let clipping = clip_grad_norm(&flat, r["max_norm"].as_f64().unwrap(), 1.0);
        let (norm, expected) = (clipping.norm.clone().into_scalar(), step["norm"].as_f64().unwrap() as f32);
        assert!((norm - expected).abs() <= 1e-6 * expected, "step {i}: norm {norm} vs torch {expected}");
        clipped += usize::from(expected > 1.0);
        model = adam.step(model, flat, clipping.into(), step["lr"].as_f64().unwrap(), None, None).0;
        let ours: Vec<f32> = layout.gather_weights(&model).into_data().to_vec().unwrap();
        let torch: Vec<f32> = step["weights"].as_array().unwrap().iter().map(floats).collect::<Vec<_>>().concat();
        for (a, b) in ours.iter().zip(&torch) {
            worst = worst.max((a - b).abs() / b.abs().max(1e-3));
        }
    }
    println!("20 steps of clipping and Adam: the weights are within {worst:e} (relative) of torch's");
    assert!(worst <= 1e-6, "the weights differ from torch's by {worst:e} (relative)");
    assert!((5..15).contains(&clipped), "clipping bit in {clipped} of 20 steps");
    let record = adam.to_record();
    for (name, ours) in [("exp_avg", record.moment_1), ("exp_avg_sq", record.moment_2)] {
        let ours: Vec<f32> = ours.into_data().to_vec().unwrap();
        let torch: Vec<f32> = r[name].as_array().unwrap().iter().map(floats).collect::<Vec<_>>().concat();
        assert_close(&ours, &torch, 1e-6, name);
    }
}
