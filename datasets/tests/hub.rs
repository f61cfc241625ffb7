//! `--dataset.repo_id` end to end against a Hub of our own on 127.0.0.1 that answers as the
//! Hugging Face Hub does: the file listing with blob ids, sizes and LFS sha256s
//! (`/api/datasets/OWNER/NAME/revision/REV?blobs=true`), the version tags (`.../refs`), and
//! `resolve/REV/PATH` with the Hub's redirects (a relative one to `/api/resolve-cache/...` for
//! files in git, an absolute one to a CDN for LFS files), ranges and its headers (`X-Repo-Commit`,
//! `X-Linked-Etag`, `ETag`, `Content-Range`). Downloads must land where LeRobot puts them, resume
//! a cut transfer, refuse a corrupt file, need the token of a private dataset, and never touch the
//! network when the dataset is here already or the network is forbidden.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use datasets::hub::{DatasetRequest, DownloadEvent, HubEnv, Origin, RepoKind, resolve, resolve_model};
use datasets::synth::{CameraStorage, SynthConfig, write_dataset};
use datasets::{Dataset, DecoderCache, FrameFormat, OpenOptions, WindowSpec};
use sha1::Sha1;
use sha2::{Digest, Sha256};

const REPO: &str = "lerobot/pusht_fake";
const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

/// How the fake Hub misbehaves, if at all.
#[derive(Default, Clone)]
struct Faults {
    /// The token a request must carry (a private dataset).
    token: Option<String>,
    /// This file's first full transfer stops halfway and the connection closes.
    cut: Option<String>,
    /// This file is served with one byte changed.
    corrupt: Option<String>,
    /// The version tags (default v2.1 and v3.0).
    tags: Option<Vec<String>>,
}

/// Every request the fake Hub answered: `METHOD PATH` and its `Range` header, if any.
type RequestLog = Mutex<Vec<(String, Option<String>)>>;

struct FakeHub {
    endpoint: String,
    log: Arc<RequestLog>,
}

struct Files {
    /// What the repository is: its URLs differ by it.
    kind: RepoKind,
    by_path: BTreeMap<String, Vec<u8>>,
    faults: Faults,
    port: u16,
    cut_done: Mutex<bool>,
}

impl FakeHub {
    /// Serves the files under `source` as dataset `REPO`.
    fn serve(source: &Path, faults: Faults) -> FakeHub {
        Self::serve_as(RepoKind::Dataset, source, faults)
    }

    /// Serves the files under `source` as `REPO`, a repository of `kind`.
    fn serve_as(kind: RepoKind, source: &Path, faults: Faults) -> FakeHub {
        let mut by_path = BTreeMap::new();
        collect(source, source, &mut by_path);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let files = Arc::new(Files { kind, by_path, faults, port, cut_done: Mutex::new(false) });
        let log = Arc::new(Mutex::new(Vec::new()));
        let server_log = log.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let (files, log) = (files.clone(), server_log.clone());
                std::thread::spawn(move || {
                    let _ = answer(stream.unwrap(), &files, &log);
                });
            }
        });
        FakeHub { endpoint: format!("http://127.0.0.1:{port}"), log }
    }

    fn requests(&self) -> Vec<(String, Option<String>)> {
        self.log.lock().unwrap().clone()
    }
}

fn collect(root: &Path, dir: &Path, into: &mut BTreeMap<String, Vec<u8>>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(root, &path, into);
        } else {
            let name = path.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
            into.insert(name, std::fs::read(&path).unwrap());
        }
    }
}

