//! A 1-D convolution (burn's 2-D one of height 1, as the U-Net's layers call it) as one matrix
//! product over its unfolded input, on burn's cubecl backends, for a caller that brings the
//! product: cuBLAS on cuda (`cudnn::blas`), where cuDNN's chosen kernels ran the U-Net's largest
//! convolutions at 10-15 TFLOP/s on an H200.
//!
//! With `P = N·L'` output positions and `Q = C·S` taps, the input unfolds into `cols` `[Q, P]`
//! (`cols[c·S + s, n·L' + l] = x[n, c, l·stride + s·dilation − padding]`, zero outside), and the
//! weight `[K, C, 1, S]` is the matrix `W` `[K, Q]` as it lies in memory. Then
//!
//! - the output is `W · cols` `[K, P]`, its first two axes swapped into `[N, K, 1, L']`;
//! - the input gradient is `Wᵀ · dY` folded back (`dY` the output gradient as `[K, P]`): each
//!   input position sums the taps that read it, in a fixed order;
//! - the weight gradient is `dY · colsᵀ` `[K, Q]`, the weight's own layout.
//!
//! The unfolding, the folding and the swaps are cubecl kernels (run on lavapipe in CI, with
//! burn's matrix product in place of cuBLAS); the products are the caller's.

#![expect(unsafe_code, reason = "cubecl's unchecked launches: the indices are bounded by hand")]

use burn::tensor::Shape;
use burn_cubecl::CubeRuntime;
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::ops::{permute, reshape};
use burn_cubecl::tensor::CubeTensor;
use cubecl::CubeDim;
use cubecl::prelude::*;

use super::launch::{UNITS_PER_CUBE, striding_cubes};
use super::tensors::empty_like;

/// A 1-D convolution's sizes: `x` `[N, C, 1, L]` by `w` `[K, C, 1, S]` into `[N, K, 1, L']`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Conv1d {
    /// `N`.
    pub batch: usize,
    /// `C`.
    pub channels: usize,
    /// `L`.
    pub length: usize,
    /// `K`.
    pub outputs: usize,
    /// `S`.
    pub kernel: usize,
    /// Along the length.
    pub stride: usize,
    /// Zeros on each end of the length.
    pub padding: usize,
    /// Along the length.
    pub dilation: usize,
    /// `L'`.
    pub out_length: usize,
}

impl Conv1d {
    /// The 1-D convolution a 2-D one is, if it is one: input and kernel of height 1, no padding,
    /// stride or dilation along the height, one group, and an output of at least one position.
    pub fn of_2d(
        input: [usize; 4],
        weight: [usize; 4],
        [padding_h, padding]: [usize; 2],
        [stride_h, stride]: [usize; 2],
        [dilation_h, dilation]: [usize; 2],
        groups: usize,
    ) -> Option<Self> {
        let [batch, channels, height, length] = input;
        let [outputs, weight_channels, kernel_h, kernel] = weight;
        let one_row = height == 1 && kernel_h == 1 && padding_h == 0 && stride_h == 1 && dilation_h == 1;
        if !one_row || groups != 1 || weight_channels != channels || stride == 0 || dilation == 0 || kernel == 0 {
            return None;
        }
        let reach = dilation * (kernel - 1) + 1;
        let padded = length + 2 * padding;
        (padded >= reach && batch * channels * outputs > 0).then(|| Self {
            batch,
            channels,
            length,
            outputs,
            kernel,
            stride,
            padding,
            dilation,
            out_length: (padded - reach) / stride + 1,
        })
    }

    /// `P = N·L'`: the output positions, the products' inner width.
    pub fn positions(&self) -> usize {
        self.batch * self.out_length
    }

    /// `Q = C·S`: the taps a position reads.
    pub fn taps(&self) -> usize {
        self.channels * self.kernel
    }

    /// The sizes the kernels read.
    fn sizes<R: Runtime>(&self) -> SizesLaunch<R> {
        SizesLaunch::new(
            self.channels,
            self.length,
            self.kernel,
            self.out_length,
            self.stride,
            self.padding,
            self.dilation,
        )
    }
}

/// A 1-D convolution's sizes as its kernels read them ([`Conv1d`]'s).
#[derive(CubeLaunch, CubeType)]
struct Sizes {
    channels: usize,
    length: usize,
    kernel: usize,
    out_length: usize,
    stride: usize,
    padding: usize,
    dilation: usize,
}

