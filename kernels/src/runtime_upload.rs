//! Host-to-device uploads of uint8 frames through a runtime's own fast path, where it has one
//! (CUDA with the `cudnn` feature: [`crate::pinned_upload`]); burn's `from_data` elsewhere.

use burn::tensor::Shape;
use burn_cubecl::CubeRuntime;
use burn_cubecl::tensor::CubeTensor;

/// A cubecl runtime's upload of uint8 frames. `None` where it has no path of its own (or its
/// path failed before enqueuing anything, said once in the log): the caller uses burn's.
pub trait RuntimeUpload: CubeRuntime {
    /// `bytes` on `device` as a contiguous uint8 tensor of `shape`.
    fn upload_u8(bytes: &[u8], shape: Shape, device: &Self::Device) -> Option<CubeTensor<Self>> {
        let _ = (bytes, shape, device);
        None
    }
}

#[cfg(feature = "wgpu-untuned")]
impl RuntimeUpload for cubecl::wgpu::WgpuRuntime {}

#[cfg(all(feature = "cuda-untuned", not(feature = "cudnn")))]
impl RuntimeUpload for cubecl::cuda::CudaRuntime {}

#[cfg(feature = "cudnn")]
impl RuntimeUpload for cubecl::cuda::CudaRuntime {
    fn upload_u8(bytes: &[u8], shape: Shape, device: &Self::Device) -> Option<CubeTensor<Self>> {
        static FAILED: std::sync::Once = std::sync::Once::new();
        if bytes.is_empty() {
            return None;
        }
        crate::pinned_upload::upload_u8(bytes, shape, device)
            .inspect_err(|e| {
                FAILED
                    .call_once(|| tracing::warn!("frames uploaded by burn's own path: the pinned upload failed: {e}"));
            })
            .ok()
    }
}
