//! One remote file as `Read + Seek`, through the stream's block buffer: what FFmpeg reads a
//! streamed video through.

use std::io::{Read, Seek, SeekFrom};
use std::sync::{Arc, Mutex, PoisonError};

use super::store::RemoteFiles;
use crate::error::{Error, Result};

/// A position in one remote file; reads are served from the block buffer, fetching what it lacks.
pub struct RemoteReader {
    files: Arc<RemoteFiles>,
    relative: String,
    id: u32,
    size: u64,
    position: u64,
    /// The last read's failure in full, since FFmpeg reduces it to an error code.
    failure: Arc<Mutex<Option<Error>>>,
}

impl RemoteReader {
    /// A reader of file `relative` of `files`, at its start.
    pub fn new(files: Arc<RemoteFiles>, relative: &str) -> Result<Self> {
        let (id, size) = files.file_id(relative)?;
        let relative = relative.to_string();
        Ok(Self { files, relative, id, size, position: 0, failure: Arc::new(Mutex::new(None)) })
    }

    /// The file's size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The URL of the file, for messages.
    pub fn url(&self) -> String {
        self.files.root().file_url(&self.relative)
    }

    /// Where the reader leaves the error of a failed read, which the `io::Error` given to the
    /// caller only summarises.
    pub fn failure(&self) -> Arc<Mutex<Option<Error>>> {
        Arc::clone(&self.failure)
    }
}

impl Read for RemoteReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        // (`std::io::Result`: `Result` here is the crate's.)
        if self.position >= self.size || buf.is_empty() {
            return Ok(0);
        }
        let block_bytes = self.files.options().block_bytes as u64;
        let block = self.position / block_bytes;
        let bytes = match self.files.block(&self.relative, self.id, block) {
            Ok(bytes) => bytes,
            Err(e) => {
                let summary = std::io::Error::other(e.to_string());
                *self.failure.lock().unwrap_or_else(PoisonError::into_inner) = Some(e);
                return Err(summary);
            }
        };
        let offset = (self.position - block * block_bytes) as usize;
        let n = buf.len().min(bytes.len().saturating_sub(offset));
        buf[..n].copy_from_slice(&bytes[offset..offset + n]);
        self.position += n as u64;
        Ok(n)
    }
}

impl Seek for RemoteReader {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        let target = match to {
            SeekFrom::Start(at) => Some(at),
            SeekFrom::End(delta) => self.size.checked_add_signed(delta),
            SeekFrom::Current(delta) => self.position.checked_add_signed(delta),
        };
        let target = target.ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("seek before the start of {}", self.url()))
        })?;
        self.position = target;
        Ok(target)
    }
}
