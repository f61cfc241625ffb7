//! The unfolding of images into columns (im2col) and the folding back (col2im), and the
//! geometry of a convolution's chunks of images.

#![expect(unsafe_code, reason = "the unfold writes uninitialised columns it fills whole")]

use std::mem::MaybeUninit;
use std::ops::Range;

use burn::backend::flex::FlexTensor;
use burn::tensor::DType;
use burn::tensor::ops::ConvOptions;
use gemm::Parallelism;
use rayon::prelude::*;

/// The fewest columns a chunk's products are given: smaller products run below the matrix
/// kernels' rate on the late layers' few positions (9 per image in ResNet-18's last stage).
pub(crate) const MIN_CHUNK_COLUMNS: usize = 256;

/// Output lines shorter than this are unfolded and folded back through a table of window
/// offsets ([`Geometry::window_offsets`]) rather than copied as runs: a run of a few values
/// (3 in ResNet-18's last stage) costs more in bookkeeping than in copying.
pub(crate) const SHORT_LINE: usize = 16;

/// The most chunks a batch is cut into, which bounds the weight gradient's partial products held
/// at once.
pub(crate) const MAX_CHUNKS: usize = 32;

/// The geometry of one convolution this module computes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Geometry {
    pub(crate) batch: usize,
    pub(crate) channels: usize,
    pub(crate) height: usize,
    pub(crate) width: usize,
    pub(crate) outputs: usize,
    pub(crate) kernel: [usize; 2],
    pub(crate) stride: [usize; 2],
    pub(crate) padding: [usize; 2],
    pub(crate) out: [usize; 2],
}

impl Geometry {
    /// The geometry of an input of shape `input` by `weight` under `options`, when this module
    /// computes it: an f32 weight, one group, no dilation, nothing empty.
    pub(crate) fn of(input: [usize; 4], weight: &FlexTensor, options: &ConvOptions<2>) -> Option<Self> {
        let plain = options.groups == 1 && options.dilation == [1, 1] && !options.stride.contains(&0);
        if weight.dtype() != DType::F32 || !plain {
            return None;
        }
        let [batch, channels, height, width] = input;
        let [outputs, weight_channels, kh, kw] = dims4(weight)?;
        if weight_channels != channels || [batch, channels, height, width, outputs, kh, kw].contains(&0) {
            return None;
        }
        let out =
            |size: usize, axis: usize, k: usize| output_size(size, k, options.stride[axis], options.padding[axis]);
        let out = [out(height, 0, kh)?, out(width, 1, kw)?];
        Some(Self {
            batch,
            channels,
            height,
            width,
            outputs,
            kernel: [kh, kw],
            stride: options.stride,
            padding: options.padding,
            out,
        })
    }

    /// Whether `output_grad` has this convolution's output shape, `[N, O, Ho, Wo]`, in f32.
    pub(crate) fn is_output(&self, output_grad: &FlexTensor) -> bool {
        output_grad.dtype() == DType::F32
            && dims4(output_grad) == Some([self.batch, self.outputs, self.out[0], self.out[1]])
    }

    /// Output positions per image.
    pub(crate) fn positions(&self) -> usize {
        self.out[0] * self.out[1]
    }

    /// Values per input image.
    pub(crate) fn input_size(&self) -> usize {
        self.channels * self.height * self.width
    }

    /// Values per output image.
    pub(crate) fn output_size(&self) -> usize {
        self.outputs * self.positions()
    }

    /// Rows of the unfolded input: every input channel at every kernel offset.
    pub(crate) fn rows(&self) -> usize {
        self.channels * self.kernel[0] * self.kernel[1]
    }

    /// Images per chunk: enough for [`MIN_CHUNK_COLUMNS`] columns and for as many columns as
    /// the weight has rows (each chunk reads the whole weight, and the weight gradient adds one
    /// product of its size per chunk: where the weight outweighs the input, as in the U-Net's
    /// convolutions, the batch stays one chunk), and few enough chunks ([`MAX_CHUNKS`]).
    /// Depends on the shapes only, so the sums' order does too.
    pub(crate) fn chunk_images(&self) -> usize {
        let for_columns = MIN_CHUNK_COLUMNS.max(self.outputs).div_ceil(self.positions());
        for_columns.max(self.batch.div_ceil(MAX_CHUNKS)).min(self.batch)
    }

    /// The images of chunk `index`.
    pub(crate) fn chunk(&self, index: usize) -> Range<usize> {
        let per = self.chunk_images();
        index * per..((index + 1) * per).min(self.batch)
    }

