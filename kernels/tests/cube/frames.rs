//! YUV 4:2:0 to RGB against the decoder's own converter.

use burn::backend::wgpu::WgpuDevice;
use burn::prelude::*;
use burn::tensor::{FloatDType, TensorPrimitive};
use kernels::FrameKernels;

use super::WgpuKernels;

/// Two YUV 4:2:0 frames a launch (`bt601::check_frames`: every luma value under every (U, V)
/// pair at the even width, most of them at the odd one), uploaded as the trainer uploads them
/// (`transforms::frames_to_int`): the kernel's RGB levels are the bytes of the decoder's own
/// converter (`bt601::planes_to_chw`, swscale's arithmetic), every one.
pub(crate) fn the_yuv_kernel_gives_the_decoders_bytes_for_every_value<Gpu: WgpuKernels>() {
    let device = WgpuDevice::default();
    assert!(<Gpu as FrameKernels>::has_yuv420_kernel());
    for (h, w) in [(512usize, 512usize), (512, 509)] {
        let (planes, expected) = datasets::video::bt601::check_frames(h, w);
        let frame_len = kernels::yuv420_frame_len(h, w);
        let ints = transforms::frames_to_int::<Gpu>(&planes, [2, 1, 1, frame_len], &device);
        let terms = transforms::decoder_terms();
        let rgb =
            <Gpu as FrameKernels>::yuv420_to_rgb(ints.into_primitive(), 2, (h, w), &terms, FloatDType::F32).unwrap();
        let rgb = Tensor::<Gpu, 4>::from_primitive(TensorPrimitive::Float(rgb));
        assert_eq!(rgb.dims(), [2, 3, h, w]);
        let levels: Vec<f32> = rgb.into_data().to_vec().unwrap();
        let differing = levels.iter().zip(&expected).filter(|(l, e)| (*l * 255.0).round() != f32::from(**e)).count();
        assert_eq!(differing, 0, "{h}x{w}: of {} values", levels.len());
    }
}