/// The Hub keeps parquet, MP4 and safetensors files in LFS.
fn is_lfs(path: &str) -> bool {
    path.ends_with(".parquet") || path.ends_with(".mp4") || path.ends_with(".safetensors")
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn git_blob_id(bytes: &[u8]) -> String {
    let mut digest = Sha1::new();
    digest.update(format!("blob {}\0", bytes.len()).as_bytes());
    digest.update(bytes);
    digest.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn answer(stream: TcpStream, files: &Files, log: &RequestLog) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut headers = BTreeMap::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
        }
    }
    let mut parts = request_line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or("").to_string(), parts.next().unwrap_or("").to_string());
    log.lock().unwrap().push((format!("{method} {target}"), headers.get("range").cloned()));
    let mut out = stream;
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));

    if let Some(token) = &files.faults.token
        && headers.get("authorization") != Some(&format!("Bearer {token}"))
        && !path.starts_with("/cdn/")
    {
        return respond(&mut out, 401, &[], b"Invalid username or password.");
    }
    // A dataset's files are under `/datasets/REPO/resolve`, a model's under `/REPO/resolve`.
    let plural = files.kind.plural();
    let api = format!("/api/{plural}/{REPO}/");
    let resolve = match files.kind {
        RepoKind::Dataset => format!("/datasets/{REPO}/resolve/"),
        RepoKind::Model => format!("/{REPO}/resolve/"),
    };
    let resolve_cache = format!("/api/resolve-cache/{plural}/{REPO}/{COMMIT}/");
    if path == format!("{api}refs") {
        let tags = files.faults.tags.clone().unwrap_or_else(|| vec!["v2.1".into(), "v3.0".into()]);
        let tags: Vec<_> = tags
            .iter()
            .map(|t| serde_json::json!({"name": t, "ref": format!("refs/tags/{t}"), "targetCommit": COMMIT}))
            .collect();
        let body = serde_json::json!({"branches": [{"name": "main", "ref": "refs/heads/main", "targetCommit": COMMIT}], "converts": [], "tags": tags});
        return respond(&mut out, 200, &[("Content-Type", "application/json".into())], body.to_string().as_bytes());
    }
    if let Some(revision) = path.strip_prefix(&format!("{api}revision/")) {
        if !known_revision(files, revision) {
            return respond(&mut out, 404, &[], b"Revision Not Found");
        }
        assert_eq!(query, "blobs=true", "the listing is asked with its blobs");
        let siblings: Vec<_> = files
            .by_path
            .iter()
            .map(|(name, bytes)| {
                let mut sibling =
                    serde_json::json!({"rfilename": name, "blobId": git_blob_id(bytes), "size": bytes.len()});
                if is_lfs(name) {
                    sibling["lfs"] =
                        serde_json::json!({"sha256": sha256(bytes), "size": bytes.len(), "pointerSize": 134});
                }
                sibling
            })
            .collect();
        let body = serde_json::json!({"id": REPO, "sha": COMMIT, "private": files.faults.token.is_some(), "siblings": siblings});
        return respond(&mut out, 200, &[("Content-Type", "application/json".into())], body.to_string().as_bytes());
    }
    if let Some(rest) = path.strip_prefix(&resolve) {
        let (revision, name) = rest.split_once('/').unwrap();
        let Some(bytes) = files.by_path.get(name).filter(|_| known_revision(files, revision)) else {
            return respond(&mut out, 404, &[("X-Error-Code", "EntryNotFound".into())], b"Entry not found");
        };
        if is_lfs(name) {
            let location = format!("http://127.0.0.1:{}/cdn/{}?name={name}", files.port, sha256(bytes));
            let headers = [
                ("Location", location),
                ("X-Repo-Commit", COMMIT.into()),
                ("X-Linked-Etag", format!("\"{}\"", sha256(bytes))),
                ("X-Linked-Size", bytes.len().to_string()),
                ("ETag", "\"a-git-pointer-etag\"".into()),
            ];
            return respond(&mut out, 302, &headers, b"");
        }
        let location = format!("{resolve_cache}{name}?etag=%22{}%22", git_blob_id(bytes));
        return respond(&mut out, 307, &[("Location", location), ("X-Repo-Commit", COMMIT.into())], b"");
    }
    if let Some(name) = path.strip_prefix(&resolve_cache) {
        let bytes = &files.by_path[name];
        let extra = [("ETag", format!("\"{}\"", git_blob_id(bytes))), ("X-Repo-Commit", COMMIT.into())];
        return serve_range(&mut out, files, name, bytes, headers.get("range"), &extra);
    }
    if path.starts_with("/cdn/") {
        let name = query.strip_prefix("name=").unwrap();
        return serve_range(&mut out, files, name, &files.by_path[name], headers.get("range"), &[]);
    }
    respond(&mut out, 404, &[], b"Not found")
}

fn known_revision(files: &Files, revision: &str) -> bool {
    let tags = files.faults.tags.clone().unwrap_or_else(|| vec!["v2.1".into(), "v3.0".into()]);
    revision == "main" || revision == COMMIT || tags.iter().any(|t| t == revision)
}

