//! A 1-D convolution computed as one matrix product over unfolded windows (im2col), for the
//! U-Net, whose convolutions hold 250M weights over sequences of 4 to 64 steps.
//!
//! burn's `Conv1d` returns its weight gradient as a permuted view (a convolution of swapped
//! inputs, swapped back). On the CPU backend every elementwise pass over such a view — the
//! gradient norm, the clipping, each of Adam's operations — walks it element by element: seconds
//! per step at this size. Here the weight is the left operand of a matrix product, so its
//! gradient `dY · colsᵀ` comes out of the matrix kernel contiguous, and the forward pass is the
//! same product PyTorch's convolution computes. Only the small activations are rearranged.
//!
//! Where the backend has its own convolution kernels built on matrix products
//! ([`ConvolutionKernels::has_conv1d_products`](kernels::ConvolutionKernels::has_conv1d_products): the CPU's in f32; on cuda cuDNN's, or cuBLAS's products
//! with `LEROBOT_RS_CONV1D=cublas`), the convolution is one of those, of height 1, instead: one
//! node of the graph, with the same products. Elsewhere (wgpu, the CPU in half precision, cuda
//! without cuDNN, or with `LEROBOT_RS_CONV1D=burn` outside exact f32) it is composed of burn's
//! operations as above.

use burn::module::{Param, ParamId};
use burn::nn::Initializer;
use burn::nn::conv::ConvTranspose1d;
use burn::prelude::*;
use burn::tensor::ops::{ConvOptions, ConvTransposeOptions};
use kernels::Kernels;

/// `Conv1d(in, out, kernel, stride, padding)` with PyTorch's default initialisation.
#[derive(Module, Debug)]
pub struct GemmConv1d<B: Backend> {
    /// The kernel, `[out, in · kernel]` (PyTorch's `[out, in, kernel]` flattened row-major).
    pub weight: Param<Tensor<B, 2>>,
    /// The bias, `[out]`.
    pub bias: Param<Tensor<B, 1>>,
    /// Input channels.
    pub channels_in: usize,
    /// Kernel size.
    pub kernel: usize,
    /// Stride.
    pub stride: usize,
    /// Zero padding on both sides.
    pub padding: usize,
}

impl<B: Backend> GemmConv1d<B> {
    /// A convolution initialised as `torch.nn.Conv1d`: weight and bias uniform in
    /// `±1/√(in · kernel)`.
    pub fn new(
        channels_in: usize,
        channels_out: usize,
        kernel: usize,
        stride: usize,
        padding: usize,
        device: &B::Device,
    ) -> Self {
        let fan_in = channels_in * kernel;
        let bound = 1.0 / (fan_in as f64).sqrt();
        let init = Initializer::Uniform { min: -bound, max: bound };
        Self {
            weight: init.init_with([channels_out, fan_in], Some(fan_in), Some(channels_out), device),
            bias: init.init_with([channels_out], Some(fan_in), Some(channels_out), device),
            channels_in,
            kernel,
            stride,
            padding,
        }
    }

    /// A convolution with the given `[out, in, kernel]` weight and `[out]` bias.
    pub fn from_weights(weight: Tensor<B, 3>, bias: Tensor<B, 1>, stride: usize, padding: usize) -> Self {
        let [out, channels_in, kernel] = weight.dims();
        Self {
            weight: Param::initialized(ParamId::new(), weight.reshape([out, channels_in * kernel])),
            bias: Param::initialized(ParamId::new(), bias),
            channels_in,
            kernel,
            stride,
            padding,
        }
    }

    /// The output length for an input of `length`.
    pub fn output_length(&self, length: usize) -> usize {
        (length + 2 * self.padding - self.kernel) / self.stride + 1
    }
}

impl<B: Kernels> GemmConv1d<B> {
    /// `[B, in, L]` → `[B, out, L_out]`.
    pub fn forward(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        if B::has_conv1d_products(x.dtype()) { self.forward_as_2d(x) } else { self.forward_composed(x) }
    }

