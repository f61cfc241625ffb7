//! Computing one episode's statistics the way LeRobot does (`compute_episode_stats`):
//! numeric features over the frame axis, cameras per channel over a sample of frames scaled to
//! [0, 1], and (v3.0) quantiles from LeRobot's 5000-bin histogram estimator.

use crate::meta::features::FrameShape;
use crate::stats::{FeatureStats, StatArray};

/// The quantiles LeRobot v3.0 stores, with their keys.
pub const QUANTILES: [(f64, &str); 5] = [(0.01, "q01"), (0.10, "q10"), (0.50, "q50"), (0.90, "q90"), (0.99, "q99")];

/// The number of histogram bins of LeRobot's `RunningQuantileStats`.
const QUANTILE_BINS: usize = 5000;

/// Whose arithmetic a dataset's statistics follow: LeRobot's writers of the two versions compute
/// them differently, and the stored numbers carry those differences.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatsMethod {
    /// v2.1 (LeRobot 0.3): numpy's `mean` and `std`; no quantiles. Computed here in float64,
    /// centred (within 1e-7 relative of numpy's float32 for float features).
    V21,
    /// v3.0 (LeRobot 0.4 and later): `RunningQuantileStats`, which promotes float and `uint8`
    /// inputs (camera frames included) to float32, accumulates the mean and the mean of squares
    /// in float32 as numpy does (pairwise along a single column, sequentially across rows
    /// otherwise), takes `std = sqrt(max(0, E[x²] − E[x]²))`, and estimates q01..q99 from a
    /// 5000-bin histogram. The float32 sums are reproduced: over a 96×96 camera they move the
    /// mean by ~0.4% and the std by up to ~15% from the exact values, and LeRobot normalises
    /// with what it stored.
    V30,
}

impl StatsMethod {
    /// The method of LeRobot's writer for `version`.
    pub fn of(version: crate::CodebaseVersion) -> Self {
        if version.is_v3() { Self::V30 } else { Self::V21 }
    }

    fn quantiles(self) -> bool {
        self == Self::V30
    }
}

/// Statistics of a numeric feature over one episode: `values` holds `rows` rows of `width`
/// values; `float` says the feature is stored as floats (or booleans), which LeRobot's v3.0
/// writer sums in float32 (integers in float64).
pub fn numeric_stats(values: &[f64], rows: usize, width: usize, float: bool, method: StatsMethod) -> FeatureStats {
    let columns: Vec<Vec<(f64, f64)>> =
        (0..width).map(|c| (0..rows).map(|r| (values[r * width + c], 1.0)).collect()).collect();
    let float32 = float && method == StatsMethod::V30;
    let mut stats = weighted_stats(&columns, method.quantiles(), float32, 1.0);
    if method == StatsMethod::V30 && rows > 0 {
        let column = |c: usize| (0..rows).map(move |r| values[r * width + c]);
        let (means, stds): (Vec<f64>, Vec<f64>) = (0..width)
            .map(|c| {
                if float {
                    let (m, s) = running_mean_std(&column(c).map(|v| v as f32).collect::<Vec<_>>(), width == 1);
                    (f64::from(m), f64::from(s))
                } else {
                    running_mean_std(&column(c).collect::<Vec<_>>(), width == 1)
                }
            })
            .unzip();
        stats.0.insert("mean".into(), StatArray::vector(means));
        stats.0.insert("std".into(), StatArray::vector(stds));
    }
    stats.0.insert("count".into(), StatArray::vector(vec![rows as f64]));
    stats
}

/// Statistics of a camera over one episode from its sampled frames (CHW uint8, already picked
/// by [`sample_indices`] and reduced by [`downsample`]), per channel, divided by 255, with
/// shape `(C, 1, 1)`; `count` is the number of frames.
pub fn camera_stats(frames: &[Vec<u8>], shape: FrameShape, method: StatsMethod) -> FeatureStats {
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
    let mut stats = weighted_stats(&columns, method.quantiles(), method == StatsMethod::V30, 255.0);
    if method == StatsMethod::V30 && !frames.is_empty() {
        // LeRobot sums the (frames · pixels, channels) float32 batch: pixel order, per channel.
        let (means, stds): (Vec<f64>, Vec<f64>) = (0..shape.channels)
            .map(|c| {
                let values: Vec<f32> =
                    frames.iter().flat_map(|f| f[c * plane..(c + 1) * plane].iter().map(|&v| f32::from(v))).collect();
                let (mean, std) = running_mean_std(&values, shape.channels == 1);
                (f64::from(mean / 255.0), f64::from(std / 255.0))
            })
            .unzip();
        stats.0.insert("mean".into(), StatArray::vector(means));
        stats.0.insert("std".into(), StatArray::vector(stds));
    }
    for array in stats.0.values_mut() {
        array.shape = vec![shape.channels, 1, 1];
    }
    stats.0.insert("count".into(), StatArray::vector(vec![frames.len() as f64]));
    stats
}

/// The float types numpy accumulates in.
trait NumpyFloat:
    Copy + std::ops::Add<Output = Self> + std::ops::Mul<Output = Self> + std::ops::Sub<Output = Self>
{
    const ZERO: Self;
    fn div_count(self, n: usize) -> Self;
    fn max_zero_sqrt(self) -> Self;
}

