//! `--dataset.streaming`: a dataset read from a store instead of a folder gives the same samples
//! to the bit, holds no more video than its buffer's bound and writes no data or video file to
//! disk, rides out cut connections and server errors, and stops with the file's name when a file
//! changes on the server during the run. The stores are real: a folder through object_store's
//! `file://` store, a plain HTTP server of our own on 127.0.0.1 (ranges, entity tags, and the
//! faults it is told to inject), and an S3 server (moto's, `moto_server`, which
//! `scripts/test.sh` installs; `cargo test` alone skips that test).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use datasets::remote::{RemoteFiles, RemoteRoot, StreamOptions};
use datasets::synth::{SynthConfig, write_dataset};
use datasets::{Dataset, DecoderCache, FrameFormat, OpenOptions, Sample, WindowSpec, diffusion_delta_timestamps};

/// A v3.0 dataset of six episodes, two a file: three data files and three video files.
fn source_dataset(dir: &Path) -> PathBuf {
    let root = dir.join("source");
    let synth =
        SynthConfig { episodes: 6, min_length: 20, max_length: 30, episodes_per_file: Some(2), ..Default::default() };
    write_dataset(&root, &synth).unwrap();
    root
}

/// The buffer's bound in the tests: smaller than any one video file.
const BUFFER: usize = 8 << 10;

/// Small blocks and a buffer of a few, so that a run fetches, drops and fetches again.
fn small_buffer() -> StreamOptions {
    StreamOptions {
        buffer_bytes: BUFFER,
        block_bytes: 2 << 10,
        read_ahead_blocks: 2,
        first_backoff: Duration::from_millis(5),
        ..StreamOptions::default()
    }
}

/// Every sample of `dataset` with Diffusion Policy's windows, frames as bytes.
fn every_sample(dataset: &Dataset) -> datasets::Result<Vec<Sample>> {
    let deltas = diffusion_delta_timestamps(dataset.info(), 2, 8);
    let windows = WindowSpec::from_delta_timestamps(&deltas, dataset.info(), 1e-4)?;
    let mut decoders = DecoderCache::default();
    (0..dataset.len()).map(|i| dataset.get(i, &windows, &mut decoders, FrameFormat::Uint8)).collect()
}

fn assert_same_samples(streamed: &[Sample], local: &[Sample]) {
    assert_eq!(streamed.len(), local.len());
    for (i, (a, b)) in streamed.iter().zip(local).enumerate() {
        assert_eq!(a.tensors.keys().collect::<Vec<_>>(), b.tensors.keys().collect::<Vec<_>>(), "sample {i}");
        for (key, tensor) in &a.tensors {
            assert!(*tensor == b.tensors[key], "sample {i}, {key}: the streamed values differ from the local ones");
        }
    }
}

