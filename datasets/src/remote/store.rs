//! The connection to a streamed dataset's store: whole and ranged reads of its files, retried,
//! each file pinned to the version first seen, and the block buffer the videos are read through.

use std::collections::HashMap;
use std::future::Future;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange, ObjectStore};

use super::blocks::BlockBuffer;
use super::location::{RemoteRoot, StoreKind};
use crate::error::{BoxError, Error, Result};

/// How a stream reads: its buffer's bound and how it fetches.
#[derive(Clone)]
pub struct StreamOptions {
    /// The most bytes of video held in memory at once (the block buffer).
    pub buffer_bytes: usize,
    /// The size of one block, the unit of every ranged read of a video.
    pub block_bytes: usize,
    /// Blocks fetched in one request when a read misses (the block asked for and those after it).
    pub read_ahead_blocks: u64,
    /// The most bytes prefetching reads have in flight at once.
    pub max_in_flight_bytes: usize,
    /// Tries of one read (the first and the retries) before its failure stops the run.
    pub attempts: u32,
    /// The first wait after a failed attempt; each later one doubles.
    pub first_backoff: Duration,
    /// A bearer token sent with every request (the Hub's `HF_TOKEN`); never logged.
    pub bearer_token: Option<String>,
    /// The store's settings beyond the environment's, by object_store's keys (`endpoint`,
    /// `region`, `allow_http`, `access_key_id`, ...), as fsspec's `storage_options`.
    pub store_config: Vec<(String, String)>,
}

impl std::fmt::Debug for StreamOptions {
    /// Everything but the token and the store's settings' values, which may be secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let keys: Vec<&str> = self.store_config.iter().map(|(key, _)| key.as_str()).collect();
        f.debug_struct("StreamOptions")
            .field("buffer_bytes", &self.buffer_bytes)
            .field("block_bytes", &self.block_bytes)
            .field("read_ahead_blocks", &self.read_ahead_blocks)
            .field("max_in_flight_bytes", &self.max_in_flight_bytes)
            .field("attempts", &self.attempts)
            .field("first_backoff", &self.first_backoff)
            .field("bearer_token", &self.bearer_token.as_ref().map(|_| "(set)"))
            .field("store_config_keys", &keys)
            .finish()
    }
}

impl Default for StreamOptions {
    fn default() -> Self {
        Self {
            buffer_bytes: 2 << 30,
            block_bytes: 64 << 10,
            read_ahead_blocks: 2,
            max_in_flight_bytes: 64 << 20,
            attempts: 6,
            first_backoff: Duration::from_millis(100),
            bearer_token: None,
            store_config: Vec::new(),
        }
    }
}

/// What a stream has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamCounters {
    /// Requests answered (whole files and ranges).
    pub requests: u64,
    /// Bytes received.
    pub bytes: u64,
    /// Failed attempts that were tried again.
    pub retries: u64,
    /// Bytes of video held in the buffer now.
    pub buffer_bytes: u64,
    /// The most bytes of video the buffer has held.
    pub peak_buffer_bytes: u64,
}

/// The most blocks one prefetching read asks for.
const MAX_RUN_BLOCKS: u64 = 16;

/// The most blocking jobs (frame indexes read) the stream runs at once.
const MAX_BLOCKING_WORK: usize = 4;

/// What a missing file's error says.
const NOT_FOUND: &str = "not found on the server";

/// A file's size and entity tag, as the server gave them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileVersion {
    /// Its size in bytes.
    pub size: u64,
    /// Its entity tag, where the server gives one.
    pub e_tag: Option<String>,
}

/// An entity tag without its quotes and weakness mark: stores give the same tag quoted in one
/// answer and bare in another (Azure's listing and its reads).
fn bare_tag(tag: &str) -> &str {
    tag.strip_prefix("W/").unwrap_or(tag).trim_matches('"')
}

/// A file's version as first seen: reads of a different one are refused.
#[derive(Debug, Clone)]
struct Pinned {
    id: u32,
    size: u64,
    e_tag: Option<String>,
}

