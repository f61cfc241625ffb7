//! The CPU backend's 2-D max pooling, forward (the maxima and where each was) and backward (each
//! output's gradient added at its maximum), one plane per task of rayon's pool. burn-flex runs
//! the pooling through its generic 3-D loop; on ResNet-18's stem (a 3×3 window, stride 2, over
//! 64 planes of 42×42 per image) that took 12-14 ms a batch of 16 images here, this 7 ms.
//!
//! Windows are read row by row and the first maximum wins, as in PyTorch and burn; a NaN in a
//! window is its maximum, as in PyTorch (whose index is the last NaN's, ours the first's; burn's
//! skips a NaN after a window's first value). The positions are indices into the input plane
//! (`y·W + x`, i64), as burn-flex gives them, so either backward pass reads either forward's.

use burn::backend::flex::FlexTensor;
use burn::tensor::{DType, TensorData};
use rayon::prelude::*;

use super::conv::{contiguous, tensor};
use super::im2col::{dims4, output_size};

/// The shape of one pooling this module computes.
#[derive(Debug, Clone, Copy)]
struct Pooling {
    /// Images and channels.
    batch: [usize; 2],
    /// Input rows and columns.
    input: [usize; 2],
    /// Output rows and columns.
    output: [usize; 2],
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
}

impl Pooling {
    /// The pooling of `x` `[N, C, H, W]`, when this module computes it: f32, a window that
    /// fits the padded input, padding at most half the window (PyTorch's rule), no zero stride.
    fn of(x: &FlexTensor, kernel: [usize; 2], stride: [usize; 2], padding: [usize; 2]) -> Option<Self> {
        let [n, c, h, w] = dims4(x)?;
        let fits = (0..2).all(|a| stride[a] > 0 && kernel[a] > 0 && 2 * padding[a] <= kernel[a]);
        if x.dtype() != DType::F32 || !fits || [n, c, h, w].contains(&0) {
            return None;
        }
        let out = |size: usize, a: usize| output_size(size, kernel[a], stride[a], padding[a]);
        Some(Self { batch: [n, c], input: [h, w], output: [out(h, 0)?, out(w, 1)?], kernel, stride, padding })
    }

    /// The output's shape, `[N, C, Ho, Wo]`.
    fn output_shape(&self) -> [usize; 4] {
        [self.batch[0], self.batch[1], self.output[0], self.output[1]]
    }

    /// Images times channels.
    fn planes(&self) -> usize {
        self.batch[0] * self.batch[1]
    }

    /// Input values per plane.
    fn input_size(&self) -> usize {
        self.input[0] * self.input[1]
    }

    /// Output values per plane.
    fn output_size(&self) -> usize {
        self.output[0] * self.output[1]
    }

    /// The input range along axis `a` under output position `o`'s window, cut at the edges
    /// (never empty: the padding is at most half the window).
    fn window(&self, o: usize, a: usize) -> std::ops::Range<usize> {
        let start = o * self.stride[a];
        let lo = start.saturating_sub(self.padding[a]);
        let hi = (start + self.kernel[a]).saturating_sub(self.padding[a]).min(self.input[a]);
        lo..hi
    }
}

/// Max pooling of `x` `[N, C, H, W]` (dilation 1, floor): the output and, for each output, the
/// index in its input plane of its maximum. `None` where burn's own operation must compute it.
pub(crate) fn max_pool2d(
    x: &FlexTensor,
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
) -> Option<(FlexTensor, FlexTensor)> {
    let p = Pooling::of(x, kernel, stride, padding)?;
    let x = contiguous(x);
    let (in_size, out_size) = (p.input_size(), p.output_size());
    let mut values = vec![0f32; p.planes() * out_size];
    let mut indices = vec![0i64; p.planes() * out_size];
    values.par_chunks_mut(out_size).zip(indices.par_chunks_mut(out_size)).enumerate().for_each(
        |(plane, (values, indices))| {
            let input = &x[plane * in_size..][..in_size];
            for oy in 0..p.output[0] {
                let rows = p.window(oy, 0);
                for ox in 0..p.output[1] {
                    let columns = p.window(ox, 1);
                    let mut best = (f32::NEG_INFINITY, usize::MAX);
                    for y in rows.clone() {
                        for (x, &v) in input[y * p.input[1]..][columns.clone()].iter().enumerate() {
                            if best.1 == usize::MAX || v > best.0 || (v.is_nan() && !best.0.is_nan()) {
                                best = (v, y * p.input[1] + columns.start + x);
                            }
                        }
                    }
                    values[oy * p.output[1] + ox] = best.0;
                    indices[oy * p.output[1] + ox] = best.1 as i64;
                }
            }
        },
    );
    let shape = p.output_shape();
    Some((tensor(values, shape), FlexTensor::from_data(TensorData::new(indices, shape))))
}

