//! Streaming a dataset that is not on this machine: from object storage (`s3://`, `gs://`,
//! `az://`), any HTTP server that answers ranged reads (`https://`), the Hub, or another folder
//! (`file://`).
//!
//! What a run needs is read once and kept where it is small: `meta/` is mirrored into a local
//! folder ([`metadata`]), refreshed when its files change on the server; the data parquet files
//! are read into memory; the videos are read by ranges of whole blocks into one bounded buffer
//! ([`RemoteFiles`], [`RemoteReader`]) that FFmpeg reads as a file. Every file's size and entity
//! tag are pinned on first sight, and a file that changes during a run stops it with an error
//! naming it. Transient failures (a cut connection, a 5xx) are retried with backoff.

mod blocks;
mod location;
pub mod metadata;
mod prefetch;
mod reader;
mod store;

use std::sync::Arc;

pub use location::{RemoteRoot, StoreKind};
pub use prefetch::VideoPrefetch;
pub use reader::RemoteReader;
pub use store::{FileVersion, RemoteFiles, StreamCounters, StreamOptions};

/// Opens the dataset at `url` streamed ([`crate::Dataset::open_streaming`]), its metadata
/// mirrored under [`metadata::default_mirror_dir`]; with the frames of `episodes` when given.
/// Where `stream` names no token, a URL of the Hub's (`HF_ENDPOINT`) is read with the Hub's
/// (`HF_TOKEN`, [`hub_token_for`]), and any other without one.
pub fn open_url(
    url: &str,
    mut stream: StreamOptions,
    options: crate::OpenOptions,
    episodes: Option<&[usize]>,
) -> crate::Result<crate::Dataset> {
    if stream.bearer_token.is_none() {
        stream.bearer_token = hub_token_for(url, &crate::HubEnv::from_env());
    }
    let files: Arc<RemoteFiles> = RemoteFiles::connect(RemoteRoot::parse(url)?, stream)?;
    crate::Dataset::open_streaming(files, &metadata::default_mirror_dir(), options, episodes)
}

/// The URL dataset `repo_id` streams from on the Hub (`env.endpoint`): its files at the commit
/// `revision` names ([`crate::hub::dataset_commit`]: LeRobot's codebase version when none is
/// given, chosen among the dataset's version tags as LeRobot chooses), so that a tag or branch
/// moved during the run changes nothing it reads.
pub fn hub_url(repo_id: &str, revision: Option<&str>, env: &crate::HubEnv) -> crate::Result<String> {
    let repo: crate::RepoId = repo_id.parse()?;
    let commit = crate::hub::dataset_commit(&repo, revision, env)?;
    Ok(format!("{}/datasets/{repo}/resolve/{commit}", env.endpoint.trim_end_matches('/')))
}

/// The Hub's token (`env.token`) for a stream of `url` if `url` is the Hub's (under
/// `env.endpoint`), else none: the token is never sent to another store.
pub fn hub_token_for(url: &str, env: &crate::HubEnv) -> Option<String> {
    let hub = format!("{}/", env.endpoint.trim_end_matches('/'));
    url.starts_with(&hub).then(|| env.token.clone()).flatten()
}
