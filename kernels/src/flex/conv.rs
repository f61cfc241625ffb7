//! The CPU backend's 2-D convolution as matrix products over the unfolded input (im2col), cut
//! into chunks of whole images that the cores take in turn.
//!
//! burn-flex computes the input gradient as a transposed convolution whose batch loop and matrix
//! products run on one thread, and the weight gradient as a convolution of swapped inputs whose
//! product is `C_out × 9` wide; on ResNet-18's layers both take several times the forward
//! pass. Here, for each chunk of images, with `cols` its unfolded input (`[C·kh·kw, n·Ho·Wo]`)
//! and `dY` its output gradient laid out `[C_out, n·Ho·Wo]`:
//! - forward: `Y = W · cols`;
//! - weight gradient: `dW = Σ dY · colsᵀ`, the chunks' products summed in chunk order;
//! - input gradient: `dcols = Wᵀ · dY`, folded back onto the chunk's images (col2im).
//!
//! A chunk holds enough images for a product of at least [`MIN_CHUNK_COLUMNS`] columns, so its
//! unfolded input (a few MB at most) is still in the caches when the product reads it, where
//! the whole batch's (136 MB a pass at ResNet-18's batch of 16) would go through memory twice;
//! each chunk's work runs on one core. Where there are fewer chunks than threads (a batch of one
//! chunk: ResNet-18's last stage, the U-Net's layers), each chunk's work runs on every core
//! instead.
//!
//! The unfold and the fold walk each output line as one run of values where lines are long, and
//! value by value through a table of window offsets where they are short ([`SHORT_LINE`]: the
//! last stages' lines of 3 to 11 values), with the same values and the same sums either way.
//!
//! Every sum runs in one fixed order whatever the thread count: the chunks depend on the shapes
//! only, a product's reduction is never split among threads (gemm splits the output's tiles), and
//! the weight gradient's partial products are added in chunk order. So on one machine a step
//! repeats to the bit and a resume stays exact. Another CPU model may block the sums differently
//! (gemm sizes them from the caches). Other shapes than these (groups, dilation, non-f32 dtypes)
//! take burn's own operations.
//!
//! # Safety
//! Two kinds of unsafe code, both local: the gemm crate's raw pointers and strides (checked
//! against the slices' lengths before each call), and output buffers left uninitialised until
//! written whole ([`written_by`]: each caller says why every element is written).
#![expect(unsafe_code, reason = "gemm takes raw pointers; whole-written buffers are not zeroed first")]

use std::borrow::Cow;
use std::mem::MaybeUninit;
use std::ops::Range;

use burn::backend::Flex;
use burn::backend::flex::FlexTensor;
use burn::tensor::ops::{ConvOptions, FloatTensor, ModuleOps};
use burn::tensor::{DType, Shape, TensorData};
use gemm::Parallelism;
use rayon::prelude::*;

/// The fewest columns a chunk's products are given: smaller products run below the matrix
/// kernels' rate on the late layers' few positions (9 per image in ResNet-18's last stage).
const MIN_CHUNK_COLUMNS: usize = 256;

/// Output lines shorter than this are unfolded and folded back through a table of window
/// offsets ([`Geometry::window_offsets`]) rather than copied as runs: a run of a few values
/// (3 in ResNet-18's last stage) costs more in bookkeeping than in copying.
const SHORT_LINE: usize = 16;

/// The most chunks a batch is cut into, which bounds the weight gradient's partial products held
/// at once.
const MAX_CHUNKS: usize = 32;

/// The geometry of one convolution this module computes.
#[derive(Debug, Clone, Copy)]
struct Geometry {
    batch: usize,
    channels: usize,
    height: usize,
    width: usize,
    outputs: usize,
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
    out: [usize; 2],
}

