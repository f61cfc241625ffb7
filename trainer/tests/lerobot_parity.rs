//! Our model against LeRobot 0.6.1's own, on the same weights: the fixtures
//! (`tests/fixtures/lerobot_model/make_fixture.py`) hold, for small configurations, what
//! LeRobot's `DiffusionModel` computed — the global conditioning, the training loss for recorded
//! noise and timesteps, and `generate_actions` for recorded initial and step noise — and how to
//! regenerate its weights (a formula both sides compute to the bit). Our model, given the same
//! weights through `load_lerobot_weights`, must compute the same numbers:
//!
//! - global conditioning (encoder features and state, values up to 1), per value:
//!   |ours − LeRobot| ≤ 1e-5 (measured: 4.5e-7 at most);
//! - the training loss: relative difference ≤ 1e-5 (measured: 0 to 2.2e-7);
//! - generated actions (values up to 1, after 5 to 10 reverse steps), per value: ≤ 1e-4
//!   (measured: 3.1e-6 at most).
//!
//! Both sides compute in float32 with different convolution algorithms, so the last bits differ;
//! the tolerances are 20 to 50 times the differences measured (each test prints its own).
//!
//! Exporting the loaded model gives every tensor back, value for value, so that the export's
//! layouts are held to LeRobot's too. The same formula gives torchvision's ResNet-18 weights for
//! the pretrained-backbone loader.

mod common;

use std::collections::HashMap;
use std::path::Path;

use burn::backend::{Autodiff, Flex};
use burn::module::AutodiffModule;
use burn::prelude::*;
use datasets::FrameShape;
use serde_json::Value;
use trainer::lerobot::{EntryValues, lerobot_state_dict, load_lerobot_weights, load_resnet18, read_state_dict};
use trainer::model::encoder::RgbEncoder;
use trainer::{DiffusionConfig, DiffusionModel, Observation, PolicyFeatures, Preset, Sampler, TrainingNoise};

use common::lerobot_model::{fixture, formula_state_dict, read_json, write_safetensors};

type Train = Autodiff<Flex>;

/// The tensors of a fixture's safetensors file, as f32 (integers and bools converted) with shapes.
fn read_tensors(name: &str) -> HashMap<String, (Vec<usize>, Vec<f32>)> {
    let bytes = std::fs::read(fixture(name)).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    file.tensors()
        .into_iter()
        .map(|(key, view)| {
            let data = view.data();
            let values: Vec<f32> = match view.dtype() {
                safetensors::Dtype::F32 => {
                    data.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
                }
                safetensors::Dtype::I64 => {
                    data.chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap()) as f32).collect()
                }
                safetensors::Dtype::U8 => data.iter().map(|&b| f32::from(b)).collect(),
                other => panic!("{key}: {other:?}"),
            };
            (key, (view.shape().to_vec(), values))
        })
        .collect()
}

/// Our configuration and features for a fixture's description.
fn config_of(description: &Value) -> (DiffusionConfig, PolicyFeatures) {
    let c = &description["config"];
    let get = |key: &str| c[key].clone();
    let mut config = DiffusionConfig::preset(Preset::Classic);
    config.n_obs_steps = description["n_obs_steps"].as_u64().unwrap() as usize;
    config.horizon = get("horizon").as_u64().unwrap() as usize;
    config.n_action_steps = get("n_action_steps").as_u64().unwrap() as usize;
    config.crop_shape = None;
    config.use_group_norm = get("use_group_norm").as_bool().unwrap();
    config.use_separate_rgb_encoder_per_camera = get("use_separate_rgb_encoder_per_camera").as_bool().unwrap();
    config.down_dims = serde_json::from_value(get("down_dims")).unwrap();
    config.kernel_size = get("kernel_size").as_u64().unwrap() as usize;
    config.n_groups = get("n_groups").as_u64().unwrap() as usize;
    config.diffusion_step_embed_dim = get("diffusion_step_embed_dim").as_u64().unwrap() as usize;
    config.spatial_softmax_num_keypoints = get("spatial_softmax_num_keypoints").as_u64().unwrap() as usize;
    config.noise_scheduler_type = serde_json::from_value(get("noise_scheduler_type")).unwrap();
    config.num_inference_steps = Some(get("num_inference_steps").as_u64().unwrap() as usize);
    config.prediction_type = serde_json::from_value(get("prediction_type")).unwrap();
    config.do_mask_loss_for_padding = get("do_mask_loss_for_padding").as_bool().unwrap();
    config.use_film_scale_modulation = get("use_film_scale_modulation").as_bool().unwrap();
    let image: Vec<usize> = serde_json::from_value(description["image"].clone()).unwrap();
    let shape = FrameShape { channels: image[0], height: image[1], width: image[2] };
    let features = PolicyFeatures {
        state_dim: description["state_dim"].as_u64().unwrap() as usize,
        action_dim: description["action_dim"].as_u64().unwrap() as usize,
        env_state_dim: description["env_state_dim"].as_u64().map(|e| e as usize),
        cameras: description["cameras"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| (k.as_str().unwrap().into(), shape))
            .collect(),
    };
    (config, features)
}

