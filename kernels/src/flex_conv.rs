//! The CPU backend's 2-D convolution as three matrix products over the unfolded input of the
//! whole batch (im2col), each one large product on all the cores.
//!
//! burn-flex computes the input gradient as a transposed convolution whose batch loop and matrix
//! products run on one thread, and the weight gradient as a convolution of swapped inputs whose
//! product is `C_out × 9` wide; on ResNet-18's layers both take several times the forward
//! pass. Here, with `cols` the unfolded input (`[C·kh·kw, N·Ho·Wo]`) and `dY` the output
//! gradient laid out `[C_out, N·Ho·Wo]`:
//! - forward: `Y = W · cols`;
//! - weight gradient: `dW = dY · colsᵀ`;
//! - input gradient: `dcols = Wᵀ · dY`, folded back onto the input (col2im).
//!
//! Each product's reduction runs in one fixed order whatever the thread count (gemm splits the
//! output's tiles among threads, never the sum over `k`), so on one machine a step repeats to
//! the bit and a resume stays exact. Another CPU model may block the sums differently (gemm
//! sizes them from the caches). Other shapes than these (groups, dilation, non-f32 dtypes)
//! take burn's own operations.
//!
//! # Safety
//! Two kinds of unsafe code, both local: the gemm crate's raw pointers and strides (checked
//! against the slices' lengths before each call), and output buffers left uninitialised until
//! written whole ([`written_by`]: each caller says why every element is written).
#![expect(unsafe_code, reason = "gemm takes raw pointers; whole-written buffers are not zeroed first")]

use std::mem::MaybeUninit;

use burn::backend::Flex;
use burn::backend::flex::FlexTensor;
use burn::tensor::ops::{ConvOptions, FloatTensor, ModuleOps};
use burn::tensor::{DType, Shape, TensorData};
use rayon::prelude::*;

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
    /// The geometry of `x` by `weight` under `options`, when this module computes it: f32,
    /// one group, no dilation, nothing empty.
    fn of(x: &FlexTensor, weight: &FlexTensor, options: &ConvOptions<2>) -> Option<Self> {
        let plain = options.groups == 1 && options.dilation == [1, 1] && !options.stride.contains(&0);
        if x.dtype() != DType::F32 || weight.dtype() != DType::F32 || !plain {
            return None;
        }
        let [batch, channels, height, width] = dims4(x)?;
        let [outputs, weight_channels, kh, kw] = dims4(weight)?;
        if weight_channels != channels || [batch, channels, height, width, outputs, kh, kw].contains(&0) {
            return None;
        }
        let out = |size: usize, axis: usize, k: usize| {
            (size + 2 * options.padding[axis]).checked_sub(k).map(|s| s / options.stride[axis] + 1)
        };
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

    /// Columns of the unfolded input: every output position of every image.
    fn columns(&self) -> usize {
        self.batch * self.positions()
    }

    /// Rows of the unfolded input: every input channel at every kernel offset.
    fn rows(&self) -> usize {
        self.channels * self.kernel[0] * self.kernel[1]
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

/// A 4-D tensor's dimensions.
fn dims4(t: &FlexTensor) -> Option<[usize; 4]> {
    t.layout().shape().as_slice().try_into().ok()
}

/// An f32 tensor's elements in row-major order (copied only if it is a view).
pub(crate) fn contiguous(t: &FlexTensor) -> std::borrow::Cow<'_, [f32]> {
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
/// zeroed first (at batch 16, ResNet-18's unfolded inputs are 136 MB a pass).
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

/// The unfolded input `[C·kh·kw, N·Ho·Wo]`: row `(c, i, j)` holds, for every image and output
/// position, the input value under kernel offset `(i, j)` of channel `c` (0 in the padding).
fn im2col(x: &[f32], g: &Geometry) -> Vec<f32> {
    let (columns, positions, [kh, kw], [out_h, out_w]) = (g.columns(), g.positions(), g.kernel, g.out);
    let zero = MaybeUninit::new(0f32);
    let fill = |cols: &mut [MaybeUninit<f32>]| {
        cols.par_chunks_mut(columns).enumerate().for_each(|(row, out)| {
            let (c, i, j) = (row / (kh * kw), row / kw % kh, row % kw);
            let (lo, hi) = g.inside_columns(j);
            for n in 0..g.batch {
                let plane = &x[(n * g.channels + c) * g.height * g.width..][..g.height * g.width];
                for oy in 0..out_h {
                    let dst = &mut out[n * positions + oy * out_w..][..out_w];
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
                    let line = &plane[y * g.width..][..g.width];
                    let first = lo * g.stride[1] + j - g.padding[1];
                    if g.stride[1] == 1 {
                        dst[lo..hi].write_copy_of_slice(&line[first..first + (hi - lo)]);
                    } else {
                        let inside = line[first..].iter().step_by(g.stride[1]);
                        for (d, &v) in dst[lo..hi].iter_mut().zip(inside) {
                            d.write(v);
                        }
                    }
                }
            }
        });
    };
    // SAFETY: every (image, output row) segment of every row is written above: zeros outside
    // the input, its values inside (`lo..hi` holds exactly `hi − lo` values of the line).
    unsafe { written_by(g.rows() * columns, fill) }
}

/// Adds the unfolded gradient `dcols` (`[C·kh·kw, N·Ho·Wo]`) back onto the input's positions:
/// `[N, C, H, W]`, each plane summed by one task in a fixed order.
fn col2im(dcols: &[f32], g: &Geometry) -> Vec<f32> {
    let (columns, positions, [kh, kw], [out_h, out_w]) = (g.columns(), g.positions(), g.kernel, g.out);
    let mut dx = vec![0f32; g.batch * g.channels * g.height * g.width];
    dx.par_chunks_mut(g.height * g.width).enumerate().for_each(|(plane_index, plane)| {
        let (n, c) = (plane_index / g.channels, plane_index % g.channels);
        for i in 0..kh {
            for j in 0..kw {
                let row = &dcols[((c * kh + i) * kw + j) * columns + n * positions..][..positions];
                let (lo, hi) = g.inside_columns(j);
                for oy in 0..out_h {
                    let Some(y) = g.input_row(oy, i) else { continue };
                    let line = &mut plane[y * g.width..][..g.width];
                    let src = &row[oy * out_w..][..out_w];
                    for (ox, v) in src.iter().enumerate().take(hi).skip(lo) {
                        line[ox * g.stride[1] + j - g.padding[1]] += v;
                    }
                }
            }
        }
    });
    dx
}

/// `[N, O, P]` → `[O, N·P]`: the output gradient with every image's positions side by side.
fn images_side_by_side(dy: &[f32], g: &Geometry) -> Vec<f32> {
    let (positions, columns) = (g.positions(), g.columns());
    let fill = |out: &mut [MaybeUninit<f32>]| {
        out.par_chunks_mut(columns).enumerate().for_each(|(o, row)| {
            for n in 0..g.batch {
                let from = &dy[(n * g.outputs + o) * positions..][..positions];
                row[n * positions..][..positions].write_copy_of_slice(from);
            }
        });
    };
    // SAFETY: each row is `batch` segments of `positions` values, all written.
    unsafe { written_by(g.outputs * columns, fill) }
}

/// `dst (m × n) = lhs (m × k) · rhs (k × n)`, each operand given by its row and column strides,
/// on all the cores; every element of `dst` is written (for `k ≥ 1`).
fn matmul(
    [m, n, k]: [usize; 3],
    dst: &mut [MaybeUninit<f32>],
    lhs: &[f32],
    [lhs_rs, lhs_cs]: [usize; 2],
    rhs: &[f32],
    [rhs_rs, rhs_cs]: [usize; 2],
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
            gemm::Parallelism::Rayon(0),
        );
    }
}

