//! The video types of a build without FFmpeg (the `video` feature off): opening a decoder or a
//! writer is an [`Error::VideoUnsupported`] naming the file, so that such a build reads datasets
//! with images in parquet, and video datasets through a frame cache, and says why it cannot do
//! more.

use std::convert::Infallible;
use std::path::{Path, PathBuf};

use super::{DecodeCounters, VideoCodec};
use crate::error::{Error, Result};
use crate::meta::features::FrameShape;

/// YUV 4:2:0 planes to RGB through FFmpeg, which this build lacks: always an error.
pub fn yuv420_to_chw(
    _planes: &[u8],
    _height: usize,
    _width: usize,
    _out: &mut [u8],
) -> std::result::Result<(), String> {
    Err("converting YUV to RGB as the decoder does needs FFmpeg: build with the `video` feature".into())
}

/// An MP4 decoder, which this build cannot open.
#[derive(Debug)]
pub struct VideoDecoder {
    never: Infallible,
}

impl VideoDecoder {
    /// Always an [`Error::VideoUnsupported`] for `path`.
    pub fn open(path: &Path) -> Result<Self> {
        Err(Error::VideoUnsupported { path: path.to_path_buf() })
    }

    /// Always an [`Error::VideoUnsupported`] for `path`.
    pub fn open_with_threads(path: &Path, _threads: usize) -> Result<Self> {
        Self::open(path)
    }

    /// The file (never reached: no decoder exists).
    pub fn path(&self) -> &Path {
        match self.never {}
    }

    /// The frame shape (never reached).
    pub fn shape(&self) -> FrameShape {
        match self.never {}
    }

    /// The frame rate (never reached).
    pub fn fps(&self) -> f64 {
        match self.never {}
    }

    /// The pixel format (never reached).
    pub fn pixel_format(&self) -> &'static str {
        match self.never {}
    }

    /// The work done (never reached).
    pub fn counters(&self) -> DecodeCounters {
        match self.never {}
    }

    /// The frame nearest a timestamp (never reached).
    pub fn frame_at(&mut self, _timestamp_s: f64, _tolerance_s: f64, _out: &mut [u8]) -> Result<f64> {
        match self.never {}
    }

    /// The frame nearest a timestamp, in an encoding (never reached).
    pub fn encoded_frame_at(
        &mut self,
        _timestamp_s: f64,
        _tolerance_s: f64,
        _encoding: crate::FrameEncoding,
        _out: &mut [u8],
    ) -> Result<f64> {
        match self.never {}
    }

    /// The frames nearest some timestamps (never reached).
    pub fn frames_at(&mut self, _timestamps_s: &[f64], _tolerance_s: f64, _out: &mut [u8]) -> Result<()> {
        match self.never {}
    }

    /// The frames nearest some timestamps, in an encoding (never reached).
    pub fn encoded_frames_at(
        &mut self,
        _timestamps_s: &[f64],
        _tolerance_s: f64,
        _encoding: crate::FrameEncoding,
        _out: &mut [u8],
    ) -> Result<()> {
        match self.never {}
    }

    /// Every frame in turn (never reached).
    pub fn for_each_frame(
        &mut self,
        _convert: bool,
        _each: impl FnMut(f64, Option<&[u8]>) -> Result<()>,
    ) -> Result<()> {
        match self.never {}
    }
}

/// An MP4 writer, which this build cannot create.
#[derive(Debug)]
pub struct VideoWriter {
    never: Infallible,
    _path: PathBuf,
}

impl VideoWriter {
    /// Always an [`Error::VideoUnsupported`] for `path`.
    pub fn create(path: &Path, _shape: FrameShape, _fps: u32, _codec: VideoCodec) -> Result<Self> {
        Err(Error::VideoUnsupported { path: path.to_path_buf() })
    }

    /// Encodes one frame (never reached).
    pub fn push_chw(&mut self, _chw: &[u8]) -> Result<()> {
        match self.never {}
    }

    /// The frames pushed (never reached).
    pub fn frames(&self) -> usize {
        match self.never {}
    }

    /// Finishes the file (never reached).
    pub fn finish(self) -> Result<()> {
        match self.never {}
    }
}
