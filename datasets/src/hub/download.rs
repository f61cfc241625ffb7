//! Downloading a dataset (or a LeRobot policy, a model repository) from the Hub as
//! `huggingface_hub.snapshot_download` lays it out, through
//! the `hf-hub` crate: its cache layout (`datasets--OWNER--NAME/{blobs,snapshots,refs}`), its
//! resumable transfers (a `.part` file continued with a `Range` request, also after a retry), and
//! its handling of the Hub's redirects. What `hf-hub` 0.4 leaves out is done here: LeRobot's choice
//! of revision among the dataset's version tags, checking every file against the Hub's listing
//! (size, and sha256 for LFS files or the git blob id for the others) before it is used, and
//! `--dataset.root`'s layout (`local_dir`: the files themselves under the root, hard links to the
//! blobs where the file system allows).

use std::io::Read;
use std::path::Path;

use hf_hub::api::Progress;
use hf_hub::api::sync::{ApiBuilder, ApiError};
use hf_hub::{Cache, Repo, RepoType};
use serde::Deserialize;
use sha1::Sha1;
use sha2::{Digest, Sha256};

use super::{
    DatasetRequest, DownloadEvent, Origin, RepoId, RepoKind, Resolved, hub_error, is_complete_for, parse_version,
};
use crate::dataset::Metadata;
use crate::{Error, HubEnv, Result, join_under};

/// Attempts per file: a transfer cut short is resumed from its `.part` file this many times.
const RETRIES: usize = 5;

/// One file of the Hub's listing (`GET /api/datasets/OWNER/NAME/revision/REV?blobs=true`).
#[derive(Debug, Deserialize)]
struct Sibling {
    rfilename: String,
    #[serde(rename = "blobId")]
    blob_id: Option<String>,
    size: Option<u64>,
    lfs: Option<Lfs>,
}

#[derive(Debug, Deserialize)]
struct Lfs {
    sha256: String,
    size: u64,
}

#[derive(Debug, Deserialize)]
struct Listing {
    sha: String,
    siblings: Vec<Sibling>,
}

#[derive(Debug, Deserialize)]
struct Refs {
    #[serde(default)]
    tags: Vec<NamedRef>,
}

#[derive(Debug, Deserialize)]
struct NamedRef {
    name: String,
}

/// What a file must be once downloaded.
#[derive(Debug, Clone, PartialEq)]
enum Expected {
    /// An LFS file: its sha256.
    Sha256(String),
    /// A file in git itself: its blob id, sha1 of `blob LEN\0` and the content.
    GitBlob(String),
}

impl Expected {
    /// The hash the Hub names the file by: `hf-hub` keeps it as `blobs/<hash>`.
    fn hash(&self) -> &str {
        match self {
            Expected::Sha256(hash) | Expected::GitBlob(hash) => hash,
        }
    }
}

