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
#[cfg(feature = "hub")]
mod upload;

use std::fmt;
use std::path::{Path, PathBuf};

use crate::dataset::Metadata;
use crate::{Error, Result};

pub use env::{DEFAULT_ENDPOINT, HubEnv};
#[cfg(feature = "cli")]
pub use progress::{DownloadBar, resolve_model_on_terminal, resolve_on_terminal};
pub use repo_id::{RepoId, RepoKind};
#[cfg(feature = "hub")]
pub use upload::{UploadFile, files_of_folder, upload_to_model_repo};

/// LeRobot 0.6.1's `CODEBASE_VERSION`: the revision asked for when none is given.
pub const DEFAULT_REVISION: &str = "v3.0";

/// The revision of a model repository asked for when none is given, as `huggingface_hub`'s.
pub const DEFAULT_MODEL_REVISION: &str = "main";

/// The files a LeRobot policy's folder must hold: what `from_pretrained` reads first.
const POLICY_FILES: [&str; 2] = ["config.json", "model.safetensors"];

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

/// Finds the dataset `request` names, downloading it when it is missing or incomplete and
/// downloads are allowed; `progress` hears of the download as it goes.
pub fn resolve(
    request: &DatasetRequest,
    env: &HubEnv,
    progress: &mut dyn FnMut(DownloadEvent<'_>),
) -> Result<Resolved> {
    let revision = request.revision.clone().unwrap_or_else(|| DEFAULT_REVISION.to_string());
    let may_download = !env.offline && request.download;
    let is_complete = |root: &Path| is_complete_for(root, request.episodes.as_deref());
    if let Some(root) = &request.root {
        if is_complete(root)? {
            return Ok(Resolved { root: root.clone(), origin: Origin::GivenRoot });
        }
    } else {
        let home = env.lerobot_home.join(request.repo_id.as_str());
        if is_complete(&home)? {
            return Ok(Resolved { root: home, origin: Origin::LeRobotHome });
        }
        // A commit or a version tag names fixed files; a branch may have moved since, so it is
        // asked of the Hub again when the Hub may be asked.
        let fixed = is_commit(&revision) || parse_version(&revision).is_some();
        if (fixed || !may_download)
            && let Some(snapshot) = cached_snapshot(&env.hub_cache(), &request.repo_id, RepoKind::Dataset, &revision)
            && is_complete(&snapshot)?
        {
            return Ok(Resolved { root: snapshot, origin: Origin::HubCache { revision } });
        }
    }
    if !may_download {
        let why = if env.offline { "HF_HUB_OFFLINE is set" } else { "downloads are off (--dataset.download false)" };
        let looked = match &request.root {
            Some(root) => format!("{} holds no complete copy", root.display()),
            None => format!(
                "neither {} nor LeRobot's Hub cache {} holds a complete copy of revision {revision}",
                env.lerobot_home.join(request.repo_id.as_str()).display(),
                env.hub_cache().display()
            ),
        };
        return Err(hub_error(RepoKind::Dataset, &request.repo_id, format!("{looked}, and {why}")));
    }
    fetch(request, &revision, env, progress)
}

/// Finds the LeRobot policy `repo_id` (a model repository, at `revision`, else
/// [`DEFAULT_MODEL_REVISION`]) as `huggingface_hub` keeps it, in `$HF_HUB_CACHE/models--OWNER--NAME`
/// (so a policy LeRobot downloaded is found, and one found here is LeRobot's too), downloading
/// the files at the repository's top level when the Hub may be asked. A branch is asked of the
/// Hub again (it may have moved); a commit, or any revision offline, is served from the cache
/// when its snapshot holds `config.json` and `model.safetensors`.
pub fn resolve_model(
    repo_id: &RepoId,
    revision: Option<&str>,
    env: &HubEnv,
    progress: &mut dyn FnMut(DownloadEvent<'_>),
) -> Result<Resolved> {
    let revision = revision.unwrap_or(DEFAULT_MODEL_REVISION);
    let cached = cached_snapshot(&env.hf_hub_cache, repo_id, RepoKind::Model, revision)
        .filter(|snapshot| POLICY_FILES.iter().all(|file| snapshot.join(file).is_file()));
    if (is_commit(revision) || env.offline)
        && let Some(snapshot) = cached
    {
        return Ok(Resolved { root: snapshot, origin: Origin::HubCache { revision: revision.to_string() } });
    }
    if env.offline {
        return Err(hub_error(
            RepoKind::Model,
            repo_id,
            format!(
                "HF_HUB_OFFLINE is set, and {} holds no snapshot of revision {revision} with {}",
                env.hf_hub_cache.join(repo_id.cache_folder(RepoKind::Model)).display(),
                POLICY_FILES.join(" and ")
            ),
        ));
    }
    let resolved = fetch_model(repo_id, revision, env, progress)?;
    if let Some(missing) = POLICY_FILES.iter().find(|file| !resolved.root.join(file).is_file()) {
        return Err(hub_error(
            RepoKind::Model,
            repo_id,
            format!("revision {revision} holds no {missing}: it is not a LeRobot policy (its pretrained_model folder)"),
        ));
    }
    Ok(resolved)
}

#[cfg(feature = "hub")]
fn fetch_model(
    repo_id: &RepoId,
    revision: &str,
    env: &HubEnv,
    progress: &mut dyn FnMut(DownloadEvent<'_>),
) -> Result<Resolved> {
    download::fetch_model(repo_id, revision, env, progress)
}

#[cfg(not(feature = "hub"))]
fn fetch_model(
    repo_id: &RepoId,
    _revision: &str,
    _env: &HubEnv,
    _progress: &mut dyn FnMut(DownloadEvent<'_>),
) -> Result<Resolved> {
    Err(hub_error(
        RepoKind::Model,
        repo_id,
        "this build cannot download it (built without the `hub` feature): download it with \
         `huggingface-cli download ID --local-dir DIR` and give DIR"
            .to_string(),
    ))
}

#[cfg(feature = "hub")]
fn fetch(
    request: &DatasetRequest,
    revision: &str,
    env: &HubEnv,
    progress: &mut dyn FnMut(DownloadEvent<'_>),
) -> Result<Resolved> {
    download::fetch(request, revision, env, progress)
}

#[cfg(not(feature = "hub"))]
fn fetch(
    request: &DatasetRequest,
    _revision: &str,
    _env: &HubEnv,
    _progress: &mut dyn FnMut(DownloadEvent<'_>),
) -> Result<Resolved> {
    Err(hub_error(
        RepoKind::Dataset,
        &request.repo_id,
        "the dataset is not here, and this build cannot download it (built without the `hub` \
         feature); download it with LeRobot or a build with `hub`, or pass --dataset.root"
            .to_string(),
    ))
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

/// The snapshot folder a Hub cache holds for `revision`, if its ref is there.
fn cached_snapshot(cache: &Path, repo_id: &RepoId, kind: RepoKind, revision: &str) -> Option<PathBuf> {
    let repo = cache.join(repo_id.cache_folder(kind));
    let commit = if is_commit(revision) {
        revision.to_string()
    } else {
        std::fs::read_to_string(repo.join("refs").join(revision)).ok()?.trim().to_string()
    };
    Some(repo.join("snapshots").join(commit))
}

fn is_commit(revision: &str) -> bool {
    revision.len() == 40 && revision.bytes().all(|b| b.is_ascii_hexdigit())
}

fn hub_error(kind: RepoKind, repo_id: &RepoId, message: String) -> Error {
    Error::Hub { kind, repo_id: repo_id.to_string(), message, source: None }
}
