//! torchvision's ResNet-18 without its pooling and classifier (`children()[:-2]`), with
//! BatchNorm or, as LeRobot's `use_group_norm` does, every `BatchNorm2d(c)` replaced by
//! `GroupNorm(c / 16, c)`.

use burn::module::Param;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::pool::{MaxPool2d, MaxPool2dConfig};
use burn::nn::{BatchNorm, BatchNormConfig, GroupNorm, GroupNormConfig, Initializer, PaddingConfig2d};
use burn::prelude::*;
use burn::tensor::activation::relu;
use burn::tensor::ops::ConvOptions;
use kernels::{Activation, Kernels};

/// How the trunk holds its feature maps between kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `[N, C, H, W]`, burn's and LeRobot's.
    ChannelsFirst,
    /// `[N, H, W, C]`, each kernel given the `[N, C, H, W]` view of it: a backend whose
    /// convolutions compute channels-last (cuDNN's tensor cores) then transposes nothing, and
    /// the elementwise operations between kernels write `[N, H, W, C]` again.
    ChannelsLast,
}

impl Layout {
    /// The layout backend `B`'s convolutions of `dtype` want
    /// ([`kernels::ConvolutionKernels::prefers_channels_last`]).
    pub fn for_backend<B: Kernels>(dtype: burn::tensor::DType) -> Self {
        if B::prefers_channels_last(dtype) { Self::ChannelsLast } else { Self::ChannelsFirst }
    }

    /// Feature maps `x` `[N, C, H, W]` held in this layout.
    fn hold<B: Backend>(self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        match self {
            Self::ChannelsFirst => x,
            Self::ChannelsLast => x.permute([0, 2, 3, 1]),
        }
    }

    /// The `[N, C, H, W]` view of feature maps `x` held in this layout.
    fn release<B: Backend>(self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        match self {
            Self::ChannelsFirst => x,
            Self::ChannelsLast => x.permute([0, 3, 1, 2]),
        }
    }

    /// `f` of the `[N, C, H, W]` view of feature maps `x` held in this layout, its result held
    /// in this layout again.
    fn through_channels_first<B: Backend>(
        self,
        x: Tensor<B, 4>,
        f: impl FnOnce(Tensor<B, 4>) -> Tensor<B, 4>,
    ) -> Tensor<B, 4> {
        self.hold(f(self.release(x)))
    }
}

/// BatchNorm or GroupNorm over 2-D feature maps.
#[derive(Module, Debug)]
pub enum Norm2d<B: Backend> {
    /// `BatchNorm2d` (running statistics update while training).
    Batch(BatchNorm<B>),
    /// `GroupNorm(c / 16, c)`.
    Group(GroupNorm<B>),
}

impl<B: Kernels> Norm2d<B> {
    /// A norm over `channels`, grouped in 16s when `group_norm`.
    pub fn new(channels: usize, group_norm: bool, device: &B::Device) -> Self {
        if group_norm {
            Self::Group(GroupNormConfig::new(channels / 16, channels).init(device))
        } else {
            Self::Batch(BatchNormConfig::new(channels).init(device))
        }
    }

    /// Normalises `[N, C, H, W]`, then `activation` (in one pass where the backend fuses them).
    pub fn forward(&self, x: Tensor<B, 4>, activation: Activation) -> Tensor<B, 4> {
        self.forward_in(x, activation, Layout::ChannelsFirst)
    }

    /// [`Norm2d::forward`] of feature maps held in `layout`. GroupNorm on `[N, H, W, C]` is
    /// given its `[N, C, H·W]` view, which its kernels read channels-last.
    pub fn forward_in(&self, x: Tensor<B, 4>, activation: Activation, layout: Layout) -> Tensor<B, 4> {
        match (self, layout) {
            (Self::Group(n), Layout::ChannelsLast) => {
                let [samples, height, width, channels] = x.dims();
                let maps = x.reshape([samples, height * width, channels]).permute([0, 2, 1]);
                let y = super::norm::group_norm(n, maps, activation);
                y.permute([0, 2, 1]).reshape([samples, height, width, channels])
            }
            (Self::Group(n), Layout::ChannelsFirst) => super::norm::group_norm(n, x, activation),
            (Self::Batch(n), _) => layout.through_channels_first(x, |x| super::norm::batch_norm(n, x, activation)),
        }
    }
}

