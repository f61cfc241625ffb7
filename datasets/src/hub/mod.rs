//! Datasets named as LeRobot users name them, `--dataset.repo_id OWNER/NAME`: found where
//! LeRobot 0.6.1 keeps them and, where they are missing or incomplete, fetched from the Hugging
//! Face Hub (the `hub` feature) the way LeRobot's `snapshot_download` lays them out.
//!
//! LeRobot's order ([`resolve`]):
//! - `--dataset.root DIR` given: that folder; downloads go straight into it (`local_dir`).
//! - otherwise `$HF_LEROBOT_HOME/OWNER/NAME` when it holds the dataset; then the revision's
//!   snapshot in LeRobot's Hub cache, `$HF_LEROBOT_HOME/hub/datasets--OWNER--NAME/snapshots/
//!   COMMIT`; else a download into that cache.
//!
//! `HF_LEROBOT_HOME` defaults to `$HF_HOME/lerobot`, and `HF_HOME` to
//! `$XDG_CACHE_HOME/huggingface` or `~/.cache/huggingface` ([`HubEnv`]). The revision defaults to
//! LeRobot's codebase version, [`DEFAULT_REVISION`], resolved as LeRobot resolves it against the
//! dataset's version tags.

#[cfg(feature = "hub")]
mod download;
mod env;
#[cfg(feature = "cli")]
mod progress;
mod repo_id;
mod repo_kind;
mod resolve;
#[cfg(feature = "hub")]
mod upload;

use std::fmt;
use std::path::{Path, PathBuf};

use crate::dataset::Metadata;
use crate::{Error, Result};

#[cfg(feature = "hub")]
pub use download::dataset_commit;
pub use env::{DEFAULT_ENDPOINT, HubEnv};
#[cfg(feature = "cli")]
pub use progress::{DownloadBar, resolve_model_on_terminal, resolve_on_terminal};
pub use repo_id::RepoId;
pub use repo_kind::RepoKind;
pub use resolve::{resolve, resolve_model};
#[cfg(feature = "hub")]
pub use upload::{UploadFile, files_of_folder, upload_to_model_repo};

/// LeRobot 0.6.1's `CODEBASE_VERSION`: the revision asked for when none is given.
pub const DEFAULT_REVISION: &str = "v3.0";

/// The revision of a model repository asked for when none is given, as `huggingface_hub`'s.
pub const DEFAULT_MODEL_REVISION: &str = "main";

/// What a run asks for: LeRobot's `--dataset.repo_id`, `--dataset.root`, `--dataset.revision`
/// and whether the Hub may be asked (`--dataset.download`; `HF_HUB_OFFLINE=1` forbids it too).
#[derive(Debug, Clone, PartialEq)]
pub struct DatasetRequest {
    /// The dataset's Hub id.
    pub repo_id: RepoId,
    /// The folder to use (and to download into); `None`: LeRobot's folders.
    pub root: Option<PathBuf>,
    /// The branch, tag or commit; `None`: [`DEFAULT_REVISION`].
    pub revision: Option<String>,
    /// Whether a missing or incomplete dataset may be downloaded.
    pub download: bool,
    /// The episodes wanted (`--dataset.episodes`): only their data and video files are needed,
    /// and downloaded, beside the metadata, as LeRobot downloads them. `None`: every episode.
    pub episodes: Option<Vec<usize>>,
}

impl DatasetRequest {
    /// The requests for `repo_ids` (one Hub id, or several separated by commas): with one id,
    /// the folder is `roots`' one when given; with several, `ROOT/OWNER/NAME` under one root (as
    /// LeRobot's `MultiLeRobotDataset` places them), or one root per id.
    pub fn for_ids(repo_ids: &str, roots: &[PathBuf], revision: Option<&str>, download: bool) -> Result<Vec<Self>> {
        let ids = split_ids(repo_ids);
        if ids.is_empty() {
            return Err(Error::Request(format!("{repo_ids:?} names no dataset")));
        }
        if roots.len() > 1 && roots.len() != ids.len() {
            return Err(Error::Request(format!(
                "{} dataset folders for {} repo ids: give one folder holding them all, or one per id",
                roots.len(),
                ids.len()
            )));
        }
        ids.iter()
            .enumerate()
            .map(|(i, id)| {
                let root = match roots {
                    [] => None,
                    [one] if ids.len() == 1 => Some(one.clone()),
                    [parent] => Some(parent.join(id)),
                    each => Some(each[i].clone()),
                };
                Ok(Self {
                    repo_id: id.parse()?,
                    root,
                    revision: revision.map(str::to_string),
                    download,
                    episodes: None,
                })
            })
            .collect()
    }
}