/// The units of the launch stride over `cols` `[Q, P]`: `cols[q, p]` is `x[n, c, t]` with `q = c·S
/// + s`, `p = n·L' + l`, `t = l·stride + s·dilation − padding`, or zero where `t` is outside
/// `[0, L)`. `x` is contiguous `[N, C, 1, L]`.
#[cube(launch_unchecked)]
fn unfold_kernel<F: Float>(
    x: &Tensor<F>,
    cols: &mut Tensor<F>,
    total: usize,
    sizes: &Sizes,
    #[define(F)] _dtype: StorageType,
) {
    let (channels, length, kernel) = (sizes.channels, sizes.length, sizes.kernel);
    let (out_length, stride, padding, dilation) = (sizes.out_length, sizes.stride, sizes.padding, sizes.dilation);
    let positions = total / (channels * kernel);
    let step = (CUBE_COUNT_X * CUBE_DIM_X) as usize;
    let mut i = ABSOLUTE_POS_X as usize;
    while i < total {
        let q = i / positions;
        let p = i % positions;
        let (c, s) = (q / kernel, q % kernel);
        let (n, l) = (p / out_length, p % out_length);
        // In the padded input: t + padding, unsigned.
        let at = l * stride + s * dilation;
        let mut value = F::new(0.0);
        if at >= padding && at - padding < length {
            value = x[(n * channels + c) * length + at - padding];
        }
        cols[i] = value;
        i += step;
    }
}

/// The units of the launch stride over `dx` `[N, C, 1, L]`: `dx[n, c, t]` sums `dcols[c·S + s,
/// n·L' + l]` over the taps `s` (in order) whose `l = (t + padding − s·dilation) / stride` is a
/// whole output position below `L'`, in f32 whatever `F` (half precision rounds once, as cuDNN's
/// input gradient does).
#[cube(launch_unchecked)]
#[expect(clippy::manual_is_multiple_of, reason = "cubecl expands `%`, not the standard library's method")]
fn fold_kernel<F: Float>(
    dcols: &Tensor<F>,
    dx: &mut Tensor<F>,
    total: usize,
    sizes: &Sizes,
    #[define(F)] _dtype: StorageType,
) {
    let (channels, length, kernel) = (sizes.channels, sizes.length, sizes.kernel);
    let (out_length, stride, padding, dilation) = (sizes.out_length, sizes.stride, sizes.padding, sizes.dilation);
    let positions = (total / (channels * length)) * out_length;
    let step = (CUBE_COUNT_X * CUBE_DIM_X) as usize;
    let mut i = ABSOLUTE_POS_X as usize;
    while i < total {
        let t = i % length;
        let row = i / length;
        let (n, c) = (row / channels, row % channels);
        let mut sum = f32::new(0.0);
        for s in 0..kernel {
            let reach = t + padding;
            let tap = s * dilation;
            if reach >= tap && (reach - tap) % stride == 0 {
                let l = (reach - tap) / stride;
                if l < out_length {
                    sum += f32::cast_from(dcols[(c * kernel + s) * positions + n * out_length + l]);
                }
            }
        }
        dx[i] = F::cast_from(sum);
        i += step;
    }
}

/// `x` `[N, C, 1, L]` unfolded into `cols` `[Q, P]` (see the module's documentation).
pub fn unfold<R: CubeRuntime>(x: CubeTensor<R>, conv: &Conv1d) -> CubeTensor<R> {
    let x = into_contiguous(x);
    let cols = empty_like(&x, Shape::new([conv.taps(), conv.positions()]), x.dtype);
    let total = conv.taps() * conv.positions();
    // SAFETY: unit `i < total` writes `cols[i]` (new, `total` elements) and reads `x` at
    // `(n·C + c)·L + t` with `n < N`, `c < C`, `t < L` (checked before the read): within the
    // contiguous `[N, C, 1, L]`.
    unsafe {
        unfold_kernel::launch_unchecked::<R>(
            &x.client,
            striding_cubes(total),
            CubeDim::new_1d(UNITS_PER_CUBE),
            x.clone().into_tensor_arg(),
            cols.clone().into_tensor_arg(),
            total,
            conv.sizes(),
            x.dtype.into(),
        );
    }
    cols
}

