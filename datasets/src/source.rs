//! Where a dataset's data and video files are read from: this machine's folder, or a streamed
//! root ([`crate::remote`]). Metadata is always local (a streamed dataset's is mirrored).

use std::path::{Path, PathBuf};
#[cfg(feature = "stream")]
use std::sync::Arc;

use bytes::Bytes;

#[cfg(feature = "stream")]
use crate::error::Error;
use crate::error::Result;
#[cfg(feature = "stream")]
use crate::remote::{RemoteFiles, RemoteReader, VideoPrefetch};
use crate::table::mmap::map_file;
use crate::video::VideoDecoder;

/// Where a dataset's data and video files are.
#[derive(Debug, Clone, Default)]
pub(crate) enum FileSource {
    /// Under the dataset's folder.
    #[default]
    Local,
    /// Under a streamed root; the files' paths are its URL joined with their relative paths.
    #[cfg(feature = "stream")]
    Remote(Arc<VideoPrefetch>),
}

impl FileSource {
    /// The folder the data and video paths are joined to: the dataset's own, or the streamed
    /// root's URL (so that every message names the file where it is).
    pub(crate) fn files_root(&self, local_root: &Path) -> PathBuf {
        match self {
            Self::Local => local_root.to_path_buf(),
            #[cfg(feature = "stream")]
            Self::Remote(stream) => PathBuf::from(stream.files().root().url()),
        }
    }

    /// The whole of file `path` (under [`Self::files_root`]).
    pub(crate) fn bytes(&self, path: &Path) -> Result<Bytes> {
        match self {
            Self::Local => map_file(path),
            #[cfg(feature = "stream")]
            Self::Remote(stream) => stream.files().read_all(&relative(stream.files(), path)?),
        }
    }

    /// A decoder of video `path` (under [`Self::files_root`]).
    pub(crate) fn open_video(&self, path: &Path) -> Result<VideoDecoder> {
        match self {
            Self::Local => VideoDecoder::open(path),
            #[cfg(feature = "stream")]
            Self::Remote(stream) => {
                let reader = RemoteReader::new(Arc::clone(stream.files()), &relative(stream.files(), path)?)?;
                let failure = reader.failure();
                VideoDecoder::open_reader(reader, failure, path)
            }
        }
    }
}

/// `path`'s part under the streamed root, `/`-separated.
#[cfg(feature = "stream")]
fn relative(files: &RemoteFiles, path: &Path) -> Result<String> {
    let text = path.to_string_lossy();
    text.strip_prefix(files.root().url())
        .map(|rest| rest.trim_start_matches('/').to_string())
        .ok_or_else(|| Error::request(format!("{text} is not a file of the streamed dataset {}", files.root().url())))
}
