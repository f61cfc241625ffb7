//! [`OptimiserKernels`] on the CPU: the gradients gathered with their squares in one pass, and
//! Adam's update of every parameter in place, on rayon's threads.

use burn::backend::Flex;
use burn::backend::flex::FlexTensor;
use burn::tensor::DType;
use burn::tensor::ops::FloatTensor;
use rayon::prelude::*;

use crate::{AdamConstants, AdamStep, FlatBuffers, OptimiserKernels, portable};

/// Elements per task: large enough that a task's overhead is noise, small enough to spread a
/// ResNet layer's weights over the cores.
const CHUNK: usize = 1 << 15;

/// The constants of one update and the gradients' scale.
pub(crate) struct Update {
    pub(crate) scale: f32,
    pub(crate) c: AdamConstants,
}

impl Update {
    fn new(step: &AdamStep, scale: f32) -> Self {
        Self { scale, c: step.constants() }
    }

    /// One chunk, in the portable version's (torch's) order of operations.
    #[inline]
    fn apply(&self, w: &mut [f32], g: &[f32], m: &mut [f32], v: &mut [f32]) {
        let c = &self.c;
        for (((w, &g), m), v) in w.iter_mut().zip(g).zip(m.iter_mut()).zip(v.iter_mut()) {
            let mut g = g * self.scale;
            if c.weight_decay != 0.0 {
                g += *w * c.weight_decay;
            }
            *m += (g - *m) * c.one_minus_beta_1;
            *v = *v * c.beta_2 + g * c.one_minus_beta_2 * g;
            let denominator = v.sqrt() / c.bias_correction_2_sqrt + c.epsilon;
            *w += *m / denominator * -c.step_size;
        }
    }
}

/// `a ← a + weight·(w − a)`, or a copy at weight 1.
#[inline]
pub(crate) fn blend(a: &mut [f32], w: &[f32], weight: f32) {
    if weight >= 1.0 {
        a.copy_from_slice(w);
    } else {
        for (a, &w) in a.iter_mut().zip(w) {
            *a += (w - *a) * weight;
        }
    }
}

/// A flat f32 buffer of `len` values to be written over: `reuse` where it is one no other
/// handle shares, else a new one.
pub(crate) fn flat_buffer(len: usize, reuse: Option<FlexTensor>) -> FlexTensor {
    let reusable =
        |t: &FlexTensor| t.dtype() == DType::F32 && t.is_unique() && t.layout().contiguous_offsets() == Some((0, len));
    match reuse {
        Some(buffer) if reusable(&buffer) => buffer,
        _ => FlexTensor::from_data(burn::tensor::TensorData::new(vec![0f32; len], [len])),
    }
}

/// `out` cut into consecutive ranges of `lens` values, one per part.
pub(crate) fn split_ranges<'a>(mut out: &'a mut [f32], lens: &[usize]) -> Vec<&'a mut [f32]> {
    lens.iter()
        .map(|&n| {
            let (range, rest) = std::mem::take(&mut out).split_at_mut(n);
            out = rest;
            range
        })
        .collect()
}

/// `Σ v²` of one chunk of a flat buffer, in f64.
pub(crate) fn chunk_squares(chunk: &[f32]) -> f64 {
    super::sums::sum_f64(chunk, |v| f64::from(v) * f64::from(v))
}

/// The chunks' sums added in chunk order, so that the norm does not depend on how rayon split
/// the work (a resumed run must repeat it to the bit), as a `[1]` f32 tensor.
pub(crate) fn total_squares(chunks: &[f64]) -> FlexTensor {
    let total: f64 = chunks.iter().sum();
    FlexTensor::from_data(burn::tensor::TensorData::new(vec![total as f32], [1]))
}

/// Copies `part`'s elements in row-major order into `out`, a contiguous run of its storage at a
/// time (a convolution's weight gradient, a `swap_dims(0, 1)` view, has runs of `k·k`).
pub(crate) fn copy_row_major(part: &FlexTensor, out: &mut [f32]) {
    if out.is_empty() {
        return;
    }
    let storage = part.storage::<f32>();
    let blocks = part.layout().strided_blocks();
    let block_len = blocks.block_len();
    for (start, out) in blocks.block_starts().zip(out.chunks_exact_mut(block_len)) {
        out.copy_from_slice(&storage[start..start + block_len]);
    }
}