/// The Hub ids in `text`, separated by commas.
pub fn split_ids(text: &str) -> Vec<&str> {
    text.split(',').map(str::trim).filter(|id| !id.is_empty()).collect()
}

/// Where a dataset was found, for the log line a run prints.
#[derive(Debug, Clone, PartialEq)]
pub enum Origin {
    /// The folder given with `--dataset.root`, complete already.
    GivenRoot,
    /// `$HF_LEROBOT_HOME/OWNER/NAME`.
    LeRobotHome,
    /// A snapshot in LeRobot's Hub cache, downloaded before.
    HubCache {
        /// The revision asked for.
        revision: String,
    },
    /// Downloaded now.
    Downloaded {
        /// The revision downloaded (after LeRobot's version resolution).
        revision: String,
        /// The commit it pointed to.
        commit: String,
        /// Files fetched (the others were there already).
        files: usize,
        /// Bytes fetched.
        bytes: u64,
    },
}

/// A resolved dataset: the folder to open, and how it was found.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// The dataset's root folder.
    pub root: PathBuf,
    /// How it was found.
    pub origin: Origin,
}

impl fmt::Display for Resolved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let root = self.root.display();
        match &self.origin {
            Origin::GivenRoot => write!(f, "{root} (--dataset.root)"),
            Origin::LeRobotHome => write!(f, "{root} (in HF_LEROBOT_HOME)"),
            Origin::HubCache { revision } => write!(f, "{root} (revision {revision}, downloaded before)"),
            Origin::Downloaded { revision, commit, files, bytes } => write!(
                f,
                "{root} (revision {revision}, commit {commit}: downloaded {files} files, {:.1} MB)",
                *bytes as f64 / 1e6
            ),
        }
    }
}

/// What a download reports as it goes, for a progress bar.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DownloadEvent<'a> {
    /// What is to be fetched: files and their bytes.
    Plan {
        /// Files to fetch.
        files: usize,
        /// Their bytes.
        bytes: u64,
    },
    /// A file starts (again, after a retry: its bytes count from `resumed_at`).
    File {
        /// Its path in the dataset.
        name: &'a str,
        /// Its size in bytes.
        size: u64,
        /// Bytes already there from an interrupted transfer.
        resumed_at: u64,
    },
    /// `bytes` more bytes of the current file arrived.
    Bytes(u64),
}

/// Whether `root` holds the whole dataset: its metadata and every data and video file the
/// episodes name. `false` when a file is missing (what LeRobot downloads on); the error itself
/// when metadata that is there is not what the format says (such a folder is reported, never
/// downloaded over). The data files are only looked for, not read: opening the dataset does that.
pub fn is_complete(root: &Path) -> Result<bool> {
    is_complete_for(root, None)
}

/// Whether `root` holds the metadata and the data and video files of `episodes` (all when
/// `None`), as [`is_complete`] judges the whole dataset.
pub fn is_complete_for(root: &Path, episodes: Option<&[usize]>) -> Result<bool> {
    match Metadata::read(root) {
        Ok(metadata) => Ok(metadata.first_missing_file_of(root, episodes)?.is_none()),
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(error) => Err(error),
    }
}

/// `v3.0` or `3.0` (a patch number is allowed and ignored) as (major, minor): a revision that
/// names a codebase version.
fn parse_version(text: &str) -> Option<(u64, u64)> {
    let text = text.strip_prefix(['v', 'V']).unwrap_or(text);
    let mut parts = text.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    match parts.next() {
        None => Some((major, minor)),
        Some(patch) if patch.parse::<u64>().is_ok() && parts.next().is_none() => Some((major, minor)),
        Some(_) => None,
    }
}

fn is_commit(revision: &str) -> bool {
    revision.len() == 40 && revision.bytes().all(|b| b.is_ascii_hexdigit())
}

fn hub_error(kind: RepoKind, repo_id: &RepoId, message: String) -> Error {
    Error::Hub { kind, repo_id: repo_id.to_string(), message, source: None }
}
