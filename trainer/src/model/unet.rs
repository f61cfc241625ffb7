//! LeRobot's `DiffusionConditionalUnet1d`: a 1-D convolutional U-Net over the action sequence,
//! conditioned by FiLM on the diffusion step embedding and the observation features.

use burn::nn::conv::{ConvTranspose1d, ConvTranspose1dConfig};
use burn::nn::{GroupNorm, GroupNormConfig, Linear, LinearConfig};
use burn::prelude::*;
use burn::tensor::FloatDType;
use kernels::{Activation, Kernels};

use super::conv1d::{GemmConv1d, conv_transpose1d};
use super::linear::linear;

/// Mish, `x · tanh(softplus(x))`, with softplus written as `relu(x) + ln(1 + e^(−|x|))`
/// ([`kernels::portable::activate`]): the same function as burn's `mish`, whose `ln(eˣ + 1)`
/// overflows (and turns gradients into NaN) beyond x ≈ 11 in f16.
pub fn mish<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    kernels::portable::activate(x, Activation::Mish)
}

/// `DiffusionSinusoidalPosEmb`: `[sin(t·f_k), cos(t·f_k)]` with
/// `f_k = exp(−k · ln(10000) / (half − 1))`, computed in f32 (timesteps up to 99 lose their
/// integer precision in f16 and bf16); the caller casts the result.
pub fn sinusoidal_embedding<B: Backend>(timesteps: Tensor<B, 1>, dim: usize) -> Tensor<B, 2> {
    let timesteps = timesteps.cast(FloatDType::F32);
    let half = dim / 2;
    let scale = (10000f64).ln() / (half as f64 - 1.0);
    let freqs: Vec<f32> = (0..half).map(|k| ((k as f64) * -scale).exp() as f32).collect();
    let [n] = timesteps.dims();
    let freqs = kernels::device_constant::<B, 1>(&freqs, [half], timesteps.dtype(), &timesteps.device());
    let angles = timesteps.reshape([n, 1]) * freqs.reshape([1, half]);
    Tensor::cat(vec![angles.clone().sin(), angles.cos()], 1)
}

/// `DiffusionConv1dBlock`: Conv1d → GroupNorm → Mish.
#[derive(Module, Debug)]
pub struct Conv1dBlock<B: Backend> {
    /// `block.0`.
    pub conv: GemmConv1d<B>,
    /// `block.1`.
    pub norm: GroupNorm<B>,
}

impl<B: Kernels> Conv1dBlock<B> {
    fn new(inputs: usize, outputs: usize, kernel: usize, groups: usize, device: &B::Device) -> Self {
        Self {
            conv: GemmConv1d::new(inputs, outputs, kernel, 1, kernel / 2, device),
            norm: GroupNormConfig::new(groups, outputs).init(device),
        }
    }

    fn forward(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        super::norm::group_norm(&self.norm, self.conv.forward(x), Activation::Mish)
    }
}

/// `DiffusionConditionalResidualBlock1d`: conv block → FiLM (`γ·h + β`, or `h + β`) → conv
/// block, plus the input through a 1×1 convolution when the width changes.
#[derive(Module, Debug)]
pub struct ResidualBlock<B: Backend> {
    /// `conv1`.
    pub conv1: Conv1dBlock<B>,
    /// `cond_encoder.1` (after a Mish).
    pub cond_encoder: Linear<B>,
    /// `conv2`.
    pub conv2: Conv1dBlock<B>,
    /// `residual_conv`, when in ≠ out.
    pub residual_conv: Option<GemmConv1d<B>>,
    /// Output channels.
    pub out_channels: usize,
    /// Whether the condition scales as well as shifts.
    pub film_scale: bool,
}

impl<B: Kernels> ResidualBlock<B> {
    fn new(inputs: usize, outputs: usize, cond_dim: usize, cfg: &UnetShape, device: &B::Device) -> Self {
        let cond_channels = if cfg.film_scale { 2 * outputs } else { outputs };
        Self {
            conv1: Conv1dBlock::new(inputs, outputs, cfg.kernel_size, cfg.n_groups, device),
            cond_encoder: LinearConfig::new(cond_dim, cond_channels).init(device),
            conv2: Conv1dBlock::new(outputs, outputs, cfg.kernel_size, cfg.n_groups, device),
            residual_conv: (inputs != outputs).then(|| GemmConv1d::new(inputs, outputs, 1, 1, 0, device)),
            out_channels: outputs,
            film_scale: cfg.film_scale,
        }
    }

    /// `x` `[B, in, T]` and `activated_cond` `[B, cond_dim]`, the condition after the Mish that
    /// begins LeRobot's `cond_encoder`: the same for every block, so [`ConditionalUnet1d::forward`] computes it
    /// once (one activation and its gradient, where each of the twelve blocks had its own).
    fn forward(&self, x: Tensor<B, 3>, activated_cond: Tensor<B, 2>) -> Tensor<B, 3> {
        let out = self.conv1.forward(x.clone());
        let [b, _] = activated_cond.dims();
        let embed = linear(&self.cond_encoder, activated_cond);
        let out =
            if self.film_scale { kernels::film(out, embed) } else { out + embed.reshape([b, self.out_channels, 1]) };
        let out = self.conv2.forward(out);
        let residual = match &self.residual_conv {
            Some(conv) => conv.forward(x),
            None => x,
        };
        out + residual
    }
}

