//! YUV 4:2:0 to RGB against the decoder's own converter; the crop at offsets on the device.

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

/// Windows cut at offsets read from the device: each image's window, as indexing the host's
/// values cuts it, for samples of two frames each (the trainer's random crop,
/// `transforms::geometry::random_crop`, the same values as the CPU's slice and gathers), and
/// offsets past the image clamped to the last window inside it.
pub(crate) fn the_crop_kernel_cuts_each_images_window<Gpu: WgpuKernels>() {
    let device = WgpuDevice::default();
    assert!(<Gpu as FrameKernels>::has_crop_kernel());
    let (n, c, h, w, size) = (4usize, 3usize, 10usize, 12usize, (6usize, 7usize));
    let values: Vec<f32> = (0..n * c * h * w).map(|i| i as f32 * 0.5 - 7.0).collect();
    let images = || Tensor::<Gpu, 4>::from_data(TensorData::new(values.clone(), [n, c, h, w]), &device);
    let expected = |windows: &[(usize, usize)]| -> Vec<f32> {
        let mut out = Vec::new();
        for (image, &(top, left)) in windows.iter().enumerate() {
            for channel in 0..c {
                for row in 0..size.0 {
                    for column in 0..size.1 {
                        out.push(values[((image * c + channel) * h + top + row) * w + left + column]);
                    }
                }
            }
        }
        out
    };
    // The kernel itself, an offset pair per image; (9, 9) lies past the image: (4, 5) is cut.
    let windows = [(1, 2), (3, 0), (0, 5), (9, 9)];
    let offsets: Vec<i32> = windows.iter().flat_map(|&(t, l)| [t, l]).collect();
    let offsets = Tensor::<Gpu, 2, Int>::from_data(TensorData::new(offsets, [n, 2]), &device);
    let crops = <Gpu as FrameKernels>::crop_windows(images().into_primitive().tensor(), offsets.into_primitive(), size)
        .expect("the kernel takes these");
    let crops = Tensor::<Gpu, 4>::from_primitive(TensorPrimitive::Float(crops));
    assert_eq!(crops.dims(), [n, c, size.0, size.1]);
    assert_eq!(crops.into_data().to_vec::<f32>().unwrap(), expected(&[(1, 2), (3, 0), (0, 5), (4, 5)]));
    // The trainer's crop: a window per sample of two frames, shared by the batch or not.
    for per_sample in [[(2, 3), (2, 3)], [(4, 1), (0, 5)]] {
        let crops = transforms::geometry::random_crop(images(), &per_sample, 2, size);
        let per_image = [per_sample[0], per_sample[0], per_sample[1], per_sample[1]];
        assert_eq!(crops.into_data().to_vec::<f32>().unwrap(), expected(&per_image), "{per_sample:?}");
    }
}

/// Under autodiff the crop's kernel takes images no gradient flows through, and leaves to burn's
/// operations (which carry it) images that are a tracked leaf or computed from one.
pub(crate) fn the_crop_kernel_under_autodiff_leaves_images_on_a_gradients_path<Gpu: WgpuKernels>() {
    type Tracked<B> = burn::backend::Autodiff<B>;
    let device = WgpuDevice::default();
    let images = || Tensor::<Tracked<Gpu>, 4>::ones([2, 3, 8, 8], &device);
    let crop = |images: Tensor<Tracked<Gpu>, 4>| {
        let windows = Tensor::<Tracked<Gpu>, 2, Int>::zeros([2, 2], &device);
        <Tracked<Gpu> as FrameKernels>::crop_windows(images.into_primitive().tensor(), windows.into_primitive(), (4, 4))
    };
    assert!(crop(images()).is_some(), "images no gradient flows through");
    assert!(crop(images().require_grad()).is_none(), "a tracked leaf");
    assert!(crop(images().require_grad() * 2.0).is_none(), "images computed from a tracked leaf");
}