/// `conv2d(x, weight)` without bias, or `None` where burn's own operation must compute it.
pub(crate) fn conv2d(x: &FlexTensor, weight: &FlexTensor, options: &ConvOptions<2>) -> Option<FlexTensor> {
    let g = Geometry::of(x, weight, options)?;
    let cols = im2col(&contiguous(x), &g);
    let (rows, columns, positions) = (g.rows(), g.columns(), g.positions());
    let weight = contiguous(weight);
    let product =
        |y: &mut [MaybeUninit<f32>]| matmul([g.outputs, columns, rows], y, &weight, [rows, 1], &cols, [columns, 1]);
    // SAFETY: the product writes all of its output (`rows` ≥ 1: no dimension is empty).
    let y_side_by_side = unsafe { written_by(g.outputs * columns, product) };
    // [O, N·P] → [N, O, P]
    let scatter = |y: &mut [MaybeUninit<f32>]| {
        y.par_chunks_mut(positions).enumerate().for_each(|(index, out)| {
            let (n, o) = (index / g.outputs, index % g.outputs);
            out.write_copy_of_slice(&y_side_by_side[o * columns + n * positions..][..positions]);
        });
    };
    // SAFETY: every chunk of `positions` values is written whole.
    let y = unsafe { written_by(g.batch * g.outputs * positions, scatter) };
    Some(tensor(y, [g.batch, g.outputs, g.out[0], g.out[1]]))
}

