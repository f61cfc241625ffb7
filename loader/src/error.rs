//! The loader's error type.

/// What can go wrong while building a loader or producing a batch.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading the dataset failed (a missing or corrupt file, a frame outside tolerance, ...).
    #[error(transparent)]
    Dataset(#[from] datasets::Error),

    /// The loader's configuration is invalid for this dataset.
    #[error("invalid loader configuration: {0}")]
    Config(String),

    /// Assembling a batch failed; the pipeline stops after delivering this error.
    #[error("batch {batch} of epoch {epoch}: {source}")]
    Batch {
        /// The epoch.
        epoch: u64,
        /// The batch's position in the epoch.
        batch: usize,
        /// What failed.
        #[source]
        source: Box<Error>,
    },

    /// A worker panicked while assembling a batch; the pipeline stops.
    #[error("a loader worker panicked while assembling batch {batch} of epoch {epoch}: {message}")]
    WorkerPanicked {
        /// The epoch.
        epoch: u64,
        /// The batch's position in the epoch.
        batch: usize,
        /// The panic message.
        message: String,
    },
}

/// The loader's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