/// A contiguous f32 tensor's elements.
pub(crate) fn f32_slice(t: &FlexTensor) -> Option<&[f32]> {
    t.as_slice::<f32>()
}

/// A contiguous f32 tensor's elements, writable (copied first if the storage is shared).
pub(crate) fn contiguous_mut(t: &mut FlexTensor) -> &mut [f32] {
    let (start, end) = t.layout().contiguous_offsets().expect("checked contiguous");
    &mut t.storage_mut::<f32>()[start..end]
}

impl OptimiserKernels for Flex {
    fn sum_of_squares(x: FloatTensor<Self>) -> FloatTensor<Self> {
        let Some(values) = f32_slice(&x) else { return portable::sum_of_squares::<Self>(x) };
        let chunks: Vec<f64> = values.par_chunks(CHUNK).map(chunk_squares).collect();
        total_squares(&chunks)
    }

    fn concat_flat_with_squares(
        parts: Vec<FloatTensor<Self>>,
        reuse: Option<FloatTensor<Self>>,
        device: &Self::Device,
    ) -> [FloatTensor<Self>; 2] {
        if parts.iter().any(|p| p.dtype() != DType::F32 || !p.layout().has_positive_strides()) {
            return crate::ops::optimiser::concat_flat_then_squares::<Self>(parts, reuse, device);
        }
        let lens: Vec<usize> = parts.iter().map(|p| p.layout().num_elements()).collect();
        let starts = crate::ops::elements::starts_of(&lens);
        let mut flat = flat_buffer(lens.iter().sum(), reuse);
        let out = contiguous_mut(&mut flat);
        // A few gradients are views (burn's own convolutions and transposed convolutions):
        // copied into their ranges first, as `concat_flat` copies them.
        let slices: Vec<Option<&[f32]>> = parts.iter().map(f32_slice).collect();
        let views: Vec<_> =
            parts.iter().zip(&slices).zip(split_ranges(out, &lens)).filter(|((_, slice), _)| slice.is_none()).collect();
        views.into_par_iter().for_each(|((part, _), out)| copy_row_major(part, out));
        // Each chunk of the buffer is filled from the contiguous parts it spans, then summed
        // while it is in the cache: the chunks and their order are `sum_of_squares`'s, so are
        // the bits.
        let chunks: Vec<f64> = out
            .par_chunks_mut(CHUNK)
            .enumerate()
            .map(|(index, chunk)| {
                let begin = index * CHUNK;
                let mut part = starts.partition_point(|&start| start <= begin) - 1;
                let mut filled = 0;
                while filled < chunk.len() {
                    let from = begin + filled - starts[part];
                    let take = (lens[part] - from).min(chunk.len() - filled);
                    if let Some(slice) = slices[part] {
                        chunk[filled..][..take].copy_from_slice(&slice[from..][..take]);
                    }
                    filled += take;
                    part += 1;
                }
                chunk_squares(chunk)
            })
            .collect();
        [flat, total_squares(&chunks)]
    }

    fn concat_flat(
        parts: Vec<FloatTensor<Self>>,
        reuse: Option<FloatTensor<Self>>,
        device: &Self::Device,
    ) -> FloatTensor<Self> {
        let plain = parts.iter().all(|p| p.dtype() == DType::F32 && p.layout().has_positive_strides());
        if !plain {
            return portable::concat_flat::<Self>(parts, device);
        }
        let lens: Vec<usize> = parts.iter().map(|p| p.layout().num_elements()).collect();
        let mut flat = flat_buffer(lens.iter().sum(), reuse);
        // Each part's range of the output, handed out in order, then filled in parallel.
        let out = contiguous_mut(&mut flat);
        parts.par_iter().zip(split_ranges(out, &lens)).for_each(|(part, out)| copy_row_major(part, out));
        flat
    }

