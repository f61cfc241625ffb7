//! Training on a dataset whose camera is stored as images in parquet, directly and through a
//! frame cache: what a build without FFmpeg (the GPU kit's) trains on. Runs in every build.

use burn::backend::{Autodiff, Flex};
use datasets::synth::{CameraStorage, SynthConfig, write_dataset};
use serde_json::json;
use trainer::train;

use crate::common::{scratch, tiny_config};

#[test]
fn a_run_on_images_in_parquet_trains_with_and_without_a_frame_cache() {
    let dir = scratch("images-dataset");
    let root = dir.join("dataset");
    let config = SynthConfig {
        episodes: 3,
        min_length: 20,
        max_length: 20,
        storage: CameraStorage::Images,
        ..SynthConfig::default()
    };
    write_dataset(&root, &config).unwrap();
    let frames = dir.join("frames");
    let dataset = datasets::Dataset::open(&root).unwrap();
    datasets::frame_cache::write_frame_cache(&dataset, &frames, &Default::default(), &|_| {}).unwrap();

    // Crops of 64x64 leave the encoder a 2x2 feature map, so that the loss depends on the frames
    // (the tiny policy's 32x32 crops leave one position, the same keypoint whatever the frame).
    let run = |name: &str, mut extra: serde_json::Value| {
        trainer::merge(&mut extra, json!({"policy": {"crop_shape": [64, 64]}}));
        let config = tiny_config(&root, &dir.join(name), 4, extra);
        train::<Autodiff<Flex>>(&config, None, Default::default(), |_| {}).unwrap()
    };
    let direct = run("direct", json!({}));
    let cached = run("cached", json!({"dataset": {"frame_cache": frames}}));
    assert_eq!(direct.steps, 4);
    assert!(direct.losses.iter().all(|(_, l)| l.is_finite()), "{:?}", direct.losses);
    // The cache holds the same frames: the same batches, the same losses.
    assert_eq!(direct.losses, cached.losses);
    assert!(direct.checkpoint.is_some_and(|c| c.join("model.mpk").exists()));
}