    /// How many chunks the batch is cut into.
    pub(crate) fn chunk_count(&self) -> usize {
        self.batch.div_ceil(self.chunk_images())
    }

    /// Whether each chunk's work is spread over the cores: where there are fewer chunks than
    /// threads; otherwise the chunks run side by side, one core each. Either way the bits are
    /// the same: gemm splits a product's output tiles, never its sums, and the unfold and fold
    /// write each row or plane from one task.
    pub(crate) fn spreads_chunks(&self) -> bool {
        self.chunk_count() < rayon::current_num_threads()
    }

    /// How each chunk's products use the cores ([`Geometry::spreads_chunks`]).
    pub(crate) fn parallelism(&self) -> Parallelism {
        if self.spreads_chunks() { Parallelism::Rayon(0) } else { Parallelism::None }
    }

    /// `work` on each `len`-long piece of `values` (a chunk's rows or planes) with its index, on
    /// every core or on this one ([`Geometry::spreads_chunks`]).
    pub(crate) fn for_each_piece<T: Send>(
        &self,
        values: &mut [T],
        len: usize,
        work: impl Fn((usize, &mut [T])) + Sync + Send,
    ) {
        if self.spreads_chunks() {
            values.par_chunks_mut(len).enumerate().for_each(work);
        } else {
            values.chunks_mut(len).enumerate().for_each(work);
        }
    }

    /// Whether output lines are short enough to unfold through [`Geometry::window_offsets`].
    pub(crate) fn has_short_lines(&self) -> bool {
        self.out[1] < SHORT_LINE
    }

    /// For every kernel offset `(i, j)` and output position `(oy, ox)`, in that order
    /// (`[kh·kw, Ho·Wo]`), the offset in an input plane the window reads there, or
    /// `usize::MAX` where it reads the padding.
    pub(crate) fn window_offsets(&self) -> Vec<usize> {
        let ([kh, kw], [out_h, out_w]) = (self.kernel, self.out);
        let column =
            |ox: usize, j: usize| (ox * self.stride[1] + j).checked_sub(self.padding[1]).filter(|&x| x < self.width);
        let mut offsets = Vec::with_capacity(kh * kw * out_h * out_w);
        for i in 0..kh {
            for j in 0..kw {
                for oy in 0..out_h {
                    let y = self.input_row(oy, i);
                    offsets.extend((0..out_w).map(|ox| match (y, column(ox, j)) {
                        (Some(y), Some(x)) => y * self.width + x,
                        _ => usize::MAX,
                    }));
                }
            }
        }
        offsets
    }

    /// For kernel row offset `i` and output row `oy`, the input row it reads, if inside.
    pub(crate) fn input_row(&self, oy: usize, i: usize) -> Option<usize> {
        (oy * self.stride[0] + i).checked_sub(self.padding[0]).filter(|&y| y < self.height)
    }

    /// For kernel column offset `j`, the output columns whose input column is inside:
    /// `lo..hi`, input column `ox·stride + j − padding`.
    pub(crate) fn inside_columns(&self, j: usize) -> (usize, usize) {
        let (s, p) = (self.stride[1], self.padding[1]);
        let lo = p.saturating_sub(j).div_ceil(s).min(self.out[1]);
        // Largest ox with ox·s + j − p < width.
        let hi = if self.width + p > j { ((self.width + p - j - 1) / s + 1).min(self.out[1]) } else { 0 };
        (lo, hi.max(lo))
    }
}

/// The input lines of a chunk of images, read as contiguous runs: with a horizontal stride
/// `s > 1`, each line is first split into its `s` phases (the columns `≡ r mod s`, one after
/// another), so that every kernel offset reads a contiguous run of one phase rather than every
/// `s`-th value (ResNet-18's 7×7 stem and its stride-2 layers).
pub(crate) struct InputLines<'a> {
    /// The whole batch's input.
    pub(crate) x: &'a [f32],
    /// The chunk's lines split into phases, when the stride is over 1.
    pub(crate) phased: Option<Vec<f32>>,
    /// The chunk's first image.
    pub(crate) first_image: usize,
    pub(crate) geometry: Geometry,
}