/// A streamed dataset's store, its pinned file versions and its block buffer. Shared by every
/// reader of the dataset; its calls block the calling thread (a loader worker) on a runtime of
/// its own.
pub struct RemoteFiles {
    root: RemoteRoot,
    options: StreamOptions,
    store: Arc<dyn ObjectStore>,
    /// Taken only by `Drop`, which shuts it down without waiting: the last holder may be one of
    /// its own threads (a prefetch finishing after the dataset was dropped).
    runtime: Option<tokio::runtime::Runtime>,
    pinned: Mutex<HashMap<String, Pinned>>,
    blocks: BlockBuffer,
    /// Blocks that prefetching reads may have in flight.
    in_flight: tokio::sync::Semaphore,
    /// Blocking work (frame indexes read) that may run at once.
    blocking_work: Arc<tokio::sync::Semaphore>,
    /// The most blocks one prefetching read asks for (never more than may be in flight).
    longest_run: u64,
    requests: AtomicU64,
    bytes: AtomicU64,
    retries: AtomicU64,
}

impl std::fmt::Debug for RemoteFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteFiles").field("root", &self.root.url()).finish_non_exhaustive()
    }
}

impl Drop for RemoteFiles {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl RemoteFiles {
    /// Connects to `root`'s store, its credentials and endpoint taken from the environment as
    /// each store's own tools take them (`AWS_*`, `GOOGLE_*`, `AZURE_*`).
    pub fn connect(root: RemoteRoot, options: StreamOptions) -> Result<Arc<Self>> {
        if options.block_bytes == 0 || options.buffer_bytes < options.block_bytes || options.attempts == 0 {
            return Err(Error::request(format!(
                "streaming {}: blocks of {} bytes, a buffer of {} and {} attempts: a block must be at least a \
                 byte, the buffer at least a block, and a read tried at least once",
                root.url(),
                options.block_bytes,
                options.buffer_bytes,
                options.attempts
            )));
        }
        let store = build_store(&root, &options)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("stream-io")
            .enable_all()
            .build()
            .map_err(|e| Error::remote(root.url(), "cannot start the I/O runtime", Some(e.into())))?;
        let blocks = BlockBuffer::new(options.buffer_bytes);
        let permits = (options.max_in_flight_bytes / options.block_bytes.max(1)).max(1);
        let in_flight = tokio::sync::Semaphore::new(permits);
        let longest_run = MAX_RUN_BLOCKS.min(permits as u64);
        Ok(Arc::new(Self {
            root,
            options,
            store,
            runtime: Some(runtime),
            pinned: Mutex::new(HashMap::new()),
            blocks,
            in_flight,
            blocking_work: Arc::new(tokio::sync::Semaphore::new(MAX_BLOCKING_WORK)),
            longest_run,
            requests: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            retries: AtomicU64::new(0),
        }))
    }

    /// The dataset's root.
    pub fn root(&self) -> &RemoteRoot {
        &self.root
    }

    /// The options it reads with.
    pub fn options(&self) -> &StreamOptions {
        &self.options
    }

    /// What it has done so far.
    pub fn counters(&self) -> StreamCounters {
        let (held, peak) = self.blocks.held();
        StreamCounters {
            requests: self.requests.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            retries: self.retries.load(Ordering::Relaxed),
            buffer_bytes: held as u64,
            peak_buffer_bytes: peak as u64,
        }
    }

    /// The files under folder `relative` (recursively), relative to the root, with their sizes
    /// and entity tags, in name order.
    pub fn list(&self, relative: &str) -> Result<Vec<(String, u64, Option<String>)>> {
        let prefix = ObjectPath::from(self.root.object_path(relative));
        let skip = self.root.object_path("").len();
        let listed: Vec<object_store::ObjectMeta> = self
            .handle()
            .block_on(self.store.list(Some(&prefix)).try_collect())
            .map_err(|e| self.failed(relative, "cannot list", e))?;
        let mut files: Vec<_> = listed
            .into_iter()
            .map(|meta| (meta.location.as_ref()[skip..].trim_start_matches('/').to_string(), meta.size, meta.e_tag))
            .collect();
        files.sort();
        Ok(files)
    }

    /// Pins the version of every file under folder `relative` as one listing gives them, so
    /// that a file changed after this point is refused even if the run had not read it yet.
    pub fn pin_listed(&self, relative: &str) -> Result<()> {
        let listed = self.list(relative)?;
        let mut pinned = self.lock();
        for (file, size, e_tag) in listed {
            let id = pinned.len() as u32;
            pinned.entry(file).or_insert(Pinned { id, size, e_tag });
        }
        Ok(())
    }