/// The files under `dir`, relative.
fn files_under(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                found.push(path.strip_prefix(dir).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    found.sort();
    found
}

#[test]
fn a_streamed_dataset_gives_the_local_samples_to_the_bit_within_its_buffer() {
    let dir = tempfile::tempdir().unwrap();
    let source = source_dataset(dir.path());
    let local = every_sample(&Dataset::open(&source).unwrap()).unwrap();

    let root = RemoteRoot::parse(&format!("file://{}", source.display())).unwrap();
    let files = RemoteFiles::connect(root, small_buffer()).unwrap();
    let mirror = dir.path().join("mirror");
    let streamed = Dataset::open_streaming(Arc::clone(&files), &mirror, OpenOptions::default(), None).unwrap();
    assert!(streamed.is_streamed());
    assert_same_samples(&every_sample(&streamed).unwrap(), &local);

    let counters = files.counters();
    assert!(counters.requests > 0 && counters.bytes > 0, "{counters:?}");
    assert!(counters.peak_buffer_bytes <= BUFFER as u64, "the buffer held {} bytes", counters.peak_buffer_bytes);
    let video_bytes: u64 = files_under(&source)
        .iter()
        .filter(|f| f.ends_with(".mp4"))
        .map(|f| std::fs::metadata(source.join(f)).unwrap().len())
        .sum();
    assert!(
        video_bytes > 4 * BUFFER as u64,
        "the videos ({video_bytes} bytes) must not fit the buffer for this test to mean anything"
    );
    // Only metadata reaches the disk.
    let kept = files_under(&mirror);
    assert!(kept.iter().all(|f| f.contains("/meta/") || f.ends_with("versions.json")), "{kept:?}");
    assert!(kept.iter().any(|f| f.ends_with("meta/info.json")) && kept.iter().any(|f| f.contains("meta/episodes/")));

    // A second run finds the metadata mirrored and reads none of it again.
    let again =
        RemoteFiles::connect(RemoteRoot::parse(&format!("file://{}", source.display())).unwrap(), small_buffer())
            .unwrap();
    let reopened = Dataset::open_streaming(Arc::clone(&again), &mirror, OpenOptions::default(), Some(&[1, 4])).unwrap();
    let data_files = files_under(&source).iter().filter(|f| f.starts_with("data/")).count();
    assert_eq!(again.counters().requests as usize, 2, "two data files hold episodes 1 and 4, of {data_files}");
    let sample = every_sample_of(&reopened, 1);
    assert_same_samples(&[sample], &local[reopened.episodes()[1].frames.start..][..1]);
}

#[test]
fn prefetching_more_videos_than_the_streams_threads_never_stalls_a_read() {
    // Six video files, each prefetched at once: more frame indexes read together than the stream
    // runs blocking jobs, and the local store reads its files on the same runtime's blocking
    // threads. Every sample must still come, the same as the local ones.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("source");
    let synth =
        SynthConfig { episodes: 6, min_length: 20, max_length: 30, episodes_per_file: Some(1), ..Default::default() };
    write_dataset(&root, &synth).unwrap();
    let local = every_sample(&Dataset::open(&root).unwrap()).unwrap();
    let files = RemoteFiles::connect(RemoteRoot::parse(&format!("file://{}", root.display())).unwrap(), small_buffer())
        .unwrap();
    let mirror = dir.path().join("mirror");
    let streamed = Dataset::open_streaming(files, &mirror, OpenOptions::default(), None).unwrap();
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        streamed.prefetch_episodes(&(0..streamed.episodes().len()).collect::<Vec<_>>());
        let _ = done.send(every_sample(&streamed));
    });
    let streamed = finished
        .recv_timeout(Duration::from_secs(120))
        .expect("the reads stalled: no sample within two minutes of prefetching every episode")
        .unwrap();
    assert_same_samples(&streamed, &local);
}

fn every_sample_of(dataset: &Dataset, episode: usize) -> Sample {
    let deltas = diffusion_delta_timestamps(dataset.info(), 2, 8);
    let windows = WindowSpec::from_delta_timestamps(&deltas, dataset.info(), 1e-4).unwrap();
    let row = dataset.episodes()[episode].frames.start;
    dataset.get(row, &windows, &mut DecoderCache::default(), FrameFormat::Uint8).unwrap()
}

/// What the HTTP server does to the requests it answers.
#[derive(Default)]
struct Faults {
    /// Every n-th `GET` of a range is answered 503.
    unavailable_every: Option<usize>,
    /// Every n-th `GET` of a range sends half of its body and closes the connection.
    cut_every: Option<usize>,
}

/// A plain HTTP/1.1 server of a folder's files: `HEAD`, and `GET` of the whole file or of one
/// range, with an entity tag that is a hash of the file's bytes as they are at each request.
struct FileServer {
    url: String,
    gets: Arc<AtomicUsize>,
}

impl FileServer {
    fn serve(folder: &Path, faults: Faults) -> FileServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let gets = Arc::new(AtomicUsize::new(0));
        let (folder, counted, faults) = (folder.to_path_buf(), Arc::clone(&gets), Arc::new(faults));
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (folder, counted, faults) = (folder.clone(), Arc::clone(&counted), Arc::clone(&faults));
                std::thread::spawn(move || answer(stream, &folder, &counted, &faults));
            }
        });
        FileServer { url, gets }
    }
}