impl<'a> InputLines<'a> {
    pub(crate) fn new(x: &'a [f32], g: &Geometry, images: Range<usize>) -> Self {
        let s = g.stride[1];
        let phased = (s > 1).then(|| {
            let phase_len = g.width.div_ceil(s);
            let planes = &x[images.start * g.input_size()..images.end * g.input_size()];
            let mut phased = vec![0f32; planes.len() / g.width * s * phase_len];
            for (line, out) in planes.chunks_exact(g.width).zip(phased.chunks_exact_mut(s * phase_len)) {
                for (r, phase) in out.chunks_exact_mut(phase_len).enumerate() {
                    for (d, &v) in phase.iter_mut().zip(line[r.min(line.len())..].iter().step_by(s)) {
                        *d = v;
                    }
                }
            }
            phased
        });
        Self { x, phased, first_image: images.start, geometry: *g }
    }

    /// The `len` values of line `y` of channel `c` of the chunk's image `slot` at columns
    /// `first`, `first + s`, … (`s` the horizontal stride).
    pub(crate) fn run(&self, slot: usize, c: usize, y: usize, first: usize, len: usize) -> &[f32] {
        let g = &self.geometry;
        let line = (slot * g.channels + c) * g.height + y;
        match &self.phased {
            None => &self.x[(self.first_image * g.channels * g.height + line) * g.width + first..][..len],
            Some(phased) => {
                let (s, phase_len) = (g.stride[1], g.width.div_ceil(g.stride[1]));
                &phased[line * s * phase_len + first % s * phase_len + first / s..][..len]
            }
        }
    }
}

/// The unfolded input of `images`, `[C·kh·kw, images·Ho·Wo]`: row `(c, i, j)` holds, for every
/// image and output position, the input value under kernel offset `(i, j)` of channel `c` (0 in
/// the padding).
pub(crate) fn im2col(x: &[f32], g: &Geometry, images: Range<usize>) -> Vec<f32> {
    if g.has_short_lines() { im2col_by_offsets(x, g, images) } else { im2col_by_runs(x, g, images) }
}

/// [`im2col`] where output lines are long: each line of values copied as runs.
pub(crate) fn im2col_by_runs(x: &[f32], g: &Geometry, images: Range<usize>) -> Vec<f32> {
    let (positions, [kh, kw], [out_h, out_w]) = (g.positions(), g.kernel, g.out);
    let columns = images.len() * positions;
    let lines = InputLines::new(x, g, images.clone());
    let zero = MaybeUninit::new(0f32);
    let unfold_row = |(row, out): (usize, &mut [MaybeUninit<f32>])| {
        let (c, i, j) = (row / (kh * kw), row / kw % kh, row % kw);
        let (lo, hi) = g.inside_columns(j);
        for slot in 0..images.len() {
            for oy in 0..out_h {
                let dst = &mut out[slot * positions + oy * out_w..][..out_w];
                let Some(y) = g.input_row(oy, i) else {
                    dst.fill(zero);
                    continue;
                };
                dst[..lo].fill(zero);
                dst[hi..].fill(zero);
                if lo == hi {
                    // The whole output row reads the padding.
                    continue;
                }
                let first = lo * g.stride[1] + j - g.padding[1];
                dst[lo..hi].write_copy_of_slice(lines.run(slot, c, y, first, hi - lo));
            }
        }
    };
    let fill = |cols: &mut [MaybeUninit<f32>]| g.for_each_piece(cols, columns, unfold_row);
    // SAFETY: every (image, output row) segment of every row is written above: zeros outside
    // the input, its values inside (`lo..hi` holds exactly `hi − lo` values of the line).
    unsafe { written_by(g.rows() * columns, fill) }
}

/// [`im2col`] where output lines are short: each value read through the window offsets.
pub(crate) fn im2col_by_offsets(x: &[f32], g: &Geometry, images: Range<usize>) -> Vec<f32> {
    let (positions, windows, plane_size) = (g.positions(), g.kernel[0] * g.kernel[1], g.height * g.width);
    let columns = images.len() * positions;
    let offsets = g.window_offsets();
    let unfold_row = |(row, out): (usize, &mut [MaybeUninit<f32>])| {
        let (c, window) = (row / windows, row % windows);
        let offsets = &offsets[window * positions..][..positions];
        for (n, out) in images.clone().zip(out.chunks_exact_mut(positions)) {
            let plane = &x[(n * g.channels + c) * plane_size..][..plane_size];
            for (d, &offset) in out.iter_mut().zip(offsets) {
                d.write(plane.get(offset).copied().unwrap_or(0.0));
            }
        }
    };
    let fill = |cols: &mut [MaybeUninit<f32>]| g.for_each_piece(cols, columns, unfold_row);
    // SAFETY: every row holds `positions` values per image, each written above.
    unsafe { written_by(g.rows() * columns, fill) }
}

