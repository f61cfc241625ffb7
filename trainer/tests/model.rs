//! The network against LeRobot 0.6.1: parameter counts (measured with LeRobot's `make_policy`
//! on the same features) and the shapes that flow through it.

use burn::backend::Flex;
use burn::module::Module;
use burn::prelude::*;
use datasets::FrameShape;
use trainer::model::resnet::ResNet18;
use trainer::model::unet::sinusoidal_embedding;
use trainer::{DiffusionConfig, DiffusionModel, Observation, PolicyFeatures, Preset, TrainingNoise};

#[path = "support/encoder_layouts.rs"]
mod encoder_layouts;

fn pusht() -> PolicyFeatures {
    PolicyFeatures {
        state_dim: 2,
        action_dim: 2,
        env_state_dim: None,
        cameras: vec![("observation.image".into(), FrameShape { channels: 3, height: 96, width: 96 })],
    }
}

fn aloha() -> PolicyFeatures {
    let camera = FrameShape { channels: 3, height: 240, width: 320 };
    PolicyFeatures {
        state_dim: 14,
        action_dim: 14,
        env_state_dim: None,
        cameras: vec![("observation.images.top".into(), camera), ("observation.images.wrist".into(), camera)],
    }
}

/// (total learnable, RGB encoders, U-Net) of a freshly built model.
fn counts(preset: Preset, features: &PolicyFeatures) -> (usize, usize, usize) {
    let model = DiffusionModel::<Flex>::skeleton(&DiffusionConfig::preset(preset), features, &Default::default());
    let encoders = model.rgb_encoder.iter().map(|e| e.num_params() - running_stats(e)).sum();
    (model.num_learnable_params(), encoders, model.unet.num_params())
}

/// BatchNorm's running mean and variance: buffers, not parameters, in PyTorch.
fn running_stats<M: Module<Flex>>(module: &M) -> usize {
    let mut names = Vec::new();
    struct Collect<'a>(&'a mut Vec<usize>, Vec<String>);
    impl burn::module::ModuleVisitor<Flex> for Collect<'_> {
        fn enter_module(&mut self, name: &str, _: &str) {
            self.1.push(name.to_string());
        }
        fn exit_module(&mut self, _: &str, _: &str) {
            self.1.pop();
        }
        fn visit_float<const D: usize>(&mut self, param: &burn::module::Param<Tensor<Flex, D>>) {
            if matches!(self.1.last().map(String::as_str), Some("running_mean" | "running_var")) {
                self.0.push(param.shape().num_elements());
            }
        }
    }
    module.visit(&mut Collect(&mut names, Vec::new()));
    names.iter().sum()
}

#[test]
fn pusht_has_lerobots_262709026_parameters_in_both_presets() {
    // LeRobot 0.6.1, `make_policy` on a PushT dataset: 262,709,026 = 11,197,088 (RGB encoder)
    // + 251,511,938 (U-Net), with the classic and the 0.6 defaults alike.
    for preset in [Preset::Classic, Preset::Lerobot06] {
        assert_eq!(counts(preset, &pusht()), (262_709_026, 11_197_088, 251_511_938), "{preset:?}");
    }
}

#[test]
fn two_cameras_share_one_encoder_or_get_one_each() {
    // LeRobot 0.6.1 on a two-camera, 14-dimensional ALOHA-like dataset.
    assert_eq!(counts(Preset::Classic, &aloha()), (267_110_190, 11_197_088, 255_913_102));
    assert_eq!(counts(Preset::Lerobot06, &aloha()), (278_307_278, 22_394_176, 255_913_102));
}

fn tiny() -> DiffusionConfig {
    DiffusionConfig {
        down_dims: vec![16, 32, 64],
        diffusion_step_embed_dim: 16,
        ..DiffusionConfig::preset(Preset::Classic)
    }
}

