//! A bias's gradient along the channels, a cube per channel.

use cubecl::prelude::*;

use super::launch::UNITS_PER_CUBE;
use super::sums::cube_sum;

/// Cube `c` sums channel `c` of `output_grad` `[N, C, S]` (contiguous, f32 or a half
/// precision) over the samples and positions in f32, its units a stride each and then the
/// cube's halves, into `bias_grad[c]` (in `output_grad`'s dtype).
#[cube(launch_unchecked)]
pub(crate) fn channel_bias_grad_kernel<F: Float>(
    output_grad: &Tensor<F>,
    bias_grad: &mut Tensor<F>,
    channels: usize,
    positions: usize,
    #[define(F)] _dtype: StorageType,
) {
    let channel = CUBE_POS_X as usize;
    let count = output_grad.len() / channels;
    let mut sum = f32::new(0.0);
    let mut i = UNIT_POS_X as usize;
    while i < count {
        let (sample, position) = (i / positions, i % positions);
        sum += f32::cast_from(output_grad[(sample * channels + channel) * positions + position]);
        i += CUBE_DIM_X as usize;
    }
    let mut partial = SharedMemory::<f32>::new(UNITS_PER_CUBE as usize);
    let total = cube_sum::<f32>(&mut partial, sum);
    if UNIT_POS_X == 0 {
        bias_grad[channel] = F::cast_from(total);
    }
}
