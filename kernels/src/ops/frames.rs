//! The frames' family of [`Kernels`](super::Kernels): camera frames uploaded as bytes and
//! converted to RGB on the device, cropped at offsets on the device, and how much one buffer
//! there can hold.

use burn::prelude::*;
use burn::tensor::FloatDType;
use burn::tensor::ops::{FloatTensor, IntTensor};

use super::yuv::Yuv420Terms;

/// The `[N, C, H, W]` of `images` (its `shape`) where the GPU crop kernel takes it with
/// `windows` offsets and windows of `(height, width)`: four dimensions, a window no larger than
/// the image, two offsets an image (fusion checks this before registering the kernel, whose
/// execution cannot fall back).
#[cfg(any(feature = "wgpu-untuned", feature = "cuda-untuned", feature = "gpu-fusion"))]
pub(crate) fn crop_kernel_takes(
    shape: &[usize],
    windows: usize,
    (height, width): (usize, usize),
) -> Option<[usize; 4]> {
    let [n, channels, image_height, image_width] = shape.try_into().ok()?;
    let fits = height <= image_height && width <= image_width && windows == 2 * n;
    fits.then_some([n, channels, image_height, image_width])
}

/// The frames' operations, for backend `Self`: upload, colour conversion, crop, buffer size.
pub trait FrameKernels: Backend {
    /// The largest buffer this backend allocates on `device` in one piece, in bytes: on burn's
    /// cubecl backends, their memory manager's largest page (on CUDA a quarter of the GPU's
    /// memory; on wgpu the largest storage buffer); `None` (the default) where tensors live in
    /// the host's memory, under no such limit.
    fn largest_allocation(_device: &Self::Device) -> Option<u64> {
        None
    }

    /// Whether [`FrameKernels::yuv420_to_rgb`] has a kernel here, known before it runs (fusion
    /// registers it as its custom operation ahead of its execution).
    fn has_yuv420_kernel() -> bool {
        false
    }

    /// `frames` YUV 4:2:0 frames of `height × width` (`planes`: each frame's
    /// [`yuv420_frame_len`](super::yuv::yuv420_frame_len) uint8 values, its luma then its U and V planes of `⌈H/2⌉ × ⌈W/2⌉`,
    /// in an integer tensor of any shape) as RGB in [0, 1], `[frames, 3, H, W]` in `dtype` (what
    /// the device's `Tensor::float` gives): each chroma sample stands for its 2×2 block, and each channel is the sum of
    /// `terms` clamped to [0, 255], over 255, in one launch where the backend has a kernel for
    /// it; `None` where it has none (the caller composes burn's operations).
    fn yuv420_to_rgb(
        planes: IntTensor<Self>,
        frames: usize,
        size: (usize, usize),
        terms: &Yuv420Terms,
        dtype: FloatDType,
    ) -> Option<FloatTensor<Self>> {
        let _ = (planes, frames, size, terms, dtype);
        None
    }

    /// Whether [`FrameKernels::crop_windows`] has a kernel here, known before it runs (fusion
    /// registers it as its custom operation ahead of its execution).
    fn has_crop_kernel() -> bool {
        false
    }

    /// A window of `size` `(height, width)` cut from each image of `images` `[N, C, H, W]`, image
    /// `n`'s `windows[n] = (top, left)` (an integer tensor `[N, 2]` on the device), as a new
    /// contiguous `[N, C, height, width]` tensor, in one launch where the backend has a kernel
    /// for it (an offset past the image, or negative, cuts a window inside it, never reads
    /// outside); `None` where it has none, or the images are on a gradient's path (the caller
    /// slices or gathers). The offsets come from a buffer, not
    /// from the launch or a view's address: a step captured as a CUDA graph crops anew on each
    /// replay.
    fn crop_windows(
        images: FloatTensor<Self>,
        windows: IntTensor<Self>,
        size: (usize, usize),
    ) -> Option<FloatTensor<Self>> {
        let _ = (images, windows, size);
        None
    }

    /// `bytes` on `device` as a contiguous uint8 tensor of `shape`, through the backend's own
    /// upload where it has one (CUDA with the `cudnn` feature: one parallel copy into a reused
    /// page-locked buffer, then an asynchronous copy on burn's stream); `None` elsewhere, and
    /// the caller uses burn's `from_data`.
    fn upload_u8(bytes: &[u8], shape: Shape, device: &Self::Device) -> Option<IntTensor<Self>> {
        let _ = (bytes, shape, device);
        None
    }
}
