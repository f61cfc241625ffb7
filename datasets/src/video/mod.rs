//! MP4 camera streams: frame-exact decoding, a bounded decoder cache, and the writer used by the
//! synthetic datasets.

mod cache;
mod decoder;
mod rgb;
mod writer;

pub use cache::{DecoderCache, DecoderCacheConfig, estimated_bytes};
pub use decoder::{DecodeCounters, VideoDecoder, init_ffmpeg};
pub use writer::{CRF, GOP, VideoCodec, VideoWriter};

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
