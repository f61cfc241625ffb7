//! Two models initialised at once on two threads each get their own seed's weights. burn's
//! generator is one per process, and parameters are drawn lazily: `init_model` holds the
//! generator from seeding to the last parameter, so that two runs (or replicas) started together
//! in one process do not draw each other's numbers. This is the only test of its binary: any
//! other test drawing lazily initialised parameters at the same time would draw from the same
//! generator, outside `init_model`.

use burn::backend::Flex;
use burn::module::{Module, ModuleVisitor, Param};
use burn::prelude::*;
use datasets::FrameShape;
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

#[test]
fn models_initialised_at_once_on_two_threads_keep_their_own_seeds_weights() {
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
