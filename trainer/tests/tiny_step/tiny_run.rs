//! The tiny policy (as `bench train-step --tiny`) on PushT's images, ready to step on any
//! backend: what this binary's tests count the work of.

use loader::{Batch, SamplerState};
use serde_json::json;
use trainer::{InputPipeline, StepRunner, TrainConfig, TrainData, TrainingBackend, init_model};

/// A runner of the tiny policy on `device` and one batch of two samples of PushT's images,
/// stored in parquet so that the build needs no FFmpeg. The batch's size changes what is
/// launched only where a GroupNorm's channels grow wide enough to take several cubes each.
pub fn tiny_runner<B: TrainingBackend>(device: &B::Device) -> (StepRunner<B>, Batch) {
    let (config, data) = tiny_config(2);
    let policy = &config.policy.config;
    let normalizer = data.normalizer(&config).expect("its statistics");
    let pipeline =
        InputPipeline::new(policy.clone(), data.features.clone(), normalizer, config.dataset.image_transforms.clone());
    let model = init_model::<B>(policy, &data.features, config.seed, device).expect("the model");
    let runner = StepRunner::new(model, policy.clone(), pipeline, config.seed, config.steps, device.clone());
    (runner, tiny_batch(&config, &data))
}

/// A batch of `samples` samples of the tiny policy's data (its first).
pub fn tiny_batch_of(samples: usize) -> Batch {
    let (config, data) = tiny_config(samples);
    tiny_batch(&config, &data)
}

/// The tiny policy's configuration, with batches of `samples`, and its data.
fn tiny_config(samples: usize) -> (TrainConfig, TrainData) {
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/lerobot-0.6.1/pusht_images");
    let overrides = json!({
        "dataset": {"root": fixture, "frame_cache": "off"},
        "policy": {"preset": "classic", "pretrained_backbone_weights": null, "down_dims": [64, 128, 256], "diffusion_step_embed_dim": 64},
        "batch_size": samples,
        "num_workers": 1,
    });
    let config = TrainConfig::resolve(None, overrides).expect("the configuration resolves");
    let data = TrainData::open(&config).expect("the fixture opens");
    (config, data)
}

/// The first batch of `data`'s loader.
fn tiny_batch(config: &TrainConfig, data: &TrainData) -> Batch {
    data.loader(config, SamplerState::default()).expect("a loader").next().expect("a batch").expect("read")
}
