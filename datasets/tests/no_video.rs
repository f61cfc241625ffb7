//! A build without FFmpeg (`--no-default-features`, as the GPU kit builds it): metadata and
//! images stored in parquet read as usual, a frame cache of them too, and every attempt to decode
//! or encode video is an error that names the file and says why.
#![cfg(not(feature = "video"))]

use std::path::{Path, PathBuf};

use datasets::frame_cache::{FrameCache, write_frame_cache};
use datasets::synth::{CameraStorage, SynthConfig, write_dataset};
use datasets::video::VideoCodec;
use datasets::{Dataset, DecoderCache, Error, FrameFormat, WindowSpec};

fn fixture(dir: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures").join(dir)
}

#[test]
fn a_video_dataset_opens_and_its_frames_are_refused_naming_the_file() {
    const { assert!(!datasets::video::SUPPORTED) };
    let dataset = Dataset::open(fixture("lerobot-0.6.1/pusht_mini")).expect("metadata and parquet need no FFmpeg");
    let err = dataset
        .get(0, &WindowSpec::none(), &mut DecoderCache::default(), FrameFormat::Uint8)
        .expect_err("no decoder in this build");
    assert!(matches!(err, Error::VideoUnsupported { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("file-000.mp4") && text.contains("`video` feature"), "{text}");

    let report = datasets::validate::validate(&fixture("lerobot-0.6.1/pusht_mini"), 1e-4);
    assert!(
        report.problems.iter().any(|p| p.file.ends_with("file-000.mp4") && p.message.contains("no FFmpeg")),
        "{:#?}",
        report.problems
    );
}

#[test]
fn images_in_parquet_and_their_frame_cache_read_as_usual() {
    let dataset = Dataset::open(fixture("lerobot-0.6.1/pusht_images")).unwrap();
    let mut decoders = DecoderCache::default();
    let sample = dataset.get(17, &WindowSpec::none(), &mut decoders, FrameFormat::Uint8).unwrap();
    let frame = &sample.tensors["observation.image"];
    assert_eq!(frame.shape, vec![3, 96, 96]);

    let dir = tempfile::tempdir().unwrap();
    write_frame_cache(&dataset, dir.path(), &Default::default(), &|_| {}).unwrap();
    let cache = FrameCache::open(dir.path(), &dataset).unwrap();
    let datasets::Values::U8(pixels) = &frame.values else { panic!("uint8 frames") };
    assert_eq!(cache.camera("observation.image").unwrap().frame(17), &pixels[..]);
}

#[test]
fn synthesising_video_says_this_build_cannot_and_images_still_work() {
    let dir = tempfile::tempdir().unwrap();
    let config = SynthConfig { episodes: 2, min_length: 10, max_length: 12, ..SynthConfig::default() };
    assert!(matches!(config.storage, CameraStorage::Video(VideoCodec::Av1)));
    let err = write_dataset(&dir.path().join("video"), &config).expect_err("no encoder in this build");
    assert!(matches!(err, Error::VideoUnsupported { .. }), "{err:?}");
    let images = SynthConfig { storage: CameraStorage::Images, ..config };
    write_dataset(&dir.path().join("images"), &images).unwrap();
    assert_eq!(Dataset::open(dir.path().join("images")).unwrap().len(), images_frames(&dir.path().join("images")));
}

/// `total_frames` of a dataset's `info.json`.
fn images_frames(root: &Path) -> usize {
    let info: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("meta/info.json")).unwrap()).unwrap();
    info["total_frames"].as_u64().unwrap() as usize
}