    /// The convolution composed of burn's operations: the windows side by side, then one
    /// matrix product.
    fn forward_composed(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        let [batch, channels, length] = x.dims();
        let out_length = self.output_length(length);
        // Zeros made in the input's dtype: burn's `pad` fills in the default dtype and fails on
        // half-precision inputs.
        let padded = if self.padding > 0 {
            let [b, c, _] = x.dims();
            let zeros = Tensor::<B, 3>::zeros([b, c, self.padding], (&x.device(), x.dtype()));
            Tensor::cat(vec![zeros.clone(), x, zeros], 2)
        } else {
            x
        };
        // Window j of every output position: padded[.., .., j + stride·t].
        let last = self.stride * (out_length - 1) + 1;
        let windows: Vec<Tensor<B, 3>> =
            (0..self.kernel).map(|j| padded.clone().slice(s![.., .., j..j + last; self.stride as isize])).collect();
        // [B, in, k, L_out] → [in, k, B, L_out] → [in·k, B·L_out]
        let columns =
            Tensor::stack::<4>(windows, 2).permute([1, 2, 0, 3]).reshape([channels * self.kernel, batch * out_length]);
        let [out, _] = self.weight.dims();
        let y = self.weight.val().matmul(columns) + self.bias.val().reshape([out, 1]);
        y.reshape([out, batch, out_length]).swap_dims(0, 1)
    }

    /// The same convolution as a 2-D one of height 1, through the backend's own products
    /// ([`kernels::conv2d`]): one operation of the graph instead of the padding, the windows and
    /// the product above, each of which a backward pass walks again. Its weight gradient comes
    /// out contiguous too.
    fn forward_as_2d(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        let [batch, channels, length] = x.dims();
        let [out, _] = self.weight.dims();
        let weight = self.weight.val().reshape([out, channels, 1, self.kernel]);
        let options = ConvOptions::new([1, self.stride], [0, self.padding], [1, 1], 1);
        let y = kernels::conv2d(x.reshape([batch, channels, 1, length]), weight, None, options);
        let [_, _, _, out_length] = y.dims();
        kernels::add_channel_bias(y.reshape([batch, out, out_length]), self.bias.val())
    }
}

/// burn's `ConvTranspose1d` `layer` applied to `x` `[B, in, L]`, as a 2-D transposed
/// convolution of height 1 through the backend's own convolution passes
/// ([`kernels::conv_transpose2d`]: cuDNN, or cuBLAS's products, on cuda, the CPU's matrix
/// products), where burn's layer would run its direct kernels. The layer keeps its weights and names.
pub fn conv_transpose1d<B: Kernels>(layer: &ConvTranspose1d<B>, x: Tensor<B, 3>) -> Tensor<B, 3> {
    let [batch, channels, length] = x.dims();
    let [weight_in, weight_out, kernel] = layer.weight.dims();
    let weight = layer.weight.val().reshape([weight_in, weight_out, 1, kernel]);
    let options = ConvTransposeOptions::new(
        [1, layer.stride],
        [0, layer.padding],
        [0, layer.padding_out],
        [1, layer.dilation],
        layer.groups,
    );
    let y = kernels::conv_transpose2d(x.reshape([batch, channels, 1, length]), weight, None, options);
    let [_, out, _, out_length] = y.dims();
    let y = y.reshape([batch, out, out_length]);
    match &layer.bias {
        Some(bias) => kernels::add_channel_bias(y, bias.val()),
        None => y,
    }
}

#[cfg(test)]
mod tests {
    use burn::backend::{Autodiff, Flex};
    use burn::tensor::Distribution;
    use burn::tensor::module::conv1d;
    use burn::tensor::ops::ConvOptions;

    use super::*;

    type Ad = Autodiff<Flex>;

    /// One way of computing the convolution.
    type Forward = fn(&GemmConv1d<Ad>, Tensor<Ad, 3>) -> Tensor<Ad, 3>;

    fn max_diff<const D: usize>(a: Tensor<Flex, D>, b: Tensor<Flex, D>) -> f32 {
        (a - b).abs().max().into_scalar()
    }

