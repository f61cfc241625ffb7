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
//! A chunk holds enough images for a product of at least [`MIN_CHUNK_COLUMNS`](super::im2col::MIN_CHUNK_COLUMNS) columns, so its
//! unfolded input (a few MB at most) is still in the caches when the product reads it, where
//! the whole batch's (136 MB a pass at ResNet-18's batch of 16) would go through memory twice;
//! each chunk's work runs on one core. Where there are fewer chunks than threads (a batch of one
//! chunk: ResNet-18's last stage, the U-Net's layers), each chunk's work runs on every core
//! instead.
//!
//! The unfold and the fold walk each output line as one run of values where lines are long, and
//! value by value through a table of window offsets where they are short ([`SHORT_LINE`](super::im2col::SHORT_LINE): the
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

use super::im2col::{Geometry, col2im, dims4, im2col, written_by};

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

/// The output gradient of `images`, `[O, images·P]`, each image's positions side by side
/// (borrowed for one image, whose `[O, P]` block is that already).
pub(crate) fn side_by_side<'a>(dy: &'a [f32], g: &Geometry, images: Range<usize>) -> Cow<'a, [f32]> {
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
pub(crate) fn matmul(
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

    use super::super::im2col::{Geometry, col2im_by_offsets, col2im_by_runs, im2col_by_offsets, im2col_by_runs};
    use crate::ConvolutionKernels;
    use crate::test_support::max_relative;

    type Ad = Autodiff<Flex>;

    /// A convolution's shape: (batch, in, out, height, width, kernel, stride, padding).
    type Case = (usize, usize, usize, usize, usize, usize, usize, usize);

    /// ResNet-18's kinds of layers (7×7 stride 2 on 3 channels, 3×3 with and without stride,
    /// 1×1 stride 2), odd sizes where the padding cuts a window on one side only, lines short
    /// and long ([`SHORT_LINE`](super::im2col::SHORT_LINE)), and batches of one chunk and of several.
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
