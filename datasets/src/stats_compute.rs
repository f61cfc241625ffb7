//! Computing one episode's statistics the way LeRobot does (`compute_episode_stats`):
//! numeric features over the frame axis, cameras per channel over a sample of frames scaled to
//! [0, 1], and (v3.0) quantiles from LeRobot's 5000-bin histogram estimator.

use crate::features::FrameShape;
use crate::stats::{FeatureStats, StatArray};

/// The quantiles LeRobot v3.0 stores, with their keys.
pub const QUANTILES: [(f64, &str); 5] = [(0.01, "q01"), (0.10, "q10"), (0.50, "q50"), (0.90, "q90"), (0.99, "q99")];

/// The number of histogram bins of LeRobot's `RunningQuantileStats`.
const QUANTILE_BINS: usize = 5000;

/// Statistics of a numeric feature over one episode: `values` holds `rows` rows of `width`
/// values. `quantiles` adds q01..q99 (v3.0; v2.1 has none).
pub fn numeric_stats(values: &[f64], rows: usize, width: usize, quantiles: bool) -> FeatureStats {
    let columns: Vec<Vec<(f64, f64)>> =
        (0..width).map(|c| (0..rows).map(|r| (values[r * width + c], 1.0)).collect()).collect();
    let mut stats = weighted_stats(&columns, quantiles, 1.0);
    stats.0.insert("count".into(), StatArray::vector(vec![rows as f64]));
    stats
}

/// Statistics of a camera over one episode from its sampled frames (CHW uint8, already picked
/// by [`sample_indices`] and reduced by [`downsample`]), per channel, divided by 255, with
/// shape `(C, 1, 1)`; `count` is the number of frames.
pub fn camera_stats(frames: &[Vec<u8>], shape: FrameShape, quantiles: bool) -> FeatureStats {
    let plane = shape.height * shape.width;
    let mut histograms = vec![[0f64; 256]; shape.channels];
    for frame in frames {
        for (c, hist) in histograms.iter_mut().enumerate() {
            for &v in &frame[c * plane..(c + 1) * plane] {
                hist[usize::from(v)] += 1.0;
            }
        }
    }
    let columns: Vec<Vec<(f64, f64)>> = histograms
        .iter()
        .map(|h| h.iter().enumerate().filter(|(_, n)| **n > 0.0).map(|(v, &n)| (v as f64, n)).collect())
        .collect();
    let mut stats = weighted_stats(&columns, quantiles, 255.0);
    for array in stats.0.values_mut() {
        array.shape = vec![shape.channels, 1, 1];
    }
    stats.0.insert("count".into(), StatArray::vector(vec![frames.len() as f64]));
    stats
}

/// min/max/mean/std (population) and optionally quantiles of each column, given as
/// `(value, multiplicity)` pairs, every result divided by `scale`.
fn weighted_stats(columns: &[Vec<(f64, f64)>], quantiles: bool, scale: f64) -> FeatureStats {
    let mut names: Vec<(&str, Vec<f64>)> = vec![("min", vec![]), ("max", vec![]), ("mean", vec![]), ("std", vec![])];
    let mut qs: Vec<Vec<f64>> = vec![Vec::new(); QUANTILES.len()];
    for column in columns {
        let n: f64 = column.iter().map(|(_, w)| w).sum();
        let min = column.iter().map(|(v, _)| *v).fold(f64::INFINITY, f64::min);
        let max = column.iter().map(|(v, _)| *v).fold(f64::NEG_INFINITY, f64::max);
        let mean = column.iter().map(|(v, w)| v * w).sum::<f64>() / n;
        let var = column.iter().map(|(v, w)| (v - mean).powi(2) * w).sum::<f64>() / n;
        for (slot, v) in names.iter_mut().zip([min, max, mean, var.sqrt()]) {
            slot.1.push(v / scale);
        }
        if quantiles {
            // LeRobot: fewer than 2 samples → every quantile is the mean.
            let values = if n < 2.0 { vec![mean; QUANTILES.len()] } else { histogram_quantiles(column, min, max, n) };
            for (q, v) in qs.iter_mut().zip(values) {
                q.push(v / scale);
            }
        }
    }
    let mut stats = FeatureStats::default();
    for (name, values) in names {
        stats.0.insert(name.into(), StatArray::vector(values));
    }
    if quantiles {
        for ((_, key), values) in QUANTILES.iter().zip(qs) {
            stats.0.insert((*key).into(), StatArray::vector(values));
        }
    }
    stats
}

