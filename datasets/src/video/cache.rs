//! A bounded cache of open video decoders, least recently used out first.
//!
//! Opening an MP4 costs 0.3–2 ms (container probing), far more than decoding a 96×96 frame, so
//! decoders stay open per file; but an unbounded cache is how LeRobot's reached 35 GB on one
//! worker (its #3614). Both the number of decoders and an estimate of their memory are bounded.

use std::path::{Path, PathBuf};

use super::{DecodeCounters, VideoDecoder};
use crate::error::Result;

/// Limits of a [`DecoderCache`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DecoderCacheConfig {
    /// The most decoders kept open. Default 32.
    pub max_decoders: usize,
    /// The most memory the open decoders may hold, by estimate ([`estimated_bytes`]). Default
    /// 256 MiB.
    pub max_bytes: usize,
}

impl Default for DecoderCacheConfig {
    fn default() -> Self {
        Self { max_decoders: 32, max_bytes: 256 << 20 }
    }
}

/// The memory an open decoder is estimated to hold: its three frame slots and about eight
/// reference frames in the codec (YUV 4:2:0, 1.5 bytes per pixel), plus 1 MiB of container and
/// codec state.
pub fn estimated_bytes(decoder: &VideoDecoder) -> usize {
    let s = decoder.shape();
    s.height * s.width * 3 / 2 * 11 + (1 << 20)
}

struct Entry {
    path: PathBuf,
    decoder: VideoDecoder,
    bytes: usize,
    last_used: u64,
}

/// Open decoders by file, bounded by count and by estimated bytes.
pub struct DecoderCache {
    config: DecoderCacheConfig,
    entries: Vec<Entry>,
    clock: u64,
    opened: u64,
    retired: DecodeCounters,
}

impl DecoderCache {
    /// An empty cache with these limits.
    pub fn new(config: DecoderCacheConfig) -> Self {
        Self { config, entries: Vec::new(), clock: 0, opened: 0, retired: DecodeCounters::default() }
    }

    /// The decoder of `path`, opening it (and closing the least recently used ones beyond the
    /// limits) if needed. The decoder returned is never the one evicted.
    pub fn get(&mut self, path: &Path) -> Result<&mut VideoDecoder> {
        self.get_with(path, VideoDecoder::open)
    }

    /// [`Self::get`], opening a decoder with `open` (a dataset's
    /// [`crate::Dataset::open_video`], for a file that may be streamed).
    pub fn get_with(
        &mut self,
        path: &Path,
        open: impl FnOnce(&Path) -> Result<VideoDecoder>,
    ) -> Result<&mut VideoDecoder> {
        self.clock += 1;
        let index = match self.entries.iter().position(|e| e.path == path) {
            Some(i) => i,
            None => {
                let decoder = open(path)?;
                self.opened += 1;
                let bytes = estimated_bytes(&decoder);
                self.entries.push(Entry { path: path.to_path_buf(), decoder, bytes, last_used: self.clock });
                self.evict_beyond_limits();
                self.entries.len() - 1
            }
        };
        let entry = &mut self.entries[index];
        entry.last_used = self.clock;
        Ok(&mut entry.decoder)
    }

    /// Closes least recently used decoders until the limits hold, keeping the newest one.
    fn evict_beyond_limits(&mut self) {
        while self.entries.len() > 1
            && (self.entries.len() > self.config.max_decoders.max(1) || self.bytes() > self.config.max_bytes)
        {
            let oldest =
                (0..self.entries.len() - 1).min_by_key(|&i| self.entries[i].last_used).expect("at least two entries");
            let entry = self.entries.remove(oldest);
            let c = entry.decoder.counters();
            self.retired.frames_decoded += c.frames_decoded;
            self.retired.seeks += c.seeks;
            self.retired.frames_converted += c.frames_converted;
        }
    }

    /// The number of open decoders.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no decoder is open.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The estimated memory of the open decoders.
    pub fn bytes(&self) -> usize {
        self.entries.iter().map(|e| e.bytes).sum()
    }

    /// How many files were opened since the cache was made.
    pub fn files_opened(&self) -> u64 {
        self.opened
    }

    /// The work of every decoder this cache has held.
    pub fn counters(&self) -> DecodeCounters {
        let mut total = self.retired;
        for e in &self.entries {
            let c = e.decoder.counters();
            total.frames_decoded += c.frames_decoded;
            total.seeks += c.seeks;
            total.frames_converted += c.frames_converted;
        }
        total
    }
}

impl Default for DecoderCache {
    fn default() -> Self {
        Self::new(DecoderCacheConfig::default())
    }
}
