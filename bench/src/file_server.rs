//! A folder served over HTTP on 127.0.0.1 with a network's latency and bandwidth: the store
//! `bench loader --serve-latency-ms` streams from, so that streaming is measured against a link
//! like a cloud bucket's on one machine.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

/// The link the server imitates.
#[derive(Debug, Clone, Copy)]
pub struct Link {
    /// Added before each answer (a request's round trip).
    pub latency: Duration,
    /// Bytes per second over all connections together.
    pub bytes_per_s: f64,
}

/// A running server; it stops with the process.
pub struct FileServer {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
}

/// When the shared link is next free: writes are paced so that all connections together stay
/// under the bandwidth.
struct Pacer {
    next_free: Mutex<Instant>,
    bytes_per_s: f64,
}

impl Pacer {
    /// Waits until `bytes` may be sent.
    fn take(&self, bytes: usize) {
        let wait_until = {
            let mut next = self.next_free.lock().unwrap_or_else(PoisonError::into_inner);
            let start = (*next).max(Instant::now());
            *next = start + Duration::from_secs_f64(bytes as f64 / self.bytes_per_s);
            *next
        };
        let now = Instant::now();
        if wait_until > now {
            std::thread::sleep(wait_until - now);
        }
    }
}

impl FileServer {
    /// Serves `folder` (HEAD, GET of a whole file or of one byte range, connections kept alive).
    pub fn serve(folder: &Path, link: Link) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").context("binding a port on 127.0.0.1")?;
        let url = format!("http://{}", listener.local_addr()?);
        let folder = folder.to_path_buf();
        let pacer = Arc::new(Pacer { next_free: Mutex::new(Instant::now()), bytes_per_s: link.bytes_per_s });
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (folder, pacer) = (folder.clone(), Arc::clone(&pacer));
                std::thread::spawn(move || serve_connection(stream, &folder, link.latency, &pacer));
            }
        });
        Ok(Self { url })
    }
}

/// Answers the requests of one connection until it closes.
fn serve_connection(stream: TcpStream, folder: &Path, latency: Duration, pacer: &Pacer) {
    let _ = stream.set_nodelay(true);
    let Ok(mut writer) = stream.try_clone() else { return };
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, target) = (parts.next().unwrap_or("").to_string(), parts.next().unwrap_or("").to_string());
        let mut range = None;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            if header.trim().is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.trim().eq_ignore_ascii_case("range")
            {
                range = value.trim().strip_prefix("bytes=").map(str::to_string);
            }
        }
        std::thread::sleep(latency);
        if answer(&mut writer, folder, &method, &target, range.as_deref(), pacer).is_err() {
            return;
        }
    }
}

fn answer(
    out: &mut TcpStream,
    folder: &Path,
    method: &str,
    target: &str,
    range: Option<&str>,
    pacer: &Pacer,
) -> std::io::Result<()> {
    let relative = target.trim_start_matches('/');
    let path = folder.join(relative);
    let (bytes, e_tag) = match (relative.contains(".."), std::fs::read(&path), std::fs::metadata(&path)) {
        (false, Ok(bytes), Ok(meta)) => {
            let modified = meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
            let tag = format!("\"{:x}-{:x}\"", bytes.len(), modified.map_or(0, |d| d.as_nanos()));
            (bytes, tag)
        }
        _ => return out.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"),
    };
    let total = bytes.len();
    let span = range.and_then(|r| {
        let (start, end) = r.split_once('-')?;
        let start: usize = start.parse().ok()?;
        let end = end.parse::<usize>().map_or(total.saturating_sub(1), |e| e.min(total.saturating_sub(1)));
        (start <= end && start < total).then_some(start..end + 1)
    });
    let (status, body, extra) = match span {
        Some(span) => (
            "206 Partial Content",
            &bytes[span.clone()],
            format!("Content-Range: bytes {}-{}/{total}\r\n", span.start, span.end - 1),
        ),
        None => ("200 OK", &bytes[..], String::new()),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nETag: {e_tag}\r\nAccept-Ranges: bytes\r\n{extra}\r\n",
        body.len()
    );
    out.write_all(head.as_bytes())?;
    if method == "HEAD" {
        return Ok(());
    }
    for chunk in body.chunks(64 << 10) {
        pacer.take(chunk.len());
        out.write_all(chunk)?;
    }
    Ok(())
}
