//! The noise schedule, both samplers, the learning-rate schedule and global-norm clipping
//! against the libraries LeRobot uses: values computed by diffusers 0.39 and torch 2.11
//! (`tests/fixtures/diffusers/make_fixture.py`).

use burn::backend::{Autodiff, Flex};
use burn::module::{Module, Param};
use burn::optim::GradientsParams;
use burn::prelude::*;
use serde_json::Value;
use trainer::optim::{clip_grad_norm, learning_rate};
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
        let norm = clip_grad_norm::<Ad, _>(&model, &mut grads, 10.0, 1.0).into_scalar();
        let expected = case["norm"].as_f64().unwrap() as f32;
        assert!((norm - expected).abs() < 1e-5 * expected, "norm {norm} vs {expected}");
        let clipped = case["clipped"].as_array().unwrap();
        let matrix: Vec<f32> = grads.get::<Flex, 2>(model.matrix.id).unwrap().into_data().to_vec().unwrap();
        let vector: Vec<f32> = grads.get::<Flex, 1>(model.vector.id).unwrap().into_data().to_vec().unwrap();
        assert_close(&matrix, &floats(&clipped[0]), 1e-6, "clipped matrix");
        assert_close(&vector, &floats(&clipped[1]), 1e-6, "clipped vector");
    }
}
