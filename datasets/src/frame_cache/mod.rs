//! The decoded-frame cache: every camera frame of a dataset decoded once into one memory-mapped
//! uint8 file per camera, so that training reads frames with a copy instead of a decode.
//!
//! A cache file is `{dir}/{camera key}.frames`: a 4 KiB header, then one frame per dataset row,
//! in global `index` order, laid out as the header's [`FrameEncoding`] says: CHW RGB, or the
//! decoder's YUV 4:2:0 planes (half the bytes, for a loader asked for that encoding). The header
//! carries a format version and a fingerprint of the dataset it was made from (its `info.json`,
//! episode table and timestamps); opening refuses a cache of another version or another dataset,
//! or one whose size does not add up (truncated). The folder's record ([`RECORD`],
//! [`CacheRecord`]), written last, marks the cache complete and says whose frames it holds; its
//! modification time is when the cache was last opened.
//!
//! Writing ([`write`]), reading ([`FrameCache`]) and removing (the [`store`] of automatic caches)
//! take the folder's [`locks`], so that what a killed process left is found and removed by the
//! next run.

use std::fs::File;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::meta::features::{Feature, FrameEncoding, FrameShape, MAX_FEATURE_VALUES};
use crate::meta::info::INFO_PATH;

pub mod locks;
mod resize;
pub mod store;
mod write;

pub use write::{CacheFormat, write_frame_cache};

use locks::{FolderLock, LockMode, READERS_LOCK};

