//! FiLM's scale and shift, one launch each way.

use cubecl::prelude::*;

/// The units of the launch stride over FiLM's `x` `[B, C, T]` (contiguous, `total` elements):
/// `y = embedding[b, c]·x + embedding[b, C + c]`, `embedding` `[B, 2C]`, in their dtype `F`.
#[cube(launch_unchecked)]
pub(crate) fn film_kernel<F: Float>(
    x: &Tensor<F>,
    embedding: &Tensor<F>,
    y: &mut Tensor<F>,
    total: usize,
    channels: usize,
    positions: usize,
    #[define(F)] _dtype: StorageType,
) {
    let stride = (CUBE_COUNT_X * CUBE_DIM_X) as usize;
    let mut i = ABSOLUTE_POS_X as usize;
    while i < total {
        let row = i / positions;
        let scale_at = row + (row / channels) * channels;
        y[i] = embedding[scale_at] * x[i] + embedding[scale_at + channels];
        i += stride;
    }
}

/// The units of the launch stride over FiLM's rows (sample `b`, channel `c`; `rows` in all),
/// each taking its `positions` in order: `dx = scale·dy`, and the row's `Σ dy·x` and `Σ dy` into
/// `embedding_grad[b, c]` and `embedding_grad[b, C + c]`, summed in `A` (f32: in a
/// half-precision forward, as torch's reductions accumulate).
#[cube(launch_unchecked)]
#[expect(clippy::too_many_arguments, reason = "a kernel's buffers are its arguments")]
pub(crate) fn film_backward_kernel<F: Float, A: Float>(
    x: &Tensor<F>,
    embedding: &Tensor<F>,
    output_grad: &Tensor<F>,
    input_grad: &mut Tensor<F>,
    embedding_grad: &mut Tensor<F>,
    rows: usize,
    channels: usize,
    positions: usize,
    #[define(F, A)] _dtypes: [StorageType; 2],
) {
    let stride = (CUBE_COUNT_X * CUBE_DIM_X) as usize;
    let mut row = ABSOLUTE_POS_X as usize;
    while row < rows {
        let scale_at = row + (row / channels) * channels;
        let scale = embedding[scale_at];
        let mut sum_dy_x = A::new(0.0);
        let mut sum_dy = A::new(0.0);
        for t in 0..positions {
            let at = row * positions + t;
            let dy = output_grad[at];
            input_grad[at] = dy * scale;
            sum_dy_x += A::cast_from(dy) * A::cast_from(x[at]);
            sum_dy += A::cast_from(dy);
        }
        embedding_grad[scale_at] = F::cast_from(sum_dy_x);
        embedding_grad[scale_at + channels] = F::cast_from(sum_dy);
        row += stride;
    }
}
