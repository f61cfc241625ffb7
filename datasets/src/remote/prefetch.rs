//! Fetching a streamed dataset's videos ahead of its decoders: the bytes an episode's frames
//! decode from, found in each file's frame index.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::reader::RemoteReader;
use super::store::RemoteFiles;
use crate::error::Result;
use crate::video::FrameIndex;

/// A file's frame index, once read; its lock held by the one read of it.
type IndexSlot = Arc<Mutex<Option<Arc<FrameIndex>>>>;

/// A stream's video prefetching, with the frame index of each file it has fetched for.
#[derive(Debug)]
pub struct VideoPrefetch {
    files: Arc<RemoteFiles>,
    indexes: Mutex<HashMap<String, IndexSlot>>,
}

impl VideoPrefetch {
    /// Prefetching through `files`.
    pub fn new(files: Arc<RemoteFiles>) -> Arc<Self> {
        Arc::new(Self { files, indexes: Mutex::new(HashMap::new()) })
    }

    /// The stream it fetches from.
    pub fn files(&self) -> &Arc<RemoteFiles> {
        &self.files
    }

    /// Fetches, without waiting, the bytes video `relative` decodes its frames from `first_s`
    /// to `last_s` (seconds in the file) from. A failure is left for the decoder's own read to
    /// meet and report.
    pub fn frames(self: &Arc<Self>, relative: &str, first_s: f64, last_s: f64) {
        let (prefetch, relative) = (Arc::clone(self), relative.to_string());
        self.files.spawn_blocking(move || match prefetch.frame_index(&relative) {
            Ok(index) => {
                if let Some(span) = index.span(first_s, last_s) {
                    prefetch.files.prefetch(&relative, span);
                }
            }
            Err(e) => tracing::debug!(target: "stream", "no frame index to prefetch by: {e}"),
        });
    }

    /// The frame index of video `relative`, read (its `moov` box, through the buffer) the first
    /// time; a caller asking while it is read waits for that read rather than making another.
    fn frame_index(&self, relative: &str) -> Result<Arc<FrameIndex>> {
        let slot = Arc::clone(
            self.indexes.lock().unwrap_or_else(PoisonError::into_inner).entry(relative.to_string()).or_default(),
        );
        let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(index) = &*slot {
            return Ok(Arc::clone(index));
        }
        let url = self.files.root().file_url(relative);
        let reader = RemoteReader::new(Arc::clone(&self.files), relative)?;
        let index = Arc::new(FrameIndex::read(reader, std::path::Path::new(&url))?);
        *slot = Some(Arc::clone(&index));
        Ok(index)
    }
}
