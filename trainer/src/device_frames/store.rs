//! The frame caches' frames kept in the training device's memory: each step gathers its frames
//! there by their rows in the caches ([`loader::LoaderBuilder::frame_rows`]), where the loader
//! would otherwise copy every frame into the batch and the step upload it. At real size (four
//! 480x640 cameras, 3.7 MB of YUV planes a sample) those two copies bound the host's rate, and
//! the upload takes the bus for tens of milliseconds a step; the gather moves the same bytes
//! in the GPU's memory, at its bandwidth.

use std::collections::BTreeMap;

use burn::prelude::*;
use burn::tensor::DType;
use datasets::frame_cache::FrameCache;
use datasets::{FrameEncoding, FrameShape};
use kernels::Kernels;
use transforms::frames_to_int;

use crate::error::{Error, Result};

/// The most bytes of frames uploaded at once (through the upload's page-locked buffer on CUDA,
/// which the run keeps).
const UPLOAD_CHUNK_BYTES: usize = 64 << 20;

/// Every cached frame of the run's cameras on one device, each camera's the rows of every
/// dataset's cache end to end, in the datasets' order (the loader's rows).
#[derive(Debug, Clone)]
pub struct DeviceFrames<B: Backend> {
    cameras: BTreeMap<String, CameraFrames<B>>,
}

/// One camera's frames, `[rows, frame length]` (uint8 where the backend holds it), and how they
/// are stored.
#[derive(Debug, Clone)]
struct CameraFrames<B: Backend> {
    frames: Tensor<B, 2, Int>,
    shape: FrameShape,
    encoding: FrameEncoding,
}

impl<B: Kernels> DeviceFrames<B> {
    /// Uploads the frames of cameras `keys` from `caches` (one per dataset, in the datasets'
    /// order) to `device`: a camera at a time, into one tensor made first, in pieces of at most
    /// 64 MiB. An error where a cache lacks a camera or stores it otherwise than the first.
    pub fn upload(caches: &[FrameCache], keys: &[String], device: &B::Device) -> Result<Self> {
        let mut cameras = BTreeMap::new();
        for key in keys {
            let stored = caches
                .iter()
                .map(|cache| {
                    cache.camera(key).ok_or_else(|| {
                        Error::Config(format!("the frame cache in {} has no camera `{key}`", cache.dir().display()))
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            let Some(first) = stored.first().map(|camera| camera.header()) else { continue };
            for (cache, camera) in caches.iter().zip(&stored).skip(1) {
                let header = camera.header();
                if (header.shape, header.encoding) != (first.shape, first.encoding) {
                    return Err(Error::Config(format!(
                        "camera `{key}`: the frame cache in {} stores {} frames in {}, the first dataset's {} in {}",
                        cache.dir().display(),
                        header.shape,
                        header.encoding,
                        first.shape,
                        first.encoding
                    )));
                }
            }
            let len = first.frame_len();
            let rows: usize = stored.iter().map(|camera| camera.header().frames as usize).sum();
            let shape = [rows, len];
            // Every row is written below.
            let mut frames: Tensor<B, 2, Int> = match bytes_per_level::<B>(device) {
                1 => Tensor::empty(shape, (device, DType::U8)),
                _ => Tensor::empty(shape, device),
            };
            let per_piece = (UPLOAD_CHUNK_BYTES / len.max(1)).max(1);
            let mut at = 0;
            for camera in &stored {
                let count = camera.header().frames as usize;
                for start in (0..count).step_by(per_piece) {
                    let end = (start + per_piece).min(count);
                    let piece = frames_to_int::<B>(camera.frames(start..end), [end - start, 1, 1, len], device);
                    frames = frames.slice_assign([at + start..at + end, 0..len], piece.reshape([end - start, len]));
                }
                at += count;
            }
            cameras.insert(key.clone(), CameraFrames { frames, shape: first.shape, encoding: first.encoding });
        }
        Ok(Self { cameras })
    }

    /// Checks that camera `key`'s frames are on the device, stored as `stored` says (their shape
    /// and encoding), and that each of `rows` (the loader's [`loader::Batch::frame_rows`]) is one
    /// of them: what [`DeviceFrames::gather_rows`] takes for granted.
    pub fn check_rows(&self, key: &str, rows: &[i64], stored: (FrameShape, FrameEncoding)) -> Result<()> {
        let camera = self
            .cameras
            .get(key)
            .ok_or_else(|| Error::Config(format!("camera `{key}`'s frames are not on the device")))?;
        if (camera.shape, camera.encoding) != stored {
            return Err(Error::Config(format!(
                "camera `{key}`: the device holds its frames as {} in {}, the batch's are {} in {}",
                camera.shape, camera.encoding, stored.0, stored.1
            )));
        }
        let count = camera.frames.dims()[0];
        if let Some(&row) = rows.iter().find(|&&row| usize::try_from(row).map_or(true, |row| row >= count)) {
            return Err(Error::Config(format!("camera `{key}`: row {row} of frames that has {count} rows")));
        }
        Ok(())
    }

    /// Camera `key`'s frames at `rows`, already on the device and checked
    /// ([`DeviceFrames::check_rows`]), `[rows, frame length]`, gathered on the device.
    ///
    /// # Panics
    ///
    /// When camera `key`'s frames are not on the device.
    pub fn gather_rows(&self, key: &str, rows: Tensor<B, 1, Int>) -> Tensor<B, 2, Int> {
        self.cameras[key].frames.clone().select(0, rows)
    }

    /// The bytes the frames take on the device.
    pub fn bytes(&self) -> u64 {
        let bytes = |frames: &Tensor<B, 2, Int>| frames.shape().num_elements() * frames.dtype().size();
        self.cameras.values().map(|camera| bytes(&camera.frames) as u64).sum()
    }
}

/// The bytes a frame's level takes on `device`: one where the backend holds uint8 tensors, else
/// that of its integers.
pub(crate) fn bytes_per_level<B: Kernels>(device: &B::Device) -> usize {
    if B::supports_dtype(device, DType::U8) { 1 } else { 4 }
}
