//! MP4 camera streams: frame-exact decoding, a bounded decoder cache, and the writer used by the
//! synthetic datasets.

pub mod bt601;
mod cache;
mod codec;
mod counters;
#[cfg(feature = "video")]
mod decoder;
#[cfg(feature = "video")]
mod index;
#[cfg(feature = "video")]
mod rgb;
#[cfg(not(feature = "video"))]
mod unsupported;
#[cfg(feature = "video")]
mod writer;

pub use cache::{DecoderCache, DecoderCacheConfig, estimated_bytes};
pub use codec::{CRF, GOP, VideoCodec};
pub use counters::DecodeCounters;
#[cfg(feature = "video")]
pub use decoder::{VideoDecoder, init_ffmpeg};
#[cfg(feature = "video")]
pub use index::FrameIndex;
#[cfg(feature = "video")]
pub use rgb::yuv420_to_chw;
#[cfg(not(feature = "video"))]
pub use unsupported::{VideoDecoder, VideoWriter, yuv420_to_chw};
#[cfg(feature = "video")]
pub use writer::VideoWriter;

/// Whether this build decodes and encodes video: the `video` feature, which links FFmpeg. Without
/// it, datasets with images in parquet read as usual, video datasets read through a frame cache,
/// and anything that needs a decoder or an encoder is an [`Error::VideoUnsupported`](crate::Error::VideoUnsupported).
pub const SUPPORTED: bool = cfg!(feature = "video");

use std::path::Path;

use crate::error::Result;
use crate::meta::features::FrameShape;

/// What a full decode of a video file found.
#[derive(Debug, Clone, PartialEq)]
pub struct VideoProbe {
    /// The RGB frame shape.
    pub shape: FrameShape,
    /// The stream's average frame rate.
    pub fps: f64,
    /// The timestamp of every decodable frame, in decode order, in seconds.
    pub timestamps: Vec<f64>,
}

/// Decodes every frame of `path` (without colour conversion) and lists their timestamps.
pub fn probe(path: &Path) -> Result<VideoProbe> {
    let mut decoder = VideoDecoder::open(path)?;
    let mut timestamps = Vec::new();
    decoder.for_each_frame(false, |t, _| {
        timestamps.push(t);
        Ok(())
    })?;
    Ok(VideoProbe { shape: decoder.shape(), fps: decoder.fps(), timestamps })
}
