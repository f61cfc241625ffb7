//! The trainer library's error type.

/// What can go wrong while building, training, checkpointing or running the policy.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration is invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// Reading the dataset failed.
    #[error(transparent)]
    Dataset(#[from] datasets::Error),
    /// The loader failed (a worker's error, with its batch).
    #[error(transparent)]
    Loader(#[from] loader::Error),
    /// The loader stopped handing out batches before the run's last step (it only ends after
    /// delivering an error, which comes first).
    #[error("the loader stopped before step {step} of the run")]
    LoaderEnded {
        /// The optimiser step that found no batch.
        step: usize,
    },
    /// Transforms or normalisation failed.
    #[error(transparent)]
    Transforms(#[from] transforms::Error),
    /// A checkpoint could not be written or read.
    #[error("checkpoint {}: {message}", path.display())]
    Checkpoint {
        /// The checkpoint folder or file.
        path: std::path::PathBuf,
        /// What went wrong.
        message: String,
    },
    /// A data-parallel run failed between its replicas (a drift, a collective call).
    #[error("data-parallel training: {0}")]
    Replicas(String),
    /// A step captured as a CUDA graph failed to replay.
    #[error("the training step captured as a CUDA graph: {0}")]
    Graph(String),
    /// A replica of a data-parallel run stopped because another failed (whose error is the
    /// cause).
    #[error("data-parallel training: rank {rank}: stopped because another rank failed")]
    StoppedByAnotherReplica {
        /// The replica that stopped.
        rank: usize,
    },
    /// An applied optimiser step's gradient norm was NaN or infinite: training stops without
    /// saving the weights that step updated.
    #[error(
        "training diverged: the gradient norm of {} is not finite (NaN or infinite); training stopped without \
         saving the weights it updated ({}). Lower policy.optimizer_lr, or look for NaN or infinite values in the \
         dataset",
        steps_text(*first, *last),
        checkpoint_text(last_checkpoint.as_deref())
    )]
    Diverged {
        /// The first step since the norms were last found finite.
        first: usize,
        /// The last step run.
        last: usize,
        /// The run's newest checkpoint (the one it resumed from, where it wrote none), if any.
        last_checkpoint: Option<std::path::PathBuf>,
    },
    /// Pretrained weights named by the configuration could not be found or downloaded.
    #[error("pretrained weights {name}: {message}")]
    PretrainedWeights {
        /// The name or file the configuration gives.
        name: String,
        /// What went wrong, and what to do about it.
        message: String,
    },
    /// Writing outputs (logs, metrics) failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
}

/// "step 7", or "a step from 5 to 8".
fn steps_text(first: usize, last: usize) -> String {
    if first == last { format!("step {last}") } else { format!("a step from {first} to {last}") }
}

/// Where the last good weights are.
fn checkpoint_text(last: Option<&std::path::Path>) -> String {
    match last {
        Some(dir) => format!("the last checkpoint is {}", dir.display()),
        None => "the run has no checkpoint".to_string(),
    }
}

/// The trainer's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A checkpoint error for `path`.
    pub fn checkpoint(path: impl AsRef<std::path::Path>, message: impl std::fmt::Display) -> Self {
        Error::Checkpoint { path: path.as_ref().to_path_buf(), message: message.to_string() }
    }

    /// An I/O error for `path`.
    pub fn io(path: impl AsRef<std::path::Path>, source: std::io::Error) -> Self {
        Error::Io { path: path.as_ref().to_path_buf(), source }
    }
}
