//! Replays every input the fuzz targets (`fuzz/`) ever crashed or stalled on, kept in
//! `fuzz/regressions/<target>/`, through the same entry points: each must now return, within a
//! deadline, so that a fix undone fails this test instead of hanging CI.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use datasets::fuzzing::{frame_cache, info_json, metadata, parquet_table};

/// Long enough for a debug build on a busy machine (an input takes milliseconds in release);
/// short against the minutes to hours the stalls this guards against took.
const DEADLINE: Duration = Duration::from_secs(120);

/// The kept inputs of `target`, sorted.
fn inputs(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/regressions").join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file() && path.file_name().is_some_and(|n| n != ".gitkeep"))
        .collect();
    files.sort();
    files
}

/// Runs `run` on `input` on its own thread; panics if it has not returned within [`DEADLINE`].
fn returns_in_time(name: &str, run: fn(&[u8]), input: Vec<u8>) {
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        run(&input);
        let _ = done.send(());
    });
    match finished.recv_timeout(DEADLINE) {
        Ok(()) => {}
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{name} has not returned after {DEADLINE:?}"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{name} panicked"),
    }
}

fn replay(target: &str, run: fn(&[u8])) -> usize {
    let files = inputs(target);
    for path in &files {
        returns_in_time(&path.display().to_string(), run, std::fs::read(path).unwrap());
    }
    files.len()
}

#[test]
fn past_fuzz_findings_now_return() {
    let replayed = [
        replay("info_json", info_json),
        replay("metadata", metadata),
        replay("parquet_table", parquet_table),
        replay("frame_cache", frame_cache),
    ];
    // Every input kept so far (`fuzz/regressions/`): none for info_json and frame_cache, two
    // for metadata, four for parquet_table. Keep this in step when adding one.
    assert_eq!(replayed, [0, 2, 4, 0], "inputs replayed per target");
}

#[test]
fn every_target_takes_the_edge_inputs() {
    for (name, run) in [
        ("info_json", info_json as fn(&[u8])),
        ("metadata", metadata),
        ("parquet_table", parquet_table),
        ("frame_cache", frame_cache),
    ] {
        for input in [&b""[..], b"\0", b"{}", b"PAR1", b"PAR1\0\0\0\0PAR1", &[0xFF; 64]] {
            returns_in_time(&format!("{name}({input:?})"), run, input.to_vec());
        }
    }
}