    #[test]
    fn matches_burns_convolution_and_its_gradients() {
        let device = Default::default();
        let cases = [(1, 2, 5, 16), (2, 1, 3, 16), (1, 0, 1, 8), (2, 1, 3, 4)];
        // Both ways of computing it: the backend's 2-D kernels (the CPU's in f32) and burn's
        // operations (the GPUs', half precision).
        let forwards: [Forward; 2] = [GemmConv1d::forward_as_2d, GemmConv1d::forward_composed];
        for ((stride, padding, kernel, length), forward) in cases.into_iter().flat_map(|c| forwards.map(|f| (c, f))) {
            let x = Tensor::<Ad, 3>::random([3, 6, length], Distribution::Default, &device).require_grad();
            let w = Tensor::<Ad, 2>::random([5, 6 * kernel], Distribution::Default, &device).require_grad();
            let b = Tensor::<Ad, 1>::random([5], Distribution::Default, &device).require_grad();
            let reference = conv1d(
                x.clone(),
                w.clone().reshape([5, 6, kernel]),
                Some(b.clone()),
                ConvOptions::new([stride], [padding], [1], 1),
            );
            let conv = GemmConv1d {
                weight: Param::from_tensor(w.clone()),
                bias: Param::from_tensor(b.clone()),
                channels_in: 6,
                kernel,
                stride,
                padding,
            };
            let ours = forward(&conv, x.clone());
            assert_eq!(ours.dims(), reference.dims());
            assert!(max_diff(ours.clone().inner(), reference.clone().inner()) < 1e-5);
            // Gradients through a weighted sum, both ways.
            let probe = Tensor::<Ad, 3>::random(ours.dims(), Distribution::Default, &device);
            let g_ref = (reference * probe.clone()).sum().backward();
            let g_ours = (ours * probe).sum().backward();
            assert!(max_diff(x.grad(&g_ours).unwrap(), x.grad(&g_ref).unwrap()) < 1e-4, "dx");
            assert!(max_diff(w.grad(&g_ours).unwrap(), w.grad(&g_ref).unwrap()) < 1e-4, "dw");
            assert!(max_diff(b.grad(&g_ours).unwrap(), b.grad(&g_ref).unwrap()) < 1e-4, "db");
        }
    }

    /// The U-Net's upsampling layer (`ConvTranspose1d(c, c, 4, stride 2, padding 1)`, with
    /// bias) and others with an output padding, through the backend's convolution passes (the
    /// CPU's in f32), give burn's layer's output and gradients.
    #[test]
    fn transposed_matches_burns_layer_and_its_gradients() {
        use burn::nn::conv::ConvTranspose1dConfig;
        let device = Default::default();
        // (channels in, out, kernel, stride, padding, padding out, length)
        let cases = [(6, 6, 4, 2, 1, 0, 4), (6, 6, 4, 2, 1, 0, 9), (5, 3, 3, 2, 1, 1, 7), (4, 4, 5, 3, 2, 2, 5)];
        for (cin, cout, kernel, stride, padding, padding_out, length) in cases {
            let layer = ConvTranspose1dConfig::new([cin, cout], kernel)
                .with_stride(stride)
                .with_padding(padding)
                .with_padding_out(padding_out)
                .init::<Ad>(&device);
            let x = Tensor::<Ad, 3>::random([3, cin, length], Distribution::Default, &device).require_grad();
            let reference = layer.forward(x.clone());
            let ours = conv_transpose1d(&layer, x.clone());
            let case = format!("{cin}→{cout} k{kernel} s{stride} p{padding} op{padding_out} over {length}");
            assert_eq!(ours.dims(), reference.dims(), "{case}");
            assert!(max_diff(ours.clone().inner(), reference.clone().inner()) < 1e-5, "{case}: output");
            let probe = Tensor::<Ad, 3>::random(ours.dims(), Distribution::Default, &device);
            let g_ref = (reference * probe.clone()).sum().backward();
            let g_ours = (ours * probe).sum().backward();
            let weight = layer.weight.val();
            let bias = layer.bias.as_ref().expect("a bias").val();
            assert!(max_diff(x.grad(&g_ours).unwrap(), x.grad(&g_ref).unwrap()) < 1e-4, "{case}: dx");
            assert!(max_diff(weight.grad(&g_ours).unwrap(), weight.grad(&g_ref).unwrap()) < 1e-4, "{case}: dw");
            assert!(max_diff(bias.grad(&g_ours).unwrap(), bias.grad(&g_ref).unwrap()) < 1e-4, "{case}: db");
        }
    }
}