/// torchvision's ResNet initialisation: `kaiming_normal_(mode="fan_out", nonlinearity="relu")`.
fn conv(channels: [usize; 2], kernel: usize, stride: usize, padding: usize) -> Conv2dConfig {
    Conv2dConfig::new(channels, [kernel, kernel])
        .with_stride([stride, stride])
        .with_padding(PaddingConfig2d::Explicit(padding, padding, padding, padding))
        .with_bias(false)
        .with_initializer(Initializer::KaimingNormal { gain: std::f64::consts::SQRT_2, fan_out_only: true })
}

/// `conv.forward(x)`, computed by the backend's convolution kernels ([`kernels::conv2d`]): on
/// the CPU, three large matrix products on every core, where burn's backward pass runs a
/// transposed convolution on one thread. Asymmetric padding takes burn's module.
fn convolve<B: Kernels>(conv: &Conv2d<B>, x: Tensor<B, 4>) -> Tensor<B, 4> {
    match conv.padding {
        PaddingConfig2d::Explicit(top, left, bottom, right) if top == bottom && left == right => {
            let options = ConvOptions::new(conv.stride, [top, left], conv.dilation, conv.groups);
            kernels::conv2d(x, conv.weight.val(), conv.bias.as_ref().map(Param::val), options)
        }
        _ => conv.forward(x),
    }
}

/// `pool.forward(x)`, computed by the backend's max pooling ([`kernels::max_pool2d`]: on the
/// CPU, one pass per plane on every core, where burn's runs a generic 3-D loop). Asymmetric
/// padding, dilation and rounding up take burn's module.
fn max_pool<B: Kernels>(pool: &MaxPool2d, x: Tensor<B, 4>) -> Tensor<B, 4> {
    match pool.padding {
        PaddingConfig2d::Explicit(top, left, bottom, right)
            if top == bottom && left == right && pool.dilation == [1, 1] && !pool.ceil_mode =>
        {
            kernels::max_pool2d(x, pool.kernel_size, pool.stride, [top, left])
        }
        _ => pool.forward(x),
    }
}

/// The 1×1 projection of a block that changes resolution or width.
#[derive(Module, Debug)]
pub struct Downsample<B: Backend> {
    /// `downsample.0`.
    pub conv: Conv2d<B>,
    /// `downsample.1`.
    pub norm: Norm2d<B>,
}

/// torchvision's `BasicBlock`.
#[derive(Module, Debug)]
pub struct BasicBlock<B: Backend> {
    /// 3×3 convolution (carries the stride).
    pub conv1: Conv2d<B>,
    /// Its norm.
    pub bn1: Norm2d<B>,
    /// 3×3 convolution.
    pub conv2: Conv2d<B>,
    /// Its norm.
    pub bn2: Norm2d<B>,
    /// The shortcut projection, when shapes change.
    pub downsample: Option<Downsample<B>>,
}

impl<B: Kernels> BasicBlock<B> {
    fn new(inputs: usize, outputs: usize, stride: usize, group_norm: bool, device: &B::Device) -> Self {
        let downsample = (stride != 1 || inputs != outputs).then(|| Downsample {
            conv: conv([inputs, outputs], 1, stride, 0).init(device),
            norm: Norm2d::new(outputs, group_norm, device),
        });
        Self {
            conv1: conv([inputs, outputs], 3, stride, 1).init(device),
            bn1: Norm2d::new(outputs, group_norm, device),
            conv2: conv([outputs, outputs], 3, 1, 1).init(device),
            bn2: Norm2d::new(outputs, group_norm, device),
            downsample,
        }
    }

