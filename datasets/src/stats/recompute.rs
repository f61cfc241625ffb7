//! Recomputing a dataset's statistics from its files, as LeRobot computes them when it records
//! (per episode, then aggregated), and comparing them with the stored ones.

use rayon::prelude::*;

use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::meta::features::Feature;
use crate::stats::{Stats, aggregate};
use crate::stats::{StatsMethod, camera_stats, downsample, numeric_stats, sample_indices};
use crate::table::ColumnValues;
use crate::table::image::decode_chw;
use crate::video::DecoderCache;

/// Per-episode statistics of every feature, computed from the dataset's files (v3.0 with
/// quantiles, v2.1 without), in episode order.
pub fn compute_episode_stats(dataset: &Dataset) -> Result<Vec<Stats>> {
    dataset.require_every_episode("recomputing the statistics")?;
    dataset
        .episodes()
        .par_iter()
        .map_init(DecoderCache::default, |decoders, episode| {
            let mut stats = Stats::new();
            for feature in &dataset.info().features {
                if let Some(s) = feature_stats(dataset, feature, episode, decoders)? {
                    stats.insert(feature.key.to_string(), s);
                }
            }
            Ok(stats)
        })
        .collect()
}

/// Per-episode statistics aggregated over the dataset, as `stats.json` holds them.
pub fn compute_stats(dataset: &Dataset) -> Result<(Vec<Stats>, Stats)> {
    let episodes = compute_episode_stats(dataset)?;
    let total = aggregate(&episodes).map_err(Error::request)?;
    Ok((episodes, total))
}

fn feature_stats(
    dataset: &Dataset,
    feature: &Feature,
    episode: &crate::meta::episodes::Episode,
    decoders: &mut DecoderCache,
) -> Result<Option<crate::stats::FeatureStats>> {
    let method = StatsMethod::of(dataset.info().version);
    let rows = episode.frames.clone();
    if let Some(shape) = feature.frame_shape() {
        let picks: Vec<usize> = sample_indices(rows.len()).into_iter().map(|i| rows.start + i).collect();
        let mut frames = Vec::with_capacity(picks.len());
        if feature.is_video() {
            let camera = dataset.info().video_keys().iter().position(|k| **k == feature.key).expect("a video key");
            let path = dataset.video_file(episode, camera)?;
            let from = episode.videos[camera].from_timestamp;
            let timestamps: Vec<f64> = picks.iter().map(|&r| from + dataset.timestamp(r)).collect();
            let mut pixels = vec![0u8; picks.len() * shape.len()];
            decoders.get_with(&path, |p| dataset.open_video(p))?.frames_at(
                &timestamps,
                dataset.options().tolerance_s,
                &mut pixels,
            )?;
            frames.extend(pixels.chunks_exact(shape.len()).map(|f| downsample(f, shape)));
        } else if let Some(ColumnValues::Image(images)) =
            dataset.table().column(feature.key.as_str()).map(|c| &c.values)
        {
            for &row in &picks {
                let (s, chw) = decode_chw(images.get(row)).map_err(|message| Error::Image {
                    path: dataset.table().file_of(row).to_path_buf(),
                    field: feature.key.to_string(),
                    row,
                    message,
                })?;
                frames.push(downsample(&chw, s));
            }
        }
        let reduced = frames.first().map_or(shape, |(_, s)| *s);
        let pixels: Vec<Vec<u8>> = frames.into_iter().map(|(p, _)| p).collect();
        return Ok(Some(camera_stats(&pixels, reduced, method)));
    }
    let Some(column) = dataset.table().column(feature.key.as_str()) else { return Ok(None) };
    let w = column.width;
    let (values, float): (Vec<f64>, bool) = match &column.values {
        ColumnValues::F32(v) => (v[rows.start * w..rows.end * w].iter().map(|&x| f64::from(x)).collect(), true),
        ColumnValues::I64(v) => (v[rows.start * w..rows.end * w].iter().map(|&x| x as f64).collect(), false),
        ColumnValues::Bool(v) => {
            (v[rows.start * w..rows.end * w].iter().map(|&x| f64::from(u8::from(x))).collect(), true)
        }
        ColumnValues::Str(_) | ColumnValues::Image(_) => return Ok(None),
    };
    Ok(Some(numeric_stats(&values, rows.len(), w, float, method)))
}

/// The largest difference between two sets of statistics for one `feature.stat`.
#[derive(Debug, Clone, PartialEq)]
pub struct StatDifference {
    /// `feature.stat`.
    pub name: String,
    /// Largest absolute difference (NaN when the shapes differ or one side is missing).
    pub max_abs: f64,
    /// Largest difference relative to the stored value's magnitude (floored at 1e-6).
    pub max_rel: f64,
}

/// Compares computed statistics with stored ones, entry by entry (union of both).
pub fn compare_stats(computed: &Stats, stored: &Stats) -> Vec<StatDifference> {
    let mut out = Vec::new();
    let mut features: Vec<&String> = computed.keys().chain(stored.keys()).collect();
    features.sort();
    features.dedup();
    for feature in features {
        let (a, b) = (computed.get(feature), stored.get(feature));
        let mut names: Vec<&String> = a.iter().chain(b.iter()).flat_map(|s| s.0.keys()).collect();
        names.sort();
        names.dedup();
        for name in names {
            let pair = (a.and_then(|s| s.get(name)), b.and_then(|s| s.get(name)));
            let (max_abs, max_rel) = match pair {
                (Some(x), Some(y)) if x.values.len() == y.values.len() => {
                    x.values.iter().zip(&y.values).fold((0.0f64, 0.0f64), |(ma, mr), (p, q)| {
                        let d = (p - q).abs();
                        (ma.max(d), mr.max(d / q.abs().max(1e-6)))
                    })
                }
                _ => (f64::NAN, f64::NAN),
            };
            out.push(StatDifference { name: format!("{feature}.{name}"), max_abs, max_rel });
        }
    }
    out
}
