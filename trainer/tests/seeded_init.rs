//! burn's generator is one per process, and parameters are drawn lazily. Two models initialised
//! at once on two threads each get their own seed's weights (`init_model` holds the generator
//! from seeding to the last parameter), and a model loaded from weights draws nothing from it
//! (loading once drew every bias, and moved the weights a run started beside it drew). Every
//! draw of this binary goes through `with_seeded_generator`.

use burn::backend::Flex;
use burn::module::{Module, ModuleVisitor, Param};
use burn::prelude::*;
use burn::tensor::Distribution;
use datasets::FrameShape;
use trainer::model::with_seeded_generator;
use trainer::{DiffusionConfig, DiffusionModel, PolicyFeatures, Preset, init_model};

/// Every weight of `model`, in visiting order.
fn all_weights(model: &DiffusionModel<Flex>) -> Vec<f32> {
    struct Gather(Vec<f32>);
    impl ModuleVisitor<Flex> for Gather {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<Flex, D>>) {
            self.0.extend(param.val().into_data().to_vec::<f32>().unwrap());
        }
    }
    let mut gather = Gather(Vec::new());
    model.visit(&mut gather);
    gather.0
}

/// The tiny policy's configuration and PushT's features.
fn tiny() -> (DiffusionConfig, PolicyFeatures) {
    let config = DiffusionConfig {
        down_dims: vec![16, 32, 64],
        diffusion_step_embed_dim: 16,
        ..DiffusionConfig::preset(Preset::Classic)
    };
    let features = PolicyFeatures {
        state_dim: 2,
        action_dim: 2,
        env_state_dim: None,
        cameras: vec![("observation.image".into(), FrameShape { channels: 3, height: 96, width: 96 })],
    };
    (config, features)
}

#[test]
fn models_initialised_at_once_on_two_threads_keep_their_own_seeds_weights() {
    let (config, features) = tiny();
    let init = |seed| all_weights(&init_model::<Flex>(&config, &features, seed, &Default::default()).unwrap());
    let (alone_1, alone_2) = (init(1), init(2));
    assert_ne!(alone_1, alone_2);
    for _ in 0..4 {
        let (one, two) = std::thread::scope(|s| {
            let a = s.spawn(|| init(1));
            let b = s.spawn(|| init(2));
            (a.join().unwrap(), b.join().unwrap())
        });
        assert!(one == alone_1 && two == alone_2, "concurrent initialisations drew each other's numbers");
    }
}

#[test]
fn a_model_loaded_from_weights_draws_nothing_from_the_generator() {
    let (config, features) = tiny();
    let device = Default::default();
    let trained = init_model::<Flex>(&config, &features, 3, &device).unwrap();
    let draw = || Tensor::<Flex, 1>::random([8], Distribution::Default, &device).into_data().to_vec::<f32>().unwrap();
    let after_seeding = with_seeded_generator::<Flex, _>(&device, 5, draw);
    let (loaded, after_loading) = with_seeded_generator::<Flex, _>(&device, 5, || {
        let loaded = DiffusionModel::skeleton(&config, &features, &device).load_record(trained.clone().into_record());
        (loaded, draw())
    });
    assert_eq!(after_loading, after_seeding, "loading weights drew from burn's generator");
    assert_eq!(all_weights(&loaded), all_weights(&trained));
}