    /// The block on feature maps held in `layout`.
    fn forward_in(&self, x: Tensor<B, 4>, layout: Layout) -> Tensor<B, 4> {
        let convolve = |conv: &Conv2d<B>, x| layout.through_channels_first(x, |x| convolve(conv, x));
        let identity = match &self.downsample {
            Some(d) => d.norm.forward_in(convolve(&d.conv, x.clone()), Activation::Identity, layout),
            None => x.clone(),
        };
        let out = self.bn1.forward_in(convolve(&self.conv1, x), Activation::Relu, layout);
        let out = self.bn2.forward_in(convolve(&self.conv2, out), Activation::Identity, layout);
        relu(out + identity)
    }
}

/// The ResNet-18 trunk: conv 7×7/2 → norm → ReLU → max-pool 3/2 → four stages of two blocks
/// (64, 128, 256, 512 channels). `[N, 3, H, W]` → `[N, 512, ⌈H/32⌉, ⌈W/32⌉]`.
#[derive(Module, Debug)]
pub struct ResNet18<B: Backend> {
    /// `backbone.0`.
    pub conv1: Conv2d<B>,
    /// `backbone.1`.
    pub bn1: Norm2d<B>,
    /// `backbone.3`.
    pub maxpool: MaxPool2d,
    /// `backbone.4` .. `backbone.7`, two blocks each.
    pub layers: Vec<Vec<BasicBlock<B>>>,
}

impl<B: Kernels> ResNet18<B> {
    /// A freshly initialised trunk.
    pub fn new(group_norm: bool, device: &B::Device) -> Self {
        let widths = [64, 128, 256, 512];
        let mut inputs = 64;
        let layers = widths
            .iter()
            .enumerate()
            .map(|(i, &w)| {
                let stride = if i == 0 { 1 } else { 2 };
                let blocks = vec![
                    BasicBlock::new(inputs, w, stride, group_norm, device),
                    BasicBlock::new(w, w, 1, group_norm, device),
                ];
                inputs = w;
                blocks
            })
            .collect();
        Self {
            conv1: conv([3, 64], 7, 2, 3).init(device),
            bn1: Norm2d::new(64, group_norm, device),
            maxpool: MaxPool2dConfig::new([3, 3])
                .with_strides([2, 2])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                .init(),
            layers,
        }
    }

    /// The feature map of `[N, 3, H, W]` images.
    pub fn forward(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        self.forward_in(x, Layout::ChannelsFirst)
    }

    /// [`ResNet18::forward`] with the feature maps held in `layout` between kernels; the images
    /// and the result are `[N, C, H, W]` either way (the result a view of `[N, H, W, C]` memory
    /// with [`Layout::ChannelsLast`]).
    pub fn forward_in(&self, x: Tensor<B, 4>, layout: Layout) -> Tensor<B, 4> {
        let x = self.bn1.forward_in(layout.hold(convolve(&self.conv1, x)), Activation::Relu, layout);
        let x = layout.through_channels_first(x, |x| max_pool(&self.maxpool, x));
        layout.release(self.layers.iter().flatten().fold(x, |x, block| block.forward_in(x, layout)))
    }

    /// The feature-map size for `(height, width)` inputs.
    pub fn output_size(height: usize, width: usize) -> (usize, usize) {
        let conv = |s: usize, k: usize, stride: usize, p: usize| (s + 2 * p - k) / stride + 1;
        let mut hw = (conv(height, 7, 2, 3), conv(width, 7, 2, 3));
        hw = (conv(hw.0, 3, 2, 1), conv(hw.1, 3, 2, 1));
        for _ in 0..3 {
            hw = (conv(hw.0, 3, 2, 1), conv(hw.1, 3, 2, 1));
        }
        hw
    }
}
