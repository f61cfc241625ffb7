//! burn's `Linear` layers run through the backend's own matrix products where it has them
//! ([`kernels::linear`]: cuBLAS on cuda with `LEROBOT_RS_LINEAR=cublas`), burn's `linear`
//! elsewhere.

use burn::module::Param;
use burn::nn::Linear;
use burn::prelude::*;
use kernels::Kernels;

/// `layer`'s forward on `x` (`[..., d_input]` to `[..., d_output]`), as `Linear::forward`
/// computes it, through [`kernels::linear`].
pub fn linear<B: Kernels, const D: usize>(layer: &Linear<B>, x: Tensor<B, D>) -> Tensor<B, D> {
    kernels::linear(x, layer.weight.val(), layer.bias.as_ref().map(Param::val))
}
