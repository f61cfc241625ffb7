//! YUV 4:2:0 → RGB as a decoder's fixed-point converter computes it, for
//! [`FrameKernels::yuv420_to_rgb`](crate::FrameKernels::yuv420_to_rgb): the caller names the converter's
//! terms (the dataset crate's `video::bt601`, swscale's), the kernel evaluates them in integers,
//! so that each level is the decoder's byte on any device (only its division by 255 is in
//! floating point, as for RGB frames).

/// One term of the conversion in 16-bit fixed point: `((value − offset) · 2^shift · multiplier)
/// >> 16`, the shift arithmetic (the floor of the product over 2¹⁶).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedPointTerm {
    /// Subtracted from the 8-bit value first (16 for luma, 128 for chroma).
    pub offset: i32,
    /// The left shift before the product.
    pub shift: u32,
    /// The multiplier, in units of 2⁻¹⁶ after the shift.
    pub multiplier: i32,
}

/// The five terms of limited-range YUV → RGB: `R = luma(Y) + red_v(V)`, `G = luma(Y) +
/// green_u(U) + green_v(V)`, `B = luma(Y) + blue_u(U)`, each clamped to [0, 255].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Yuv420Terms {
    /// Y's term, in every channel.
    pub luma: FixedPointTerm,
    /// V's term in red.
    pub red_v: FixedPointTerm,
    /// U's term in green.
    pub green_u: FixedPointTerm,
    /// V's term in green.
    pub green_v: FixedPointTerm,
    /// U's term in blue.
    pub blue_u: FixedPointTerm,
}

/// Whether the GPU kernel takes `frames` frames of `height × width` in `planes` values: some
/// pixels, and exactly the frames' bytes (fusion checks this before registering the kernel,
/// whose execution cannot fall back).
#[cfg(any(feature = "wgpu-untuned", feature = "cuda-untuned", feature = "gpu-fusion"))]
pub(crate) fn yuv420_kernel_takes(planes: usize, frames: usize, (height, width): (usize, usize)) -> bool {
    frames * height * width > 0 && planes == frames * yuv420_frame_len(height, width)
}

/// The bytes of one YUV 4:2:0 frame of `height × width`: `H·W` of luma, then `⌈H/2⌉·⌈W/2⌉` of
/// U and of V.
pub fn yuv420_frame_len(height: usize, width: usize) -> usize {
    height * width + 2 * height.div_ceil(2) * width.div_ceil(2)
}
