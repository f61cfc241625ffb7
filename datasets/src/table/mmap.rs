//! Memory-mapped files: the only `unsafe` in the crate.
//!
//! # Safety
//!
//! A memory map is only sound while nobody truncates or rewrites the file underneath it: a
//! read past a truncated end raises `SIGBUS`, and a concurrent write shows torn data. Dataset
//! files are immutable once written (LeRobot never rewrites a finished parquet file), and the
//! maps made here for parquet tables live only while a file is decoded into owned columns.
//! Frame-cache maps live longer; their writer publishes a finished file by renaming it into
//! place, never by rewriting it, so a reader never sees a file change size under it. What is
//! not protected against is another process truncating a file while we read it: that kills
//! the process with `SIGBUS` instead of returning an error. The length is checked when mapping,
//! so a file truncated *before* it is opened is reported as an error, and the loader checks
//! the frame cache's files before every batch (`FrameCache::check_intact`), so a truncation
//! *between* batches is an error too; only one that lands during a batch's copy is not caught.

#![expect(unsafe_code, reason = "memory mapping is inherently unsafe; see the module's Safety section")]

use std::fs::File;
use std::path::Path;

use bytes::Bytes;

use crate::error::{Error, Result};

/// Maps a whole file read-only and hands it out as shareable, zero-copy [`Bytes`].
/// An empty file gives empty bytes (a zero-length map is not allowed by the OS).
pub(crate) fn map_file(path: &Path) -> Result<Bytes> {
    let map = map_readonly(path)?;
    Ok(map.map_or_else(Bytes::new, Bytes::from_owner))
}

/// Maps a whole file read-only; `None` for an empty file.
pub(crate) fn map_readonly(path: &Path) -> Result<Option<memmap2::Mmap>> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
    if len == 0 {
        return Ok(None);
    }
    // SAFETY: the file is opened read-only and dataset files are never modified in place
    // (module docs); the map owns its own reference to the file, so it stays valid after
    // `file` is dropped.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
    Ok(Some(map))
}