/// The file, or the range of it asked for (`bytes=A-B`, `bytes=A-`), with the faults applied.
fn serve_range(
    out: &mut TcpStream,
    files: &Files,
    name: &str,
    bytes: &[u8],
    range: Option<&String>,
    extra: &[(&str, String)],
) -> std::io::Result<()> {
    let mut body = bytes.to_vec();
    if files.faults.corrupt.as_deref() == Some(name) {
        let middle = body.len() / 2;
        body[middle] ^= 0xff;
    }
    let total = body.len();
    let (start, end) = match range.and_then(|r| r.strip_prefix("bytes=")).and_then(|r| r.split_once('-')) {
        Some((a, b)) => {
            (a.parse::<usize>().unwrap(), if b.is_empty() { total.saturating_sub(1) } else { b.parse().unwrap() })
        }
        None => (0, total.saturating_sub(1)),
    };
    if start >= total {
        return respond(out, 416, &[("Content-Range", format!("bytes */{total}"))], b"");
    }
    let mut headers = extra.to_vec();
    headers.push(("Accept-Ranges", "bytes".into()));
    let status = if range.is_some() {
        headers.push(("Content-Range", format!("bytes {start}-{end}/{total}")));
        206
    } else {
        200
    };
    let slice = &body[start..=end];
    let full_transfer = slice.len() > 1 && start == 0;
    let mut cut_done = files.cut_done.lock().unwrap();
    if files.faults.cut.as_deref() == Some(name) && full_transfer && !*cut_done {
        *cut_done = true;
        // Promise the whole body, send half of it, and hang up.
        write_head(out, status, &headers, slice.len())?;
        out.write_all(&slice[..slice.len() / 2])?;
        out.flush()?;
        return out.shutdown(std::net::Shutdown::Both);
    }
    drop(cut_done);
    respond(out, status, &headers, slice)
}

fn write_head(out: &mut TcpStream, status: u16, headers: &[(&str, String)], length: usize) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        206 => "Partial Content",
        302 => "Found",
        307 => "Temporary Redirect",
        401 => "Unauthorized",
        404 => "Not Found",
        416 => "Range Not Satisfiable",
        _ => "Other",
    };
    let mut head = format!("HTTP/1.1 {status} {reason}\r\nContent-Length: {length}\r\nConnection: close\r\n");
    for (name, value) in headers {
        head += &format!("{name}: {value}\r\n");
    }
    head += "\r\n";
    out.write_all(head.as_bytes())
}

fn respond(out: &mut TcpStream, status: u16, headers: &[(&str, String)], body: &[u8]) -> std::io::Result<()> {
    write_head(out, status, headers, body.len())?;
    out.write_all(body)?;
    out.flush()
}

/// A small dataset with its images in parquet, as the Hub would hold it.
fn source_dataset(dir: &Path) -> PathBuf {
    let root = dir.join("source");
    let synth = SynthConfig {
        episodes: 3,
        min_length: 12,
        max_length: 20,
        storage: CameraStorage::Images,
        ..Default::default()
    };
    write_dataset(&root, &synth).unwrap();
    std::fs::write(root.join("README.md"), "---\nlicense: apache-2.0\n---\n").unwrap();
    root
}

fn env(home: &Path, hub: &FakeHub) -> HubEnv {
    HubEnv {
        lerobot_home: home.to_path_buf(),
        hf_hub_cache: home.join("hf-hub"),
        endpoint: hub.endpoint.clone(),
        token: None,
        offline: false,
    }
}

fn request(root: Option<PathBuf>) -> DatasetRequest {
    DatasetRequest { repo_id: REPO.parse().unwrap(), root, revision: None, download: true, episodes: None }
}

/// Every file of `source` is under `root` with the same bytes.
fn assert_same_files(source: &Path, root: &Path) {
    let (mut want, mut got) = (BTreeMap::new(), BTreeMap::new());
    collect(source, source, &mut want);
    for name in want.keys() {
        got.insert(name.clone(), std::fs::read(root.join(name)).unwrap_or_else(|e| panic!("{name}: {e}")));
    }
    assert!(want == got, "the downloaded files differ from the Hub's");
}

fn first_sample_actions(root: &Path) -> String {
    let dataset = Dataset::open(root).unwrap();
    let sample = dataset.get(5, &WindowSpec::none(), &mut DecoderCache::default(), FrameFormat::Uint8).unwrap();
    format!("{:?}", sample.tensors["action"].values)
}