/// The gradient of `conv2d(x, weight)` with respect to `x`, or `None` (burn's).
pub(crate) fn conv2d_input_grad(
    x: &FlexTensor,
    weight: &FlexTensor,
    output_grad: &FlexTensor,
    options: &ConvOptions<2>,
) -> Option<FlexTensor> {
    let g = Geometry::of(x, weight, options).filter(|g| g.is_output(output_grad))?;
    let (rows, columns) = (g.rows(), g.columns());
    let dy = images_side_by_side(&contiguous(output_grad), &g);
    // dcols = Wᵀ · dY: Wᵀ[r, o] = W[o · rows + r].
    let weight = contiguous(weight);
    let product = |dcols: &mut [MaybeUninit<f32>]| {
        matmul([rows, columns, g.outputs], dcols, &weight, [1, rows], &dy, [columns, 1]);
    };
    // SAFETY: the product writes all of its output (`outputs` ≥ 1).
    let dcols = unsafe { written_by(rows * columns, product) };
    Some(tensor(col2im(&dcols, &g), [g.batch, g.channels, g.height, g.width]))
}

/// The gradient of `conv2d(x, weight)` with respect to `weight`, or `None` (burn's).
pub(crate) fn conv2d_weight_grad(
    x: &FlexTensor,
    weight: &FlexTensor,
    output_grad: &FlexTensor,
    options: &ConvOptions<2>,
) -> Option<FlexTensor> {
    let g = Geometry::of(x, weight, options).filter(|g| g.is_output(output_grad))?;
    let (rows, columns) = (g.rows(), g.columns());
    let dy = images_side_by_side(&contiguous(output_grad), &g);
    let cols = im2col(&contiguous(x), &g);
    // dW = dY · colsᵀ: colsᵀ[l, r] = cols[r · columns + l].
    let product =
        |dw: &mut [MaybeUninit<f32>]| matmul([g.outputs, rows, columns], dw, &dy, [columns, 1], &cols, [1, columns]);
    // SAFETY: the product writes all of its output (`columns` ≥ 1: no dimension is empty).
    let dw = unsafe { written_by(g.outputs * rows, product) };
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

    use crate::Kernels;

    type Ad = Autodiff<Flex>;

    fn max_relative(a: Tensor<Flex, 4>, b: Tensor<Flex, 4>) -> f32 {
        let scale = b.clone().abs().max().into_scalar().max(1e-6);
        (a - b).abs().max().into_scalar() / scale
    }

    /// The forward pass and both gradients equal burn's convolution's, over ResNet-18's kinds of
    /// layers (7×7 stride 2 on 3 channels, 3×3 with and without stride, 1×1 stride 2) and odd
    /// sizes where the padding cuts a window on one side only.
    #[test]
    fn matches_burns_convolution_and_its_gradients() {
        let device = Default::default();
        let cases = [
            // (batch, in, out, height, width, kernel, stride, padding)
            (2, 3, 8, 19, 20, 7, 2, 3),
            (3, 8, 8, 9, 10, 3, 1, 1),
            (2, 8, 16, 9, 10, 3, 2, 1),
            (2, 8, 16, 10, 11, 1, 2, 0),
            (1, 4, 5, 6, 7, 3, 1, 0),
            (2, 4, 4, 5, 6, 3, 3, 2),
            // Padding as wide as the input: some output columns read only padding.
            (1, 2, 3, 3, 1, 5, 1, 2),
            (1, 3, 4, 4, 2, 7, 2, 3),
            (2, 2, 2, 3, 1, 3, 3, 1),
        ];
        for (batch, cin, cout, height, width, k, stride, padding) in cases {
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

    /// One thread and two give the same bits (rayon's split does not change a sum's order), on
    /// a layer large enough for the products to run on several threads.
    #[test]
    fn repeats_to_the_bit_whatever_the_threads() {
        let device = Default::default();
        let values = |n: usize, seed: f32| (0..n).map(|i| (i as f32 * 0.618 + seed).sin()).collect::<Vec<f32>>();
        let run = || {
            let x = TensorData::new(values(8 * 32 * 16 * 16, 0.1), [8, 32, 16, 16]);
            let w = TensorData::new(values(64 * 32 * 9, 0.7), [64, 32, 3, 3]);
            let x = Tensor::<Ad, 4>::from_data(x, &device).require_grad();
            let w = Tensor::<Ad, 4>::from_data(w, &device).require_grad();
            let options = ConvOptions::new([1, 1], [1, 1], [1, 1], 1);
            let y = crate::conv2d(x.clone(), w.clone(), None, options);
            let grads = (y.clone() * y.clone()).sum().backward();
            (y.inner().into_data(), x.grad(&grads).unwrap().into_data(), w.grad(&grads).unwrap().into_data())
        };
        let on = |threads: usize| rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap().install(run);
        assert_eq!(on(1), on(2));
    }
}
