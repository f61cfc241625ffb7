//! Runs that build the same frame cache at once (two trainings started on one dataset with
//! `--frame-cache auto`) each publish a whole file: the cache opens and holds the dataset's frames,
//! and no temporary file is left behind.

use datasets::frame_cache::{FrameCache, write_frame_cache};
use datasets::synth::{CameraStorage, SynthConfig, write_dataset};
use datasets::video::DecoderCache;
use datasets::{Dataset, FrameFormat, Values, WindowSpec};

#[test]
fn four_writers_of_one_cache_leave_it_whole() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("dataset");
    let synth = SynthConfig {
        episodes: 4,
        min_length: 15,
        max_length: 25,
        storage: CameraStorage::Images,
        ..Default::default()
    };
    write_dataset(&root, &synth).unwrap();
    let dataset = Dataset::open(&root).unwrap();
    let cache_dir = dir.path().join("cache");

    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| write_frame_cache(&dataset, &cache_dir, &Default::default(), &|_| {}).unwrap());
        }
    });

    let cache = FrameCache::open(&cache_dir, &dataset).unwrap();
    let camera = cache.camera("observation.image").unwrap();
    let mut decoders = DecoderCache::default();
    for row in 0..dataset.len() {
        let sample = dataset.get(row, &WindowSpec::none(), &mut decoders, FrameFormat::Uint8).unwrap();
        let Values::U8(pixels) = &sample.tensors["observation.image"].values else { panic!("uint8 frames") };
        assert_eq!(camera.frame(row), &pixels[..], "row {row}");
    }
    let leftovers: Vec<_> = std::fs::read_dir(&cache_dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}