/// The cache format this build reads and writes (2: the header names the frames' encoding).
pub const FORMAT_VERSION: u32 = 2;
const MAGIC: &[u8; 8] = b"LRFRAMES";
/// Header size; frames start at this (page-aligned) offset.
const HEADER_LEN: usize = 4096;

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
    fn encode(&self) -> Vec<u8> {
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

    fn decode(path: &Path, bytes: &[u8]) -> Result<Self> {
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
fn encoding_code(encoding: FrameEncoding) -> u32 {
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

/// What a complete cache folder holds, written last by [`write_frame_cache`].
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
    fn write(&self, dir: &Path) -> Result<()> {
        let path = dir.join(RECORD);
        let tmp = dir.join(format!("{RECORD}{}{}", write::TEMPORARY, std::process::id()));
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

/// The bytes [`write_frame_cache`] writes for `dataset` stored as `format` says: one header and
/// one frame per row, per camera.
pub fn decoded_bytes(dataset: &Dataset, format: &CacheFormat) -> u64 {
    let info = dataset.info();
    info.camera_keys()
        .iter()
        .filter_map(|key| info.feature(key.as_str()).and_then(Feature::frame_shape))
        .map(|shape| HEADER_LEN as u64 + dataset.len() as u64 * format.shape(shape).encoded_len(format.encoding) as u64)
        .sum()
}

/// Sets the modification time of `dir`'s record to now: the cache was used. Best effort (a
/// read-only cache keeps its time).
fn mark_used(dir: &Path) {
    if let Ok(record) = File::options().append(true).open(dir.join(RECORD)) {
        let _ = record.set_modified(std::time::SystemTime::now());
    }
}

/// One camera's frames, memory-mapped.
#[derive(Debug)]
pub struct CachedCamera {
    header: CacheHeader,
    map: memmap2::Mmap,
    /// The mapped file, kept open to notice a truncation (see [`FrameCache::check_intact`]).
    file: File,
    path: PathBuf,
}

impl CachedCamera {
    /// The header.
    pub fn header(&self) -> &CacheHeader {
        &self.header
    }

    /// The frame of dataset row `row` (in the header's encoding), borrowed from the map.
    pub fn frame(&self, row: usize) -> &[u8] {
        self.frames(row..row + 1)
    }

    /// The frames of dataset rows `rows`, end to end, borrowed from the map.
    pub fn frames(&self, rows: std::ops::Range<usize>) -> &[u8] {
        let len = self.header.frame_len();
        &self.map[HEADER_LEN + rows.start * len..HEADER_LEN + rows.end * len]
    }
}

/// The frame cache of a dataset: one memory-mapped file per camera, and the folder's readers
/// lock held shared, so that no other process removes it while it is read.
#[derive(Debug)]
pub struct FrameCache {
    dir: PathBuf,
    cameras: Vec<CachedCamera>,
    _reading: Option<FolderLock>,
}

impl FrameCache {
    /// Opens the cache in `dir` for `dataset`, refusing files of another format version, of
    /// another dataset (or an older state of this one), or of the wrong size, and marks it used
    /// now (for the least-recently-used order in which the [`store`] removes caches).
    pub fn open(dir: &Path, dataset: &Dataset) -> Result<Self> {
        dataset.require_every_episode("a frame cache")?;
        let fingerprint = cache_fingerprint(dataset)?;
        let keys = dataset.info().camera_keys();
        // Lock only a folder that holds a cache, leaving other folders as they are.
        let reading = match keys.first().map(|key| cache_file(dir, key.as_str())) {
            Some(first) if first.exists() => Some(FolderLock::acquire_existing(dir, READERS_LOCK, LockMode::Shared)?),
            _ => None,
        };
        let mut cameras = Vec::new();
        for key in keys {
            let path = cache_file(dir, key.as_str());
            let map = crate::table::mmap::map_readonly(&path)?
                .ok_or_else(|| Error::field(&path, "header", "the file is empty"))?;
            let header = CacheHeader::decode(&path, &map[..map.len().min(HEADER_LEN)])?;
            if header.key != key.as_str() {
                return Err(Error::field(&path, "key", format!("holds camera `{}`, not `{key}`", header.key)));
            }
            if header.fingerprint != fingerprint || header.frames != dataset.len() as u64 {
                return Err(Error::field(
                    &path,
                    "fingerprint",
                    format!(
                        "this cache was made from another dataset or an older state of {} (its {} frames, fingerprint {:016x}; the dataset has {} frames, fingerprint {fingerprint:016x}): rebuild it with `datasets cache`",
                        dataset.root().display(),
                        header.frames,
                        header.fingerprint,
                        dataset.len()
                    ),
                ));
            }
            let expected = HEADER_LEN as u64 + header.frames * header.frame_len() as u64;
            if map.len() as u64 != expected {
                return Err(Error::field(
                    &path,
                    "size",
                    format!(
                        "{} bytes, {expected} expected: the file is truncated or was written incompletely",
                        map.len()
                    ),
                ));
            }
            let file = File::open(&path).map_err(|e| Error::io(&path, e))?;
            cameras.push(CachedCamera { header, map, file, path });
        }
        mark_used(dir);
        Ok(FrameCache { dir: dir.to_path_buf(), cameras, _reading: reading })
    }

    /// The cache folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Checks that no cache file shrank since it was mapped. Reading a mapped page past the
    /// end of a file that another process truncated raises `SIGBUS`, which would kill the
    /// process; the loader calls this before each batch so that a truncation between batches
    /// is an error instead. (One that lands during a batch's copy cannot be caught this way.)
    pub fn check_intact(&self) -> Result<()> {
        for camera in &self.cameras {
            let len = camera.file.metadata().map_err(|e| Error::io(&camera.path, e))?.len();
            if len < camera.map.len() as u64 {
                return Err(Error::field(
                    &camera.path,
                    "size",
                    format!(
                        "the file shrank from {} to {len} bytes while in use: another process truncated it; rebuild it with `datasets cache`",
                        camera.map.len()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Whether every camera is stored as `format` says (its size and encoding).
    pub fn holds(&self, format: &CacheFormat) -> bool {
        self.cameras
            .iter()
            .all(|c| c.header.shape == format.shape(c.header.source) && c.header.encoding == format.encoding)
    }

    /// How the frames are stored: RGB, or YUV 4:2:0 planes (one encoding for every camera, as
    /// [`write_frame_cache`] writes them; RGB for a dataset without cameras).
    pub fn encoding(&self) -> FrameEncoding {
        self.cameras.first().map_or(FrameEncoding::Rgb, |c| c.header.encoding)
    }

    /// The cached camera `key`.
    pub fn camera(&self, key: &str) -> Option<&CachedCamera> {
        self.cameras.iter().find(|c| c.header.key == key)
    }
}