fn tensor<B: Backend, const D: usize>(tensors: &HashMap<String, (Vec<usize>, Vec<f32>)>, key: &str) -> Tensor<B, D> {
    let (shape, values) = &tensors[key];
    Tensor::from_data(TensorData::new(values.clone(), shape.clone()), &Default::default())
}

/// The fixture's (normalised) batch as our model takes it: per camera `[B·S, 3, H, W]`.
fn observation<B: Backend>(tensors: &HashMap<String, (Vec<usize>, Vec<f32>)>, cameras: usize) -> Observation<B> {
    let images: Tensor<B, 6> = tensor(tensors, "batch.images");
    let [b, s, _, c, h, w] = images.dims();
    Observation {
        state: tensor(tensors, "batch.state"),
        images: (0..cameras).map(|n| images.clone().slice(s![.., .., n..n + 1]).reshape([b * s, c, h, w])).collect(),
        env_state: tensors.contains_key("batch.environment_state").then(|| tensor(tensors, "batch.environment_state")),
    }
}

fn values<B: Backend, const D: usize>(t: Tensor<B, D>) -> Vec<f32> {
    t.into_data().convert::<f32>().to_vec().unwrap()
}

/// The largest |ours − theirs|; infinite where a value is not finite (so that NaN cannot pass).
fn max_difference(ours: &[f32], theirs: &[f32]) -> f32 {
    assert_eq!(ours.len(), theirs.len());
    assert!(!ours.is_empty(), "nothing to compare");
    ours.iter()
        .zip(theirs)
        .map(|(a, b)| if a.is_finite() && b.is_finite() { (a - b).abs() } else { f32::INFINITY })
        .fold(0.0, f32::max)
}

fn check_case(case: &str) {
    let description = read_json(&format!("{case}.json"));
    let tensors = read_tensors(&format!("{case}.safetensors"));
    let (config, features) = config_of(&description);
    let cameras = features.cameras.len();

    // Our state dict for this configuration has LeRobot's names and shapes.
    let device = Default::default();
    let fresh = DiffusionModel::<Train>::skeleton(&config, &features, &device);
    let mut ours: Vec<(String, Vec<usize>)> =
        lerobot_state_dict(&fresh, &config, false).into_iter().map(|e| (e.name, e.shape)).collect();
    let mut theirs: Vec<(String, Vec<usize>)> = serde_json::from_value(description["state_dict"].clone()).unwrap();
    ours.sort();
    theirs.sort();
    assert_eq!(ours, theirs, "{case}: state-dict names and shapes");

    let mut dict = formula_state_dict(&description["weights"]);
    for (key, value) in &tensors {
        if let Some(name) = key.strip_prefix("buffer.") {
            dict.insert(name.to_string(), value.clone());
        }
    }
    let source = fixture(&format!("{case}.json"));
    let model = load_lerobot_weights(fresh, &config, &dict, &source).unwrap();

    // Exporting gives back every tensor loaded, value for value (LeRobot's layouts both ways).
    let mut exported = 0;
    for entry in lerobot_state_dict(&model, &config, true) {
        if let (EntryValues::F32(values), Some((shape, loaded))) = (&entry.values, dict.get(&entry.name)) {
            assert_eq!((&entry.shape, values), (shape, loaded), "{case}: `{}` exported", entry.name);
            exported += 1;
        }
    }
    assert_eq!(exported, dict.len(), "{case}: tensors exported back");

    // Inference, in eval mode: the global conditioning, then the reverse diffusion.
    let eval = model.valid();
    let obs = observation::<Flex>(&tensors, cameras);
    let cond = values(eval.global_conditioning(&obs));
    let cond_diff = max_difference(&cond, &tensors["expected.global_cond"].1);
    let schedule = config.noise_schedule();
    let sampler = Sampler {
        schedule: &schedule,
        kind: config.noise_scheduler_type,
        steps: config.inference_steps(),
        n_action_steps: config.n_action_steps,
    };
    let (noise_shape, initial) = tensors["inference.initial_noise"].clone();
    let step_noise = tensors.get("inference.step_noise");
    let per_step: usize = noise_shape.iter().product();
    let actions = eval.generate_actions(&obs, initial, noise_shape.clone().try_into().unwrap(), &sampler, |i| {
        let (_, all) = step_noise.expect("DDPM step noise");
        all[i * per_step..(i + 1) * per_step].to_vec()
    });
    let (action_shape, expected_actions) = &tensors["expected.actions"];
    assert_eq!(&actions.dims().to_vec(), action_shape, "{case}: action shape");
    let action_diff = max_difference(&values(actions), expected_actions);

    // Training, in train mode (BatchNorm on batch statistics): the loss for LeRobot's draws.
    let obs = observation::<Train>(&tensors, cameras);
    let (eps_shape, eps) = tensors["train.eps"].clone();
    let timesteps: Vec<usize> = tensors["train.timesteps"].1.iter().map(|&t| t as usize).collect();
    let noise = TrainingNoise::<Train>::new(&schedule, eps, eps_shape.try_into().unwrap(), &timesteps, &device);
    let pad: Tensor<Train, 2> = tensor(&tensors, "batch.action_is_pad");
    let mask = config.do_mask_loss_for_padding.then(|| pad.greater_elem(0.5));
    let loss = model.loss(&obs, tensor(&tensors, "batch.action"), &noise, config.prediction_type, mask);
    let loss: f32 = loss.into_scalar().elem();
    let expected_loss = tensors["expected.loss"].1[0];
    let loss_diff = (loss - expected_loss).abs() / expected_loss.abs();

    eprintln!(
        "{case}: global conditioning max |Δ| {cond_diff:.2e}; loss {loss} vs {expected_loss} (relative {loss_diff:.2e}); \
         actions max |Δ| {action_diff:.2e}"
    );
    assert!(cond_diff <= 1e-5, "{case}: global conditioning differs by {cond_diff}");
    assert!(loss_diff <= 1e-5, "{case}: loss {loss}, LeRobot's {expected_loss}");
    assert!(action_diff <= 1e-4, "{case}: actions differ by {action_diff}");
}

