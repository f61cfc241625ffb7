//! The statistics `datasets stats` computes from a dataset's files against those LeRobot itself
//! wrote while recording the fixtures: `meta/stats.json` (v3.0, LeRobot 0.6.1) and
//! `meta/episodes_stats.jsonl` (v2.1, LeRobot 0.3.3, per episode and aggregated).
//!
//! Tolerances, relative to the stored value (or absolute below 1e-6):
//! - every statistic of every numeric feature, and of cameras stored losslessly (PNG in parquet):
//!   1e-6 (measured: 1.4e-7 at most, from float32 rounding in LeRobot 0.3's numpy);
//! - except the quantiles of `timestamp`: 1e-3. LeRobot computed them from the float64
//!   `frame_index / fps` it held while recording; the files hold float32, and a value that moves
//!   across one of the 5000 histogram edges moves the quantile by a fraction of a bin (measured:
//!   9.6e-5);
//! - cameras stored as video: LeRobot measured the frames before encoding them, we measure the
//!   decoded ones, which the lossy codec changed. Counts and `max` must agree exactly, the mean
//!   within 1% and the std within 10% (measured: 0.25% and 7.1%), the upper quantiles
//!   (q50..q99) within 1e-3; `min`, q01 and q10 (the darkest pixels, which the codec smooths
//!   most) are not compared.

use std::path::{Path, PathBuf};

use datasets::stats::{Stats, compare_stats, compute_stats};
#[cfg(feature = "video")]
use datasets::stats::{compute_episode_stats, read_episode_stats};
use datasets::{Dataset, Feature};

fn fixture(dir: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures").join(dir)
}

/// The tolerance on `feature.stat`, or `None` when the two cannot be compared (see the module
/// documentation).
fn tolerance(dataset: &Dataset, feature: &str, stat: &str) -> Option<f64> {
    let is_video = dataset.info().feature(feature).is_some_and(Feature::is_video);
    match (is_video, feature, stat) {
        (true, _, "count" | "max") => Some(0.0),
        (true, _, "mean") => Some(0.01),
        (true, _, "std") => Some(0.1),
        (true, _, "q50" | "q90" | "q99") => Some(1e-3),
        (true, _, _) => None,
        (false, "timestamp", q) if q.starts_with('q') => Some(1e-3),
        (false, _, _) => Some(1e-6),
    }
}

/// Compares `computed` with `stored` entry by entry; returns how many entries were compared.
fn check(dataset: &Dataset, computed: &Stats, stored: &Stats, what: &str) -> usize {
    let mut compared = 0;
    let differences = compare_stats(computed, stored);
    assert!(!differences.is_empty(), "{what}: nothing to compare");
    for d in differences {
        let (feature, stat) = d.name.rsplit_once('.').expect("feature.stat");
        let Some(limit) = tolerance(dataset, feature, stat) else { continue };
        let worst = if d.max_abs < 1e-6 { d.max_abs } else { d.max_rel };
        assert!(worst <= limit, "{what}: `{}` differs from LeRobot's by {worst:.3e} (limit {limit:.0e})", d.name);
        compared += 1;
    }
    compared
}

fn check_aggregated(dir: &str) -> usize {
    let dataset = Dataset::open(fixture(dir)).unwrap();
    let (_, computed) = compute_stats(&dataset).unwrap();
    assert_eq!(computed.keys().collect::<Vec<_>>(), dataset.stats().keys().collect::<Vec<_>>(), "{dir}: features");
    check(&dataset, &computed, dataset.stats(), dir)
}

#[test]
fn v3_statistics_of_images_in_parquet_are_lerobots() {
    // Seven numeric features and the camera, ten statistics each (count and quantiles included).
    assert_eq!(check_aggregated("lerobot-0.6.1/pusht_images"), 8 * 10);
}

#[test]
#[cfg(feature = "video")] // decodes video
fn v3_statistics_of_a_video_dataset_are_lerobots() {
    // Seven numeric features with ten statistics, and seven of the camera's.
    assert_eq!(check_aggregated("lerobot-0.6.1/pusht_mini"), 7 * 10 + 7);
}

#[test]
#[cfg(feature = "video")] // decodes video
fn v21_statistics_are_lerobots_per_episode_and_aggregated() {
    let dir = "lerobot-0.3.3/v21_pusht";
    // Seven numeric features with five statistics (no quantiles in v2.1), and four of the camera's.
    assert_eq!(check_aggregated(dir), 7 * 5 + 4);
    let dataset = Dataset::open(fixture(dir)).unwrap();
    let stored = read_episode_stats(&fixture(dir).join("meta/episodes_stats.jsonl")).unwrap();
    let computed = compute_episode_stats(&dataset).unwrap();
    assert_eq!(stored.len(), computed.len());
    for ((index, theirs), ours) in stored.iter().zip(&computed) {
        // Per episode as in the aggregate: seven numeric features, four camera statistics.
        assert_eq!(check(&dataset, ours, theirs, &format!("{dir} episode {index}")), 7 * 5 + 4);
    }
}
