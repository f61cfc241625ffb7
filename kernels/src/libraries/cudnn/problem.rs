//! One 2-D convolution as cuDNN describes it, from burn's shapes and options: the sizes of the
//! input, weight and output, padding, strides, dilation, groups and element type, checked before
//! any descriptor is made. Nothing here needs a GPU.

use burn::tensor::DType;
use burn::tensor::ops::{ConvOptions, ConvTransposeOptions};

/// The element types cuDNN convolves for us; every one accumulates in f32.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConvDataType {
    /// f32 (TF32 tensor cores allowed unless exact f32 is asked for).
    F32,
    /// IEEE half precision.
    F16,
    /// bfloat16.
    Bf16,
}

impl ConvDataType {
    /// The type of burn's `dtype`, if cuDNN convolves it.
    pub fn of(dtype: DType) -> Option<Self> {
        match dtype {
            DType::F32 | DType::Flex32 => Some(Self::F32),
            DType::F16 => Some(Self::F16),
            DType::BF16 => Some(Self::Bf16),
            _ => None,
        }
    }
}

/// Why a convolution cannot be given to cuDNN (the caller takes burn's then).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProblemError {
    /// An element type cuDNN does not convolve here.
    #[error("cuDNN convolves f32, f16 and bf16 tensors, not {0:?}")]
    DataType(DType),
    /// The input and the weight of different element types.
    #[error("the input is {input:?} and the weight {weight:?}: one element type for both")]
    MixedTypes {
        /// The input's type.
        input: DType,
        /// The weight's type.
        weight: DType,
    },
    /// Shapes or options no convolution has.
    #[error("input {input:?} and weight {weight:?} with {options:?}: {why}")]
    Shapes {
        /// `[N, C, H, W]`.
        input: [usize; 4],
        /// `[O, C / groups, kh, kw]`.
        weight: [usize; 4],
        /// burn's options, as given.
        options: String,
        /// What does not fit.
        why: &'static str,
    },
    /// A size beyond cuDNN's 32-bit integers.
    #[error("a size of {0} is beyond cuDNN's 32-bit sizes")]
    TooLarge(usize),
}

/// How a problem's tensors lie in memory (their shapes are burn's either way: `[N, C, H, W]`,
/// a weight's `[O, C / groups, kh, kw]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ConvLayout {
    /// Channels-first: `[N, C, H, W]` activations, `[O, C, kh, kw]` weights (burn's and torch's
    /// default).
    #[default]
    Nchw,
    /// Channels-last: `[N, H, W, C]` activations, `[O, kh, kw, C]` weights (KRSC): what cuDNN's
    /// tensor-core kernels compute in, with no transposes around them.
    Nhwc,
}

impl ConvLayout {
    /// The element strides of a tensor of `dims` (`[N, C, H, W]`, or a weight's `[O, C, kh,
    /// kw]`) lying in this layout.
    pub fn strides(self, dims: [i32; 4]) -> [i64; 4] {
        let [_, c, h, w] = dims.map(i64::from);
        match self {
            Self::Nchw => [c * h * w, h * w, w, 1],
            Self::Nhwc => [h * w * c, 1, w * c, c],
        }
    }
}

/// A convolution `input` `[N, C, H, W]` by `weight` `[O, C / groups, kh, kw]` giving `output`
/// `[N, O, H', W']`, as cuDNN's descriptors take it (cross-correlation, as burn and torch
/// compute it). Keys the algorithms found for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConvProblem {
    /// `[N, C, H, W]`.
    pub input: [i32; 4],
    /// `[O, C / groups, kh, kw]`.
    pub weight: [i32; 4],
    /// `[N, O, H', W']`.
    pub output: [i32; 4],
    /// Zeros added on each side, `[h, w]`.
    pub padding: [i32; 2],
    /// `[h, w]`.
    pub stride: [i32; 2],
    /// `[h, w]`.
    pub dilation: [i32; 2],
    /// Channel groups.
    pub groups: i32,
    /// The element type of every tensor.
    pub data_type: ConvDataType,
    /// How every tensor lies in memory ([`ConvLayout::Nchw`] unless [`ConvProblem::in_layout`]
    /// says otherwise).
    pub layout: ConvLayout,
}