/// Adds the unfolded gradient `dcols` of `images` (`[C·kh·kw, images·Ho·Wo]`) onto their input
/// positions in `dx` (`[images, C, H, W]`, zeros on entry), in a fixed order.
/// Each input value receives its sums in one order, by kernel offset `(i, j)` and then by
/// output position, whichever way the lines are walked.
pub(crate) fn col2im(dcols: &[f32], g: &Geometry, images: Range<usize>, dx: &mut [f32]) {
    if g.has_short_lines() { col2im_by_offsets(dcols, g, images, dx) } else { col2im_by_runs(dcols, g, images, dx) }
}

/// [`col2im`] where output lines are short: each value added through the window offsets.
pub(crate) fn col2im_by_offsets(dcols: &[f32], g: &Geometry, images: Range<usize>, dx: &mut [f32]) {
    let (positions, windows, plane_size) = (g.positions(), g.kernel[0] * g.kernel[1], g.height * g.width);
    let columns = images.len() * positions;
    let offsets = g.window_offsets();
    let fold_plane = |(index, plane): (usize, &mut [f32])| {
        let (slot, c) = (index / g.channels, index % g.channels);
        for (window, offsets) in offsets.chunks_exact(positions).enumerate() {
            let row = &dcols[(c * windows + window) * columns + slot * positions..][..positions];
            for (&offset, v) in offsets.iter().zip(row) {
                if let Some(d) = plane.get_mut(offset) {
                    *d += v;
                }
            }
        }
    };
    g.for_each_piece(dx, plane_size, fold_plane);
}

/// [`col2im`] where output lines are long: each line of values added as runs.
pub(crate) fn col2im_by_runs(dcols: &[f32], g: &Geometry, images: Range<usize>, dx: &mut [f32]) {
    let (positions, [kh, kw], [out_h, out_w]) = (g.positions(), g.kernel, g.out);
    let (columns, plane_size) = (images.len() * positions, g.height * g.width);
    let fold_plane = |(index, plane): (usize, &mut [f32])| {
        let (slot, c) = (index / g.channels, index % g.channels);
        for i in 0..kh {
            for j in 0..kw {
                let row = &dcols[((c * kh + i) * kw + j) * columns + slot * positions..][..positions];
                let (lo, hi) = g.inside_columns(j);
                if lo == hi {
                    continue;
                }
                let first = lo * g.stride[1] + j - g.padding[1];
                for oy in 0..out_h {
                    let Some(y) = g.input_row(oy, i) else { continue };
                    let line = &mut plane[y * g.width + first..(y + 1) * g.width];
                    let src = &row[oy * out_w + lo..oy * out_w + hi];
                    if g.stride[1] == 1 {
                        for (d, v) in line.iter_mut().zip(src) {
                            *d += v;
                        }
                    } else {
                        for (d, v) in line.iter_mut().step_by(g.stride[1]).zip(src) {
                            *d += v;
                        }
                    }
                }
            }
        }
    };
    g.for_each_piece(dx, plane_size, fold_plane);
}

/// The output size along one axis of `size` inputs, under a window of `kernel` moved by
/// `stride` over the input padded by `padding` on both sides (rounded down; `None` where the
/// window does not fit).
pub(crate) fn output_size(size: usize, kernel: usize, stride: usize, padding: usize) -> Option<usize> {
    (size + 2 * padding).checked_sub(kernel).map(|s| s / stride + 1)
}

/// A 4-D tensor's dimensions.
pub(crate) fn dims4(t: &FlexTensor) -> Option<[usize; 4]> {
    t.layout().shape().as_slice().try_into().ok()
}

/// A vector of `len` values, each written by `fill`: buffers that are written whole are not
/// zeroed first.
///
/// # Safety
/// `fill` must initialise every element of the slice it is given.
pub(crate) unsafe fn written_by(len: usize, fill: impl FnOnce(&mut [MaybeUninit<f32>])) -> Vec<f32> {
    let mut values = Vec::with_capacity(len);
    // In this crate's tests the buffer starts as NaN, so that an element `fill` missed shows in
    // the results (fresh pages are zeros, which would hide a missed element of the padding).
    #[cfg(test)]
    values.spare_capacity_mut()[..len].fill(MaybeUninit::new(f32::NAN));
    fill(&mut values.spare_capacity_mut()[..len]);
    // SAFETY: `fill` initialised the first `len` elements (the caller's promise).
    unsafe { values.set_len(len) };
    values
}
