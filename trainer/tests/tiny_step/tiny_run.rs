//! The tiny policy (as `bench train-step --tiny`) on PushT's images, ready to step on any
//! backend: what this binary's tests count the work of.

use std::path::Path;

use loader::{Batch, SamplerState};
use serde_json::json;
use trainer::{InputPipeline, StepRunner, TrainConfig, TrainData, TrainingBackend, init_model};

/// A runner of the tiny policy on `device` and one batch of two samples of PushT's images,
/// stored in parquet so that the build needs no FFmpeg. The batch's size changes what is
/// launched only where a GroupNorm's channels grow wide enough to take several cubes each.
pub fn tiny_runner<B: TrainingBackend>(device: &B::Device) -> (StepRunner<B>, Batch) {
    let (config, data) = tiny_config(2, json!({"root": FIXTURE, "frame_cache": "off"}));
    runner_of(&config, &data, device)
}

/// A batch of `samples` samples of the tiny policy's data (its first).
pub fn tiny_batch_of(samples: usize) -> Batch {
    let (config, data) = tiny_config(samples, json!({"root": FIXTURE, "frame_cache": "off"}));
    tiny_batch(&config, &data)
}

/// [`tiny_runner`] with the frames kept on `device` (`dataset.frames_on_device`, from a frame
/// cache written into `cache`): the runner gathers each batch's frames there by the rows the
/// loader gives. Returns the runner and batches (as rows) of two samples and of one, the same
/// samples as [`tiny_runner`]'s and [`tiny_batch_of`]'s.
pub fn tiny_rows_runner<B: TrainingBackend>(device: &B::Device, cache: &Path) -> (StepRunner<B>, Batch, Batch) {
    let dataset = datasets::Dataset::open(Path::new(FIXTURE)).expect("the fixture opens");
    datasets::frame_cache::write_frame_cache(&dataset, cache, &Default::default(), &|_| {}).expect("its cache");
    let on_device = json!({"root": FIXTURE, "frame_cache": cache, "frames_on_device": "on"});
    let settled = |samples| {
        let (config, mut data) = tiny_config(samples, on_device.clone());
        data.settle_frames_on_device::<B>(&config, device, &mut |_| {}).expect("settled");
        assert!(data.frames_on_device, "`on` with a frame cache keeps the frames on the device");
        (config, data)
    };
    let (config, data) = settled(2);
    let frames = data.device_frames::<B>(device).expect("uploaded").expect("frames on the device");
    let (runner, two) = runner_of(&config, &data, device);
    let (config, data) = settled(1);
    let one = tiny_batch(&config, &data);
    assert!(two.frame_rows("observation.image").is_some(), "the loader gives the frames' rows");
    (runner.with_device_frames(frames), two, one)
}

/// PushT's images as LeRobot wrote them, in parquet.
const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/lerobot-0.6.1/pusht_images");

/// A runner of the tiny policy from `config` and `data`, and the first batch.
fn runner_of<B: TrainingBackend>(config: &TrainConfig, data: &TrainData, device: &B::Device) -> (StepRunner<B>, Batch) {
    let policy = &config.policy.config;
    let normalizer = data.normalizer(config).expect("its statistics");
    let pipeline =
        InputPipeline::new(policy.clone(), data.features.clone(), normalizer, config.dataset.image_transforms.clone());
    let model = init_model::<B>(policy, &data.features, config.seed, device).expect("the model");
    let runner = StepRunner::new(model, policy.clone(), pipeline, config.seed, config.steps, device.clone());
    (runner, tiny_batch(config, data))
}

/// The tiny policy's configuration on `dataset` (the configuration's `dataset` section), with
/// batches of `samples`, and its data.
fn tiny_config(samples: usize, dataset: serde_json::Value) -> (TrainConfig, TrainData) {
    let overrides = json!({
        "dataset": dataset,
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
