//! The cache's layout on disk: each camera file's header and the dataset fingerprint it
//! carries, the folder's record, the format a cache is written in, and the temporary files'
//! mark.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::meta::features::{Feature, FrameEncoding, FrameShape, MAX_FEATURE_VALUES};
use crate::meta::info::INFO_PATH;

/// The cache format this build reads and writes (2: the header names the frames' encoding).
pub const FORMAT_VERSION: u32 = 2;

pub(crate) const MAGIC: &[u8; 8] = b"LRFRAMES";

/// Header size; frames start at this (page-aligned) offset.
pub(crate) const HEADER_LEN: usize = 4096;

/// The header of one camera's cache file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheHeader {
    /// Format version.
    pub version: u32,
    /// Fingerprint of the source dataset.
    pub fingerprint: u64,
    /// Number of frames (dataset rows).
    pub frames: u64,
    /// Shape of each stored frame.
    pub shape: FrameShape,
    /// Shape of the source frames (differs when the cache was resized).
    pub source: FrameShape,
    /// How each frame's bytes are laid out.
    pub encoding: FrameEncoding,
    /// The camera's feature key.
    pub key: String,
}

impl CacheHeader {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&(HEADER_LEN as u32).to_le_bytes());
        out.extend_from_slice(&self.fingerprint.to_le_bytes());
        out.extend_from_slice(&self.frames.to_le_bytes());
        for v in [
            self.shape.channels,
            self.shape.height,
            self.shape.width,
            self.source.channels,
            self.source.height,
            self.source.width,
        ] {
            out.extend_from_slice(&(v as u32).to_le_bytes());
        }
        out.extend_from_slice(&encoding_code(self.encoding).to_le_bytes());
        out.extend_from_slice(&(self.key.len() as u32).to_le_bytes());
        out.extend_from_slice(self.key.as_bytes());
        out.resize(HEADER_LEN, 0);
        out
    }

    pub(crate) fn decode(path: &Path, bytes: &[u8]) -> Result<Self> {
        let bad = |m: String| Error::field(path, "header", m);
        if bytes.len() < 64 || &bytes[..8] != MAGIC {
            return Err(bad("not a frame-cache file (bad magic)".into()));
        }
        let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().expect("4 bytes"));
        let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().expect("8 bytes"));
        let version = u32_at(8);
        if version != FORMAT_VERSION {
            return Err(bad(format!(
                "format version {version}, this build reads version {FORMAT_VERSION}: rebuild the cache with `datasets cache`"
            )));
        }
        if u32_at(12) as usize != HEADER_LEN {
            return Err(bad(format!("header length {} (expected {HEADER_LEN})", u32_at(12))));
        }
        let dims: Vec<usize> = (0..6).map(|i| u32_at(32 + 4 * i) as usize).collect();
        let shape = FrameShape { channels: dims[0], height: dims[1], width: dims[2] };
        let source = FrameShape { channels: dims[3], height: dims[4], width: dims[5] };
        if shape.is_empty() || shape.len() > MAX_FEATURE_VALUES {
            return Err(bad(format!("implausible frame shape {shape}")));
        }
        let encoding = match u32_at(56) {
            0 => FrameEncoding::Rgb,
            1 => FrameEncoding::Yuv420,
            code => return Err(bad(format!("unknown frame encoding {code}"))),
        };
        let key_len = u32_at(60) as usize;
        let key = bytes
            .get(64..64 + key_len)
            .and_then(|k| std::str::from_utf8(k).ok())
            .ok_or_else(|| bad("bad camera key".into()))?;
        Ok(CacheHeader {
            version,
            fingerprint: u64_at(16),
            frames: u64_at(24),
            shape,
            source,
            encoding,
            key: key.to_string(),
        })
    }

    /// Bytes of one stored frame.
    pub fn frame_len(&self) -> usize {
        self.shape.encoded_len(self.encoding)
    }
}

/// The header's code for `encoding`.
pub(crate) fn encoding_code(encoding: FrameEncoding) -> u32 {
    match encoding {
        FrameEncoding::Rgb => 0,
        FrameEncoding::Yuv420 => 1,
    }
}

/// A fingerprint of a dataset's layout: `info.json`, the episode table (frame ranges, files,
/// time offsets) and every row's timestamp. A checkpoint records it, so that a resumed run reads
/// the same samples; a copy of the dataset elsewhere has the same one.
pub fn fingerprint(dataset: &Dataset) -> Result<u64> {
    let info_path = dataset.root().join(INFO_PATH);
    let mut bytes = std::fs::read(&info_path).map_err(|e| Error::io(&info_path, e))?;
    for e in dataset.episodes() {
        bytes.extend_from_slice(format!("{}:{:?}:{}", e.index, e.frames, e.data_file.display()).as_bytes());
        for v in &e.videos {
            bytes.extend_from_slice(format!("{}@{}", v.file.display(), v.from_timestamp).as_bytes());
        }
    }
    for row in 0..dataset.len() {
        bytes.extend_from_slice(&(dataset.timestamp(row) as f32).to_le_bytes());
    }
    Ok(twox_hash::XxHash64::oneshot(0, &bytes))
}