/// LeRobot's `RunningQuantileStats` for one batch: a 5000-bin histogram over
/// `[min − 1e-10, max + 1e-10]` (numpy's half-open bins, last bin closed), then the value at
/// each target count by linear interpolation inside its bin.
fn histogram_quantiles(column: &[(f64, f64)], min: f64, max: f64, total: f64) -> Vec<f64> {
    let (lo, hi) = (min - 1e-10, max + 1e-10);
    let step = (hi - lo) / QUANTILE_BINS as f64;
    let mut edges: Vec<f64> = (0..=QUANTILE_BINS).map(|i| lo + i as f64 * step).collect();
    edges[QUANTILE_BINS] = hi;
    let mut hist = vec![0f64; QUANTILE_BINS];
    for &(v, w) in column {
        // Last edge <= v, the last bin also taking v == hi.
        let bin = edges.partition_point(|&e| e <= v).saturating_sub(1).min(QUANTILE_BINS - 1);
        hist[bin] += w;
    }
    let mut cumsum = hist.clone();
    for i in 1..cumsum.len() {
        cumsum[i] += cumsum[i - 1];
    }
    QUANTILES
        .iter()
        .map(|(q, _)| {
            let target = q * total;
            let idx = cumsum.partition_point(|&c| c < target);
            if idx == 0 {
                return edges[0];
            }
            if idx >= cumsum.len() {
                return edges[QUANTILE_BINS];
            }
            let before = cumsum[idx - 1];
            let in_bin = cumsum[idx] - before;
            if in_bin == 0.0 {
                return edges[idx];
            }
            edges[idx] + (target - before) / in_bin * (edges[idx + 1] - edges[idx])
        })
        .collect()
}

/// LeRobot's `estimate_num_samples`: how many frames of an episode of `len` frames its camera
/// statistics look at.
pub fn num_samples(len: usize) -> usize {
    let min = len.min(100);
    let by_power = (len as f64).powf(0.75) as usize;
    min.max(by_power.min(10_000))
}

/// LeRobot's `sample_indices`: `round(linspace(0, len − 1, num_samples(len)))`.
pub fn sample_indices(len: usize) -> Vec<usize> {
    let n = num_samples(len);
    if n == 0 {
        return Vec::new();
    }
    if n == 1 {
        return vec![0];
    }
    let last = (len - 1) as f64;
    (0..n).map(|i| (i as f64 * last / (n - 1) as f64).round_ties_even() as usize).collect()
}

/// LeRobot's `auto_downsample_height_width`: frames with a side of 300 pixels or more are
/// strided by `int(longer side / 150)`. Returns the reduced CHW frame and its shape.
pub fn downsample(frame: &[u8], shape: FrameShape) -> (Vec<u8>, FrameShape) {
    let (h, w) = (shape.height, shape.width);
    if h.max(w) < 300 {
        return (frame.to_vec(), shape);
    }
    let factor = if w > h { w / 150 } else { h / 150 };
    let (oh, ow) = (h.div_ceil(factor), w.div_ceil(factor));
    let mut out = Vec::with_capacity(shape.channels * oh * ow);
    for c in 0..shape.channels {
        for y in (0..h).step_by(factor) {
            let row = &frame[c * h * w + y * w..c * h * w + (y + 1) * w];
            out.extend(row.iter().step_by(factor));
        }
    }
    (out, FrameShape { channels: shape.channels, height: oh, width: ow })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_counts_follow_lerobot() {
        assert_eq!(num_samples(50), 50);
        assert_eq!(num_samples(500), 105);
        assert_eq!(num_samples(1000), 177);
        assert_eq!(num_samples(5000), 594);
        let idx = sample_indices(40);
        assert_eq!(idx.len(), 40);
        assert_eq!(idx.first(), Some(&0));
        assert_eq!(idx.last(), Some(&39));
        let idx = sample_indices(1000);
        assert_eq!((idx.len(), idx[0], idx[176]), (177, 0, 999));
    }

    #[test]
    fn numeric_stats_and_quantiles() {
        let values: Vec<f64> = (0..1000).map(f64::from).collect();
        let s = numeric_stats(&values, 1000, 1, true);
        assert_eq!(s.get("min").unwrap().values, vec![0.0]);
        assert_eq!(s.get("max").unwrap().values, vec![999.0]);
        assert!((s.get("mean").unwrap().values[0] - 499.5).abs() < 1e-9);
        assert!((s.get("std").unwrap().values[0] - 288.674990).abs() < 1e-5);
        let q50 = s.get("q50").unwrap().values[0];
        assert!((q50 - 499.5).abs() < 0.5, "{q50}");
        let q01 = s.get("q01").unwrap().values[0];
        assert!((q01 - 9.5).abs() < 0.5, "{q01}");
        assert_eq!(s.get("count").unwrap().values, vec![1000.0]);
    }

    #[test]
    fn camera_stats_are_per_channel_in_unit_range() {
        let shape = FrameShape { channels: 3, height: 2, width: 2 };
        let frame: Vec<u8> = [[0u8; 4], [255; 4], [51; 4]].concat();
        let s = camera_stats(&[frame.clone(), frame], shape, false);
        let mean = s.get("mean").unwrap();
        assert_eq!(mean.shape, vec![3, 1, 1]);
        assert_eq!(mean.values, vec![0.0, 1.0, 0.2]);
        assert_eq!(s.get("count").unwrap().values, vec![2.0]);
    }

    #[test]
    fn large_frames_are_strided() {
        let shape = FrameShape { channels: 1, height: 300, width: 600 };
        let frame = vec![7u8; 300 * 600];
        let (small, s) = downsample(&frame, shape);
        assert_eq!((s.height, s.width), (75, 150));
        assert_eq!(small.len(), 75 * 150);
    }
}
