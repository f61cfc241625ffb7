//! Camera frames onto the device: the loader's uint8 buffer goes over as uint8 (a quarter of
//! the bytes of float32), and becomes float in [0, 1] there.

use burn::prelude::*;
use burn::tensor::DType;

/// Uploads channel-first uint8 frames, `[N, C, H, W]` (any leading dimensions flattened into
/// `N`), with one host-to-device copy, and converts them to float in [0, 1] on the device
/// (`x / 255`, as LeRobot's `batch[k].float() / 255`).
///
/// Backends that cannot hold uint8 tensors receive the frames widened to their integer type.
pub fn frames_to_float<B: Backend>(bytes: &[u8], shape: [usize; 4], device: &B::Device) -> Tensor<B, 4> {
    frames_to_int(bytes, shape, device).float().div_scalar(255.0)
}

/// Uploads uint8 frames as an integer tensor, uint8 on the device where the backend supports it.
pub fn frames_to_int<B: Backend>(bytes: &[u8], shape: [usize; 4], device: &B::Device) -> Tensor<B, 4, Int> {
    assert_eq!(bytes.len(), shape.iter().product::<usize>(), "frames of shape {shape:?}");
    if B::supports_dtype(device, DType::U8) {
        Tensor::from_data(TensorData::new(bytes.to_vec(), shape), (device, DType::U8))
    } else {
        let wide: Vec<i32> = bytes.iter().map(|&b| i32::from(b)).collect();
        Tensor::from_data(TensorData::new(wide, shape), device)
    }
}