#[test]
fn downloads_into_lerobots_hub_cache_and_finds_it_there_offline() {
    let dir = tempfile::tempdir().unwrap();
    let source = source_dataset(dir.path());
    let hub = FakeHub::serve(&source, Faults::default());
    let home = dir.path().join("lerobot-home");
    let (mut planned, mut fetched) = (0, 0);
    let resolved = resolve(&request(None), &env(&home, &hub), &mut |event| match event {
        DownloadEvent::Plan { bytes, .. } => planned = bytes,
        DownloadEvent::File { resumed_at, .. } => fetched += resumed_at,
        DownloadEvent::Bytes(bytes) => fetched += bytes,
    })
    .unwrap();

    let snapshot = home.join("hub/datasets--lerobot--pusht_fake/snapshots").join(COMMIT);
    assert_eq!(resolved.root, snapshot);
    let Origin::Downloaded { revision, commit, files, bytes } = &resolved.origin else { panic!("{resolved}") };
    assert_eq!((revision.as_str(), commit.as_str()), ("v3.0", COMMIT), "LeRobot's codebase version, as tagged");
    assert_eq!(*bytes, planned);
    assert_eq!(fetched, planned, "the progress events add up to the bytes planned");
    assert!(*files >= 6, "{files} files");
    assert_same_files(&source, &snapshot);
    assert_eq!(
        std::fs::read_to_string(home.join("hub/datasets--lerobot--pusht_fake/refs/v3.0")).unwrap().trim(),
        COMMIT
    );
    assert_eq!(first_sample_actions(&snapshot), first_sample_actions(&source));

    // Downloaded once: found again with the network forbidden, and the Hub is not asked.
    let asked = hub.requests().len();
    let offline = HubEnv { offline: true, ..env(&home, &hub) };
    let again = resolve(&request(None), &offline, &mut |_| {}).unwrap();
    assert_eq!(again.root, snapshot);
    assert_eq!(again.origin, Origin::HubCache { revision: "v3.0".into() });
    assert_eq!(hub.requests().len(), asked);
}

#[test]
fn a_given_root_gets_the_files_themselves() {
    let dir = tempfile::tempdir().unwrap();
    let source = source_dataset(dir.path());
    let hub = FakeHub::serve(&source, Faults::default());
    let root = dir.path().join("my-pusht");
    let resolved = resolve(&request(Some(root.clone())), &env(&dir.path().join("home"), &hub), &mut |_| {}).unwrap();
    assert_eq!(resolved.root, root);
    assert!(matches!(resolved.origin, Origin::Downloaded { .. }));
    assert_same_files(&source, &root);
    let info = root.join("meta/info.json");
    assert!(!std::fs::symlink_metadata(&info).unwrap().file_type().is_symlink(), "files, not links, under the root");

    let asked = hub.requests().len();
    let again = resolve(&request(Some(root.clone())), &env(&dir.path().join("home"), &hub), &mut |_| {}).unwrap();
    assert_eq!(again.origin, Origin::GivenRoot);
    assert_eq!(hub.requests().len(), asked, "a complete root is used without asking the Hub");
}

#[test]
fn a_dataset_in_lerobot_home_wins_and_a_missing_one_is_not_fetched_offline() {
    let dir = tempfile::tempdir().unwrap();
    let source = source_dataset(dir.path());
    let hub = FakeHub::serve(&source, Faults::default());
    let home = dir.path().join("home");

    let offline = HubEnv { offline: true, ..env(&home, &hub) };
    let error = resolve(&request(None), &offline, &mut |_| {}).unwrap_err().to_string();
    assert!(error.contains("lerobot/pusht_fake") && error.contains("HF_HUB_OFFLINE"), "{error}");
    let no_download = DatasetRequest { download: false, ..request(None) };
    let error = resolve(&no_download, &env(&home, &hub), &mut |_| {}).unwrap_err().to_string();
    assert!(error.contains("--dataset.download false"), "{error}");
    assert!(hub.requests().is_empty(), "the Hub was asked: {:?}", hub.requests());

    write_dataset(&home.join(REPO), &SynthConfig { episodes: 2, storage: CameraStorage::Images, ..Default::default() })
        .unwrap();
    let resolved = resolve(&request(None), &env(&home, &hub), &mut |_| {}).unwrap();
    assert_eq!((resolved.root, resolved.origin), (home.join(REPO), Origin::LeRobotHome));
    assert!(hub.requests().is_empty());
}

#[test]
fn a_cut_transfer_resumes_where_it_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let source = source_dataset(dir.path());
    let biggest = {
        let mut files = BTreeMap::new();
        collect(&source, &source, &mut files);
        files.into_iter().filter(|(name, _)| is_lfs(name)).max_by_key(|(_, bytes)| bytes.len()).unwrap()
    };
    let hub = FakeHub::serve(&source, Faults { cut: Some(biggest.0.clone()), ..Default::default() });
    let home = dir.path().join("home");
    let resolved = resolve(&request(None), &env(&home, &hub), &mut |_| {}).unwrap();
    assert_same_files(&source, &resolved.root);

    let half = biggest.1.len() / 2;
    let ranges: Vec<String> = hub
        .requests()
        .into_iter()
        .filter(|(line, _)| line.starts_with("GET /cdn/") && line.ends_with(&biggest.0))
        .filter_map(|(_, range)| range)
        .collect();
    assert!(ranges.contains(&format!("bytes={half}-")), "no request resumed at byte {half}: {ranges:?}");
}