impl NumpyFloat for f32 {
    const ZERO: Self = 0.0;
    fn div_count(self, n: usize) -> Self {
        self / n as f32
    }
    fn max_zero_sqrt(self) -> Self {
        self.max(0.0).sqrt()
    }
}

impl NumpyFloat for f64 {
    const ZERO: Self = 0.0;
    fn div_count(self, n: usize) -> Self {
        self / n as f64
    }
    fn max_zero_sqrt(self) -> Self {
        self.max(0.0).sqrt()
    }
}

/// `RunningQuantileStats`' mean and `sqrt(max(0, E[x²] − E[x]²))` of one column of a batch
/// (one update), in the column's float type, summed as `np.mean(batch, axis=0)` sums it:
/// `single` when the batch has one column.
fn running_mean_std<T: NumpyFloat>(column: &[T], single: bool) -> (T, T) {
    let sum = |v: &[T]| if single { numpy_pairwise_sum(v) } else { v.iter().fold(T::ZERO, |acc, &x| acc + x) };
    let squares: Vec<T> = column.iter().map(|&x| x * x).collect();
    let mean = sum(column).div_count(column.len());
    let mean_of_squares = sum(&squares).div_count(column.len());
    (mean, (mean_of_squares - mean * mean).max_zero_sqrt())
}

/// numpy's sum of a contiguous column: blocks of 8192 values (its buffer) added in order, each
/// summed pairwise (`pairwise_sum` in numpy's loops: eight accumulators up to 128 values,
/// halves above).
fn numpy_pairwise_sum<T: NumpyFloat>(values: &[T]) -> T {
    fn pairwise<T: NumpyFloat>(a: &[T]) -> T {
        let n = a.len();
        if n < 8 {
            return a.iter().fold(T::ZERO, |acc, &x| acc + x);
        }
        if n <= 128 {
            let mut r: [T; 8] = a[..8].try_into().expect("8 values");
            let blocks = n - n % 8;
            for chunk in a[8..blocks].chunks_exact(8) {
                for (acc, &x) in r.iter_mut().zip(chunk) {
                    *acc = *acc + x;
                }
            }
            let head = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
            return a[blocks..].iter().fold(head, |acc, &x| acc + x);
        }
        let half = n / 2 - (n / 2) % 8;
        pairwise(&a[..half]) + pairwise(&a[half..])
    }
    values.chunks(8192).fold(T::ZERO, |acc, block| acc + pairwise(block))
}

/// min/max/mean/std (population) and optionally quantiles of each column, given as
/// `(value, multiplicity)` pairs, every result divided by `scale`. `float32` says LeRobot's
/// batch holds float32 values, whose histogram edges it computes in float32 too.
fn weighted_stats(columns: &[Vec<(f64, f64)>], quantiles: bool, float32: bool, scale: f64) -> FeatureStats {
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
            let values = if n < 2.0 {
                vec![mean; QUANTILES.len()]
            } else {
                histogram_quantiles(column, &histogram_edges(min, max, float32), n)
            };
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

/// `np.linspace(min − 1e-10, max + 1e-10, 5001)` as `RunningQuantileStats` computes it: in the
/// batch's float type, so for float32 data the padding vanishes unless the bound is tiny and
/// the edges are float32 products `i · step + start`.
fn histogram_edges(min: f64, max: f64, float32: bool) -> Vec<f64> {
    if float32 {
        let (lo, hi) = (min as f32 - 1e-10, max as f32 + 1e-10);
        let step = (hi - lo) / QUANTILE_BINS as f32;
        let mut edges: Vec<f64> = (0..=QUANTILE_BINS).map(|i| f64::from(i as f32 * step + lo)).collect();
        edges[QUANTILE_BINS] = f64::from(hi);
        edges
    } else {
        let (lo, hi) = (min - 1e-10, max + 1e-10);
        let step = (hi - lo) / QUANTILE_BINS as f64;
        let mut edges: Vec<f64> = (0..=QUANTILE_BINS).map(|i| i as f64 * step + lo).collect();
        edges[QUANTILE_BINS] = hi;
        edges
    }
}

/// LeRobot's `RunningQuantileStats` for one batch: a histogram over `edges` (numpy's half-open
/// bins, the last one closed), then the value at each target count by linear interpolation
/// inside its bin.
fn histogram_quantiles(column: &[(f64, f64)], edges: &[f64], total: f64) -> Vec<f64> {
    let bins = edges.len() - 1;
    let mut hist = vec![0f64; bins];
    for &(v, w) in column {
        // Last edge <= v, the last bin also taking v == hi.
        let bin = edges.partition_point(|&e| e <= v).saturating_sub(1).min(bins - 1);
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
                return edges[bins];
            }
            let before = cumsum[idx - 1];
            let in_bin = cumsum[idx] - before;
            if in_bin == 0.0 {
                return edges[idx];
            }
            // The bin's width in the edges' own type (float32 edges subtract in float32).
            let width = edges[idx + 1] - edges[idx];
            edges[idx] + (target - before) / in_bin * width
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
        let s = numeric_stats(&values, 1000, 1, false, StatsMethod::V30);
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
        let s = camera_stats(&[frame.clone(), frame], shape, StatsMethod::V21);
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