#[test]
fn groupnorm_shared_encoder_one_camera_matches_lerobot() {
    check_case("groupnorm_shared_1cam");
}

#[test]
fn batchnorm_one_encoder_per_camera_matches_lerobot() {
    check_case("batchnorm_per_camera_2cam");
}

#[test]
fn groupnorm_shared_encoder_two_cameras_matches_lerobot() {
    check_case("groupnorm_shared_2cam");
}

#[test]
fn loading_refuses_weights_of_another_configuration() {
    let description = read_json("groupnorm_shared_1cam.json");
    let (config, features) = config_of(&description);
    let dict = formula_state_dict(&read_json("batchnorm_per_camera_2cam.json")["weights"]);
    let model = DiffusionModel::<Flex>::skeleton(&config, &features, &Default::default());
    let err =
        load_lerobot_weights(model, &config, &dict, Path::new("other/model.safetensors")).unwrap_err().to_string();
    assert!(err.contains("other/model.safetensors") && err.contains("diffusion.rgb_encoder"), "{err}");
}

#[test]
fn pretrained_resnet18_weights_give_torchvisions_features() {
    // torchvision's names and layouts, written to a real safetensors file.
    let dict = formula_state_dict(&read_json("resnet18.json")["weights"]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("resnet18.safetensors");
    write_safetensors(&dict, &path);

    let device = Default::default();
    let encoder = RgbEncoder::<Train>::new((40, 72), 32, false, &device);
    let encoder = load_resnet18(encoder, &path, &device).unwrap();
    let fixture = read_tensors("resnet18.safetensors");
    let features = encoder.valid().backbone.forward(tensor::<Flex, 4>(&fixture, "input"));
    let (shape, expected) = &fixture["expected.features"];
    assert_eq!(&features.dims().to_vec(), shape);
    let diff = max_difference(&values(features), expected);
    eprintln!("ResNet-18 trunk on torchvision's weights: max |Δ| {diff:.2e} (features up to 1.0)");
    assert!(diff <= 1e-5, "features differ by {diff}"); // measured: 3.0e-7

    // The loaded weights still train: a backward pass reaches them.
    let out = encoder.backbone.forward(tensor::<Train, 4>(&fixture, "input")).sum();
    let grads = out.backward();
    assert!(encoder.backbone.conv1.weight.val().grad(&grads).is_some(), "the loaded conv1 weight gets no gradient");

    // GroupNorm cannot take BatchNorm's weights.
    let group = RgbEncoder::<Flex>::new((40, 72), 32, true, &Default::default());
    let err = load_resnet18(group, &path, &Default::default()).expect_err("refused").to_string();
    assert!(err.contains("BatchNorm"), "{err}");
}

#[test]
fn a_pth_written_by_torch_save_reads_back_exactly() {
    // Float32, float16 and bfloat16 tensors and an int64 buffer, as `torch.save` wrote them.
    let dict = read_state_dict(&fixture("small_state_dict.pth")).unwrap();
    let expected = read_json("small_state_dict.json");
    let mut names: Vec<&String> = dict.keys().collect();
    names.sort();
    assert_eq!(names, ["bn.bias", "bn.weight", "conv.weight", "fc.weight"], "num_batches_tracked is left out");
    for (name, want) in expected.as_object().unwrap() {
        let (shape, values) = &dict[name];
        let want_shape: Vec<usize> = serde_json::from_value(want["shape"].clone()).unwrap();
        let want_values: Vec<f32> = serde_json::from_value(want["values"].clone()).unwrap();
        assert_eq!(shape, &want_shape, "{name}");
        assert_eq!(values, &want_values, "{name}");
    }
}
