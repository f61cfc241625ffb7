//! Memory stays flat over many epochs: buffers are recycled and nothing leaks per decoded
//! frame. (One test in its own binary, so no other test's allocations move the measurement.)

use std::sync::Arc;

use datasets::synth::{SynthConfig, write_dataset};
use datasets::{Dataset, WindowSpec};
use loader::Loader;

fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: f64 =
        status.lines().find(|l| l.starts_with("VmRSS:")).unwrap().split_whitespace().nth(1).unwrap().parse().unwrap();
    kib / 1024.0
}

#[test]
fn resident_memory_is_flat_over_many_epochs_of_video() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ds");
    write_dataset(
        &root,
        &SynthConfig { episodes: 6, min_length: 40, max_length: 40, seed: 8, ..SynthConfig::default() },
    )
    .unwrap();
    let dataset = Arc::new(Dataset::open(&root).unwrap());
    let deltas = datasets::diffusion_delta_timestamps(dataset.info(), 2, 16);
    let windows = WindowSpec::from_delta_timestamps(&deltas, dataset.info(), 1e-4).unwrap();
    let mut loader =
        Loader::builder(dataset).batch_size(32).num_workers(2).drop_frames(0, 7).windows(windows).build().unwrap();
    // Warm up: buffers, decoders and allocator arenas reach their steady state.
    for _ in 0..60 {
        loader.next().unwrap().unwrap();
    }
    let warm = rss_mb();
    // About 25,000 samples (~60,000 decoded frames): a leak of a packet per frame shows as tens
    // of megabytes.
    for _ in 0..800 {
        loader.next().unwrap().unwrap();
    }
    let end = rss_mb();
    assert!(end - warm < 8.0, "resident memory grew from {warm:.1} MB to {end:.1} MB over 800 batches");
}
