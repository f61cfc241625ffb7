//! The resize LeRobot applies for a policy's `resize_shape`, on the CPU for a resized frame
//! cache: torchvision's `Resize` (bilinear, antialiased), which is PIL's resampling. Each output
//! position along an axis averages the inputs under a triangle as wide as the scale factor (when
//! shrinking; one input on either side when growing), its weights normalised; the width is
//! resized first, then the height, in `f32`, and the result rounded to the nearest level.

use crate::meta::features::FrameShape;

/// One output position along an axis: the inputs it reads, from `start`, and their weights.
#[derive(Clone)]
struct Taps {
    start: usize,
    weights: Vec<f32>,
}

/// The taps of each of `output` positions resampled from `input` (torchvision's
/// `_upsample_bilinear2d_aa` weights: centre `(i + ½)·scale`, support `scale` when shrinking).
fn taps(input: usize, output: usize) -> Vec<Taps> {
    let scale = input as f32 / output as f32;
    let (support, stretch) = if scale >= 1.0 { (scale, 1.0 / scale) } else { (1.0, 1.0) };
    (0..output)
        .map(|i| {
            let centre = scale * (i as f32 + 0.5);
            let start = (centre - support + 0.5).max(0.0) as usize;
            let end = ((centre + support + 0.5) as usize).min(input);
            let weights: Vec<f32> =
                (start..end).map(|j| (1.0 - ((j as f32 - centre + 0.5) * stretch).abs()).max(0.0)).collect();
            let total: f32 = weights.iter().sum();
            Taps { start, weights: weights.iter().map(|w| w / total).collect() }
        })
        .collect()
}

/// Input rows resized along their width together, one vector lane each.
const LANES: usize = 8;

/// Resizes channel-first frames of one shape to another (the same channels): the taps of both
/// axes computed once, and the buffers of one frame's passes kept for the next. A thread needs
/// its own (clone one per thread).
///
/// The width pass takes [`LANES`] rows at a time, interleaved, so that each tap is one multiply
/// and add of a vector; the height pass runs along the rows. Every value is summed in the same
/// order as one row at a time would sum it, so the bytes do not depend on the grouping.
#[derive(Clone)]
pub(crate) struct Resampler {
    from: FrameShape,
    to: FrameShape,
    columns: Vec<Taps>,
    rows: Vec<Taps>,
    /// Levels as torchvision's input, `x / 255`.
    levels: [f32; 256],
    /// [`LANES`] input rows as levels, interleaved: column `c` of the band's row `r` at
    /// `c·LANES + r`.
    band: Vec<f32>,
    /// A channel resized along its width: `from.height × to.width`.
    wide: Vec<f32>,
    /// One output row before rounding.
    sums: Vec<f32>,
}

impl Resampler {
    pub(crate) fn new(from: FrameShape, to: FrameShape) -> Self {
        Self {
            from,
            to,
            columns: taps(from.width, to.width),
            rows: taps(from.height, to.height),
            levels: std::array::from_fn(|x| x as f32 / 255.0),
            band: vec![0.0; from.width * LANES],
            wide: vec![0.0; from.height * to.width],
            sums: vec![0.0; to.width],
        }
    }

    /// Appends `frame`, of `from`'s shape, resized to `to`'s, to `out`.
    pub(crate) fn resize(&mut self, frame: &[u8], out: &mut Vec<u8>) {
        let Self { from, to, columns, rows, levels, band, wide, sums } = self;
        for plane in frame.chunks_exact(from.height * from.width) {
            let bands = plane.chunks(from.width * LANES).zip(wide.chunks_mut(to.width * LANES));
            for (input, output) in bands {
                // A last band of fewer rows repeats its last row in the lanes past it, whose sums
                // are not written.
                let rows: [&[u8]; LANES] = std::array::from_fn(|lane| {
                    let row = lane.min(input.len() / from.width - 1);
                    &input[row * from.width..(row + 1) * from.width]
                });
                for (column, lanes) in band.chunks_exact_mut(LANES).enumerate() {
                    for (level, row) in lanes.iter_mut().zip(rows) {
                        *level = levels[usize::from(row[column])];
                    }
                }
                for (column, tap) in columns.iter().enumerate() {
                    let mut sum = [0.0f32; LANES];
                    for (k, &w) in tap.weights.iter().enumerate() {
                        let at = (tap.start + k) * LANES;
                        for (s, &x) in sum.iter_mut().zip(&band[at..at + LANES]) {
                            *s += x * w;
                        }
                    }
                    for (row, &s) in output.chunks_exact_mut(to.width).zip(&sum) {
                        row[column] = s;
                    }
                }
            }
            for tap in rows.iter() {
                sums.fill(0.0);
                for (k, &w) in tap.weights.iter().enumerate() {
                    let input = &wide[(tap.start + k) * to.width..(tap.start + k + 1) * to.width];
                    for (sum, &x) in sums.iter_mut().zip(input) {
                        *sum += x * w;
                    }
                }
                out.extend(sums.iter().map(|v| to_level(*v)));
            }
        }
    }
}