pub(super) fn fetch(
    request: &DatasetRequest,
    revision: &str,
    env: &HubEnv,
    progress: &mut dyn FnMut(DownloadEvent<'_>),
) -> Result<Resolved> {
    let repo_id = &request.repo_id;
    let revision = safe_version(repo_id, revision, env)?;
    let cache_dir = match &request.root {
        // `local_dir`: the blobs are kept beside the dataset, where `huggingface_hub` keeps its
        // own bookkeeping and never uploads from (`push_to_hub` skips `.cache/huggingface`).
        Some(root) => root.join(".cache").join("huggingface").join("lerobot-rs"),
        None => env.hub_cache(),
    };
    let hub = Snapshot::list(RepoKind::Dataset, repo_id, &revision, &cache_dir, env)?;
    let root = request.root.clone().unwrap_or_else(|| hub.folder());
    let local_dir = request.root.is_some();
    let (files, bytes) = match &request.episodes {
        None => hub.download(&root, local_dir, |_| true, progress)?,
        Some(episodes) => {
            // As LeRobot: the metadata first, then the files those episodes live in.
            let (meta_files, meta_bytes) =
                hub.download(&root, local_dir, |name| name.starts_with("meta/"), progress)?;
            let needed = Metadata::read(&root)?.files_of(episodes);
            let (files, bytes) = hub.download(&root, local_dir, |name| needed.contains(Path::new(name)), progress)?;
            (meta_files + files, meta_bytes + bytes)
        }
    };
    if request.root.is_none() {
        hub.record_ref()?;
    }
    if !is_complete_for(&root, request.episodes.as_deref())? {
        return Err(hub_error(
            RepoKind::Dataset,
            repo_id,
            format!(
                "revision {revision} was downloaded to {}, but files the dataset names are not in it",
                root.display()
            ),
        ));
    }
    Ok(Resolved { root, origin: Origin::Downloaded { revision, commit: hub.commit, files, bytes } })
}

/// Downloads the files at the top level of model repository `repo_id` at `revision` into
/// `huggingface_hub`'s cache (`$HF_HUB_CACHE`), as `snapshot_download` lays them out: what a
/// LeRobot policy's `from_pretrained` reads (a repository's `checkpoints/` folders are left).
pub(super) fn fetch_model(
    repo_id: &RepoId,
    revision: &str,
    env: &HubEnv,
    progress: &mut dyn FnMut(DownloadEvent<'_>),
) -> Result<Resolved> {
    let hub = Snapshot::list(RepoKind::Model, repo_id, revision, &env.hf_hub_cache, env)?;
    let root = hub.folder();
    let (files, bytes) = hub.download(&root, false, |name| !name.contains('/'), progress)?;
    hub.record_ref()?;
    Ok(Resolved {
        root,
        origin: Origin::Downloaded { revision: revision.to_string(), commit: hub.commit, files, bytes },
    })
}

/// One revision of a Hub repository as the Hub lists it, fixed to its commit, with the cache
/// it is downloaded into.
struct Snapshot<'a> {
    kind: RepoKind,
    repo_id: &'a RepoId,
    revision: String,
    commit: String,
    files: Vec<Sibling>,
    api: hf_hub::api::sync::Api,
    /// The repository's folder in the cache: `blobs/`, `snapshots/COMMIT/`, `refs/`.
    repo_cache: std::path::PathBuf,
}

impl<'a> Snapshot<'a> {
    /// Asks the Hub for the files of `repo_id` at `revision`, with their sizes and hashes.
    fn list(kind: RepoKind, repo_id: &'a RepoId, revision: &str, cache_dir: &Path, env: &HubEnv) -> Result<Self> {
        let api = ApiBuilder::from_cache(Cache::new(cache_dir.to_path_buf()))
            .with_endpoint(env.endpoint.clone())
            .with_token(env.token.clone())
            .with_progress(false)
            .with_retries(RETRIES)
            .build()
            .map_err(|e| api_error(kind, repo_id, "cannot set up the Hub client", e))?;
        let listing: Listing = api
            .repo(Repo::with_revision(repo_id.to_string(), repo_type(kind), revision.to_string()))
            .info_request()
            .query("blobs", "true")
            .call()
            .map_err(|e| request_error(kind, repo_id, revision, env, "listing its files", e))?
            .into_json()
            .map_err(|e| hub_error(kind, repo_id, format!("the Hub's file listing is not what was expected: {e}")))?;
        if !super::is_commit(&listing.sha) {
            return Err(hub_error(kind, repo_id, format!("the Hub's listing names no commit (sha {:?})", listing.sha)));
        }
        Ok(Self {
            kind,
            repo_id,
            revision: revision.to_string(),
            commit: listing.sha,
            files: listing.siblings,
            api,
            repo_cache: cache_dir.join(repo_id.cache_folder(kind)),
        })
    }

    /// The snapshot's folder in the cache: `snapshots/COMMIT`.
    fn folder(&self) -> std::path::PathBuf {
        self.repo_cache.join("snapshots").join(&self.commit)
    }

    /// Downloads the listed files `wanted` keeps that `root` lacks (or holds at another size),
    /// each checked against the listing before it is used; with `local_dir`, each is placed
    /// under `root` too (else `root` is the cache's snapshot, where `hf-hub` links it). Returns
    /// the files and bytes fetched.
    fn download(
        &self,
        root: &Path,
        local_dir: bool,
        wanted: impl Fn(&str) -> bool,
        progress: &mut dyn FnMut(DownloadEvent<'_>),
    ) -> Result<(usize, u64)> {
        let (kind, repo_id) = (self.kind, self.repo_id);
        // Every file from the commit listed, even if the revision moves on meanwhile.
        let repo = self.api.repo(Repo::with_revision(repo_id.to_string(), repo_type(kind), self.commit.clone()));
        let mut todo = Vec::new();
        for sibling in self.files.iter().filter(|s| wanted(&s.rfilename)) {
            let target = join_under(root, Path::new(&sibling.rfilename))
                .map_err(|m| hub_error(kind, repo_id, format!("the Hub lists a file outside the {kind}: {m}")))?;
            let Some(size) = sibling.lfs.as_ref().map(|lfs| lfs.size).or(sibling.size) else {
                return Err(hub_error(
                    kind,
                    repo_id,
                    format!("{}: the Hub's listing gives no size for it", sibling.rfilename),
                ));
            };
            let present = std::fs::metadata(&target).is_ok_and(|m| m.is_file() && m.len() == size);
            if !present {
                todo.push((sibling, target, size));
            }
        }
        let bytes: u64 = todo.iter().map(|(_, _, size)| size).sum();
        progress(DownloadEvent::Plan { files: todo.len(), bytes });
        for (sibling, target, size) in &todo {
            let expected = match (&sibling.lfs, &sibling.blob_id) {
                (Some(lfs), _) => Expected::Sha256(lfs.sha256.clone()),
                (None, Some(blob)) => Expected::GitBlob(blob.clone()),
                (None, None) => {
                    return Err(hub_error(
                        kind,
                        repo_id,
                        format!("{}: the Hub's listing gives no hash to check it by", sibling.rfilename),
                    ));
                }
            };
            // A `.part` left by an earlier run that cannot be resumed from, as long as the file or
            // longer: `hf-hub` would fail on it (416, or "corrupted") or append the whole file to it.
            let part = self.repo_cache.join("blobs").join(format!("{}.part", expected.hash()));
            if std::fs::metadata(&part).is_ok_and(|m| m.len() >= *size) {
                std::fs::remove_file(&part).map_err(|e| Error::io(&part, e))?;
            }
            let relay = Relay { name: &sibling.rfilename, size: *size, progress: &mut *progress, started: false };
            let cached = repo
                .download_with_progress(&sibling.rfilename, relay)
                .map_err(|e| api_error(kind, repo_id, &format!("downloading {}", sibling.rfilename), e))?;
            let blob = std::fs::canonicalize(&cached).map_err(|e| Error::io(&cached, e))?;
            if let Err(message) = verify(&blob, *size, &expected) {
                // Never serve it, and never resume from it: the next attempt starts afresh.
                let _ = std::fs::remove_file(&blob);
                let _ = std::fs::remove_file(&cached);
                return Err(hub_error(
                    kind,
                    repo_id,
                    format!("{}: {message}; removed it, run again to download it anew", sibling.rfilename),
                ));
            }
            if local_dir {
                place(&blob, target)?;
            }
        }
        Ok((todo.len(), bytes))
    }

    /// Records which commit the revision named (`refs/REVISION`): what LeRobot's (and our)
    /// next offline lookup of it reads.
    fn record_ref(&self) -> Result<()> {
        let refs = self.repo_cache.join("refs");
        std::fs::create_dir_all(&refs).map_err(|e| Error::io(&refs, e))?;
        let file = refs.join(&self.revision);
        std::fs::write(&file, &self.commit).map_err(|e| Error::io(&file, e))
    }
}

fn repo_type(kind: RepoKind) -> RepoType {
    match kind {
        RepoKind::Dataset => RepoType::Dataset,
        RepoKind::Model => RepoType::Model,
    }
}

/// `hf-hub` calls `init` at each attempt and then `update` once with the bytes already in the
/// `.part` file; after that each `update` is new bytes.
struct Relay<'a, 'b> {
    name: &'a str,
    size: u64,
    progress: &'a mut (dyn FnMut(DownloadEvent<'_>) + 'b),
    /// The attempt's first `update` (the bytes already there) has come.
    started: bool,
}

impl Progress for Relay<'_, '_> {
    fn init(&mut self, _size: usize, _filename: &str) {
        self.started = false;
    }

    fn update(&mut self, bytes: usize) {
        let bytes = bytes as u64;
        if self.started {
            (self.progress)(DownloadEvent::Bytes(bytes));
        } else {
            self.started = true;
            (self.progress)(DownloadEvent::File { name: self.name, size: self.size, resumed_at: bytes });
        }
    }

    fn finish(&mut self) {}
}

/// Checks a downloaded file against the Hub's listing.
fn verify(path: &Path, size: u64, expected: &Expected) -> std::result::Result<(), String> {
    let length = std::fs::metadata(path).map_err(|e| format!("cannot read it back: {e}"))?.len();
    if length != size {
        return Err(format!("{length} bytes arrived where the Hub lists {size}"));
    }
    let (name, want, got) = match expected {
        Expected::Sha256(want) => ("sha256", want, hex(&digest_file::<Sha256>(path, None).map_err(read_back)?)),
        Expected::GitBlob(want) => {
            ("git blob id", want, hex(&digest_file::<Sha1>(path, Some(length)).map_err(read_back)?))
        }
    };
    if !got.eq_ignore_ascii_case(want) {
        return Err(format!("its {name} is {got}, the Hub's listing says {want}: the file is corrupt"));
    }
    Ok(())
}

/// What a file that cannot be read back after its download is.
fn read_back(e: std::io::Error) -> String {
    format!("cannot read it back: {e}")
}

/// The digest of a file; with `git_length`, of git's blob header and the file.
pub(super) fn digest_file<D: Digest>(path: &Path, git_length: Option<u64>) -> std::io::Result<Vec<u8>> {
    let mut digest = D::new();
    if let Some(length) = git_length {
        digest.update(format!("blob {length}\0").as_bytes());
    }
    let mut file = std::fs::File::open(path)?;
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        digest.update(&buffer[..n]);
    }
    Ok(digest.finalize().to_vec())
}

