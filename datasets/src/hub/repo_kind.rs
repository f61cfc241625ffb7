//! What a Hub repository holds, a dataset or a model.

use std::fmt;

/// What a Hub repository holds: its URLs and its cache folder differ by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RepoKind {
    /// A dataset (`/api/datasets/...`, `datasets--OWNER--NAME`).
    Dataset,
    /// A model, such as a LeRobot policy (`/api/models/...`, `models--OWNER--NAME`).
    Model,
}

impl RepoKind {
    /// `datasets` or `models`, as the Hub's API paths and cache folders spell it.
    pub fn plural(self) -> &'static str {
        match self {
            RepoKind::Dataset => "datasets",
            RepoKind::Model => "models",
        }
    }
}

impl fmt::Display for RepoKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RepoKind::Dataset => "dataset",
            RepoKind::Model => "model",
        })
    }
}