impl ConvProblem {
    /// The problem burn's `conv2d(input, weight, options)` poses, with tensors of `dtype`.
    pub fn new(
        input: [usize; 4],
        weight: [usize; 4],
        options: &ConvOptions<2>,
        [input_type, weight_type]: [DType; 2],
    ) -> Result<Self, ProblemError> {
        if input_type != weight_type {
            return Err(ProblemError::MixedTypes { input: input_type, weight: weight_type });
        }
        let data_type = ConvDataType::of(input_type).ok_or(ProblemError::DataType(input_type))?;
        let shapes = |why| ProblemError::Shapes { input, weight, options: format!("{options:?}"), why };
        let [batch, channels, height, width] = input;
        let [outputs, group_channels, kernel_h, kernel_w] = weight;
        let groups = options.groups;
        if groups == 0 || outputs % groups != 0 {
            return Err(shapes("the groups must divide the output channels"));
        }
        if group_channels * groups != channels {
            return Err(shapes("the weight's input channels times the groups must be the input's channels"));
        }
        if options.stride.contains(&0) || options.dilation.contains(&0) {
            return Err(shapes("strides and dilations start at 1"));
        }
        if input.contains(&0) || weight.contains(&0) {
            return Err(shapes("every size starts at 1"));
        }
        let out = |size: usize, kernel: usize, axis: usize| {
            let padded = size + 2 * options.padding[axis];
            let reach = options.dilation[axis] * (kernel - 1) + 1;
            (padded >= reach).then(|| (padded - reach) / options.stride[axis] + 1)
        };
        let (Some(out_h), Some(out_w)) = (out(height, kernel_h, 0), out(width, kernel_w, 1)) else {
            return Err(shapes("the kernel reaches past the padded input"));
        };
        let small = |size: usize| i32::try_from(size).map_err(|_| ProblemError::TooLarge(size));
        let four = |dims: [usize; 4]| -> Result<[i32; 4], ProblemError> {
            Ok([small(dims[0])?, small(dims[1])?, small(dims[2])?, small(dims[3])?])
        };
        let two = |dims: [usize; 2]| -> Result<[i32; 2], ProblemError> { Ok([small(dims[0])?, small(dims[1])?]) };
        let output = [batch, outputs, out_h, out_w];
        // cuDNN indexes each tensor with 32-bit integers.
        for dims in [input, weight, output] {
            small(dims.iter().product())?;
        }
        Ok(Self {
            input: four(input)?,
            weight: four(weight)?,
            output: four(output)?,
            padding: two(options.padding)?,
            stride: two(options.stride)?,
            dilation: two(options.dilation)?,
            groups: small(groups)?,
            data_type,
            layout: ConvLayout::Nchw,
        })
    }

    /// The same problem with its tensors lying in `layout`.
    pub fn in_layout(self, layout: ConvLayout) -> Self {
        Self { layout, ..self }
    }

    /// The problem whose input gradient is burn's `conv_transpose2d(x, weight, options)` of an
    /// `x` of shape `input`: the convolution it transposes ([`crate::transposed_convolution`]),
    /// whose input is the transposed convolution's output and whose output is `x`.
    pub fn transposed(
        input: [usize; 4],
        weight: [usize; 4],
        options: &ConvTransposeOptions<2>,
        types: [DType; 2],
    ) -> Result<Self, ProblemError> {
        let shapes = |why| ProblemError::Shapes { input, weight, options: format!("{options:?}"), why };
        let convolution = crate::transposed_convolution(options)
            .ok_or_else(|| shapes("an output padding at or above the stride has no convolution to transpose"))?;
        let output = crate::conv_transpose2d_output_shape(input, weight, options)
            .ok_or_else(|| shapes("the channels, groups and sizes give no transposed convolution"))?;
        let problem = Self::new(output, weight, &convolution, types)?;
        if problem.output_shape() != input {
            return Err(shapes("the convolution transposed does not give back the input's shape"));
        }
        Ok(problem)
    }

    /// The output's shape, `[N, O, H', W']`.
    pub fn output_shape(&self) -> [usize; 4] {
        self.output.map(|d| d as usize)
    }

    /// Multiply-adds of the forward pass (the two backward passes each do as many).
    pub fn multiply_adds(&self) -> u64 {
        let [n, o, h, w] = self.output.map(|d| d as u64);
        let [_, c, kh, kw] = self.weight.map(|d| d as u64);
        n * o * h * w * c * kh * kw
    }
}
