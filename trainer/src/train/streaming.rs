//! `--dataset.streaming`: a dataset opened from its URL (or the Hub) rather than a folder
//! ([`datasets::remote`]).

use std::path::Path;

use datasets::{Dataset, OpenOptions};

use crate::error::{Error, Result};
use crate::train_config::DatasetConfig;

/// Opens the dataset at `root` (a URL; the Hub's for a dataset named by `repo_id`) streamed,
/// with the frames of `config.episodes` when given.
#[cfg(feature = "stream")]
pub(crate) fn open_streamed(root: &Path, config: &DatasetConfig, options: OpenOptions) -> Result<Dataset> {
    use datasets::remote::StreamOptions;
    /// The buffer a streamed dataset's videos are read through when the configuration names none.
    const DEFAULT_BUFFER_GB: f64 = 2.0;

    let buffer_gb = config.streaming_buffer_gb.unwrap_or(DEFAULT_BUFFER_GB);
    if !(buffer_gb.is_finite() && buffer_gb > 0.0) {
        return Err(Error::Config(format!("dataset.streaming_buffer_gb must be positive, not {buffer_gb}")));
    }
    let buffer_bytes = (buffer_gb * 1e9) as usize;
    // A buffer smaller than a few default blocks gets smaller blocks.
    let block_bytes = StreamOptions::default().block_bytes.min(buffer_bytes / 4).max(1);
    let stream = StreamOptions { buffer_bytes, block_bytes, ..StreamOptions::default() };
    // The Hub's token goes to the Hub's URLs only (open_url's choice).
    Ok(datasets::remote::open_url(&root.to_string_lossy(), stream, options, config.episodes.as_deref())?)
}

/// Without the `stream` feature: the error that says how to get it.
#[cfg(not(feature = "stream"))]
pub(crate) fn open_streamed(root: &Path, _config: &DatasetConfig, _options: OpenOptions) -> Result<Dataset> {
    Err(Error::Config(format!(
        "{}: dataset.streaming needs the trainer built with the `stream` feature (a default one)",
        root.display()
    )))
}
