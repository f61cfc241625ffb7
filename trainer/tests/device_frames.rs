//! The frame caches' frames kept on a cubecl device (`dataset.frames_on_device`,
//! `trainer::DeviceFrames`), on burn's wgpu backend over Mesa's lavapipe, without fusion and (in a
//! build with `kernels/gpu-fusion`, as `scripts/test.sh`'s) with it: a batch's training inputs
//! from its frames gathered there by their rows equal, bit for bit, those of the same batch's
//! frames copied by the loader and uploaded. wgpu holds no uint8 tensors, so the frames are kept
//! as its integers. Alone: `cargo test --release -p trainer --no-default-features --features
//! wgpu-untuned,kernels/gpu-fusion --test device_frames`.

use burn::backend::wgpu::{CubeBackend, WgpuDevice, WgpuRuntime};
use burn::prelude::*;
use kernels::Kernels;
use loader::SamplerState;
use serde_json::json;
use trainer::{InputPipeline, Mode, TrainConfig, TrainData};

/// burn's wgpu backend as cubecl gives it.
type Direct = CubeBackend<WgpuRuntime, f32, i32, u32>;

fn inputs_from_gathered_frames_equal_uploaded_ones<B: Kernels<Device = WgpuDevice>>() {
    let scratch = tempfile::tempdir().expect("a temporary folder");
    // PushT's images as LeRobot wrote them, in parquet (this build has no FFmpeg).
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/lerobot-0.6.1/pusht_images");
    let dataset = datasets::Dataset::open(std::path::Path::new(fixture)).expect("the fixture opens");
    let cache = scratch.path().join("frames");
    datasets::frame_cache::write_frame_cache(&dataset, &cache, &Default::default(), &|_| {}).expect("its cache");
    let overrides = json!({
        "dataset": {"root": fixture, "frame_cache": cache, "frames_on_device": "on"},
        "policy": {"preset": "classic", "pretrained_backbone_weights": null},
        "batch_size": 6,
        "num_workers": 1,
    });
    let config = TrainConfig::resolve(None, overrides).expect("the configuration resolves");
    let device = WgpuDevice::default();
    let mut data = TrainData::open(&config).expect("the run's data");
    data.settle_frames_on_device::<B>(&config, &device, &mut |_| {}).expect("settled");
    assert!(data.frames_on_device, "`on` with a frame cache keeps the frames on the device");
    let frames = data.device_frames::<B>(&device).expect("uploaded").expect("frames on the device");
    let batch = |data: &TrainData| {
        data.loader(&config, SamplerState::default()).expect("a loader").next().expect("a batch").expect("read")
    };
    let rows = batch(&data);
    data.frames_on_device = false;
    let copied = batch(&data);
    assert_eq!(rows.indices(), copied.indices());
    let key = "observation.image";
    assert!(rows.frame_rows(key).is_some() && copied.u8(key).is_some(), "rows, then bytes");

    let pipeline = InputPipeline::new(
        config.policy.config.clone(),
        data.features.clone(),
        data.normalizer(&config).expect("its statistics"),
        config.dataset.image_transforms.clone(),
    );
    let mode = Mode::Train { seed: 3 };
    let gathered = pipeline.train_inputs::<B>(&rows, mode, Some(&frames), &device).expect("gathered inputs");
    let uploaded = pipeline.train_inputs::<B>(&copied, mode, None, &device).expect("uploaded inputs");
    let read = |image: Tensor<B, 4>| image.into_data().convert::<f32>().to_vec::<f32>().expect("f32 values");
    let (gathered, uploaded) = (read(gathered.obs.images[0].clone()), read(uploaded.obs.images[0].clone()));
    assert_eq!(gathered.len(), 6 * 2 * 3 * 84 * 84, "two cropped frames a sample");
    assert!(gathered == uploaded, "the gathered frames' inputs differ from the uploaded frames'");
}

#[test]
fn inputs_from_frames_gathered_on_wgpu_equal_uploaded_ones() {
    inputs_from_gathered_frames_equal_uploaded_ones::<Direct>();
}

#[test]
fn inputs_from_frames_gathered_on_wgpu_with_fusion_equal_uploaded_ones() {
    // burn's wgpu backend: fusion over cubecl's where the build has `kernels/gpu-fusion`.
    inputs_from_gathered_frames_equal_uploaded_ones::<burn::backend::Wgpu>();
}
