//! Entry points for the fuzz targets (`fuzz/`) and their regression test: each puts arbitrary
//! bytes in place of one file of an otherwise valid dataset and reads it the way the library
//! does. Whatever the bytes, the call must return (an `Ok` or an `Err`), never panic, hang or
//! allocate without bound.
//!
//! One allowance: a panic raised inside `catch_decoder_panics` (in the parquet crate or the arrow
//! crates it calls), which that guard turns into an error naming the file, is let through
//! libFuzzer's abort-on-panic hook to unwind there. It is still a bug upstream, worth reporting
//! (see `vendor/README.md`); the inputs are kept in `fuzz/regressions/`.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use crate::dataset::Metadata;
use crate::frame_cache::{FrameCache, cache_file, write_frame_cache};
use crate::synth::{CameraSpec, CameraStorage, SynthConfig, write_dataset};
use crate::{CodebaseVersion, Dataset, DatasetInfo, OpenOptions};

/// The valid datasets the entry points corrupt, written once per process.
struct Skeletons {
    v2: PathBuf,
    v3: PathBuf,
    cache: PathBuf,
    /// The v3.0 skeleton, opened.
    dataset: Dataset,
    /// The v3.0 skeleton's metadata, read once: `parquet_table` spends its time in the table.
    metadata: Metadata,
}

fn skeletons() -> &'static Mutex<Skeletons> {
    static SKELETONS: OnceLock<Mutex<Skeletons>> = OnceLock::new();
    SKELETONS.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("datasets-fuzz-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let config = |version| SynthConfig {
            version,
            episodes: 2,
            min_length: 5,
            max_length: 6,
            cameras: vec![CameraSpec { key: "observation.image".into(), height: 8, width: 8 }],
            storage: CameraStorage::Images,
            ..SynthConfig::default()
        };
        let (v2, v3, cache) = (dir.join("v21"), dir.join("v30"), dir.join("cache"));
        write_dataset(&v2, &config(CodebaseVersion::V2_1)).expect("a v2.1 skeleton");
        write_dataset(&v3, &config(CodebaseVersion::V3_0)).expect("a v3.0 skeleton");
        let dataset = Dataset::open(&v3).expect("the skeleton opens");
        let metadata = Metadata::read(&v3).expect("the skeleton's metadata reads");
        write_frame_cache(&dataset, &cache, &Default::default(), &|_| {}).expect("a frame cache");
        Mutex::new(Skeletons { v2, v3, cache, dataset, metadata })
    })
}

/// Lets panics raised inside `catch_decoder_panics` unwind to it; every other panic goes to the
/// hook installed before (libFuzzer's, which aborts: a finding).
fn let_parquet_panics_unwind() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !crate::table::parquet_file::inside_decoder_guard() {
                previous(info);
            }
        }));
    });
}

/// Writes `data` over `path`, runs `read`, and puts the original bytes back.
fn with_file_replaced(path: &Path, data: &[u8], read: impl FnOnce()) {
    let original = std::fs::read(path).expect("the skeleton file exists");
    std::fs::write(path, data).expect("writable scratch folder");
    read();
    std::fs::write(path, original).expect("writable scratch folder");
}

/// `meta/info.json` as JSON text.
pub fn info_json(data: &[u8]) {
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) {
        let _ = DatasetInfo::from_json(Path::new("meta/info.json"), &value);
    }
}

/// The first byte picks the file (v2.1 `episodes.jsonl`, `tasks.jsonl`, `episodes_stats.jsonl`,
/// v3.0 `meta/tasks.parquet` or the episodes parquet); the rest is its content.
pub fn metadata(data: &[u8]) {
    let Some((&which, content)) = data.split_first() else { return };
    let_parquet_panics_unwind();
    let guard = skeletons().lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let (root, file) = match which % 5 {
        0 => (&guard.v2, "meta/episodes.jsonl"),
        1 => (&guard.v2, "meta/tasks.jsonl"),
        2 => (&guard.v2, "meta/episodes_stats.jsonl"),
        3 => (&guard.v3, "meta/tasks.parquet"),
        _ => (&guard.v3, "meta/episodes/chunk-000/file-000.parquet"),
    };
    with_file_replaced(&root.join(file), content, || {
        let _ = Dataset::open(root);
    });
}

/// The v3.0 data parquet file (the frame table, with PNG images inside), read and checked
/// against the skeleton's metadata as `Dataset::open` does.
pub fn parquet_table(data: &[u8]) {
    let_parquet_panics_unwind();
    let guard = skeletons().lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let root = &guard.v3;
    with_file_replaced(&root.join("data/chunk-000/file-000.parquet"), data, || {
        let _ = Dataset::from_metadata(
            root.clone(),
            guard.metadata.clone(),
            OpenOptions::default(),
            None,
            crate::source::FileSource::Local,
        );
    });
}

/// A frame-cache file (header and frames).
pub fn frame_cache(data: &[u8]) {
    let guard = skeletons().lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let dataset = &guard.dataset;
    with_file_replaced(&cache_file(&guard.cache, "observation.image"), data, || {
        if let Ok(cache) = FrameCache::open(&guard.cache, dataset)
            && let Some(camera) = cache.camera("observation.image")
        {
            for row in 0..dataset.len() {
                std::hint::black_box(camera.frame(row));
            }
        }
    });
}