/// The hyper-parameters that shape the U-Net.
#[derive(Debug, Clone, PartialEq)]
pub struct UnetShape {
    /// Action dimension (input and output channels).
    pub action_dim: usize,
    /// Widths of the down path (LeRobot's `down_dims`).
    pub down_dims: Vec<usize>,
    /// Convolution kernel size.
    pub kernel_size: usize,
    /// GroupNorm groups.
    pub n_groups: usize,
    /// Diffusion step embedding size.
    pub step_embed_dim: usize,
    /// FiLM scale modulation.
    pub film_scale: bool,
    /// Size of the global conditioning vector.
    pub global_cond_dim: usize,
}

/// A down or up stage: two residual blocks and a resampling convolution.
#[derive(Module, Debug)]
pub struct Stage<B: Backend> {
    /// First residual block.
    pub res1: ResidualBlock<B>,
    /// Second residual block.
    pub res2: ResidualBlock<B>,
    /// `Conv1d(o, o, 3, stride 2, pad 1)` down (absent on the last down stage).
    pub down: Option<GemmConv1d<B>>,
    /// `ConvTranspose1d(o, o, 4, stride 2, pad 1)` up.
    pub up: Option<ConvTranspose1d<B>>,
}

/// `DiffusionConditionalUnet1d`.
#[derive(Module, Debug)]
pub struct ConditionalUnet1d<B: Backend> {
    /// `diffusion_step_encoder.1`: Linear(E, 4E).
    pub step_linear1: Linear<B>,
    /// `diffusion_step_encoder.3`: Linear(4E, E).
    pub step_linear2: Linear<B>,
    /// `down_modules`.
    pub down: Vec<Stage<B>>,
    /// `mid_modules`.
    pub mid: Vec<ResidualBlock<B>>,
    /// `up_modules`.
    pub up: Vec<Stage<B>>,
    /// `final_conv.0`.
    pub final_block: Conv1dBlock<B>,
    /// `final_conv.1`: `Conv1d(down_dims[0], A, 1)`.
    pub final_conv: GemmConv1d<B>,
    /// The step embedding size.
    pub step_embed_dim: usize,
}

impl<B: Kernels> ConditionalUnet1d<B> {
    /// A freshly initialised U-Net.
    pub fn new(shape: &UnetShape, device: &B::Device) -> Self {
        let e = shape.step_embed_dim;
        let cond_dim = e + shape.global_cond_dim;
        let dims = &shape.down_dims;
        let mut in_out = vec![(shape.action_dim, dims[0])];
        in_out.extend(dims.windows(2).map(|w| (w[0], w[1])));
        let down = in_out
            .iter()
            .enumerate()
            .map(|(i, &(a, b))| Stage {
                res1: ResidualBlock::new(a, b, cond_dim, shape, device),
                res2: ResidualBlock::new(b, b, cond_dim, shape, device),
                down: (i + 1 < in_out.len()).then(|| GemmConv1d::new(b, b, 3, 2, 1, device)),
                up: None,
            })
            .collect();
        let last = *dims.last().expect("down_dims is not empty");
        let mid = vec![
            ResidualBlock::new(last, last, cond_dim, shape, device),
            ResidualBlock::new(last, last, cond_dim, shape, device),
        ];
        // LeRobot's `is_last` test on the up path is never true: every up stage upsamples.
        let up = in_out[1..]
            .iter()
            .rev()
            .map(|&(out, inp)| Stage {
                res1: ResidualBlock::new(inp * 2, out, cond_dim, shape, device),
                res2: ResidualBlock::new(out, out, cond_dim, shape, device),
                down: None,
                up: Some(ConvTranspose1dConfig::new([out, out], 4).with_stride(2).with_padding(1).init(device)),
            })
            .collect();
        Self {
            step_linear1: LinearConfig::new(e, 4 * e).init(device),
            step_linear2: LinearConfig::new(4 * e, e).init(device),
            down,
            mid,
            up,
            final_block: Conv1dBlock::new(dims[0], dims[0], shape.kernel_size, 8, device),
            final_conv: GemmConv1d::new(dims[0], shape.action_dim, 1, 1, 0, device),
            step_embed_dim: e,
        }
    }

    /// `x` `[B, T, A]`, diffusion steps `[B]` (as floats), `global_cond` `[B, G]` →
    /// prediction `[B, T, A]`.
    pub fn forward(&self, x: Tensor<B, 3>, timesteps: Tensor<B, 1>, global_cond: Tensor<B, 2>) -> Tensor<B, 3> {
        // Everything runs in the dtype of the weights (f32, or half precision for a compute copy).
        let dtype = self.step_linear1.weight.val().dtype();
        let x = x.cast(dtype).swap_dims(1, 2);
        let global_cond = global_cond.cast(dtype);
        let embed = sinusoidal_embedding(timesteps, self.step_embed_dim).cast(dtype);
        let embed = linear(&self.step_linear2, mish(linear(&self.step_linear1, embed)));
        let cond = mish(Tensor::cat(vec![embed, global_cond], 1));
        let mut skips = Vec::with_capacity(self.down.len());
        let mut x = x;
        for stage in &self.down {
            x = stage.res2.forward(stage.res1.forward(x, cond.clone()), cond.clone());
            skips.push(x.clone());
            if let Some(down) = &stage.down {
                x = down.forward(x);
            }
        }
        for block in &self.mid {
            x = block.forward(x, cond.clone());
        }
        for stage in &self.up {
            let skip = skips.pop().expect("one skip per down stage");
            x = Tensor::cat(vec![x, skip], 1);
            x = stage.res2.forward(stage.res1.forward(x, cond.clone()), cond.clone());
            if let Some(up) = &stage.up {
                x = conv_transpose1d(up, x);
            }
        }
        let x = self.final_conv.forward(self.final_block.forward(x));
        x.swap_dims(1, 2)
    }
}