#[test]
fn a_corrupt_file_is_refused_and_not_kept() {
    let dir = tempfile::tempdir().unwrap();
    let source = source_dataset(dir.path());
    let corrupt = "meta/info.json".to_string();
    let hub = FakeHub::serve(&source, Faults { corrupt: Some(corrupt.clone()), ..Default::default() });
    let root = dir.path().join("root");
    let error = resolve(&request(Some(root.clone())), &env(&dir.path().join("home"), &hub), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(error.contains(&corrupt) && error.contains("corrupt"), "{error}");
    assert!(!root.join(&corrupt).exists(), "the corrupt file was left in the dataset");
    let blobs = root.join(".cache/huggingface/lerobot-rs/datasets--lerobot--pusht_fake/blobs");
    assert!(blobs.is_dir(), "no blob folder at {}", blobs.display());
    let source_blob = git_blob_id(&std::fs::read(source.join(&corrupt)).unwrap());
    assert!(!blobs.join(source_blob).exists(), "the corrupt blob was kept");

    // An LFS file too (sha256).
    let parquet = "data/chunk-000/file-000.parquet";
    let hub = FakeHub::serve(&source, Faults { corrupt: Some(parquet.into()), ..Default::default() });
    let home = dir.path().join("home2");
    let error = resolve(&request(None), &env(&home, &hub), &mut |_| {}).unwrap_err().to_string();
    assert!(error.contains(parquet) && error.contains("sha256"), "{error}");
    let repo = home.join("hub/datasets--lerobot--pusht_fake");
    assert!(repo.join("blobs").is_dir(), "no blob folder at {}", repo.display());
    let blob = repo.join("blobs").join(sha256(&std::fs::read(source.join(parquet)).unwrap()));
    assert!(!blob.exists() && !repo.join("snapshots").join(COMMIT).join(parquet).exists(), "the corrupt file was kept");
}

#[test]
fn a_partly_downloaded_root_gets_only_what_it_lacks_and_a_broken_one_is_not_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let source = source_dataset(dir.path());
    let hub = FakeHub::serve(&source, Faults::default());
    let root = dir.path().join("root");
    let home = dir.path().join("home");
    resolve(&request(Some(root.clone())), &env(&home, &hub), &mut |_| {}).unwrap();

    let parquet = "data/chunk-000/file-000.parquet";
    std::fs::remove_file(root.join(parquet)).unwrap();
    let resolved = resolve(&request(Some(root.clone())), &env(&home, &hub), &mut |_| {}).unwrap();
    assert!(matches!(resolved.origin, Origin::Downloaded { files: 1, .. }), "{resolved}");
    assert_same_files(&source, &root);

    // A file that is there but broken is the user's to look at: reported, not replaced.
    std::fs::write(root.join("meta/info.json"), "{ not json").unwrap();
    let asked = hub.requests().len();
    let error = resolve(&request(Some(root.clone())), &env(&home, &hub), &mut |_| {}).unwrap_err().to_string();
    assert!(error.contains("meta/info.json") && error.contains("JSON"), "{error}");
    assert_eq!(std::fs::read_to_string(root.join("meta/info.json")).unwrap(), "{ not json");
    assert_eq!(hub.requests().len(), asked);
}

#[test]
fn a_private_dataset_needs_its_token() {
    let dir = tempfile::tempdir().unwrap();
    let source = source_dataset(dir.path());
    let hub = FakeHub::serve(&source, Faults { token: Some("hf_secret".into()), ..Default::default() });
    let home = dir.path().join("home");
    let error = resolve(&request(None), &env(&home, &hub), &mut |_| {}).unwrap_err().to_string();
    assert!(error.contains("HF_TOKEN"), "{error}");

    let with_token = HubEnv { token: Some("hf_secret".into()), ..env(&home, &hub) };
    let resolved = resolve(&request(None), &with_token, &mut |_| {}).unwrap();
    assert_same_files(&source, &resolved.root);
}

