//! Where an MP4's frames are in the file: FFmpeg's index of the video stream (read from the
//! `moov` box alone, no frame decoded), and the byte span a run of timestamps decodes from.
//! What a streamed dataset fetches ahead of its decoders ([`crate::remote`]).
//!
//! # Safety
//!
//! FFmpeg's index is read through two functions of its public API,
//! `avformat_index_get_entries_count` and `avformat_index_get_entry`, on a stream of an open
//! input that this module holds for the whole read; the entries are copied out before the input
//! is closed.

#![expect(unsafe_code, reason = "FFmpeg's index has no safe binding; see the module's Safety section")]

use std::ops::Range;
use std::path::Path;

use video_rs::ffmpeg;

use super::decoder::init_ffmpeg;
use crate::error::{Error, Result};

/// One frame (a packet) of the video stream: its decode time, where its bytes are, and whether
/// decoding can start there.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Entry {
    time_s: f64,
    start: u64,
    end: u64,
    keyframe: bool,
}

/// The video stream's packets in decode order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FrameIndex {
    entries: Vec<Entry>,
}

impl FrameIndex {
    /// Reads the index of the file `reader` reads; `path` names it in messages.
    pub fn read(reader: impl std::io::Read + std::io::Seek + Send + 'static, path: &Path) -> Result<Self> {
        init_ffmpeg();
        let io = ffmpeg::format::context::StreamIo::from_read_seek(reader)
            .map_err(|e| Error::video_failed(path, "cannot set up reading", e))?;
        let input = ffmpeg::format::input_from_stream(io, path.file_name().and_then(|n| n.to_str()), None)
            .map_err(|e| Error::video_failed(path, "cannot open", e))?;
        Self::of_input(&input, path)
    }

    /// The index of `input`'s best video stream.
    fn of_input(input: &ffmpeg::format::context::Input, path: &Path) -> Result<Self> {
        let stream = input
            .streams()
            .best(ffmpeg::media::Type::Video)
            .ok_or_else(|| Error::video(path, "the file has no video stream"))?;
        let time_base = stream.time_base();
        let tick_s = f64::from(time_base.numerator()) / f64::from(time_base.denominator().max(1));
        // SAFETY: `stream` is a stream of `input`, which outlives this block; the entries are
        // read by index below the count FFmpeg gives, and copied out.
        let entries = unsafe {
            let raw = stream.as_ptr().cast_mut();
            let count = ffmpeg::ffi::avformat_index_get_entries_count(raw);
            (0..count)
                .filter_map(|i| ffmpeg::ffi::avformat_index_get_entry(raw, i).as_ref())
                .map(|e| Entry {
                    time_s: e.timestamp as f64 * tick_s,
                    start: e.pos.max(0) as u64,
                    end: e.pos.max(0) as u64 + e.size().max(0) as u64,
                    keyframe: e.flags() & ffmpeg::ffi::AVINDEX_KEYFRAME != 0,
                })
                .collect()
        };
        Ok(Self { entries })
    }

    /// The bytes the frames of `times` (seconds, ascending) are decoded from: from the keyframe
    /// at or before the first to the frame after the last (a decoder may read one packet
    /// ahead). `None` when the index is empty.
    pub fn span(&self, first_s: f64, last_s: f64) -> Option<Range<u64>> {
        let slack = 1e-6;
        let begin = self
            .entries
            .iter()
            .rposition(|e| e.keyframe && e.time_s <= first_s + slack)
            .or_else(|| self.entries.iter().position(|e| e.keyframe))?;
        let end = self.entries.iter().position(|e| e.time_s > last_s + slack).map_or(self.entries.len(), |i| i + 1);
        let chosen = &self.entries[begin..end.max(begin + 1).min(self.entries.len())];
        let start = chosen.iter().map(|e| e.start).min()?;
        let stop = chosen.iter().map(|e| e.end).max()?;
        Some(start..stop)
    }

    /// The number of packets indexed.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(time_s: f64, start: u64, len: u64, keyframe: bool) -> Entry {
        Entry { time_s, start, end: start + len, keyframe }
    }

    #[test]
    fn a_span_starts_at_the_keyframe_before_and_ends_a_packet_after() {
        let index = FrameIndex {
            entries: vec![
                entry(0.0, 100, 50, true),
                entry(0.1, 150, 10, false),
                entry(0.2, 160, 40, true),
                entry(0.3, 200, 10, false),
                entry(0.4, 210, 10, false),
                entry(0.5, 220, 30, true),
            ],
        };
        assert_eq!(index.span(0.3, 0.3), Some(160..220));
        assert_eq!(index.span(0.1, 0.4), Some(100..250));
        assert_eq!(index.span(0.5, 0.9), Some(220..250));
        assert_eq!(FrameIndex::default().span(0.0, 1.0), None);
    }
}
