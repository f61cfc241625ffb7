//! A transposed convolution is the convolution it transposes, run backwards: its output is that
//! convolution's input gradient (with the transposed convolution's input as the output
//! gradient), its input gradient is that convolution's output, and its weight gradient is that
//! convolution's weight gradient with the two activations' roles swapped. The weight is the same
//! tensor, `[C_in, C_out / groups, kh, kw]`, read as the convolution's `[O, C / groups, kh, kw]`.
//! So the backends' own convolution passes (the CPU's matrix products, cuDNN) compute transposed
//! convolutions too.

use burn::tensor::ops::{ConvOptions, ConvTransposeOptions};

/// The convolution that `options` transposes, where its passes give the transposed one's
/// exactly: on every axis an output padding below the stride. (A larger one, allowed where the
/// dilation exceeds the stride, makes the convolution of the transposed output longer than the
/// transposed input.)
pub fn transposed_convolution(options: &ConvTransposeOptions<2>) -> Option<ConvOptions<2>> {
    let exact = (0..2).all(|axis| options.padding_out[axis] < options.stride[axis]);
    exact.then(|| ConvOptions::new(options.stride, options.padding, options.dilation, options.groups))
}

/// The output shape of a transposed convolution of `x` `[N, C_in, H, W]` by `weight`
/// `[C_in, C_out / groups, kh, kw]`, `[N, C_out, H', W']` with burn's (and torch's)
/// `H' = (H − 1)·stride + dilation·(kh − 1) + 1 + padding_out − 2·padding`; `None` where a size
/// would be below 1 or the groups do not divide the channels.
pub fn conv_transpose2d_output_shape(
    x: [usize; 4],
    weight: [usize; 4],
    options: &ConvTransposeOptions<2>,
) -> Option<[usize; 4]> {
    let [batch, channels, height, width] = x;
    let [weight_in, group_outputs, kh, kw] = weight;
    if options.groups == 0 || weight_in != channels || channels % options.groups != 0 {
        return None;
    }
    let size = |input: usize, kernel: usize, axis: usize| {
        let spread = (input.checked_sub(1)? * options.stride[axis])
            .checked_add(options.dilation[axis] * kernel.checked_sub(1)? + 1 + options.padding_out[axis])?;
        spread.checked_sub(2 * options.padding[axis]).filter(|&size| size > 0)
    };
    Some([batch, group_outputs * options.groups, size(height, kh, 0)?, size(width, kw, 1)?])
}
