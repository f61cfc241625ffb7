//! The frame caches' frames kept in the training device's memory: each step gathers its frames
//! there by their rows in the caches ([`loader::LoaderBuilder::frame_rows`]), where the loader
//! would otherwise copy every frame into the batch and the step upload it. At real size (four
//! 480x640 cameras, 3.7 MB of YUV planes a sample) those two copies bound the host's rate, and
//! the upload takes the bus for tens of milliseconds a step; the gather moves the same bytes
//! in the GPU's memory, at its bandwidth.

use std::collections::BTreeMap;

use burn::prelude::*;
use burn::tensor::DType;
use datasets::FrameShape;
use datasets::frame_cache::FrameCache;
use kernels::Kernels;
use transforms::frames_to_int;

use crate::error::{Error, Result};

/// The most bytes of frames uploaded at once (through the upload's page-locked buffer on CUDA).
const UPLOAD_CHUNK_BYTES: usize = 256 << 20;

/// Every cached frame of the run's cameras on one device, each camera's the rows of every
/// dataset's cache end to end, in the datasets' order (the loader's rows).
#[derive(Debug, Clone)]
pub struct DeviceFrames<B: Backend> {
    cameras: BTreeMap<String, CameraFrames<B>>,
}

/// One camera's frames: `[rows, frame length]`, uint8 where the backend holds it.
#[derive(Debug, Clone)]
struct CameraFrames<B: Backend> {
    frames: Tensor<B, 2, Int>,
    shape: FrameShape,
}

impl<B: Kernels> DeviceFrames<B> {
    /// Uploads the frames of cameras `keys` from `caches` (one per dataset, in the datasets'
    /// order) to `device`, a camera at a time, in pieces of at most 256 MiB.
    pub fn upload(caches: &[FrameCache], keys: &[String], device: &B::Device) -> Result<Self> {
        let mut cameras = BTreeMap::new();
        for key in keys {
            let mut pieces = Vec::new();
            let mut shape = None;
            for cache in caches {
                let camera = cache.camera(key).ok_or_else(|| {
                    Error::Config(format!("the frame cache in {} has no camera `{key}`", cache.dir().display()))
                })?;
                let header = camera.header();
                let len = header.frame_len();
                shape = Some(header.shape);
                let rows = usize::try_from(header.frames).unwrap_or(usize::MAX);
                let per_piece = (UPLOAD_CHUNK_BYTES / len.max(1)).max(1);
                for start in (0..rows).step_by(per_piece) {
                    let end = (start + per_piece).min(rows);
                    let bytes = camera.frames(start..end);
                    pieces
                        .push(frames_to_int::<B>(bytes, [end - start, 1, 1, len], device).reshape([end - start, len]));
                }
            }
            let Some(shape) = shape else { continue };
            let frames = if pieces.len() == 1 { pieces.remove(0) } else { Tensor::cat(pieces, 0) };
            cameras.insert(key.clone(), CameraFrames { frames, shape });
        }
        Ok(Self { cameras })
    }

    /// The frames of camera `key` at `rows` (the loader's [`loader::Batch::frame_rows`]),
    /// `[rows, frame length]`, gathered on the device.
    pub fn gather(&self, key: &str, rows: &[i64]) -> Result<Tensor<B, 2, Int>> {
        let camera = self
            .cameras
            .get(key)
            .ok_or_else(|| Error::Config(format!("camera `{key}`'s frames are not on the device")))?;
        let count = camera.frames.dims()[0];
        if let Some(&row) = rows.iter().find(|&&row| usize::try_from(row).map_or(true, |row| row >= count)) {
            return Err(Error::Config(format!("camera `{key}`: row {row} of frames that has {count} rows")));
        }
        let device = camera.frames.device();
        let rows = Tensor::<B, 1, Int>::from_data(TensorData::new(rows.to_vec(), [rows.len()]), &device);
        Ok(camera.frames.clone().select(0, rows))
    }

    /// The stored shape of camera `key`'s frames.
    pub fn frame_shape(&self, key: &str) -> Option<FrameShape> {
        self.cameras.get(key).map(|camera| camera.shape)
    }

    /// The bytes the frames take on the device.
    pub fn bytes(&self) -> u64 {
        self.cameras
            .values()
            .map(|camera| stored_bytes(camera.frames.shape().num_elements(), camera.frames.dtype()))
            .sum()
    }
}

/// The bytes `elements` of `dtype` take.
fn stored_bytes(elements: usize, dtype: DType) -> u64 {
    (elements * dtype.size()) as u64
}

/// The bytes a frame's level takes on `device`: one where the backend holds uint8 tensors, else
/// that of its integers.
pub fn bytes_per_level<B: Kernels>(device: &B::Device) -> usize {
    if B::supports_dtype(device, DType::U8) { 1 } else { 4 }
}