#[test]
fn shapes_flow_from_observations_to_actions() {
    let device = Default::default();
    let features = aloha();
    let config = DiffusionConfig { crop_shape: Some([64, 80]), ..tiny() };
    let model = DiffusionModel::<Flex>::new(&config, &features, &device);
    let (b, s) = (3, config.n_obs_steps);
    let obs = Observation {
        state: Tensor::<Flex, 3>::random([b, s, 14], burn::tensor::Distribution::Default, &device),
        images: (0..2)
            .map(|_| Tensor::<Flex, 4>::random([b * s, 3, 64, 80], burn::tensor::Distribution::Default, &device))
            .collect(),
        env_state: None,
    };
    // Per step: state (14) + 32 keypoints × (x, y) per camera; two steps.
    let cond = model.global_conditioning(&obs);
    assert_eq!(cond.dims(), [b, (14 + 2 * 32 * 2) * 2]);
    let actions = Tensor::<Flex, 3>::random([b, config.horizon, 14], burn::tensor::Distribution::Default, &device);
    let out = model.unet.forward(actions.clone(), Tensor::from_floats([0.0, 50.0, 99.0], &device), cond);
    assert_eq!(out.dims(), [b, config.horizon, 14]);
    let noise = TrainingNoise {
        eps: actions.clone(),
        timesteps: Tensor::from_floats([1.0, 2.0, 3.0], &device),
        signal: Tensor::ones([b, 1, 1], &device),
        noise: Tensor::zeros([b, 1, 1], &device),
    };
    let loss = model.loss(&obs, actions, &noise, trainer::PredictionType::Epsilon, None);
    assert_eq!(loss.dims(), [1]);
    assert!(loss.into_scalar().is_finite());
}

#[test]
fn resnet_feature_maps_and_keypoints_have_torchvisions_sizes() {
    // 84×84 → 3×3, 96×96 → 3×3, 240×320 → 8×10 (torchvision's conv/pool arithmetic).
    assert_eq!(ResNet18::<Flex>::output_size(84, 84), (3, 3));
    assert_eq!(ResNet18::<Flex>::output_size(96, 96), (3, 3));
    assert_eq!(ResNet18::<Flex>::output_size(240, 320), (8, 10));
    let device = Default::default();
    let encoder = trainer::model::encoder::RgbEncoder::<Flex>::new((84, 84), 32, true, &device);
    let x = Tensor::<Flex, 4>::random([2, 3, 84, 84], burn::tensor::Distribution::Default, &device);
    assert_eq!(encoder.backbone.forward(x.clone()).dims(), [2, 512, 3, 3]);
    let features = encoder.forward(x);
    assert_eq!(features.dims(), [2, 64]);
    // Linear + ReLU: never negative.
    assert!(features.into_data().to_vec::<f32>().unwrap().iter().all(|&v| v >= 0.0));
}

#[test]
fn spatial_softmax_grid_is_lerobots_meshgrid() {
    // np.meshgrid(np.linspace(-1, 1, 3), np.linspace(-1, 1, 2)): x varies fastest.
    let grid = trainer::model::encoder::SpatialSoftmax::<Flex>::pos_grid(2, 3);
    assert_eq!(grid, vec![-1.0, -1.0, 0.0, -1.0, 1.0, -1.0, -1.0, 1.0, 0.0, 1.0, 1.0, 1.0]);
    // A feature map peaked at one position puts the keypoint there.
    let device = Default::default();
    let mut pool = trainer::model::encoder::SpatialSoftmax::<Flex>::new(1, (2, 3), 1, &device);
    pool.nets.weight = burn::module::Param::from_tensor(Tensor::ones([1, 1, 1, 1], &device));
    pool.nets.bias = Some(burn::module::Param::from_tensor(Tensor::zeros([1], &device)));
    let mut map = vec![-50.0f32; 6];
    map[5] = 50.0; // row 1, column 2: (x, y) = (1, 1)
    let keypoints: Vec<f32> =
        pool.forward(Tensor::from_data(TensorData::new(map, [1, 1, 2, 3]), &device)).into_data().to_vec().unwrap();
    assert!((keypoints[0] - 1.0).abs() < 1e-6 && (keypoints[1] - 1.0).abs() < 1e-6, "{keypoints:?}");
}

