//! Where a dataset or a policy is found, in LeRobot's order ([`resolve`], [`resolve_model`]), and
//! the download that fills in what is missing (the `hub` feature).

use std::path::{Path, PathBuf};

use crate::Result;

#[cfg(feature = "hub")]
use super::download;
use super::env::HubEnv;
use super::repo_id::RepoId;
use super::repo_kind::RepoKind;
use super::{
    DEFAULT_MODEL_REVISION, DEFAULT_REVISION, DatasetRequest, DownloadEvent, Origin, Resolved, hub_error, is_commit,
    is_complete_for, parse_version,
};

/// The files a LeRobot policy's folder must hold: what `from_pretrained` reads first.
const POLICY_FILES: [&str; 2] = ["config.json", "model.safetensors"];

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