/// `bytes` in lowercase hex.
pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Puts a verified blob at its place under `--dataset.root`: a hard link, else a copy, made
/// under a temporary name and renamed over the target, so that the target is never torn.
fn place(blob: &Path, target: &Path) -> Result<()> {
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    }
    let name = target.file_name().map_or_else(Default::default, |n| n.to_string_lossy().into_owned());
    let partial = target.with_file_name(format!(".{name}.{}.incomplete", std::process::id()));
    let _ = std::fs::remove_file(&partial);
    if std::fs::hard_link(blob, &partial).is_err() {
        // Another file system.
        std::fs::copy(blob, &partial).map_err(|e| Error::io(&partial, e))?;
    }
    std::fs::rename(&partial, target).map_err(|e| Error::io(target, e))
}

/// The commit dataset `repo_id` is read at for `revision` (LeRobot's codebase version,
/// [`DEFAULT_REVISION`](super::DEFAULT_REVISION), when none is given), the revision chosen among
/// the dataset's version tags as LeRobot chooses it: what a stream reads, so that a tag or branch
/// moved during the run changes none of its files.
pub fn dataset_commit(repo_id: &RepoId, revision: Option<&str>, env: &HubEnv) -> Result<String> {
    if env.offline {
        return Err(hub_error(
            RepoKind::Dataset,
            repo_id,
            "HF_HUB_OFFLINE is set, and a dataset streamed from the Hub is read from it".into(),
        ));
    }
    let revision = safe_version(repo_id, revision.unwrap_or(super::DEFAULT_REVISION), env)?;
    Ok(Snapshot::list(RepoKind::Dataset, repo_id, &revision, &env.hub_cache(), env)?.commit)
}