/// `dcols` `[Q, P]` folded back into the input's gradient `[N, C, 1, L]`.
pub fn fold<R: CubeRuntime>(dcols: CubeTensor<R>, conv: &Conv1d) -> CubeTensor<R> {
    let dcols = into_contiguous(dcols);
    let dx = empty_like(&dcols, Shape::new([conv.batch, conv.channels, 1, conv.length]), dcols.dtype);
    let total = conv.batch * conv.channels * conv.length;
    // SAFETY: unit `i < total` writes `dx[i]` (new, `total` elements) and reads `dcols` at
    // `(c·S + s)·P + n·L' + l` with `c < C`, `s < S`, `n < N`, `l < L'` (checked before the
    // read): within the contiguous `[Q, P]`.
    unsafe {
        fold_kernel::launch_unchecked::<R>(
            &dcols.client,
            striding_cubes(total),
            CubeDim::new_1d(UNITS_PER_CUBE),
            dcols.clone().into_tensor_arg(),
            dx.clone().into_tensor_arg(),
            total,
            conv.sizes(),
            dcols.dtype.into(),
        );
    }
    dx
}

/// `[A, B, C]` in memory as `[B, A, C]`, contiguous, reshaped to `shape`.
fn swap_leading<R: CubeRuntime>(t: CubeTensor<R>, [a, b, c]: [usize; 3], shape: Shape) -> CubeTensor<R> {
    let swapped = into_contiguous(permute(reshape(t, Shape::new([a, b, c])), &[1, 0, 2]));
    reshape(swapped, shape)
}

/// The product of row-major matrices `op(a) · op(b)`, `op` transposing where its flag is set, of
/// the operands' dtype: the caller's (cuBLAS on cuda; burn's in the tests).
pub trait Product<R: CubeRuntime> {
    /// `op(a) · op(b)`, `[M, N]` where `op(a)` is `[M, K]` and `op(b)` `[K, N]`.
    fn product(
        &self,
        a: &CubeTensor<R>,
        a_transposed: bool,
        b: &CubeTensor<R>,
        b_transposed: bool,
    ) -> Result<CubeTensor<R>, String>;
}

/// The output `[N, K, 1, L']` of `x` by `w` `[K, C, 1, S]`.
pub fn output<R: CubeRuntime>(
    x: CubeTensor<R>,
    w: CubeTensor<R>,
    conv: &Conv1d,
    products: &impl Product<R>,
) -> Result<CubeTensor<R>, String> {
    let cols = unfold(x, conv);
    let w = reshape(into_contiguous(w), Shape::new([conv.outputs, conv.taps()]));
    let y = products.product(&w, false, &cols, false)?;
    let shape = Shape::new([conv.batch, conv.outputs, 1, conv.out_length]);
    Ok(swap_leading(y, [conv.outputs, conv.batch, conv.out_length], shape))
}

/// The output gradient `[N, K, 1, L']` as the matrix `dY` `[K, P]`.
fn output_grad_matrix<R: CubeRuntime>(dy: CubeTensor<R>, conv: &Conv1d) -> CubeTensor<R> {
    let shape = Shape::new([conv.outputs, conv.positions()]);
    swap_leading(into_contiguous(dy), [conv.batch, conv.outputs, conv.out_length], shape)
}

/// The input's gradient `[N, C, 1, L]`, given the output's `dy`.
pub fn input_grad<R: CubeRuntime>(
    w: CubeTensor<R>,
    dy: CubeTensor<R>,
    conv: &Conv1d,
    products: &impl Product<R>,
) -> Result<CubeTensor<R>, String> {
    let w = reshape(into_contiguous(w), Shape::new([conv.outputs, conv.taps()]));
    let dcols = products.product(&w, true, &output_grad_matrix(dy, conv), false)?;
    Ok(fold(dcols, conv))
}

/// The weight's gradient `[K, C, 1, S]`, given the output's `dy`.
pub fn weight_grad<R: CubeRuntime>(
    x: CubeTensor<R>,
    dy: CubeTensor<R>,
    conv: &Conv1d,
    products: &impl Product<R>,
) -> Result<CubeTensor<R>, String> {
    let cols = unfold(x, conv);
    let dw = products.product(&output_grad_matrix(dy, conv), false, &cols, true)?;
    Ok(reshape(dw, Shape::new([conv.outputs, conv.channels, 1, conv.kernel])))
}