    fn adam_update(
        weights: FloatTensor<Self>,
        flat: &mut FlatBuffers<Self>,
        offset: usize,
        scale: &FloatTensor<Self>,
        step: &AdamStep,
    ) -> FloatTensor<Self> {
        let all_f32 = [&weights, &flat.grads, &flat.moment_1, &flat.moment_2, scale]
            .into_iter()
            .chain(flat.average.as_ref())
            .all(|t| t.dtype() == DType::F32 && t.is_contiguous());
        if !all_f32 {
            return portable::adam_update::<Self>(weights, flat, offset, scale, step);
        }
        let scale = f32_slice(scale).expect("checked above")[0];
        let mut weights = weights;
        let w = contiguous_mut(&mut weights);
        let range = offset..offset + w.len();
        let g = &f32_slice(&flat.grads).expect("checked above")[range.clone()];
        let m = &mut contiguous_mut(&mut flat.moment_1)[range.clone()];
        let v = &mut contiguous_mut(&mut flat.moment_2)[range.clone()];
        let update = Update::new(step, scale);
        match (flat.average.as_mut(), step.ema_weight) {
            (Some(average), Some(weight)) => {
                let a = &mut contiguous_mut(average)[range];
                (w.par_chunks_mut(CHUNK), g.par_chunks(CHUNK), m.par_chunks_mut(CHUNK), v.par_chunks_mut(CHUNK))
                    .into_par_iter()
                    .zip(a.par_chunks_mut(CHUNK))
                    .for_each(|((w, g, m, v), a)| {
                        update.apply(w, g, m, v);
                        blend(a, w, weight);
                    });
            }
            _ => {
                (w.par_chunks_mut(CHUNK), g.par_chunks(CHUNK), m.par_chunks_mut(CHUNK), v.par_chunks_mut(CHUNK))
                    .into_par_iter()
                    .for_each(|(w, g, m, v)| update.apply(w, g, m, v));
            }
        }
        weights
    }
}

#[cfg(test)]
mod tests {
    use burn::prelude::*;
    use burn::tensor::TensorPrimitive;

    use super::*;

    fn values(n: usize, seed: f32) -> Vec<f32> {
        (0..n).map(|i| ((i as f32 * 0.7548 + seed).sin() * 43758.547).fract() - 0.5).collect()
    }

    fn flex(values: Vec<f32>) -> FlexTensor {
        let n = values.len();
        Tensor::<Flex, 1>::from_data(TensorData::new(values, [n]), &Default::default()).into_primitive().tensor()
    }

    fn read(t: &FlexTensor) -> Vec<f32> {
        t.as_slice::<f32>().unwrap().to_vec()
    }

    /// Two parameters (one spanning several chunks) through three updates, with decay, a
    /// clipping scale and an average: the fused pass gives the portable operations' numbers to
    /// the bit.
    #[test]
    fn the_fused_pass_equals_the_portable_operations() {
        let sizes = [3 * CHUNK + 17, 40];
        let len: usize = sizes.iter().sum();
        let buffers = || FlatBuffers::<Flex> {
            grads: flex(values(len, 1.0)),
            moment_1: flex(values(len, 2.0).iter().map(|v| v * 1e-2).collect()),
            moment_2: flex(values(len, 3.0).iter().map(|v| v * v * 1e-3).collect()),
            average: Some(flex(values(len, 4.0))),
            scalars: None,
        };
        let (mut fused, mut portable) = (buffers(), buffers());
        let scale = flex(vec![0.37]);
        let mut weights_fused: Vec<FlexTensor> = vec![flex(values(sizes[0], 5.0)), flex(values(sizes[1], 6.0))];
        let mut weights_portable = weights_fused.clone();
        for time in 1..=3 {
            let step = AdamStep {
                lr: 1e-3,
                beta_1: 0.95,
                beta_2: 0.999,
                epsilon: 1e-8,
                weight_decay: 1e-6,
                time,
                ema_weight: Some(if time == 1 { 1.0 } else { 0.25 }),
            };
            let mut offset = 0;
            for (w_fused, w_portable) in weights_fused.iter_mut().zip(&mut weights_portable) {
                let n = w_fused.layout().num_elements();
                *w_fused = Flex::adam_update(w_fused.clone(), &mut fused, offset, &scale, &step);
                *w_portable = portable::adam_update::<Flex>(w_portable.clone(), &mut portable, offset, &scale, &step);
                offset += n;
            }
        }
        for (a, b) in weights_fused.iter().zip(&weights_portable) {
            assert_eq!(read(a), read(b));
        }
        assert_eq!(read(&fused.moment_1), read(&portable.moment_1));
        assert_eq!(read(&fused.moment_2), read(&portable.moment_2));
        assert_eq!(read(fused.average.as_ref().unwrap()), read(portable.average.as_ref().unwrap()));
        assert_ne!(read(&weights_fused[0]), values(sizes[0], 5.0), "the weights moved");
    }