/// A fingerprint of everything a frame cache's frames depend on: the layout ([`fingerprint`])
/// and the size and modification time of every data and video file, so that a dataset written
/// again in place with other frames but the same layout (a synthetic dataset rewritten with
/// another seed) is not served the frames of its previous writing. A copy that does not keep
/// the files' times gets a cache of its own.
pub fn cache_fingerprint(dataset: &Dataset) -> Result<u64> {
    let mut bytes = fingerprint(dataset)?.to_le_bytes().to_vec();
    let mut files = std::collections::BTreeSet::new();
    for e in dataset.episodes() {
        files.insert(&e.data_file);
        files.extend(e.videos.iter().map(|v| &v.file));
    }
    for file in files {
        let path = dataset.root().join(file);
        let meta = std::fs::metadata(&path).map_err(|e| Error::io(&path, e))?;
        let modified = meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
        bytes.extend_from_slice(&meta.len().to_le_bytes());
        bytes.extend_from_slice(&modified.map_or(0, |d| d.as_nanos()).to_le_bytes());
    }
    Ok(twox_hash::XxHash64::oneshot(0, &bytes))
}

/// The cache file of camera `key` in `dir`.
pub fn cache_file(dir: &Path, key: &str) -> PathBuf {
    dir.join(format!("{key}.frames"))
}

/// The file in a cache folder that marks its cache complete: a [`CacheRecord`].
pub const RECORD: &str = "cache.json";

/// What a complete cache folder holds, written last by [`write_frame_cache`](super::write_frame_cache).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheRecord {
    /// The cache format ([`FORMAT_VERSION`]).
    pub format: u32,
    /// The dataset's folder when the cache was written.
    pub dataset: PathBuf,
    /// Its [`cache_fingerprint`], in hexadecimal.
    pub fingerprint: String,
    /// The cameras cached, one file each.
    pub cameras: Vec<String>,
}

impl CacheRecord {
    /// Writes the record into `dir` atomically (a temporary file renamed into place).
    pub(crate) fn write(&self, dir: &Path) -> Result<()> {
        let path = dir.join(RECORD);
        let tmp = dir.join(format!("{RECORD}{}{}", TEMPORARY, std::process::id()));
        let json = serde_json::to_vec_pretty(self).expect("a record serialises");
        std::fs::write(&tmp, json).map_err(|e| Error::io(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))
    }

    /// The record in `dir`, `None` if it has none (a cache not complete) or one this build
    /// cannot read.
    pub fn read(dir: &Path) -> Option<Self> {
        serde_json::from_slice(&std::fs::read(dir.join(RECORD)).ok()?).ok()
    }
}

/// The bytes [`write_frame_cache`](super::write_frame_cache) writes for `dataset` stored as `format` says: one header and
/// one frame per row, per camera.
pub fn decoded_bytes(dataset: &Dataset, format: &CacheFormat) -> u64 {
    let info = dataset.info();
    info.camera_keys()
        .iter()
        .filter_map(|key| info.feature(key.as_str()).and_then(Feature::frame_shape))
        .map(|shape| HEADER_LEN as u64 + dataset.len() as u64 * format.shape(shape).encoded_len(format.encoding) as u64)
        .sum()
}

/// What a frame cache stores of each frame: its size and its encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheFormat {
    /// Resize every frame to (height, width); `None` keeps each camera's own size.
    pub resize: Option<(usize, usize)>,
    /// How each frame is stored: RGB (default), or the decoder's YUV 4:2:0 planes, half the bytes,
    /// for a loader asked for that encoding (video cameras at their own size only).
    pub encoding: FrameEncoding,
}

impl CacheFormat {
    /// Frames in `encoding` at the cameras' own size.
    pub fn encoded(encoding: FrameEncoding) -> Self {
        Self { resize: None, encoding }
    }

    /// The shape a camera of `source` frames is stored at.
    pub(super) fn shape(&self, source: FrameShape) -> FrameShape {
        match self.resize {
            Some((height, width)) => FrameShape { channels: source.channels, height, width },
            None => source,
        }
    }

    /// Refuses what this format cannot store of `dataset`'s cameras, naming the camera.
    pub fn check(&self, dataset: &Dataset) -> Result<()> {
        if self.encoding != FrameEncoding::Rgb && self.resize.is_some() {
            return Err(Error::request(format!(
                "a frame cache resized and stored as {} is not implemented: resize it as rgb, or keep the cameras' \
                 own size",
                self.encoding
            )));
        }
        dataset.check_frame_encoding(self.encoding)
    }
}

/// What a temporary cache file's name holds, between the camera's and the writer's.
pub(super) const TEMPORARY: &str = ".tmp.";