#[test]
fn timestep_embedding_is_diffusers_sinusoid() {
    let device = Default::default();
    let e: Vec<f32> =
        sinusoidal_embedding(Tensor::<Flex, 1>::from_floats([0.0, 7.0], &device), 8).into_data().to_vec().unwrap();
    // half = 4, f_k = exp(-k ln(10000) / 3): [sin(t f), cos(t f)].
    for (row, t) in [0.0f64, 7.0].iter().enumerate() {
        for k in 0..4 {
            let f = (-(k as f64) * 10000f64.ln() / 3.0).exp();
            assert!((f64::from(e[row * 8 + k]) - (t * f).sin()).abs() < 1e-6);
            assert!((f64::from(e[row * 8 + 4 + k]) - (t * f).cos()).abs() < 1e-6);
        }
    }
}

/// The names and shapes of LeRobot 0.6.1's `DiffusionPolicy.state_dict()` for `case`
/// (`tests/fixtures/lerobot_export/make_fixture.py`).
fn lerobot_state_dict_shapes(case: &str) -> Vec<(String, Vec<usize>)> {
    let text = include_str!("../../tests/fixtures/lerobot_export/state_dict_shapes.json");
    let all: serde_json::Value = serde_json::from_str(text).unwrap();
    serde_json::from_value(all[case].clone()).unwrap()
}

#[test]
fn the_export_names_and_shapes_every_tensor_as_lerobot_does() {
    for (case, preset, features) in [
        ("pusht_classic", Preset::Classic, pusht()),
        ("pusht_lerobot06", Preset::Lerobot06, pusht()),
        ("aloha_lerobot06", Preset::Lerobot06, aloha()),
    ] {
        let config = DiffusionConfig::preset(preset);
        let model = DiffusionModel::<Flex>::skeleton(&config, &features, &Default::default());
        let mut ours: Vec<(String, Vec<usize>)> = trainer::lerobot::lerobot_state_dict(&model, &config, false)
            .into_iter()
            .map(|e| (e.name, e.shape))
            .collect();
        let mut theirs = lerobot_state_dict_shapes(case);
        ours.sort();
        theirs.sort();
        let missing: Vec<_> = theirs.iter().filter(|t| !ours.contains(t)).collect();
        let extra: Vec<_> = ours.iter().filter(|o| !theirs.contains(o)).collect();
        assert!(missing.is_empty() && extra.is_empty(), "{case}: missing {missing:?}, unexpected {extra:?}");
    }
}

#[test]
fn the_exported_config_has_lerobots_keys_and_values() {
    let theirs: serde_json::Value =
        serde_json::from_str(include_str!("../../tests/fixtures/lerobot_export/pusht_classic_config.json")).unwrap();
    let config = DiffusionConfig::preset(Preset::Classic);
    let ours = trainer::lerobot::lerobot_config(&config, &pusht());
    let keys = |v: &serde_json::Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&ours), keys(&theirs), "draccus refuses unknown keys and wants every one");
    for (key, value) in theirs.as_object().unwrap() {
        // LeRobot's default is to push to the Hub; an export is a local folder.
        if key != "push_to_hub" {
            assert_eq!(&ours[key], value, "{key}");
        }
    }
}

#[test]
fn the_trunk_held_channels_last_gives_the_channels_first_features_and_gradients() {
    // The GPU's layout for cuDNN's tensor cores (kernels::ConvolutionKernels::prefers_channels_last),
    // checked on the CPU: the same features and gradients, GroupNorm's and BatchNorm's trunks.
    encoder_layouts::assert_layouts_agree::<burn::backend::Autodiff<Flex>>(&Default::default(), &[true, false], 1e-5);
}