#[test]
fn revisions_resolve_as_lerobot_resolves_them() {
    let dir = tempfile::tempdir().unwrap();
    let source = source_dataset(dir.path());
    let old = FakeHub::serve(&source, Faults { tags: Some(vec!["v2.1".into()]), ..Default::default() });
    let error = resolve(&request(None), &env(&dir.path().join("a"), &old), &mut |_| {}).unwrap_err().to_string();
    assert!(error.contains("v2.1") && error.contains("convert"), "{error}");

    // A branch is taken as it is; an unknown revision is named in the error.
    let hub = FakeHub::serve(&source, Faults::default());
    let main = DatasetRequest { revision: Some("main".into()), ..request(None) };
    let resolved = resolve(&main, &env(&dir.path().join("b"), &hub), &mut |_| {}).unwrap();
    assert!(matches!(&resolved.origin, Origin::Downloaded { revision, .. } if revision == "main"));
    let missing = DatasetRequest { revision: Some("no-such-branch".into()), ..request(None) };
    let error = resolve(&missing, &env(&dir.path().join("c"), &hub), &mut |_| {}).unwrap_err().to_string();
    assert!(error.contains("no-such-branch"), "{error}");
}

#[test]
fn a_partial_download_that_cannot_be_resumed_is_started_afresh() {
    let dir = tempfile::tempdir().unwrap();
    let source = source_dataset(dir.path());
    let hub = FakeHub::serve(&source, Faults::default());
    let home = dir.path().join("home");
    // Left by an earlier run killed at the wrong moment: one `.part` as long as its file (the
    // server answers 416 to a range that starts at its end), one longer than its file.
    let blobs = home.join("hub/datasets--lerobot--pusht_fake/blobs");
    std::fs::create_dir_all(&blobs).unwrap();
    let parquet = std::fs::read(source.join("data/chunk-000/file-000.parquet")).unwrap();
    std::fs::write(blobs.join(format!("{}.part", sha256(&parquet))), vec![0u8; parquet.len()]).unwrap();
    let info = std::fs::read(source.join("meta/info.json")).unwrap();
    std::fs::write(blobs.join(format!("{}.part", git_blob_id(&info))), vec![0u8; info.len() + 10]).unwrap();

    // And one cut short by a killed run, with the right bytes so far: continued where it ends.
    let episodes = std::fs::read(source.join("meta/episodes/chunk-000/file-000.parquet")).unwrap();
    let half = episodes.len() / 2;
    std::fs::write(blobs.join(format!("{}.part", sha256(&episodes))), &episodes[..half]).unwrap();

    let resolved = resolve(&request(None), &env(&home, &hub), &mut |_| {}).unwrap();
    assert_same_files(&source, &resolved.root);
    let resumed = hub.requests().into_iter().any(|(line, range)| {
        line.ends_with("meta/episodes/chunk-000/file-000.parquet") && range == Some(format!("bytes={half}-"))
    });
    assert!(resumed, "the killed run's transfer was not continued at byte {half}: {:?}", hub.requests());
}

