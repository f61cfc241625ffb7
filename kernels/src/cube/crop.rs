//! Windows cut from images at offsets read from a device buffer, in one launch: the random crop
//! of a training step without its offsets in the launch or in a view's address, so that a step
//! captured as a CUDA graph crops each replay's windows (docs/plans/cuda-graph.md).

use cubecl::prelude::*;

/// The units stride over the `total` values of `out` `[N, C, height, width]`, each copying its
/// value from `images` `[N, C, image height, image width]` (contiguous) at its image's window:
/// `windows[2n]` rows down and `windows[2n + 1]` columns across, each clamped so that the
/// window lies inside the image (an offset past it cuts the last window; a negative one, read
/// as a huge unsigned value, the last too: never a read outside).
#[cube(launch_unchecked)]
#[expect(clippy::too_many_arguments, reason = "a kernel's buffers and sizes are its arguments")]
pub(crate) fn crop_kernel<F: Float, I: Int>(
    images: &Tensor<F>,
    windows: &Tensor<I>,
    out: &mut Tensor<F>,
    total: usize,
    channels: usize,
    height: usize,
    width: usize,
    image_height: usize,
    image_width: usize,
    #[define(F, I)] _dtypes: [StorageType; 2],
) {
    let stride = (CUBE_COUNT_X * CUBE_DIM_X) as usize;
    let mut k = ABSOLUTE_POS_X as usize;
    while k < total {
        let column = k % width;
        let row = (k / width) % height;
        let plane = k / (width * height);
        let image = plane / channels;
        let top = usize::min(usize::cast_from(windows[2 * image]), image_height - height);
        let left = usize::min(usize::cast_from(windows[2 * image + 1]), image_width - width);
        out[k] = images[(plane * image_height + top + row) * image_width + left + column];
        k += stride;
    }
}
