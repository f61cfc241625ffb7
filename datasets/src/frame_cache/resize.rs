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

/// Resizes channel-first frames of one shape to another (the same channels): the taps of both
/// axes computed once, and the buffers of one frame's passes kept for the next. A thread needs
/// its own (clone one per thread).
#[derive(Clone)]
pub(crate) struct Resampler {
    from: FrameShape,
    to: FrameShape,
    columns: Vec<Taps>,
    rows: Vec<Taps>,
    /// Levels as torchvision's input, `x / 255`.
    levels: [f32; 256],
    /// One input row as levels.
    line: Vec<f32>,
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
            line: vec![0.0; from.width],
            wide: vec![0.0; from.height * to.width],
            sums: vec![0.0; to.width],
        }
    }

    /// Appends `frame`, of `from`'s shape, resized to `to`'s, to `out`.
    pub(crate) fn resize(&mut self, frame: &[u8], out: &mut Vec<u8>) {
        let Self { from, to, columns, rows, levels, line, wide, sums } = self;
        for plane in frame.chunks_exact(from.height * from.width) {
            for (bytes, out_line) in plane.chunks_exact(from.width).zip(wide.chunks_exact_mut(to.width)) {
                for (value, &x) in line.iter_mut().zip(bytes) {
                    *value = levels[usize::from(x)];
                }
                for (value, tap) in out_line.iter_mut().zip(columns.iter()) {
                    let inputs = &line[tap.start..tap.start + tap.weights.len()];
                    *value = inputs.iter().zip(&tap.weights).map(|(&x, &w)| x * w).sum();
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
                out.extend(sums.iter().map(|v| (v * 255.0).round().clamp(0.0, 255.0) as u8));
            }
        }
    }
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
