//! A complete cache opened for reading: its cameras' headers checked against the dataset,
//! their files mapped.

use std::fs::File;
use std::path::{Path, PathBuf};

use super::format::{CacheFormat, CacheHeader, HEADER_LEN, RECORD, cache_file, cache_fingerprint};
use super::locks::{FolderLock, LockMode, READERS_LOCK};
use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::meta::features::FrameEncoding;

/// Sets the modification time of `dir`'s record to now: the cache was used. Best effort (a
/// read-only cache keeps its time).
pub(crate) fn mark_used(dir: &Path) {
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
    pub(crate) path: PathBuf,
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
    pub(crate) cameras: Vec<CachedCamera>,
    _reading: Option<FolderLock>,
}

impl FrameCache {
    /// Opens the cache in `dir` for `dataset`, refusing files of another format version, of
    /// another dataset (or an older state of this one), or of the wrong size, and marks it used
    /// now (for the least-recently-used order in which the [`store`](super::store) removes caches).
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
    /// [`write_frame_cache`](super::write_frame_cache) writes them; RGB for a dataset without cameras).
    pub fn encoding(&self) -> FrameEncoding {
        self.cameras.first().map_or(FrameEncoding::Rgb, |c| c.header.encoding)
    }

    /// The cached camera `key`.
    pub fn camera(&self, key: &str) -> Option<&CachedCamera> {
        self.cameras.iter().find(|c| c.header.key == key)
    }
}
