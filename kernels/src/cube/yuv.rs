//! YUV 4:2:0 frames to RGB in one launch, in the decoder's fixed-point arithmetic.

use cubecl::prelude::*;

/// One fixed-point term of YUV → RGB ([`crate::FixedPointTerm`]), its shift folded into the
/// multiplier (`multiplier · 2^shift`: the same products, and no left shift of a negative
/// value, which C++ leaves undefined).
#[derive(CubeLaunch, CubeType)]
pub(crate) struct YuvTerm {
    pub(crate) offset: i32,
    pub(crate) multiplier: i32,
}

/// `(value − offset) · multiplier >> 16`, the shift arithmetic.
#[cube]
pub(crate) fn yuv_term(value: i32, term: &YuvTerm) -> i32 {
    ((value - term.offset) * term.multiplier) >> 16
}

/// `value` clamped to [0, 255], over 255.
#[cube]
pub(crate) fn yuv_level<F: Float>(value: i32) -> F {
    let clamped = select(value < 0, 0, select(value > 255, 255, value));
    F::cast_from(clamped) / F::new(255.0)
}

/// The units of the launch stride over the `total` pixels of YUV 4:2:0 frames (`planes`, each
/// frame's luma of `area` bytes, rows of `width`, then its two chroma planes of `chroma_len` bytes, rows of
/// `chroma_width`), each writing its pixel's R, G and B (`rgb`, `[frames, 3, height, width]`)
/// as levels over 255, from its luma and the chroma sample of its 2×2 block, in integers.
#[cube(launch_unchecked)]
#[expect(clippy::too_many_arguments, reason = "a kernel's buffers and sizes are its arguments")]
pub(crate) fn yuv420_kernel<I: Int, F: Float>(
    planes: &Tensor<I>,
    rgb: &mut Tensor<F>,
    total: usize,
    area: usize,
    width: usize,
    chroma_width: usize,
    chroma_len: usize,
    luma: &YuvTerm,
    red_v: &YuvTerm,
    green_u: &YuvTerm,
    green_v: &YuvTerm,
    blue_u: &YuvTerm,
    #[define(I, F)] _dtypes: [StorageType; 2],
) {
    let stride = (CUBE_COUNT_X * CUBE_DIM_X) as usize;
    let mut i = ABSOLUTE_POS_X as usize;
    while i < total {
        let frame = i / area;
        let pixel = i % area;
        let start = frame * (area + 2 * chroma_len);
        let chroma = (pixel / width / 2) * chroma_width + (pixel % width) / 2;
        let y = yuv_term(i32::cast_from(planes[start + pixel]), luma);
        let u = i32::cast_from(planes[start + area + chroma]);
        let v = i32::cast_from(planes[start + area + chroma_len + chroma]);
        let out = frame * 3 * area + pixel;
        rgb[out] = yuv_level::<F>(y + yuv_term(v, red_v));
        rgb[out + area] = yuv_level::<F>(y + yuv_term(u, green_u) + yuv_term(v, green_v));
        rgb[out + 2 * area] = yuv_level::<F>(y + yuv_term(u, blue_u));
        i += stride;
    }
}
