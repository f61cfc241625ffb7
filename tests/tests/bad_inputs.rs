//! The bad-input corpus through the whole loader: each corruption that lets the dataset open
//! (the rest are refused at open, see `datasets/tests/bad_input.rs`) makes a loader with
//! several workers end its epoch with an error naming the file, without a panic or a hang.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use datasets::synth::{SynthConfig, write_dataset};
use datasets::{CodebaseVersion, Dataset};
use loader::Loader;

fn synth(dir: &Path, version: CodebaseVersion, episodes: usize, length: usize) -> PathBuf {
    let root = dir.join(format!("ds-{episodes}-{length}"));
    let config = SynthConfig { version, episodes, min_length: length, max_length: length, ..SynthConfig::default() };
    write_dataset(&root, &config).unwrap();
    root
}

/// Runs one epoch of a 2-worker loader on another thread; the first error, or `None` when the
/// epoch ends cleanly. Panics (fails the test) if nothing comes back within two minutes.
fn first_error(root: &Path) -> Option<String> {
    let dataset = Arc::new(Dataset::open(root).expect("this corruption opens"));
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let loader = Loader::builder(dataset).batch_size(4).num_workers(2).prefetch(2).build().unwrap();
        let error = loader.filter_map(Result::err).next().map(|e| {
            let source = std::error::Error::source(&e).map(ToString::to_string).unwrap_or_default();
            format!("{e}: {source}")
        });
        let _ = tx.send(error);
    });
    rx.recv_timeout(Duration::from_secs(120)).expect("the loader neither finished nor failed: a hang")
}

#[test]
fn every_corruption_that_opens_ends_the_epoch_with_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    type Corrupt = fn(&Path, &Dataset) -> PathBuf;
    let cases: [(&str, CodebaseVersion, Corrupt); 4] = [
        ("a truncated mp4", CodebaseVersion::V3_0, |root, ds| {
            let video = root.join(&ds.episodes()[2].videos[0].file);
            let bytes = std::fs::read(&video).unwrap();
            std::fs::write(&video, &bytes[..bytes.len() / 2]).unwrap();
            video
        }),
        ("a zero-length mp4", CodebaseVersion::V2_1, |root, ds| {
            let video = root.join(&ds.episodes()[1].videos[0].file);
            std::fs::write(&video, b"").unwrap();
            video
        }),
        ("a missing mp4", CodebaseVersion::V2_1, |root, ds| {
            let video = root.join(&ds.episodes()[2].videos[0].file);
            std::fs::remove_file(&video).unwrap();
            video
        }),
        ("garbage in the middle of an mp4", CodebaseVersion::V2_1, |root, ds| {
            let video = root.join(&ds.episodes()[0].videos[0].file);
            let mut bytes = std::fs::read(&video).unwrap();
            let n = bytes.len();
            bytes[n / 3..n / 3 + 512].iter_mut().for_each(|b| *b = 0xFF);
            bytes.truncate(n * 3 / 4);
            std::fs::write(&video, &bytes).unwrap();
            video
        }),
    ];
    for (i, (what, version, corrupt)) in cases.into_iter().enumerate() {
        let root = synth(&dir.path().join(i.to_string()), version, 3, 20);
        let dataset = Dataset::open(&root).unwrap();
        let file = corrupt(&root, &dataset);
        drop(dataset);
        let error = first_error(&root).unwrap_or_else(|| panic!("{what}: the epoch ended without an error"));
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        assert!(error.contains(&name), "{what}: the error does not name {name}: {error}");
    }
}

#[test]
fn a_video_shorter_than_its_table_is_an_error_not_a_wrong_frame() {
    let dir = tempfile::tempdir().unwrap();
    let root = synth(dir.path(), CodebaseVersion::V2_1, 3, 20);
    let short = synth(&dir.path().join("short"), CodebaseVersion::V2_1, 1, 8);
    let dataset = Dataset::open(&root).unwrap();
    let target = root.join(&dataset.episodes()[1].videos[0].file);
    let source = Dataset::open(&short).unwrap();
    std::fs::copy(short.join(&source.episodes()[0].videos[0].file), &target).unwrap();
    drop(dataset);
    let error = first_error(&root).expect("frames past the video's end are an error");
    assert!(error.contains(&*target.file_name().unwrap().to_string_lossy()), "{error}");
}