    /// The version of file `relative` this run reads, asked of the server the first time.
    pub fn version(&self, relative: &str) -> Result<FileVersion> {
        let pinned = self.pinned(relative)?;
        Ok(FileVersion { size: pinned.size, e_tag: pinned.e_tag })
    }

    /// Whether file `relative` is on the server (pinning its version if it is).
    pub fn exists(&self, relative: &str) -> Result<bool> {
        match self.pinned(relative) {
            Ok(_) => Ok(true),
            Err(Error::Remote { source: None, message, .. }) if message == NOT_FOUND => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The whole of file `relative`, refused if it differs from the version pinned.
    pub fn read_all(&self, relative: &str) -> Result<Bytes> {
        let pinned = self.pinned(relative)?;
        self.fetch(relative, &pinned, 0..pinned.size)
    }

    /// The id the block buffer knows file `relative` by, and its size.
    pub(crate) fn file_id(&self, relative: &str) -> Result<(u32, u64)> {
        let pinned = self.pinned(relative)?;
        Ok((pinned.id, pinned.size))
    }

    /// Block `block` of file `relative` (id `id`), fetched with the blocks after it that are not
    /// held (up to the read-ahead) if it is not held.
    pub(crate) fn block(&self, relative: &str, id: u32, block: u64) -> Result<Bytes> {
        if let Some(bytes) = self.blocks.get((id, block)) {
            return Ok(bytes);
        }
        let pinned = self.pinned(relative)?;
        let size = self.options.block_bytes as u64;
        let blocks = pinned.size.div_ceil(size);
        let mut end = block + 1;
        while end < blocks && end < block + self.options.read_ahead_blocks.max(1) && !self.blocks.contains((id, end)) {
            end += 1;
        }
        let bytes = self.fetch(relative, &pinned, block * size..(end * size).min(pinned.size))?;
        self.hold(id, block, &bytes);
        Ok(bytes.slice(..self.options.block_bytes.min(bytes.len())))
    }

    /// Fetches the blocks of bytes `span` of `relative` that the buffer lacks, in parallel ranged
    /// reads of runs of missing blocks, at most `max_in_flight_bytes` in flight; returns without
    /// waiting. A failure is left for the read that needs the bytes to meet and report.
    pub fn prefetch(self: &Arc<Self>, relative: &str, span: Range<u64>) {
        let Ok(pinned) = self.pinned(relative) else { return };
        let size = self.options.block_bytes as u64;
        let (first, end) = (span.start / size, span.end.min(pinned.size).div_ceil(size));
        let mut block = first;
        while block < end {
            if self.blocks.contains((pinned.id, block)) {
                block += 1;
                continue;
            }
            let run_start = block;
            while block < end && block - run_start < self.longest_run && !self.blocks.contains((pinned.id, block)) {
                block += 1;
            }
            let files = Arc::clone(self);
            let (relative, pinned) = (relative.to_string(), pinned.clone());
            let run = run_start..block;
            self.handle().spawn(async move {
                let bytes = (run.end - run.start) * size;
                let permits = u32::try_from(run.end - run.start).unwrap_or(u32::MAX);
                let Ok(_permit) = files.in_flight.acquire_many(permits).await else { return };
                let range = run.start * size..(run.end * size).min(pinned.size);
                match files.fetch_async(&relative, &pinned, range).await {
                    Ok(fetched) => files.hold(pinned.id, run.start, &fetched),
                    Err(e) => tracing::debug!(target: "stream", "prefetching {bytes} bytes: {e}"),
                }
            });
        }
    }

    /// Holds `bytes`, fetched from block `first` on, as blocks.
    fn hold(&self, id: u32, first: u64, bytes: &Bytes) {
        let size = self.options.block_bytes;
        // Each block in an allocation of its own, so that the buffer's count is the memory held
        // (a slice would keep its whole fetch alive).
        for (i, block) in bytes.chunks(size).enumerate() {
            self.blocks.insert((id, first + i as u64), Bytes::copy_from_slice(block));
        }
    }

    /// Runs `work` on the stream's threads for blocking work, without waiting for it, at most
    /// four at once. The bound is a semaphore's, not the runtime's blocking pool's: the local
    /// store reads its files on that pool, and work waiting there on such a read would deadlock
    /// a pool it filled.
    pub fn spawn_blocking(&self, work: impl FnOnce() + Send + 'static) {
        let (handle, slots) = (self.handle().clone(), Arc::clone(&self.blocking_work));
        drop(self.handle().spawn(async move {
            let Ok(_slot) = slots.acquire_owned().await else { return };
            // A panic in `work` is its own; the slot is given back either way.
            let _ = handle.spawn_blocking(work).await;
        }));
    }

    /// The `If-Match` a read of a file pinned with `tag` sends: the tag as the store gives it,
    /// quoted for Azure (whose listing gives it bare); none for a weak tag (it never matches)
    /// or a plain HTTP server (whose CDN may tag a file otherwise than its HEAD did).
    fn if_match(&self, tag: &str) -> Option<String> {
        match self.root.kind() {
            _ if tag.starts_with("W/") => None,
            StoreKind::Http => None,
            StoreKind::Azure => Some(format!("\"{}\"", bare_tag(tag))),
            StoreKind::S3 | StoreKind::Gcs | StoreKind::File => Some(tag.to_string()),
        }
    }

    /// The runtime's handle.
    fn handle(&self) -> &tokio::runtime::Handle {
        self.runtime.as_ref().expect("the runtime lives until the stream is dropped").handle()
    }

    /// The version of `relative`, asked of the server the first time.
    fn pinned(&self, relative: &str) -> Result<Pinned> {
        if let Some(pinned) = self.lock().get(relative) {
            return Ok(pinned.clone());
        }
        let path = ObjectPath::from(self.root.object_path(relative));
        let meta = self
            .handle()
            .block_on(self.with_retries(relative, || self.store.head(&path)))
            .map_err(|e| self.failed(relative, "cannot read the size of", e))?;
        let mut pinned = self.lock();
        let id = pinned.len() as u32;
        Ok(pinned.entry(relative.to_string()).or_insert(Pinned { id, size: meta.size, e_tag: meta.e_tag }).clone())
    }

    /// Bytes `range` of `relative`, which must still be the version `pinned`.
    fn fetch(&self, relative: &str, pinned: &Pinned, range: Range<u64>) -> Result<Bytes> {
        self.handle().block_on(self.fetch_async(relative, pinned, range))
    }

    /// [`Self::fetch`], on the runtime.
    async fn fetch_async(&self, relative: &str, pinned: &Pinned, range: Range<u64>) -> Result<Bytes> {
        if range.is_empty() {
            return Ok(Bytes::new());
        }
        let path = ObjectPath::from(self.root.object_path(relative));
        let expected = range.end - range.start;
        let (e_tag, bytes) = self
            .with_retries(relative, || async {
                let options = GetOptions {
                    range: Some(GetRange::Bounded(range.clone())),
                    // A plain HTTP server (the Hub's CDN behind a redirect) may tag a file
                    // otherwise than its HEAD did: there the answer's tag is compared instead.
                    if_match: pinned.e_tag.as_deref().and_then(|tag| self.if_match(tag)),
                    ..GetOptions::default()
                };
                let result = self.store.get_opts(&path, options).await?;
                let e_tag = result.meta.e_tag.clone();
                let size = result.meta.size;
                let bytes = result.bytes().await?;
                Ok((e_tag.map(|t| (t, size)), bytes))
            })
            .await
            .map_err(|e| self.failed(relative, "cannot read", e))?;
        if let Some((tag, size)) = e_tag {
            let changed = pinned.e_tag.as_deref().is_some_and(|pinned_tag| bare_tag(pinned_tag) != bare_tag(&tag))
                || size != pinned.size;
            if changed {
                return Err(self.changed(relative));
            }
        }
        if bytes.len() as u64 != expected {
            return Err(Error::remote(
                self.root.file_url(relative),
                format!("asked for bytes {}..{} and received {}", range.start, range.end, bytes.len()),
                None,
            ));
        }
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(expected, Ordering::Relaxed);
        Ok(bytes)
    }

    /// Runs `attempt` until it succeeds, fails for good, or has failed `attempts` times, waiting
    /// twice as long after each failure.
    async fn with_retries<T, F, Fut>(&self, relative: &str, attempt: F) -> object_store::Result<T>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = object_store::Result<T>>,
    {
        let mut wait = self.options.first_backoff;
        let mut tries = 1;
        loop {
            match attempt().await {
                Ok(value) => return Ok(value),
                Err(e) if tries < self.options.attempts && is_transient(&e) => {
                    let url = self.root.file_url(relative);
                    tracing::debug!(target: "stream", "{url}: attempt {tries} failed, again in {wait:?}: {e}");
                    self.retries.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(wait).await;
                    wait *= 2;
                    tries += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The error of a read of `relative` that failed for good.
    fn failed(&self, relative: &str, doing: &str, e: object_store::Error) -> Error {
        match e {
            object_store::Error::Precondition { .. } => self.changed(relative),
            object_store::Error::NotFound { .. } => Error::remote(self.root.file_url(relative), NOT_FOUND, None),
            other => Error::remote(self.root.file_url(relative), doing.to_string(), Some(Box::new(other) as BoxError)),
        }
    }

    fn changed(&self, relative: &str) -> Error {
        Error::remote(
            self.root.file_url(relative),
            "changed on the server during the run (its entity tag or size differs from the version first read); \
             start the run again to read the new version",
            None,
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pinned>> {
        self.pinned.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Whether a failed request may succeed if tried again: not a missing file, a refused
/// precondition or a bad request, but a network failure or a server's error.
fn is_transient(e: &object_store::Error) -> bool {
    !matches!(
        e,
        object_store::Error::NotFound { .. }
            | object_store::Error::Precondition { .. }
            | object_store::Error::NotModified { .. }
            | object_store::Error::InvalidPath { .. }
            | object_store::Error::NotSupported { .. }
            | object_store::Error::PermissionDenied { .. }
            | object_store::Error::Unauthenticated { .. }
            | object_store::Error::UnknownConfigurationKey { .. }
    )
}

/// The object store `root` names, configured from the environment.
fn build_store(root: &RemoteRoot, options: &StreamOptions) -> Result<Arc<dyn ObjectStore>> {
    let fail = |e: object_store::Error| Error::remote(root.url(), "cannot reach the store", Some(Box::new(e)));
    // Each attempt is ours (with_retries), so that a cut body is retried as a failed request is.
    let retry = object_store::RetryConfig { max_retries: 0, ..Default::default() };
    let mut client = object_store::ClientOptions::new().with_allow_http(true);
    if let Some(token) = &options.bearer_token {
        let mut value = http::HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| Error::request("the token holds characters a header cannot carry"))?;
        value.set_sensitive(true);
        let mut headers = http::HeaderMap::new();
        headers.insert(http::header::AUTHORIZATION, value);
        client = client.with_default_headers(headers);
    }
    let bad_key = |key: &str, e: object_store::Error| {
        Error::request(format!("storage option {key:?} is not one of {}'s: {e}", root.url()))
    };
    let config = &options.store_config;
    let store: Arc<dyn ObjectStore> = match root.kind() {
        StoreKind::S3 => {
            let mut builder = object_store::aws::AmazonS3Builder::from_env().with_url(root.store_url());
            for (key, value) in config {
                builder = builder.with_config(key.parse().map_err(|e| bad_key(key, e))?, value);
            }
            Arc::new(builder.with_retry(retry).with_client_options(client).build().map_err(fail)?)
        }
        StoreKind::Gcs => {
            let mut builder = object_store::gcp::GoogleCloudStorageBuilder::from_env().with_url(root.store_url());
            for (key, value) in config {
                builder = builder.with_config(key.parse().map_err(|e| bad_key(key, e))?, value);
            }
            Arc::new(builder.with_retry(retry).with_client_options(client).build().map_err(fail)?)
        }
        StoreKind::Azure => {
            let mut builder = object_store::azure::MicrosoftAzureBuilder::from_env().with_url(root.store_url());
            for (key, value) in config {
                builder = builder.with_config(key.parse().map_err(|e| bad_key(key, e))?, value);
            }
            Arc::new(builder.with_retry(retry).with_client_options(client).build().map_err(fail)?)
        }
        StoreKind::Http | StoreKind::File if !config.is_empty() => {
            return Err(Error::request(format!(
                "storage options are for s3://, gs:// and az:// roots, not {}",
                root.url()
            )));
        }
        StoreKind::Http => Arc::new(
            object_store::http::HttpBuilder::new()
                .with_url(root.store_url())
                .with_retry(retry)
                .with_client_options(client)
                .build()
                .map_err(fail)?,
        ),
        StoreKind::File => {
            Arc::new(object_store::local::LocalFileSystem::new_with_prefix(root.store_url()).map_err(fail)?)
        }
    };
    Ok(store)
}