fn answer(mut stream: TcpStream, folder: &Path, gets: &AtomicUsize, faults: &Faults) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or("").to_string(), parts.next().unwrap_or("").to_string());
    let mut headers = BTreeMap::new();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).is_err() || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
        }
    }
    let relative = target.trim_start_matches('/');
    let Ok(bytes) = std::fs::read(folder.join(relative)) else {
        let _ = stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        return;
    };
    let e_tag = format!("\"{:016x}\"", twox_hash::XxHash64::oneshot(0, &bytes));
    let total = bytes.len();
    let range = headers.get("range").and_then(|r| r.strip_prefix("bytes=")).and_then(|r| {
        let (start, end) = r.split_once('-')?;
        let start: usize = start.parse().ok()?;
        let end: usize = end.parse::<usize>().map_or(total - 1, |e| e.min(total - 1));
        Some(start..end + 1)
    });
    let common = format!(
        "ETag: {e_tag}\r\nAccept-Ranges: bytes\r\nLast-Modified: Sun, 29 Nov 2026 00:00:00 GMT\r\nConnection: close\r\n"
    );
    let head = |status: &str, length: usize, extra: &str| {
        format!("HTTP/1.1 {status}\r\nContent-Length: {length}\r\n{common}{extra}\r\n")
    };
    if method == "HEAD" {
        let _ = stream.write_all(head("200 OK", total, "").as_bytes());
        return;
    }
    let Some(range) = range else {
        let _ = stream.write_all(head("200 OK", total, "").as_bytes());
        let _ = stream.write_all(&bytes);
        return;
    };
    let n = gets.fetch_add(1, Ordering::SeqCst) + 1;
    if faults.unavailable_every.is_some_and(|every| n.is_multiple_of(every)) {
        let _ = stream.write_all(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        return;
    }
    let content_range = format!("Content-Range: bytes {}-{}/{total}\r\n", range.start, range.end - 1);
    let _ = stream.write_all(head("206 Partial Content", range.len(), &content_range).as_bytes());
    let body = &bytes[range];
    if faults.cut_every.is_some_and(|every| n.is_multiple_of(every)) {
        let _ = stream.write_all(&body[..body.len() / 2]);
        let _ = stream.shutdown(std::net::Shutdown::Both);
        return;
    }
    let _ = stream.write_all(body);
}

#[test]
fn over_http_cut_connections_and_server_errors_are_tried_again() {
    let dir = tempfile::tempdir().unwrap();
    let source = source_dataset(dir.path());
    let local = every_sample(&Dataset::open(&source).unwrap()).unwrap();
    let server = FileServer::serve(&source, Faults { unavailable_every: Some(5), cut_every: Some(7) });

    let files = RemoteFiles::connect(RemoteRoot::parse(&server.url).unwrap(), small_buffer()).unwrap();
    let streamed =
        Dataset::open_streaming(Arc::clone(&files), &dir.path().join("mirror"), OpenOptions::default(), None).unwrap();
    assert_same_samples(&every_sample(&streamed).unwrap(), &local);
    let counters = files.counters();
    let gets = server.gets.load(Ordering::SeqCst) as u64;
    assert!(counters.retries >= gets / 7, "{counters:?} after {gets} ranged reads, a fifth failing and a seventh cut");
    assert!(counters.retries > 0);
}

#[test]
fn a_file_changed_on_the_server_during_the_run_stops_it_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let source = source_dataset(dir.path());
    let server = FileServer::serve(&source, Faults::default());
    let files = RemoteFiles::connect(RemoteRoot::parse(&server.url).unwrap(), small_buffer()).unwrap();
    let streamed =
        Dataset::open_streaming(Arc::clone(&files), &dir.path().join("mirror"), OpenOptions::default(), None).unwrap();
    let _ = every_sample_of(&streamed, 0);

    // The first episode's video, read already but larger than the buffer, is rewritten with one
    // byte changed, as a re-upload would.
    let video = streamed.video_file(&streamed.episodes()[0], 0).unwrap();
    let relative = video.to_string_lossy().strip_prefix(&format!("{}/", server.url)).unwrap().to_string();
    let mut bytes = std::fs::read(source.join(&relative)).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(source.join(&relative), bytes).unwrap();

    let error = every_sample(&streamed).unwrap_err().to_string();
    assert!(error.contains(&format!("{}/{relative}", server.url)), "{error}");
    assert!(error.contains("changed on the server"), "{error}");
}

