//! Camera frames onto the device: the loader's uint8 buffer goes over as uint8 (a quarter of
//! the bytes of float32), and becomes float in [0, 1] there; YUV 4:2:0 planes (half the bytes
//! of RGB) become RGB there too.

use burn::prelude::*;
use burn::tensor::{DType, TensorPrimitive};
use datasets::FrameShape;
use datasets::video::bt601::{self, B_U, G_U, G_V, LUMA, R_V};
use kernels::{FixedPointTerm, Kernels, Yuv420Terms};

/// Uploads channel-first uint8 frames, `[N, C, H, W]` (any leading dimensions flattened into
/// `N`), with one host-to-device copy, and converts them to float in [0, 1] on the device
/// (`x / 255`, as LeRobot's `batch[k].float() / 255`).
///
/// Backends that cannot hold uint8 tensors receive the frames widened to their integer type.
pub fn frames_to_float<B: Kernels>(bytes: &[u8], shape: [usize; 4], device: &B::Device) -> Tensor<B, 4> {
    int_frames_to_float(frames_to_int(bytes, shape, device))
}

/// uint8 frames already on the device as float in [0, 1] (`x / 255`, as [`frames_to_float`]).
pub fn int_frames_to_float<B: Backend>(frames: Tensor<B, 4, Int>) -> Tensor<B, 4> {
    frames.float().div_scalar(255.0)
}

/// Uploads YUV 4:2:0 frames, `n` of `height × width` (each `H·W` bytes of Y, then the
/// `⌈H/2⌉·⌈W/2⌉` bytes of U and of V), with one host-to-device copy, and converts them on the
/// device to RGB float in [0, 1], `[n, 3, H, W]`: each chroma sample stands for its 2×2 block
/// (as swscale's unscaled converter takes it), BT.601 limited range with swscale's truncations
/// ([`datasets::video::bt601`]), so that the frames are the decoder's RGB frames (LeRobot's) to
/// the bit. One launch where the backend has the kernel ([`FrameKernels::yuv420_to_rgb`](kernels::FrameKernels::yuv420_to_rgb), the
/// decoder's fixed-point terms in integers); elsewhere burn's operations, on the same terms in
/// `f32`.
pub fn yuv420_frames_to_float<B: Kernels>(
    bytes: &[u8],
    n: usize,
    size: (usize, usize),
    device: &B::Device,
) -> Tensor<B, 4> {
    let planes = frames_to_int::<B>(bytes, [n, 1, 1, kernels::yuv420_frame_len(size.0, size.1)], device);
    yuv420_planes_to_rgb(planes, size)
}

/// The conversion of [`yuv420_frames_to_float`] on planes already on the device (`[n, 1, 1,
/// frame length]`, as uploaded): the backend's kernel where it has one, else
/// [`yuv420_to_rgb_by_operations`].
pub fn yuv420_planes_to_rgb<B: Kernels>(planes: Tensor<B, 4, Int>, size: (usize, usize)) -> Tensor<B, 4> {
    let n = planes.dims()[0];
    let dtype = burn::tensor::get_device_settings::<B>(&planes.device()).float_dtype;
    if let Some(rgb) = B::yuv420_to_rgb(planes.clone().into_primitive(), n, size, &decoder_terms(), dtype) {
        return Tensor::from_primitive(TensorPrimitive::Float(rgb));
    }
    yuv420_to_rgb_by_operations(planes, size)
}

/// The conversion of [`yuv420_frames_to_float`] in burn's operations (about 26 of them, each
/// reading and writing frame-sized tensors), for backends without the kernel: `planes` is
/// `[n, 1, 1, H·W + 2·⌈H/2⌉·⌈W/2⌉]` as uploaded, the result `[n, 3, H, W]`.
pub fn yuv420_to_rgb_by_operations<B: Backend>(planes: Tensor<B, 4, Int>, size: (usize, usize)) -> Tensor<B, 4> {
    let (h, w) = size;
    let [_, (ch, cw), _] = FrameShape { channels: 3, height: h, width: w }.yuv420_planes();
    let (luma, chroma) = (h * w, ch * cw);
    let n = planes.dims()[0];
    let planes: Tensor<B, 2> = planes.float().reshape([n, luma + 2 * chroma]);
    let y = planes.clone().slice(s![.., 0..luma]).reshape([n, 1, h, w]).sub_scalar(16.0).mul_scalar(LUMA).floor();
    let upsampled = |from: usize| -> Tensor<B, 4> {
        let plane: Tensor<B, 5> = planes.clone().slice(s![.., from..from + chroma]).reshape([n, ch, 1, cw, 1]);
        let blocks = plane.repeat_dim(2, 2).repeat_dim(4, 2).reshape([n, 1, 2 * ch, 2 * cw]);
        blocks.slice(s![.., .., 0..h, 0..w]).sub_scalar(128.0)
    };
    let (u, v) = (upsampled(luma), upsampled(luma + chroma));
    let r = y.clone() + v.clone().mul_scalar(R_V).floor();
    let g = y.clone() + u.clone().mul_scalar(-G_U).floor() + v.mul_scalar(-G_V).floor();
    let b = y + u.mul_scalar(B_U).floor();
    Tensor::cat(vec![r, g, b], 1).clamp(0.0, 255.0).div_scalar(255.0)
}

