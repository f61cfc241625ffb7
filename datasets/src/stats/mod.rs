//! Dataset statistics as LeRobot keeps them (`min`, `max`, `mean`, `std`, `count` and, in v3.0,
//! quantiles, per feature): the stored ones read, aggregated and written back; one episode's
//! computed as LeRobot computes them when it records; a whole dataset's recomputed from its files
//! and compared with the stored ones.

mod compute;
mod recompute;
mod stored;

pub use compute::{QUANTILES, StatsMethod, camera_stats, downsample, num_samples, numeric_stats, sample_indices};
pub use recompute::{StatDifference, compare_stats, compute_episode_stats, compute_stats};
pub use stored::{
    EPISODES_STATS_JSONL, FeatureStats, STATS_JSON, StatArray, Stats, aggregate, is_quantile_key, non_finite,
    parse_stats, read_episode_stats, read_stats, stats_to_json,
};
