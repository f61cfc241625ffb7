//! Sums of f32 values in f64, in a fixed number of interleaved lanes: one chain of dependent
//! additions waits on each addition's latency (four cycles), lanes run at the rate the values
//! arrive. The order of the additions depends on the length only, so a step repeats to the bit.
//! The loops run on the CPU's widest SIMD instructions ([`widest`]), the same sums in the same
//! order.

use super::simd::widest;

/// Lanes of a sum: four chains of eight f64, four AVX-512 registers' worth.
const LANES: usize = 32;

/// `Σ term(v)` over `values`, in f64.
pub(crate) fn sum_f64(values: &[f32], term: impl Fn(f32) -> f64) -> f64 {
    widest(
        #[inline(always)]
        move || {
            let mut lanes = [0f64; LANES];
            let mut chunks = values.chunks_exact(LANES);
            for chunk in &mut chunks {
                for (lane, &v) in lanes.iter_mut().zip(chunk) {
                    *lane += term(v);
                }
            }
            let rest: f64 = chunks.remainder().iter().map(|&v| term(v)).sum();
            lanes.iter().sum::<f64>() + rest
        },
    )
}

/// The two sums `Σ term(a, b)` over the pairs of `a` and `b` (of one length), in f64.
pub(crate) fn sum_pairs_f64(a: &[f32], b: &[f32], term: impl Fn(f32, f32) -> [f64; 2]) -> [f64; 2] {
    debug_assert_eq!(a.len(), b.len());
    widest(
        #[inline(always)]
        move || sum_pairs_in_lanes(a, b, term),
    )
}

/// [`sum_pairs_f64`]'s loop.
#[inline(always)]
fn sum_pairs_in_lanes(a: &[f32], b: &[f32], term: impl Fn(f32, f32) -> [f64; 2]) -> [f64; 2] {
    let mut lanes = [[0f64; LANES]; 2];
    let (mut chunks_a, mut chunks_b) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    for (a, b) in (&mut chunks_a).zip(&mut chunks_b) {
        for (j, (&x, &y)) in a.iter().zip(b).enumerate() {
            let [s, t] = term(x, y);
            lanes[0][j] += s;
            lanes[1][j] += t;
        }
    }
    let mut total = [lanes[0].iter().sum::<f64>(), lanes[1].iter().sum::<f64>()];
    for (&x, &y) in chunks_a.remainder().iter().zip(chunks_b.remainder()) {
        let [s, t] = term(x, y);
        total[0] += s;
        total[1] += t;
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sums equal sums in exact arithmetic (integers) over lengths around the lanes'.
    #[test]
    fn sums_every_value_once() {
        for len in [0u16, 1, 31, 32, 33, 64, 100] {
            let a: Vec<f32> = (0..len).map(f32::from).collect();
            let b: Vec<f32> = (0..len).map(|i| f32::from(2 * i + 1)).collect();
            let expected_a: f64 = (0..len).map(|i| f64::from(i) * f64::from(i)).sum();
            assert_eq!(sum_f64(&a, |v| f64::from(v * v)), expected_a, "{len}");
            let expected: [f64; 2] = [(0..len).map(f64::from).sum(), (0..len).map(|i| f64::from(2 * i + 1)).sum()];
            assert_eq!(sum_pairs_f64(&a, &b, |x, y| [f64::from(x), f64::from(y)]), expected, "{len}");
        }
    }
}