    #[test]
    fn the_sum_of_squares_matches_the_portable_one() {
        let x = values(5 * CHUNK + 3, 7.0);
        let exact: f64 = x.iter().map(|v| f64::from(*v) * f64::from(*v)).sum();
        let ours = read(&Flex::sum_of_squares(flex(x.clone())))[0];
        let portable =
            Tensor::<Flex, 1>::from_primitive(TensorPrimitive::Float(portable::sum_of_squares::<Flex>(flex(x))))
                .into_scalar();
        assert!((f64::from(ours) - exact).abs() < 1e-7 * exact, "{ours} vs {exact}");
        assert!((f64::from(portable) - exact).abs() < 1e-5 * exact, "{portable} vs {exact}");
    }

    /// A permuted view (as burn hands convolution weight gradients back) and a plain tensor,
    /// gathered into a fresh buffer and over an old one: row-major order, every old value gone.
    #[test]
    fn concat_flat_reads_views_in_row_major_order_and_writes_over_the_spare() {
        let device = Default::default();
        let matrix = Tensor::<Flex, 3>::from_data(TensorData::new(values(2 * 3 * 4, 8.0), [2, 3, 4]), &device);
        let view = matrix.clone().swap_dims(0, 1);
        let vector = Tensor::<Flex, 1>::from_data(TensorData::new(values(5, 9.0), [5]), &device);
        let mut expected: Vec<f32> = view.clone().into_data().to_vec().unwrap();
        expected.extend(values(5, 9.0));
        let parts = || vec![view.clone().into_primitive().tensor(), vector.clone().into_primitive().tensor()];
        let fresh = Flex::concat_flat(parts(), None, &device);
        assert_eq!(read(&fresh), expected);
        let spare = flex(vec![f32::NAN; expected.len()]);
        let reused = Flex::concat_flat(parts(), Some(spare), &device);
        assert_eq!(read(&reused), expected);
    }

    /// Gathering with the squares gives the gathered buffer and its `sum_of_squares` to the
    /// bit, for parts that cross the chunks' boundaries (and an empty one) gathered over a
    /// spare buffer, with and without a view among them.
    #[test]
    fn the_squares_read_while_gathering_equal_the_sum_of_the_gathered_buffer() {
        let device = Default::default();
        let sizes = [CHUNK - 3, 0, 2 * CHUNK + 5, 7, CHUNK];
        let contiguous = || sizes.iter().zip(0..).map(|(&n, i)| flex(values(n, i as f32))).collect::<Vec<_>>();
        let matrix = Tensor::<Flex, 3>::from_data(TensorData::new(values(2 * 3 * 4, 8.0), [2, 3, 4]), &device);
        let with_a_view = || {
            let mut parts = contiguous();
            parts.insert(1, matrix.clone().swap_dims(0, 1).into_primitive().tensor());
            parts
        };
        let spare = |len: usize| flex(vec![f32::NAN; len]);
        for (parts, case) in [(contiguous(), "contiguous parts"), (with_a_view(), "a view among the parts")] {
            let len = parts.iter().map(|p| p.layout().num_elements()).sum();
            let expected = Flex::concat_flat(parts.clone(), None, &device);
            let expected_squares = read(&Flex::sum_of_squares(expected.clone()));
            let [flat, squares] = Flex::concat_flat_with_squares(parts, Some(spare(len)), &device);
            assert_eq!(read(&flat), read(&expected), "{case}: gathered");
            assert_eq!(read(&squares), expected_squares, "{case}: squares");
        }
    }
}