/// The decoder's fixed-point terms ([`bt601`], swscale's), as the device's kernel
/// ([`FrameKernels::yuv420_to_rgb`](kernels::FrameKernels::yuv420_to_rgb)) takes them.
pub fn decoder_terms() -> Yuv420Terms {
    let term =
        |t: bt601::Term| FixedPointTerm { offset: t.offset.into(), shift: t.shift, multiplier: t.multiplier.into() };
    Yuv420Terms {
        luma: term(bt601::LUMA_TERM),
        red_v: term(bt601::RED_V_TERM),
        green_u: term(bt601::GREEN_U_TERM),
        green_v: term(bt601::GREEN_V_TERM),
        blue_u: term(bt601::BLUE_U_TERM),
    }
}

/// Uploads uint8 frames as an integer tensor, uint8 on the device where the backend supports it:
/// through the backend's own upload where it has one ([`FrameKernels::upload_u8`](kernels::FrameKernels::upload_u8): on CUDA a reused
/// page-locked buffer and an asynchronous copy), else burn's `from_data`.
pub fn frames_to_int<B: Kernels>(bytes: &[u8], shape: [usize; 4], device: &B::Device) -> Tensor<B, 4, Int> {
    assert_eq!(bytes.len(), shape.iter().product::<usize>(), "frames of shape {shape:?}");
    if let Some(frames) = B::upload_u8(bytes, shape.into(), device) {
        return Tensor::from_primitive(frames);
    }
    if B::supports_dtype(device, DType::U8) {
        Tensor::from_data(TensorData::new(bytes.to_vec(), shape), (device, DType::U8))
    } else {
        let wide: Vec<i32> = bytes.iter().map(|&b| i32::from(b)).collect();
        Tensor::from_data(TensorData::new(wide, shape), device)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Flex;

    /// One 3×3 frame (chroma planes of 2×2) of uniform colour `(y, u, v)`, as RGB levels.
    fn convert(y: u8, u: u8, v: u8) -> Vec<f32> {
        let mut bytes = vec![y; 9];
        bytes.extend([u; 4]);
        bytes.extend([v; 4]);
        let rgb = yuv420_frames_to_float::<Flex>(&bytes, 1, (3, 3), &Default::default());
        assert_eq!(rgb.dims(), [1, 3, 3, 3]);
        rgb.mul_scalar(255.0).into_data().to_vec::<f32>().unwrap()
    }

    #[test]
    fn limited_range_bt601_becomes_rgb_levels() {
        let level = |y, u, v| {
            let px = convert(y, u, v);
            assert!(px.iter().all(|p| p.fract() == 0.0), "whole levels: {px:?}");
            [px[0], px[9], px[18]]
        };
        assert_eq!(level(16, 128, 128), [0.0, 0.0, 0.0]);
        assert_eq!(level(235, 128, 128), [255.0, 255.0, 255.0]);
        assert_eq!(level(126, 128, 128), [128.0, 128.0, 128.0]);
        // BT.601's red, green and blue at full saturation, clamped into [0, 255]: within two
        // levels (their YUV is rounded to whole levels, and each term truncated, as swscale's).
        let near = |got: [f32; 3], want: [f32; 3]| got.iter().zip(want).all(|(g, w)| (g - w).abs() <= 2.0);
        assert!(near(level(81, 90, 240), [255.0, 0.0, 0.0]), "{:?}", level(81, 90, 240));
        assert!(near(level(145, 54, 34), [0.0, 255.0, 0.0]), "{:?}", level(145, 54, 34));
        assert!(near(level(41, 240, 110), [0.0, 0.0, 255.0]), "{:?}", level(41, 240, 110));
    }

    #[test]
    fn each_chroma_sample_colours_its_two_by_two_block() {
        // 3×3 luma at 126 (grey); U of the four chroma samples: only the top-left one is blue.
        let mut bytes = vec![126u8; 9];
        bytes.extend([240, 128, 128, 128]);
        bytes.extend([128; 4]);
        let rgb = yuv420_frames_to_float::<Flex>(&bytes, 1, (3, 3), &Default::default());
        let blue: Vec<f32> = rgb.slice(s![0..1, 2..3, .., ..]).mul_scalar(255.0).into_data().to_vec().unwrap();
        let bluer = |v: f32| v > 200.0;
        let expected = [true, true, false, true, true, false, false, false, false];
        assert_eq!(blue.iter().map(|&v| bluer(v)).collect::<Vec<_>>(), expected, "{blue:?}");
    }
}