/// A LeRobot policy as a model repository holds it: `pretrained_model/`'s files at the top
/// level, and a checkpoint pushed by `--save_checkpoint_to_hub` under `checkpoints/`.
fn source_policy(dir: &Path) -> PathBuf {
    let root = dir.join("policy");
    std::fs::create_dir_all(root.join("checkpoints/000100/pretrained_model")).unwrap();
    std::fs::write(root.join("config.json"), r#"{"type": "diffusion", "horizon": 16}"#).unwrap();
    std::fs::write(root.join("model.safetensors"), (0..=255u8).cycle().take(5000).collect::<Vec<u8>>()).unwrap();
    std::fs::write(root.join("README.md"), "---\nlibrary_name: lerobot\n---\n").unwrap();
    std::fs::write(root.join("checkpoints/000100/pretrained_model/config.json"), "{}").unwrap();
    root
}

#[test]
fn a_policy_is_downloaded_into_huggingface_hubs_cache_and_found_there_offline() {
    let dir = tempfile::tempdir().unwrap();
    let source = source_policy(dir.path());
    let hub = FakeHub::serve_as(RepoKind::Model, &source, Faults::default());
    let home = dir.path().join("home");
    let env = env(&home, &hub);
    let id = REPO.parse().unwrap();
    let resolved = resolve_model(&id, None, &env, &mut |_| {}).unwrap();

    let repo = env.hf_hub_cache.join("models--lerobot--pusht_fake");
    assert_eq!(resolved.root, repo.join("snapshots").join(COMMIT));
    assert!(matches!(&resolved.origin, Origin::Downloaded { revision, files: 3, .. } if revision == "main"));
    for file in ["config.json", "model.safetensors", "README.md"] {
        assert_eq!(std::fs::read(resolved.root.join(file)).unwrap(), std::fs::read(source.join(file)).unwrap());
    }
    assert!(!resolved.root.join("checkpoints").exists(), "a pushed checkpoint is not the policy");
    assert_eq!(std::fs::read_to_string(repo.join("refs/main")).unwrap(), COMMIT);
    assert!(hub.requests().iter().any(|(line, _)| line == &format!("GET /api/models/{REPO}/revision/main?blobs=true")));

    // Offline, the cache answers and the Hub is not asked; online, the branch is asked again
    // and nothing is downloaded twice.
    let asked = hub.requests().len();
    let offline = HubEnv { offline: true, ..env.clone() };
    let cached = resolve_model(&id, None, &offline, &mut |_| {}).unwrap();
    assert_eq!(
        (cached.root.clone(), cached.origin),
        (resolved.root.clone(), Origin::HubCache { revision: "main".into() })
    );
    assert_eq!(hub.requests().len(), asked);
    let again = resolve_model(&id, None, &env, &mut |_| {}).unwrap();
    assert!(matches!(again.origin, Origin::Downloaded { files: 0, .. }), "{again}");

    // Offline with nothing cached, a repository that is no policy, a private one without its token.
    let elsewhere = HubEnv { offline: true, hf_hub_cache: dir.path().join("empty"), ..env.clone() };
    let error = resolve_model(&id, None, &elsewhere, &mut |_| {}).unwrap_err().to_string();
    assert!(error.starts_with("model lerobot/pusht_fake: HF_HUB_OFFLINE is set"), "{error}");
    std::fs::remove_file(source.join("model.safetensors")).unwrap();
    let not_a_policy = FakeHub::serve_as(RepoKind::Model, &source, Faults::default());
    let env = HubEnv { hf_hub_cache: dir.path().join("other"), ..self::env(&home, &not_a_policy) };
    let error = resolve_model(&id, None, &env, &mut |_| {}).unwrap_err().to_string();
    assert!(error.contains("holds no model.safetensors"), "{error}");
    let private =
        FakeHub::serve_as(RepoKind::Model, &source, Faults { token: Some("hf_secret".into()), ..Default::default() });
    let env = HubEnv { hf_hub_cache: dir.path().join("private"), ..self::env(&home, &private) };
    let error = resolve_model(&id, None, &env, &mut |_| {}).unwrap_err().to_string();
    assert!(error.contains("private or gated model"), "{error}");
}

#[test]
fn with_episodes_only_the_metadata_and_their_files_are_downloaded() {
    let dir = tempfile::tempdir().unwrap();
    // One data file per episode, as LeRobot writes large episodes.
    let source = dir.path().join("source");
    let synth = SynthConfig {
        episodes: 4,
        min_length: 12,
        max_length: 20,
        storage: CameraStorage::Images,
        episodes_per_file: Some(1),
        ..Default::default()
    };
    write_dataset(&source, &synth).unwrap();
    let hub = FakeHub::serve(&source, Faults::default());
    let root = dir.path().join("root");
    let some = DatasetRequest { episodes: Some(vec![1, 3]), ..request(Some(root.clone())) };
    let resolved = resolve(&some, &env(&dir.path().join("home"), &hub), &mut |_| {}).unwrap();
    assert_eq!(resolved.root, root);

    // Each file is asked for twice (hf-hub's probe of its size, then its transfer).
    let fetched: BTreeSet<String> = hub
        .requests()
        .iter()
        .filter_map(|(line, _)| line.strip_prefix(&format!("GET /datasets/{REPO}/resolve/{COMMIT}/")).map(String::from))
        .collect();
    assert!(fetched.iter().any(|f| f.starts_with("meta/")), "{fetched:?}");
    let data: Vec<&String> = fetched.iter().filter(|f| f.starts_with("data/")).collect();
    assert_eq!(data, ["data/chunk-000/file-001.parquet", "data/chunk-000/file-003.parquet"]);
    assert!(!root.join("data/chunk-000/file-000.parquet").exists());

    // Opened as LeRobot opens it with those episodes: their samples are the whole dataset's,
    // and another episode's frame is refused.
    let opened = Dataset::open_for(&root, OpenOptions::default(), Some(&[1, 3])).unwrap();
    assert_eq!(opened.read_episodes(), Some(&[1, 3][..]));
    let whole = Dataset::open(&source).unwrap();
    let sample =
        |d: &Dataset, i: usize| d.get(i, &WindowSpec::none(), &mut DecoderCache::default(), FrameFormat::Uint8);
    for episode in [1, 3] {
        let frames = whole.episodes()[episode].frames.clone();
        for i in [frames.start, frames.end - 1] {
            assert_eq!(sample(&opened, i).unwrap(), sample(&whole, i).unwrap(), "frame {i}");
        }
    }
    let other = whole.episodes()[2].frames.start;
    assert!(sample(&opened, other).unwrap_err().to_string().contains("episode 2, which was not read"));

    // Asked again for the same episodes, nothing is fetched; for another, only its file.
    let asked = hub.requests().len();
    let again = resolve(&some, &env(&dir.path().join("home"), &hub), &mut |_| {}).unwrap();
    assert_eq!((again.origin, hub.requests().len()), (Origin::GivenRoot, asked));
    let more = DatasetRequest { episodes: Some(vec![0]), ..request(Some(root.clone())) };
    resolve(&more, &env(&dir.path().join("home"), &hub), &mut |_| {}).unwrap();
    let data_fetched: BTreeSet<String> = hub.requests()[asked..]
        .iter()
        .filter_map(|(line, _)| line.split_once("/data/").map(|(_, file)| file.to_string()))
        .collect();
    assert_eq!(data_fetched, BTreeSet::from(["chunk-000/file-000.parquet".to_string()]));
}

#[cfg(feature = "stream")]
#[test]
fn a_private_dataset_streams_from_the_hub_with_its_token() {
    use datasets::remote::{RemoteFiles, RemoteRoot, StreamOptions, hub_token_for, hub_url};
    let dir = tempfile::tempdir().unwrap();
    let source = source_dataset(dir.path());
    let hub = FakeHub::serve(&source, Faults { token: Some("hf_secret".into()), ..Default::default() });
    let without_token = env(&dir.path().join("home"), &hub);
    let with_token = HubEnv { token: Some("hf_secret".into()), ..without_token.clone() };

    // No revision asked for: LeRobot's codebase version, found among the version tags, read at
    // its commit. Without the token the Hub refuses, and the message never shows a token.
    let url = hub_url(REPO, None, &with_token).unwrap();
    assert_eq!(url, format!("{}/datasets/{REPO}/resolve/{COMMIT}", hub.endpoint));
    assert!(hub.requests().iter().any(|(line, _)| line.starts_with(&format!("GET /api/datasets/{REPO}/refs"))));
    let error = hub_url(REPO, None, &without_token).unwrap_err().to_string();
    assert!(error.contains("HF_TOKEN"), "{error}");
    let offline = HubEnv { offline: true, ..with_token.clone() };
    assert!(hub_url(REPO, None, &offline).unwrap_err().to_string().contains("HF_HUB_OFFLINE"));
    // The token goes to the Hub's URLs only.
    assert_eq!(hub_token_for(&url, &with_token).as_deref(), Some("hf_secret"));
    assert_eq!(hub_token_for("s3://bucket/lerobot/pusht_fake", &with_token), None);

    let root = || RemoteRoot::parse(&url).unwrap();
    let mirror = dir.path().join("mirror");
    let options = StreamOptions { attempts: 1, ..StreamOptions::default() };
    let error =
        Dataset::open_streaming(RemoteFiles::connect(root(), options).unwrap(), &mirror, OpenOptions::default(), None)
            .unwrap_err()
            .to_string();
    assert!(error.contains("meta/info.json") && error.contains("401"), "{error}");
    assert!(!error.contains("hf_secret"));

    let options = StreamOptions { bearer_token: hub_token_for(&url, &with_token), ..StreamOptions::default() };
    let files = RemoteFiles::connect(root(), options).unwrap();
    let streamed = Dataset::open_streaming(files, &mirror, OpenOptions::default(), None).unwrap();
    let local = Dataset::open(&source).unwrap();
    let sample =
        |d: &Dataset, i: usize| d.get(i, &WindowSpec::none(), &mut DecoderCache::default(), FrameFormat::Uint8);
    for i in 0..local.len() {
        assert_eq!(sample(&streamed, i).unwrap(), sample(&local, i).unwrap(), "sample {i}");
    }
    // No file but the metadata was written; the data came by the Hub's resolve URLs, at the commit.
    assert!(!mirror.read_dir().unwrap().flatten().any(|e| e.path().join("data").exists()));
    assert!(hub.requests().iter().any(|(line, _)| line.contains(&format!("/resolve/{COMMIT}/data/"))));
}