/// The gradient of [`max_pool2d`] with respect to `x`: each output's gradient added at the
/// index of its maximum (in output order, so a value that is the maximum of several windows
/// sums their gradients in a fixed order). `None` where burn's own operation must compute it.
pub(crate) fn max_pool2d_backward(
    x: &FlexTensor,
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
    output_grad: &FlexTensor,
    indices: &FlexTensor,
) -> Option<FlexTensor> {
    let p = Pooling::of(x, kernel, stride, padding)?;
    let same_shape = |t: &FlexTensor| dims4(t) == Some(p.output_shape());
    if output_grad.dtype() != DType::F32
        || indices.dtype() != DType::I64
        || !same_shape(output_grad)
        || !same_shape(indices)
    {
        return None;
    }
    let (grad, indices) = (contiguous(output_grad), indices.to_contiguous());
    let indices = indices.as_slice::<i64>()?;
    let (in_size, out_size) = (p.input_size(), p.output_size());
    if indices.iter().any(|&i| usize::try_from(i).map_or(true, |i| i >= in_size)) {
        return None;
    }
    let mut dx = vec![0f32; p.planes() * in_size];
    dx.par_chunks_mut(in_size).enumerate().for_each(|(plane, dx)| {
        let grad = &grad[plane * out_size..][..out_size];
        for (&g, &index) in grad.iter().zip(&indices[plane * out_size..][..out_size]) {
            dx[index as usize] += g;
        }
    });
    Some(tensor(dx, [p.batch[0], p.batch[1], p.input[0], p.input[1]]))
}

#[cfg(test)]
mod tests {
    use burn::backend::{Autodiff, Flex};
    use burn::prelude::*;
    use burn::tensor::module::{max_pool2d as burn_max_pool2d, max_pool2d_with_indices};
    use burn::tensor::{Distribution, TensorPrimitive};

    use crate::ConvolutionKernels;

    type Ad = Autodiff<Flex>;

    /// The output, the indices and the input gradient equal burn's, over ResNet-18's stem pool
    /// (3×3, stride 2, padding 1), windows without padding, overlapping windows, odd sizes, and
    /// inputs with ties (rounded values: the first maximum in the window wins in both).
    #[test]
    fn matches_burns_max_pool_and_its_gradient() {
        let device = Default::default();
        let cases = [
            // (batch, channels, height, width, kernel, stride, padding)
            (2, 3, 12, 12, [3, 3], [2, 2], [1, 1]),
            (1, 2, 7, 9, [2, 2], [2, 2], [0, 0]),
            (2, 2, 5, 6, [3, 3], [1, 1], [1, 1]),
            (1, 3, 9, 5, [3, 2], [2, 1], [1, 0]),
            (2, 1, 1, 1, [1, 1], [1, 1], [0, 0]),
        ];
        for (batch, channels, height, width, kernel, stride, padding) in cases {
            for rounded in [false, true] {
                let x = Tensor::<Flex, 4>::random([batch, channels, height, width], Distribution::Default, &device);
                let x = if rounded { x.mul_scalar(3.0).round() } else { x };
                let case =
                    format!("{batch}x{channels}x{height}x{width} k{kernel:?} s{stride:?} p{padding:?} ties {rounded}");
                let (reference, reference_indices) =
                    max_pool2d_with_indices(x.clone(), kernel, stride, padding, [1, 1], false);
                let ours = Flex::max_pool2d_indexed(x.clone().into_primitive().tensor(), kernel, stride, padding);
                let output = Tensor::<Flex, 4>::from_primitive(TensorPrimitive::Float(ours.output));
                let indices = Tensor::<Flex, 4, Int>::from_primitive(ours.indices);
                assert_eq!(output.into_data(), reference.into_data(), "{case}: output");
                assert_eq!(indices.into_data(), reference_indices.into_data(), "{case}: indices");

                let x = Tensor::<Ad, 4>::from_inner(x).require_grad();
                let reference = burn_max_pool2d(x.clone(), kernel, stride, padding, [1, 1], false);
                let ours = crate::max_pool2d(x.clone(), kernel, stride, padding);
                let weights = Tensor::<Ad, 4>::random(reference.dims(), Distribution::Default, &device);
                let grad_ref = x.grad(&(reference * weights.clone()).sum().backward()).unwrap();
                let grad_ours = x.grad(&(ours * weights).sum().backward()).unwrap();
                assert_eq!(grad_ours.into_data(), grad_ref.into_data(), "{case}: input gradient");
            }
        }
    }

    /// A NaN in a window is that window's maximum, as in PyTorch.
    #[test]
    fn a_nan_is_its_windows_maximum() {
        let device = Default::default();
        let x = Tensor::<Flex, 4>::from_floats([[[[1.0, f32::NAN, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]]], &device);
        let pooled = crate::max_pool2d(x, [2, 2], [2, 2], [0, 0]).into_data().to_vec::<f32>().unwrap();
        assert!(pooled[0].is_nan(), "{pooled:?}");
        assert_eq!(pooled[1], 8.0);
    }
}