/// A value in [0, 1] as the nearest of the 256 levels.
fn to_level(value: f32) -> u8 {
    (value * 255.0).round().clamp(0.0, 255.0) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halving_averages_pairs_and_weights_sum_to_one() {
        for (input, output) in [(640, 320), (96, 84), (5, 3), (3, 7)] {
            for tap in taps(input, output) {
                let total: f32 = tap.weights.iter().sum();
                assert!((total - 1.0).abs() < 1e-6, "{input} -> {output}: {total}");
                assert!(tap.start + tap.weights.len() <= input);
            }
        }
        // Halving: each output is the two inputs under it, a quarter of each neighbour beyond.
        let tap = &taps(8, 4)[1];
        assert_eq!((tap.start, tap.weights.len()), (1, 4));
        assert_eq!(tap.weights, [0.125, 0.375, 0.375, 0.125]);
    }

    /// The resize one row, then one output row, at a time: what [`Resampler`] computes.
    fn resize_row_by_row(frame: &[u8], from: FrameShape, to: FrameShape) -> Vec<u8> {
        let (columns, rows) = (taps(from.width, to.width), taps(from.height, to.height));
        let mut out = Vec::new();
        for plane in frame.chunks_exact(from.height * from.width) {
            let wide: Vec<Vec<f32>> = plane
                .chunks_exact(from.width)
                .map(|row| {
                    let line: Vec<f32> = row.iter().map(|&x| f32::from(x) / 255.0).collect();
                    columns
                        .iter()
                        .map(|tap| {
                            let inputs = &line[tap.start..tap.start + tap.weights.len()];
                            inputs.iter().zip(&tap.weights).fold(0.0, |sum, (&x, &w)| sum + x * w)
                        })
                        .collect()
                })
                .collect();
            for tap in &rows {
                let mut sums = vec![0.0f32; to.width];
                for (k, &w) in tap.weights.iter().enumerate() {
                    for (sum, &x) in sums.iter_mut().zip(&wide[tap.start + k]) {
                        *sum += x * w;
                    }
                }
                out.extend(sums.into_iter().map(to_level));
            }
        }
        out
    }

    #[test]
    fn rows_resized_together_give_the_bytes_of_one_row_at_a_time() {
        // Heights that fill the lanes, and that leave a short last band; shrinking and growing.
        for ((h, w), (th, tw)) in [((16, 24), (8, 12)), ((21, 19), (7, 10)), ((5, 9), (11, 4)), ((3, 3), (3, 3))] {
            let from = FrameShape { channels: 3, height: h, width: w };
            let to = FrameShape { channels: 3, height: th, width: tw };
            let frame: Vec<u8> = (0..from.len()).map(|i| ((i * 37 + i / w * 11) % 256) as u8).collect();
            let mut resized = Vec::new();
            let mut resampler = Resampler::new(from, to);
            resampler.resize(&frame, &mut resized);
            assert_eq!(resized, resize_row_by_row(&frame, from, to), "{h}x{w} -> {th}x{tw}");
            // The buffers kept from one frame do not leak into the next.
            let second: Vec<u8> = frame.iter().rev().copied().collect();
            resized.clear();
            resampler.resize(&second, &mut resized);
            assert_eq!(resized, resize_row_by_row(&second, from, to), "second frame, {h}x{w} -> {th}x{tw}");
        }
    }

    #[test]
    fn a_uniform_frame_stays_uniform_and_a_ramp_stays_in_order() {
        let from = FrameShape { channels: 3, height: 6, width: 10 };
        let to = FrameShape { channels: 3, height: 3, width: 4 };
        let mut resampler = Resampler::new(from, to);
        let (mut uniform, mut small) = (Vec::new(), Vec::new());
        resampler.resize(&[77; 180], &mut uniform);
        assert!(uniform.len() == to.len() && uniform.iter().all(|&v| v == 77));
        let ramp: Vec<u8> = (0..180).map(|i| (i % 10 * 20) as u8).collect();
        resampler.resize(&ramp, &mut small);
        assert!(small[..4].windows(2).all(|w| w[0] < w[1]), "{small:?}");
    }
}
