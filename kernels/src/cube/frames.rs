//! [`FrameKernels`] on burn's cubecl backends: YUV → RGB and the crop as our kernels, the upload
//! through the runtime's library ([`RuntimeLibraries`]), the memory manager's largest page.
#![expect(unsafe_code, reason = "cubecl launches a kernel without bounds checks only through unsafe")]

use burn::tensor::ops::{FloatTensor, IntTensor};
use burn::tensor::{FloatDType, Shape};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::{BoolElement, CubeBackend, FloatElement, IntElement};
use cubecl::CubeDim;

use super::crop::crop_kernel;
use super::launch::{UNITS_PER_CUBE, striding_cubes};
use super::tensors::empty_like;
use super::yuv::{YuvTermLaunch, yuv420_kernel};
use crate::{FrameKernels, RuntimeLibraries, Yuv420Terms};

impl<R: RuntimeLibraries, F: FloatElement, I: IntElement, BT: BoolElement> FrameKernels for CubeBackend<R, F, I, BT> {
    fn has_yuv420_kernel() -> bool {
        true
    }

    fn yuv420_to_rgb(
        planes: IntTensor<Self>,
        frames: usize,
        (height, width): (usize, usize),
        terms: &Yuv420Terms,
        dtype: FloatDType,
    ) -> Option<FloatTensor<Self>> {
        if !crate::ops::yuv::yuv420_kernel_takes(planes.meta.num_elements(), frames, (height, width)) {
            return None;
        }
        let planes = into_contiguous(planes);
        let rgb = empty_like(&planes, Shape::new([frames, 3, height, width]), dtype.into());
        let total = frames * height * width;
        let chroma_width = width.div_ceil(2);
        let term = |t: crate::FixedPointTerm| YuvTermLaunch::new(t.offset, t.multiplier << t.shift);
        // SAFETY: unit `i < total` (pixel `p` of frame `f`, `f < frames`) reads `planes` at
        // `f·frame_len` plus `p` and two chroma offsets under `frame_len` (the planes hold
        // `frames · frame_len` values, contiguous; checked), and writes `rgb` at `f·3·H·W + p`
        // plus `0`, `H·W` and `2·H·W`: within `[frames, 3, H, W]`, new and contiguous.
        unsafe {
            yuv420_kernel::launch_unchecked::<R>(
                &planes.client,
                striding_cubes(total),
                CubeDim::new_1d(UNITS_PER_CUBE),
                planes.clone().into_tensor_arg(),
                rgb.clone().into_tensor_arg(),
                total,
                height * width,
                width,
                chroma_width,
                height.div_ceil(2) * chroma_width,
                term(terms.luma),
                term(terms.red_v),
                term(terms.green_u),
                term(terms.green_v),
                term(terms.blue_u),
                [planes.dtype.into(), rgb.dtype.into()],
            );
        }
        Some(rgb)
    }

    fn has_crop_kernel() -> bool {
        true
    }

    fn crop_windows(
        images: FloatTensor<Self>,
        windows: IntTensor<Self>,
        (height, width): (usize, usize),
    ) -> Option<FloatTensor<Self>> {
        let [n, channels, image_height, image_width] = crate::ops::frames::crop_kernel_takes(
            images.meta.shape().as_slice(),
            windows.meta.num_elements(),
            (height, width),
        )?;
        let (images, windows) = (into_contiguous(images), into_contiguous(windows));
        let out = empty_like(&images, Shape::new([n, channels, height, width]), images.dtype);
        let total = out.meta.num_elements();
        // SAFETY: unit `k < total` writes `out` (new, contiguous, `total` values) at `k`, reads
        // `windows` at `2n` and `2n + 1` for its image `n < N` (it holds `2N` values, checked),
        // and `images` (contiguous `[N, C, H, W]`) at row `top + row < H` and column
        // `left + column < W` of its plane (the offsets clamped to `H − height` and
        // `W − width`, both non-negative: `crop_kernel_takes`).
        unsafe {
            crop_kernel::launch_unchecked::<R>(
                &images.client,
                striding_cubes(total),
                CubeDim::new_1d(UNITS_PER_CUBE),
                images.clone().into_tensor_arg(),
                windows.clone().into_tensor_arg(),
                out.clone().into_tensor_arg(),
                total,
                channels,
                height,
                width,
                image_height,
                image_width,
                [images.dtype.into(), windows.dtype.into()],
            );
        }
        Some(out)
    }

    fn upload_u8(bytes: &[u8], shape: Shape, device: &Self::Device) -> Option<IntTensor<Self>> {
        R::upload_u8(bytes, shape, device)
    }

    fn largest_allocation(device: &Self::Device) -> Option<u64> {
        Some(R::client(device).properties().memory.max_page_size)
    }
}
