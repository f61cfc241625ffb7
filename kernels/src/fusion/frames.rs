//! [`FrameKernels`] under fusion: YUV → RGB and the crop as custom operations, the upload and
//! the largest allocation the inner backend's.

use std::marker::PhantomData;

use burn::tensor::Shape;
use burn::tensor::ops::{FloatTensor, IntTensor};
use burn::tensor::{DType, FloatDType, TensorMetadata};
use burn_fusion::stream::{Operation, OperationStreams};
use burn_fusion::{Fusion, FusionBackend};
use burn_ir::{CustomOpIr, InitOperationIr, OperationIr, OperationOutput};

use super::register::{Handles, register_custom, register_outputs};
use crate::{FrameKernels, Kernels, Yuv420Terms};

/// YUV 4:2:0 frames to RGB as fusion's custom operation: `[planes]` (an integer tensor) in,
/// `[rgb]` out.
#[derive(Debug, Clone)]
pub(crate) struct Yuv420Op<B> {
    pub(crate) desc: CustomOpIr,
    pub(crate) frames: usize,
    pub(crate) size: (usize, usize),
    pub(crate) terms: Yuv420Terms,
    pub(crate) dtype: FloatDType,
    pub(crate) backend: PhantomData<B>,
}

impl<B: FusionBackend + Kernels> Operation<B::FusionRuntime> for Yuv420Op<B> {
    fn execute(&self, handles: &mut Handles<B>) {
        let planes = handles.get_int_tensor::<B>(&self.desc.inputs[0]);
        let rgb = B::yuv420_to_rgb(planes, self.frames, self.size, &self.terms, self.dtype)
            .expect("the inner backend's kernel, checked when registered");
        register_outputs::<B>(&self.desc, handles, vec![rgb]);
    }
}

/// The crop at offsets on the device as fusion's custom operation: `[images, windows]` in,
/// `[crops]` out.
#[derive(Debug, Clone)]
pub(crate) struct CropOp<B> {
    pub(crate) desc: CustomOpIr,
    pub(crate) size: (usize, usize),
    pub(crate) backend: PhantomData<B>,
}

impl<B: FusionBackend + Kernels> Operation<B::FusionRuntime> for CropOp<B> {
    fn execute(&self, handles: &mut Handles<B>) {
        let images = handles.get_float_tensor::<B>(&self.desc.inputs[0]);
        let windows = handles.get_int_tensor::<B>(&self.desc.inputs[1]);
        let crops =
            B::crop_windows(images, windows, self.size).expect("the inner backend's kernel, checked when registered");
        register_outputs::<B>(&self.desc, handles, vec![crops]);
    }
}

impl<B: FusionBackend + Kernels> FrameKernels for Fusion<B> {
    fn largest_allocation(device: &Self::Device) -> Option<u64> {
        B::largest_allocation(device)
    }

    fn has_yuv420_kernel() -> bool {
        B::has_yuv420_kernel()
    }

    fn upload_u8(bytes: &[u8], shape: Shape, device: &Self::Device) -> Option<IntTensor<Self>> {
        // As fusion's own `int_from_data`: the inner backend's tensor, registered as a new one.
        let tensor = B::upload_u8(bytes, shape, device)?;
        let (shape, dtype) = (tensor.shape(), tensor.dtype());
        let client = burn_fusion::get_client::<B>(device);
        let handle = B::int_tensor_handle(tensor);
        let init = InitOperationIr::create(shape, dtype, || client.register_tensor_handle(handle));
        let op = burn_fusion::NoOp::<B>::new();
        Some(client.register(OperationStreams::default(), OperationIr::Init(init), op).output())
    }

    fn has_crop_kernel() -> bool {
        B::has_crop_kernel()
    }

    fn crop_windows(
        images: FloatTensor<Self>,
        windows: IntTensor<Self>,
        (height, width): (usize, usize),
    ) -> Option<FloatTensor<Self>> {
        // What the inner kernel takes, checked here: its refusal would come too late, on
        // fusion's thread.
        let takes = crate::ops::frames::crop_kernel_takes(
            images.shape.as_slice(),
            windows.shape.num_elements(),
            (height, width),
        );
        let [n, channels, ..] = takes.filter(|_| B::has_crop_kernel())?;
        let output = (Shape::new([n, channels, height, width]), images.dtype);
        let make = |desc| CropOp::<B> { desc, size: (height, width), backend: PhantomData };
        Some(register_custom::<B, _>("lerobot_rs_crop_windows", vec![images, windows], vec![output], make).output())
    }

    fn yuv420_to_rgb(
        planes: IntTensor<Self>,
        frames: usize,
        (height, width): (usize, usize),
        terms: &Yuv420Terms,
        dtype: FloatDType,
    ) -> Option<FloatTensor<Self>> {
        let takes = crate::ops::yuv::yuv420_kernel_takes(planes.shape.num_elements(), frames, (height, width));
        if !(takes && B::has_yuv420_kernel()) {
            return None;
        }
        let output = (Shape::new([frames, 3, height, width]), DType::from(dtype));
        let make =
            |desc| Yuv420Op::<B> { desc, frames, size: (height, width), terms: *terms, dtype, backend: PhantomData };
        Some(register_custom::<B, _>("lerobot_rs_yuv420_to_rgb", vec![planes], vec![output], make).output())
    }
}