impl Geometry {
    /// The geometry of an input of shape `input` by `weight` under `options`, when this module
    /// computes it: an f32 weight, one group, no dilation, nothing empty.
    fn of(input: [usize; 4], weight: &FlexTensor, options: &ConvOptions<2>) -> Option<Self> {
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
    fn is_output(&self, output_grad: &FlexTensor) -> bool {
        output_grad.dtype() == DType::F32
            && dims4(output_grad) == Some([self.batch, self.outputs, self.out[0], self.out[1]])
    }

    /// Output positions per image.
    fn positions(&self) -> usize {
        self.out[0] * self.out[1]
    }

    /// Values per input image.
    fn input_size(&self) -> usize {
        self.channels * self.height * self.width
    }

    /// Values per output image.
    fn output_size(&self) -> usize {
        self.outputs * self.positions()
    }

    /// Rows of the unfolded input: every input channel at every kernel offset.
    fn rows(&self) -> usize {
        self.channels * self.kernel[0] * self.kernel[1]
    }

    /// Images per chunk: enough for [`MIN_CHUNK_COLUMNS`] columns and for as many columns as
    /// the weight has rows (each chunk reads the whole weight, and the weight gradient adds one
    /// product of its size per chunk: where the weight outweighs the input, as in the U-Net's
    /// convolutions, the batch stays one chunk), and few enough chunks ([`MAX_CHUNKS`]).
    /// Depends on the shapes only, so the sums' order does too.
    fn chunk_images(&self) -> usize {
        let for_columns = MIN_CHUNK_COLUMNS.max(self.outputs).div_ceil(self.positions());
        for_columns.max(self.batch.div_ceil(MAX_CHUNKS)).min(self.batch)
    }

    /// The images of chunk `index`.
    fn chunk(&self, index: usize) -> Range<usize> {
        let per = self.chunk_images();
        index * per..((index + 1) * per).min(self.batch)
    }

    /// How many chunks the batch is cut into.
    fn chunk_count(&self) -> usize {
        self.batch.div_ceil(self.chunk_images())
    }

    /// Whether each chunk's work is spread over the cores: where there are fewer chunks than
    /// threads; otherwise the chunks run side by side, one core each. Either way the bits are
    /// the same: gemm splits a product's output tiles, never its sums, and the unfold and fold
    /// write each row or plane from one task.
    fn spreads_chunks(&self) -> bool {
        self.chunk_count() < rayon::current_num_threads()
    }

    /// How each chunk's products use the cores ([`Geometry::spreads_chunks`]).
    fn parallelism(&self) -> Parallelism {
        if self.spreads_chunks() { Parallelism::Rayon(0) } else { Parallelism::None }
    }

    /// `work` on each `len`-long piece of `values` (a chunk's rows or planes) with its index, on
    /// every core or on this one ([`Geometry::spreads_chunks`]).
    fn for_each_piece<T: Send>(&self, values: &mut [T], len: usize, work: impl Fn((usize, &mut [T])) + Sync + Send) {
        if self.spreads_chunks() {
            values.par_chunks_mut(len).enumerate().for_each(work);
        } else {
            values.chunks_mut(len).enumerate().for_each(work);
        }
    }

    /// Whether output lines are short enough to unfold through [`Geometry::window_offsets`].
    fn has_short_lines(&self) -> bool {
        self.out[1] < SHORT_LINE
    }

    /// For every kernel offset `(i, j)` and output position `(oy, ox)`, in that order
    /// (`[kh·kw, Ho·Wo]`), the offset in an input plane the window reads there, or
    /// `usize::MAX` where it reads the padding.
    fn window_offsets(&self) -> Vec<usize> {
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
    fn input_row(&self, oy: usize, i: usize) -> Option<usize> {
        (oy * self.stride[0] + i).checked_sub(self.padding[0]).filter(|&y| y < self.height)
    }

    /// For kernel column offset `j`, the output columns whose input column is inside:
    /// `lo..hi`, input column `ox·stride + j − padding`.
    fn inside_columns(&self, j: usize) -> (usize, usize) {
        let (s, p) = (self.stride[1], self.padding[1]);
        let lo = p.saturating_sub(j).div_ceil(s).min(self.out[1]);
        // Largest ox with ox·s + j − p < width.
        let hi = if self.width + p > j { ((self.width + p - j - 1) / s + 1).min(self.out[1]) } else { 0 };
        (lo, hi.max(lo))
    }
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

/// The shape of an f32 tensor of four dimensions.
pub(crate) fn f32_dims4(t: &FlexTensor) -> Option<[usize; 4]> {
    (t.dtype() == DType::F32).then(|| dims4(t)).flatten()
}

/// An f32 tensor's elements in row-major order (copied only if it is a view).
pub(crate) fn contiguous(t: &FlexTensor) -> Cow<'_, [f32]> {
    match t.as_slice::<f32>() {
        Some(values) => values.into(),
        None => {
            let copy = t.to_contiguous();
            copy.as_slice::<f32>().expect("a contiguous copy of an f32 tensor").to_vec().into()
        }
    }
}

/// A contiguous f32 tensor of `shape` holding `values`.
pub(crate) fn tensor(values: Vec<f32>, shape: impl Into<Shape>) -> FlexTensor {
    FlexTensor::from_data(TensorData::new(values, shape.into()))
}

/// A vector of `len` values, each written by `fill`: buffers that are written whole are not
/// zeroed first.
///
/// # Safety
/// `fill` must initialise every element of the slice it is given.
unsafe fn written_by(len: usize, fill: impl FnOnce(&mut [MaybeUninit<f32>])) -> Vec<f32> {
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

/// The input lines of a chunk of images, read as contiguous runs: with a horizontal stride
/// `s > 1`, each line is first split into its `s` phases (the columns `≡ r mod s`, one after
/// another), so that every kernel offset reads a contiguous run of one phase rather than every
/// `s`-th value (ResNet-18's 7×7 stem and its stride-2 layers).
struct InputLines<'a> {
    /// The whole batch's input.
    x: &'a [f32],
    /// The chunk's lines split into phases, when the stride is over 1.
    phased: Option<Vec<f32>>,
    /// The chunk's first image.
    first_image: usize,
    geometry: Geometry,
}

impl<'a> InputLines<'a> {
    fn new(x: &'a [f32], g: &Geometry, images: Range<usize>) -> Self {
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
    fn run(&self, slot: usize, c: usize, y: usize, first: usize, len: usize) -> &[f32] {
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
fn im2col(x: &[f32], g: &Geometry, images: Range<usize>) -> Vec<f32> {
    if g.has_short_lines() { im2col_by_offsets(x, g, images) } else { im2col_by_runs(x, g, images) }
}

/// [`im2col`] where output lines are long: each line of values copied as runs.
fn im2col_by_runs(x: &[f32], g: &Geometry, images: Range<usize>) -> Vec<f32> {
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
fn im2col_by_offsets(x: &[f32], g: &Geometry, images: Range<usize>) -> Vec<f32> {
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
fn col2im(dcols: &[f32], g: &Geometry, images: Range<usize>, dx: &mut [f32]) {
    if g.has_short_lines() { col2im_by_offsets(dcols, g, images, dx) } else { col2im_by_runs(dcols, g, images, dx) }
}

/// [`col2im`] where output lines are short: each value added through the window offsets.
fn col2im_by_offsets(dcols: &[f32], g: &Geometry, images: Range<usize>, dx: &mut [f32]) {
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
fn col2im_by_runs(dcols: &[f32], g: &Geometry, images: Range<usize>, dx: &mut [f32]) {
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

/// The output gradient of `images`, `[O, images·P]`, each image's positions side by side
/// (borrowed for one image, whose `[O, P]` block is that already).
fn side_by_side<'a>(dy: &'a [f32], g: &Geometry, images: Range<usize>) -> Cow<'a, [f32]> {
    let (positions, image) = (g.positions(), g.output_size());
    if images.len() == 1 {
        return dy[images.start * image..][..image].into();
    }
    let columns = images.len() * positions;
    let fill = |out: &mut [MaybeUninit<f32>]| {
        for (o, row) in out.chunks_mut(columns).enumerate() {
            for (slot, n) in images.clone().enumerate() {
                let from = &dy[(n * g.outputs + o) * positions..][..positions];
                row[slot * positions..][..positions].write_copy_of_slice(from);
            }
        }
    };
    // SAFETY: each row is one segment of `positions` values per image, all written.
    unsafe { written_by(g.outputs * columns, fill) }.into()
}

/// `dst (m × n) = lhs (m × k) · rhs (k × n)`, each operand given by its row and column strides,
/// on the cores `parallelism` gives; every element of `dst` is written (for `k ≥ 1`).
fn matmul(
    [m, n, k]: [usize; 3],
    dst: &mut [MaybeUninit<f32>],
    lhs: &[f32],
    [lhs_rs, lhs_cs]: [usize; 2],
    rhs: &[f32],
    [rhs_rs, rhs_cs]: [usize; 2],
    parallelism: Parallelism,
) {
    assert!(dst.len() >= m * n, "the product's output holds m × n values");
    let reach = |rs: usize, cs: usize, rows: usize, cols: usize| (rows - 1) * rs + (cols - 1) * cs + 1;
    assert!(m == 0 || n == 0 || k == 0 || lhs.len() >= reach(lhs_rs, lhs_cs, m, k), "lhs holds m × k values");
    assert!(m == 0 || n == 0 || k == 0 || rhs.len() >= reach(rhs_rs, rhs_cs, k, n), "rhs holds k × n values");
    // SAFETY: the asserts above keep every index the strides reach inside the three slices, and
    // `dst` does not alias the operands (a `&mut` beside two `&`). With `read_dst` false the
    // kernels write every element of `dst` and read none (all but Apple's AMX kernel, behind a
    // gemm feature this workspace does not enable).
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr().cast::<f32>(),
            1,
            n as isize,
            false,
            lhs.as_ptr(),
            lhs_cs as isize,
            lhs_rs as isize,
            rhs.as_ptr(),
            rhs_cs as isize,
            rhs_rs as isize,
            0.0,
            1.0,
            false,
            false,
            false,
            parallelism,
        );
    }
}

/// `conv2d(x, weight)` without bias, or `None` where burn's own operation must compute it.
pub(crate) fn conv2d(x: &FlexTensor, weight: &FlexTensor, options: &ConvOptions<2>) -> Option<FlexTensor> {
    let g = Geometry::of(f32_dims4(x)?, weight, options)?;
    let (x, weight) = (contiguous(x), contiguous(weight));
    let (rows, positions) = (g.rows(), g.positions());
    let fill = |y: &mut [MaybeUninit<f32>]| {
        y.par_chunks_mut(g.chunk_images() * g.output_size()).enumerate().for_each(|(index, y)| {
            let images = g.chunk(index);
            let columns = images.len() * positions;
            let cols = im2col(&x, &g, images.clone());
            let product = |dst: &mut [MaybeUninit<f32>]| {
                matmul([g.outputs, columns, rows], dst, &weight, [rows, 1], &cols, [columns, 1], g.parallelism());
            };
            if images.len() == 1 {
                // One image's `[O, P]` product is its output block.
                product(y);
                return;
            }
            // SAFETY: the product writes all of its output (`rows` ≥ 1: no dimension is empty).
            let side_by_side = unsafe { written_by(g.outputs * columns, product) };
            // [O, n·P] → [n, O, P]
            for (block, out) in y.chunks_mut(positions).enumerate() {
                let (slot, o) = (block / g.outputs, block % g.outputs);
                out.write_copy_of_slice(&side_by_side[o * columns + slot * positions..][..positions]);
            }
        });
    };
    // SAFETY: each chunk's block is written whole, by its product (one image) or by the copy
    // of every `positions`-long segment of its images.
    let y = unsafe { written_by(g.batch * g.output_size(), fill) };
    Some(tensor(y, [g.batch, g.outputs, g.out[0], g.out[1]]))
}

/// The gradient of `conv2d(x, weight)` with respect to an `x` of shape `input`, or `None`
/// (burn's). Only the shape of `x` is read: this is also the transposed convolution of
/// `output_grad` ([`crate::transposed_convolution`]).
pub(crate) fn conv2d_input_grad(
    input: [usize; 4],
    weight: &FlexTensor,
    output_grad: &FlexTensor,
    options: &ConvOptions<2>,
) -> Option<FlexTensor> {
    let g = Geometry::of(input, weight, options).filter(|g| g.is_output(output_grad))?;
    let (dy, weight) = (contiguous(output_grad), contiguous(weight));
    let rows = g.rows();
    let mut dx = vec![0f32; g.batch * g.input_size()];
    dx.par_chunks_mut(g.chunk_images() * g.input_size()).enumerate().for_each(|(index, dx)| {
        let images = g.chunk(index);
        let columns = images.len() * g.positions();
        let dy = side_by_side(&dy, &g, images.clone());
        // dcols = Wᵀ · dY: Wᵀ[r, o] = W[o · rows + r].
        let product = |dcols: &mut [MaybeUninit<f32>]| {
            matmul([rows, columns, g.outputs], dcols, &weight, [1, rows], &dy, [columns, 1], g.parallelism());
        };
        // SAFETY: the product writes all of its output (`outputs` ≥ 1).
        let dcols = unsafe { written_by(rows * columns, product) };
        col2im(&dcols, &g, images, dx);
    });
    Some(tensor(dx, [g.batch, g.channels, g.height, g.width]))
}

/// The gradient of `conv2d(x, weight)` with respect to `weight`, or `None` (burn's).
pub(crate) fn conv2d_weight_grad(
    x: &FlexTensor,
    weight: &FlexTensor,
    output_grad: &FlexTensor,
    options: &ConvOptions<2>,
) -> Option<FlexTensor> {
    let g = Geometry::of(f32_dims4(x)?, weight, options).filter(|g| g.is_output(output_grad))?;
    let (x, dy) = (contiguous(x), contiguous(output_grad));
    let rows = g.rows();
    let partials: Vec<Vec<f32>> = (0..g.chunk_count())
        .into_par_iter()
        .map(|index| {
            let images = g.chunk(index);
            let columns = images.len() * g.positions();
            let dy = side_by_side(&dy, &g, images.clone());
            let cols = im2col(&x, &g, images);
            // dW = dY · colsᵀ: colsᵀ[l, r] = cols[r · columns + l].
            let product = |dw: &mut [MaybeUninit<f32>]| {
                matmul([g.outputs, rows, columns], dw, &dy, [columns, 1], &cols, [1, columns], g.parallelism());
            };
            // SAFETY: the product writes all of its output (`columns` ≥ 1: no dimension is empty).
            unsafe { written_by(g.outputs * rows, product) }
        })
        .collect();
    let mut partials = partials.into_iter();
    let mut dw = partials.next().expect("a batch has at least one chunk");
    let rest: Vec<Vec<f32>> = partials.collect();
    // Each element adds the chunks' products in chunk order.
    dw.par_chunks_mut(4096).enumerate().for_each(|(block, sums)| {
        for partial in &rest {
            for (sum, v) in sums.iter_mut().zip(&partial[block * 4096..]) {
                *sum += v;
            }
        }
    });
    Some(tensor(dw, [g.outputs, g.channels, g.kernel[0], g.kernel[1]]))
}

/// burn's own convolution, for what this module does not compute.
pub(crate) fn burn_conv2d(
    x: FloatTensor<Flex>,
    weight: FloatTensor<Flex>,
    options: ConvOptions<2>,
) -> FloatTensor<Flex> {
    <Flex as ModuleOps<Flex>>::conv2d(x, weight, None, options)
}

#[cfg(test)]
mod tests {
    use burn::backend::{Autodiff, Flex};
    use burn::prelude::*;
    use burn::tensor::module::conv2d as burn_conv2d;
    use burn::tensor::ops::ConvOptions;
    use burn::tensor::{Distribution, TensorPrimitive};

    use super::{Geometry, col2im_by_offsets, col2im_by_runs, im2col_by_offsets, im2col_by_runs};
    use crate::Kernels;
    use crate::test_support::max_relative;

    type Ad = Autodiff<Flex>;

    /// A convolution's shape: (batch, in, out, height, width, kernel, stride, padding).
    type Case = (usize, usize, usize, usize, usize, usize, usize, usize);

    /// ResNet-18's kinds of layers (7×7 stride 2 on 3 channels, 3×3 with and without stride,
    /// 1×1 stride 2), odd sizes where the padding cuts a window on one side only, lines short
    /// and long ([`SHORT_LINE`](super::SHORT_LINE)), and batches of one chunk and of several.
    const CASES: [Case; 14] = [
        (2, 3, 8, 19, 20, 7, 2, 3),
        (2, 3, 8, 40, 41, 7, 2, 3),
        (3, 8, 8, 9, 10, 3, 1, 1),
        (2, 8, 16, 9, 10, 3, 2, 1),
        (2, 8, 16, 10, 11, 1, 2, 0),
        (1, 4, 5, 6, 7, 3, 1, 0),
        (2, 4, 4, 5, 6, 3, 3, 2),
        (2, 4, 4, 17, 35, 3, 2, 1),
        // Padding as wide as the input: some output columns read only padding.
        (1, 2, 3, 3, 1, 5, 1, 2),
        (1, 3, 4, 4, 2, 7, 2, 3),
        (2, 2, 2, 3, 1, 3, 3, 1),
        // Batches cut into several chunks: of several images (the last one shorter), and
        // of one image each.
        (9, 3, 5, 8, 8, 3, 1, 1),
        (5, 2, 3, 20, 20, 3, 2, 1),
        (3, 2, 4, 18, 16, 3, 1, 1),
    ];

    /// The forward pass and both gradients equal burn's convolution's, over [`CASES`].
    #[test]
    fn matches_burns_convolution_and_its_gradients() {
        let device = Default::default();
        for (batch, cin, cout, height, width, k, stride, padding) in CASES {
            let options = ConvOptions::new([stride, stride], [padding, padding], [1, 1], 1);
            let x = Tensor::<Ad, 4>::random([batch, cin, height, width], Distribution::Default, &device);
            let w = Tensor::<Ad, 4>::random([cout, cin, k, k], Distribution::Default, &device);
            let (x, w) = (x.require_grad(), w.require_grad());
            let reference = burn_conv2d(x.clone(), w.clone(), None, options.clone());
            let ours = crate::conv2d(x.clone(), w.clone(), None, options.clone());
            let weights = Tensor::<Ad, 4>::random(reference.dims(), Distribution::Default, &device);
            let grads_ref = (reference.clone() * weights.clone()).sum().backward();
            let grads_ours = (ours.clone() * weights).sum().backward();
            let case = format!("case {batch}x{cin}x{height}x{width} k{k} s{stride} p{padding}");
            assert!(max_relative(ours.inner(), reference.inner()) < 1e-5, "{case}: forward");
            let dx = |g: &<Ad as burn::tensor::backend::AutodiffBackend>::Gradients| x.grad(g).expect("x grad");
            let dw = |g: &<Ad as burn::tensor::backend::AutodiffBackend>::Gradients| w.grad(g).expect("w grad");
            assert!(max_relative(dx(&grads_ours), dx(&grads_ref)) < 1e-5, "{case}: input gradient");
            assert!(max_relative(dw(&grads_ours), dw(&grads_ref)) < 1e-5, "{case}: weight gradient");
        }
    }

    /// Both ways of walking the lines, as runs and through the window offsets, unfold the same
    /// values and fold back the same sums, on every geometry of [`CASES`] whichever way its
    /// convolution takes, for a chunk that starts after the batch's first image.
    #[test]
    fn runs_and_window_offsets_unfold_and_fold_alike() {
        let values = |n: usize, seed: f32| (0..n).map(|i| (i as f32 * 0.618 + seed).sin()).collect::<Vec<f32>>();
        for (batch, cin, cout, height, width, k, stride, padding) in CASES {
            let x = values(batch * cin * height * width, 0.1);
            let w_tensor = super::tensor(values(cout * cin * k * k, 0.7), [cout, cin, k, k]);
            let options = ConvOptions::new([stride, stride], [padding, padding], [1, 1], 1);
            let g = Geometry::of([batch, cin, height, width], &w_tensor, &options)
                .expect("a geometry this module computes");
            let images = batch / 2..batch;
            let case = format!("case {batch}x{cin}x{height}x{width} k{k} s{stride} p{padding}");
            // The unfold starts from NaN in tests: a value either path missed fails the comparison.
            let cols = im2col_by_runs(&x, &g, images.clone());
            assert_eq!(cols, im2col_by_offsets(&x, &g, images.clone()), "{case}: unfolded");
            let dcols = values(cols.len(), 0.3);
            let fold = |by_offsets: bool| {
                let mut dx = vec![0f32; images.len() * g.input_size()];
                if by_offsets {
                    col2im_by_offsets(&dcols, &g, images.clone(), &mut dx);
                } else {
                    col2im_by_runs(&dcols, &g, images.clone(), &mut dx);
                }
                dx
            };
            let by_runs = fold(false);
            assert!(by_runs.iter().any(|&v| v != 0.0), "{case}: something folded");
            assert_eq!(by_runs, fold(true), "{case}: folded");
        }
    }

    /// A transposed convolution through this module's passes (its output the input gradient of
    /// the convolution it transposes, its gradients that convolution's output and weight
    /// gradient) equals burn's `conv_transpose2d` and its gradients: the U-Net's upsampling (a
    /// 1-D one as height 1), strided 2-D ones with and without output padding.
    #[test]
    fn transposed_convolutions_match_burns_and_their_gradients() {
        use burn::tensor::module::conv_transpose2d as burn_conv_transpose2d;
        use burn::tensor::ops::ConvTransposeOptions;
        let device = Default::default();
        let options = |stride, padding, padding_out| ConvTransposeOptions::new(stride, padding, padding_out, [1, 1], 1);
        let cases = [
            ([2, 8, 1, 4], [8, 8, 1, 4], options([1, 2], [0, 1], [0, 0])),
            ([3, 6, 1, 9], [6, 6, 1, 4], options([1, 2], [0, 1], [0, 0])),
            ([2, 4, 5, 6], [4, 3, 3, 3], options([2, 2], [1, 1], [1, 1])),
            ([1, 3, 4, 3], [3, 5, 5, 3], options([3, 2], [2, 0], [2, 1])),
            ([2, 2, 3, 3], [2, 2, 1, 1], options([1, 1], [0, 0], [0, 0])),
        ];
        for (input, weight, options) in cases {
            let case = format!("{input:?} by {weight:?} {options:?}");
            let x = Tensor::<Ad, 4>::random(input, Distribution::Default, &device).require_grad();
            let w = Tensor::<Ad, 4>::random(weight, Distribution::Default, &device).require_grad();
            let reference = burn_conv_transpose2d(x.clone(), w.clone(), None, options.clone());
            // The passes are this module's, not burn's fallback.
            let convolution = crate::transposed_convolution(&options).expect("a convolution transposed");
            let g = Geometry::of(reference.dims(), &w.clone().inner().into_primitive().tensor(), &convolution);
            assert!(g.is_some_and(|g| g.out == [input[2], input[3]]), "{case}: this module's geometry");
            let ours = crate::conv_transpose2d(x.clone(), w.clone(), None, options);
            let probe = Tensor::<Ad, 4>::random(reference.dims(), Distribution::Default, &device);
            let grads_ref = (reference.clone() * probe.clone()).sum().backward();
            let grads_ours = (ours.clone() * probe).sum().backward();
            assert_eq!(ours.dims(), reference.dims(), "{case}");
            assert!(max_relative(ours.inner(), reference.inner()) < 1e-5, "{case}: output");
            let dx = |g: &<Ad as burn::tensor::backend::AutodiffBackend>::Gradients| x.grad(g).expect("x grad");
            let dw = |g: &<Ad as burn::tensor::backend::AutodiffBackend>::Gradients| w.grad(g).expect("w grad");
            assert!(max_relative(dx(&grads_ours), dx(&grads_ref)) < 1e-5, "{case}: input gradient");
            assert!(max_relative(dw(&grads_ours), dw(&grads_ref)) < 1e-5, "{case}: weight gradient");
        }
    }

    /// Shapes this module does not compute (groups, dilation) give burn's result.
    #[test]
    fn other_shapes_fall_back_to_burns_convolution() {
        let device = Default::default();
        let x = Tensor::<Flex, 4>::random([2, 4, 7, 7], Distribution::Default, &device);
        let w = Tensor::<Flex, 4>::random([4, 2, 3, 3], Distribution::Default, &device);
        let options = ConvOptions::new([1, 1], [1, 1], [2, 2], 2);
        let reference = burn_conv2d(x.clone(), w.clone(), None, options.clone());
        let ours = Flex::conv2d_no_bias(x.into_primitive().tensor(), w.into_primitive().tensor(), options);
        let ours = Tensor::<Flex, 4>::from_primitive(TensorPrimitive::Float(ours));
        assert_eq!(ours.into_data(), reference.into_data());
    }

    /// One thread and two give the same bits (rayon's split does not change a sum's order), for
    /// a batch of several chunks (one image each: the chunks side by side, each product on one
    /// core) and for a batch of one chunk (its products on every core).
    #[test]
    fn repeats_to_the_bit_whatever_the_threads() {
        let device = Default::default();
        let values = |n: usize, seed: f32| (0..n).map(|i| (i as f32 * 0.618 + seed).sin()).collect::<Vec<f32>>();
        for (batch, size) in [(8, 16), (2, 8)] {
            let run = || {
                let x = TensorData::new(values(batch * 32 * size * size, 0.1), [batch, 32, size, size]);
                let w = TensorData::new(values(64 * 32 * 9, 0.7), [64, 32, 3, 3]);
                let x = Tensor::<Ad, 4>::from_data(x, &device).require_grad();
                let w = Tensor::<Ad, 4>::from_data(w, &device).require_grad();
                let options = ConvOptions::new([1, 1], [1, 1], [1, 1], 1);
                let y = crate::conv2d(x.clone(), w.clone(), None, options);
                let grads = (y.clone() * y.clone()).sum().backward();
                (y.inner().into_data(), x.grad(&grads).unwrap().into_data(), w.grad(&grads).unwrap().into_data())
            };
            let on =
                |threads: usize| rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap().install(run);
            assert_eq!(on(1), on(2), "batch {batch} of {size}×{size}");
        }
    }
}