/// LeRobot's `get_safe_version`: a revision that names a version (`vMAJOR.MINOR`) becomes the
/// dataset's newest version tag of the same major version not newer than it; any other revision
/// (a branch, a commit) is used as it is.
fn safe_version(repo_id: &RepoId, revision: &str, env: &HubEnv) -> Result<String> {
    let Some(wanted) = parse_version(revision) else { return Ok(revision.to_string()) };
    let url = format!("{}/api/datasets/{repo_id}/refs", env.endpoint);
    // As hf-hub does: a proxy from HTTPS_PROXY / HTTP_PROXY / ALL_PROXY.
    let mut call = ureq::AgentBuilder::new().try_proxy_from_env(true).build().get(&url);
    if let Some(token) = &env.token {
        call = call.set("Authorization", &format!("Bearer {token}"));
    }
    let refs: Refs = call
        .call()
        .map_err(|e| request_error(RepoKind::Dataset, repo_id, revision, env, "listing its version tags", e))?
        .into_json()
        .map_err(|e| {
            hub_error(RepoKind::Dataset, repo_id, format!("the Hub's list of tags is not what was expected: {e}"))
        })?;
    let versions: Vec<(u64, u64, &str)> = refs
        .tags
        .iter()
        .filter_map(|tag| parse_version(&tag.name).map(|(major, minor)| (major, minor, tag.name.as_str())))
        .collect();
    pick_version(wanted, &versions).map_err(|message| hub_error(RepoKind::Dataset, repo_id, message))
}