#[test]
fn a_missing_server_or_file_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let options = StreamOptions { attempts: 2, ..small_buffer() };
    let files = RemoteFiles::connect(RemoteRoot::parse(&format!("http://{closed}/nothing")).unwrap(), options).unwrap();
    let error = Dataset::open_streaming(files, &dir.path().join("mirror"), OpenOptions::default(), None).unwrap_err();
    assert!(error.to_string().contains(&format!("http://{closed}/nothing/meta/info.json")), "{error}");

    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let server = FileServer::serve(&empty, Faults::default());
    let files = RemoteFiles::connect(RemoteRoot::parse(&server.url).unwrap(), small_buffer()).unwrap();
    let error = Dataset::open_streaming(files, &dir.path().join("mirror"), OpenOptions::default(), None).unwrap_err();
    assert!(error.to_string().contains("meta/info.json: not found on the server"), "{error}");
}

/// An S3 server of moto's on a free port, stopped when dropped.
struct MotoServer {
    child: std::process::Child,
    endpoint: String,
}

impl Drop for MotoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_moto() -> MotoServer {
    let python = std::env::var("TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = std::process::Command::new(&python)
        .args(["-m", "moto.server", "-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{python}: {e} (set TEST_PYTHON to a Python with moto[server] installed)"));
    let server = MotoServer { child, endpoint: format!("http://127.0.0.1:{port}") };
    for _ in 0..300 {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return server;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("moto's server did not listen on port {port} within 30 s");
}

/// moto's settings for object_store (any credentials do).
fn s3_config(endpoint: &str) -> Vec<(String, String)> {
    [
        ("endpoint", endpoint),
        ("allow_http", "true"),
        ("region", "us-east-1"),
        ("access_key_id", "testing"),
        ("secret_access_key", "testing"),
    ]
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .to_vec()
}

/// Uploads `bytes` as `key` of bucket `robots`, as any S3 client would.
fn s3_put(endpoint: &str, key: &str, bytes: Vec<u8>) {
    use object_store::ObjectStore;
    let mut builder = object_store::aws::AmazonS3Builder::new().with_bucket_name("robots");
    for (key, value) in s3_config(endpoint) {
        builder = builder.with_config(key.parse().unwrap(), value);
    }
    let store = builder.build().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(store.put(&object_store::path::Path::from(key), bytes.into())).unwrap();
}

/// Sends one unsigned request to moto (creating a bucket).
fn s3_request(endpoint: &str, method: &str, path: &str, body: &[u8]) {
    let address = endpoint.trim_start_matches("http://");
    let mut stream = TcpStream::connect(address).unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{method} {path}: {answer}");
}

#[test]
#[ignore = "needs moto's S3 server: scripts/test.sh runs it with TEST_PYTHON"]
fn from_an_s3_server_the_samples_are_the_local_ones() {
    let dir = tempfile::tempdir().unwrap();
    let source = source_dataset(dir.path());
    let local = every_sample(&Dataset::open(&source).unwrap()).unwrap();
    let moto = start_moto();
    s3_request(&moto.endpoint, "PUT", "/robots", b"");
    for file in files_under(&source) {
        s3_put(&moto.endpoint, &format!("lerobot/pusht/{file}"), std::fs::read(source.join(&file)).unwrap());
    }
    let options = StreamOptions { store_config: s3_config(&moto.endpoint), ..small_buffer() };
    let files = RemoteFiles::connect(RemoteRoot::parse("s3://robots/lerobot/pusht").unwrap(), options).unwrap();
    let streamed =
        Dataset::open_streaming(Arc::clone(&files), &dir.path().join("mirror"), OpenOptions::default(), None).unwrap();
    assert_same_samples(&every_sample(&streamed).unwrap(), &local);
    assert!(files.counters().peak_buffer_bytes <= BUFFER as u64);

    // A video uploaded again with one byte changed: S3 refuses the pinned version's ranges.
    let video = "videos/observation.image/chunk-000/file-000.mp4";
    let mut bytes = std::fs::read(source.join(video)).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    s3_put(&moto.endpoint, &format!("lerobot/pusht/{video}"), bytes);
    let error = every_sample(&streamed).unwrap_err().to_string();
    assert!(error.contains(&format!("s3://robots/lerobot/pusht/{video}: changed on the server")), "{error}");
}