fn pick_version(wanted: (u64, u64), versions: &[(u64, u64, &str)]) -> std::result::Result<String, String> {
    if versions.is_empty() {
        return Err(
            "the dataset has no version tag (v3.0, v2.1, ...): LeRobot cannot tell which revision to read; name a \
             branch or commit with --dataset.revision (main, say)"
                .into(),
        );
    }
    if let Some((_, _, name)) = versions.iter().find(|(major, minor, _)| (*major, *minor) == wanted) {
        return Ok(name.to_string());
    }
    let compatible = versions.iter().filter(|(major, minor, _)| *major == wanted.0 && *minor <= wanted.1);
    if let Some((major, minor, name)) = compatible.max_by_key(|(major, minor, _)| (*major, *minor)) {
        tracing::warn!("revision v{}.{} not found, using v{major}.{minor}", wanted.0, wanted.1);
        return Ok(name.to_string());
    }
    let older =
        versions.iter().filter(|(major, _, _)| *major < wanted.0).max_by_key(|(major, minor, _)| (*major, *minor));
    if let Some((_, _, name)) = older {
        return Err(format!(
            "the dataset is at {name}, an older codebase version than v{}.{}: convert it with LeRobot's converter",
            wanted.0, wanted.1
        ));
    }
    Err(format!("the dataset's versions are all newer than v{}.{}: it needs a newer reader", wanted.0, wanted.1))
}

fn request_error(
    kind: RepoKind,
    repo_id: &RepoId,
    revision: &str,
    env: &HubEnv,
    doing: &str,
    error: ureq::Error,
) -> Error {
    let message = match &error {
        ureq::Error::Status(401 | 403, _) if env.token.is_none() => {
            format!(
                "{doing}: the Hub refused access (private or gated {kind}?): set HF_TOKEN to a token that may read it"
            )
        }
        ureq::Error::Status(401 | 403, _) => {
            format!("{doing}: the Hub refused the token in HF_TOKEN (or the token file)")
        }
        ureq::Error::Status(404, _) => {
            format!("{doing}: no {kind} {repo_id} at revision {revision} on {}", env.endpoint)
        }
        _ => format!("{doing} on {}", env.endpoint),
    };
    Error::Hub { kind, repo_id: repo_id.to_string(), message, source: Some(Box::new(error)) }
}

fn api_error(kind: RepoKind, repo_id: &RepoId, doing: &str, error: ApiError) -> Error {
    Error::Hub { kind, repo_id: repo_id.to_string(), message: doing.to_string(), source: Some(Box::new(error)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_versions_as_lerobot_does() {
        let tags = [(2, 1, "v2.1"), (3, 0, "v3.0"), (3, 1, "v3.1")];
        assert_eq!(pick_version((3, 0), &tags).unwrap(), "v3.0");
        assert_eq!(pick_version((3, 2), &tags).unwrap(), "v3.1");
        assert!(pick_version((3, 0), &[(2, 1, "v2.1")]).unwrap_err().contains("convert"));
        assert!(pick_version((3, 0), &[(4, 0, "v4.0")]).unwrap_err().contains("newer"));
        assert!(pick_version((3, 0), &[]).is_err());
        assert_eq!(parse_version("v3.0"), Some((3, 0)));
        assert_eq!(parse_version("main"), None);
        assert_eq!(parse_version("v3.0.1"), Some((3, 0)));
    }

    #[test]
    fn checks_git_blob_ids_and_sha256() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "hello\n").unwrap();
        // `git hash-object` of "hello\n", and its sha256.
        assert!(verify(&path, 6, &Expected::GitBlob("ce013625030ba8dba906f756967f9e9ca394464a".into())).is_ok());
        let sha = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03";
        assert!(verify(&path, 6, &Expected::Sha256(sha.into())).is_ok());
        assert!(verify(&path, 6, &Expected::Sha256("00".repeat(32))).unwrap_err().contains("corrupt"));
        assert!(verify(&path, 7, &Expected::Sha256(sha.into())).unwrap_err().contains("7"));
    }
}
