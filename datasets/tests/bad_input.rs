//! Bad input gets an error that names the file and the field, never a panic or a wrong sample;
//! `validate` reports the same problems.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, Float32Array, Int64Array, RecordBatch};
use datasets::synth::{SynthConfig, write_dataset};
use datasets::{CodebaseVersion, Dataset, DecoderCache, DeltaTimestamps, FrameFormat, WindowSpec};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

fn synth(version: CodebaseVersion) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ds");
    write_dataset(
        &root,
        &SynthConfig { version, episodes: 3, min_length: 20, max_length: 24, ..SynthConfig::default() },
    )
    .unwrap();
    (dir, root)
}

fn edit_json(path: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let mut value: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    edit(&mut value);
    std::fs::write(path, serde_json::to_string_pretty(&value).unwrap()).unwrap();
}

fn info(root: &Path) -> PathBuf {
    root.join("meta/info.json")
}

/// Rewrites a parquet file through `edit`, which gets each batch's columns by name.
fn edit_parquet(path: &Path, edit: impl Fn(Vec<(String, ArrayRef)>) -> Vec<(String, ArrayRef)>) {
    let file = std::fs::File::open(path).unwrap();
    let reader = ParquetRecordBatchReaderBuilder::try_new(file).unwrap().build().unwrap();
    let batches: Vec<RecordBatch> = reader
        .map(|b| {
            let b = b.unwrap();
            let columns =
                b.schema().fields().iter().zip(b.columns()).map(|(f, c)| (f.name().clone(), c.clone())).collect();
            RecordBatch::try_from_iter(edit(columns)).unwrap()
        })
        .collect();
    let mut writer = ArrowWriter::try_new(std::fs::File::create(path).unwrap(), batches[0].schema(), None).unwrap();
    for b in &batches {
        writer.write(b).unwrap();
    }
    writer.close().unwrap();
}

/// Rewrites a parquet file with column `name` replaced by `replace` of it (in every batch).
fn replace_column(path: &Path, name: &str, replace: impl Fn(&ArrayRef) -> ArrayRef) {
    edit_parquet(path, |columns| {
        columns.into_iter().map(|(n, c)| if n == name { (n, replace(&c)) } else { (n, c) }).collect()
    });
}

/// Opening fails, and the message names `file` and `field`.
fn open_fails(root: &Path, file: &str, field: &str) -> String {
    let err = Dataset::open(root).expect_err("opening should fail").to_string();
    assert!(err.contains(file), "error does not name {file}: {err}");
    assert!(err.contains(field), "error does not name {field}: {err}");
    err
}

/// Getting sample `index` fails (for the reason `why`), and the message names `file`.
fn get_fails(dataset: &Dataset, index: usize, file: &str, why: &str) -> String {
    let err = dataset
        .get(index, &WindowSpec::none(), &mut DecoderCache::default(), FrameFormat::Uint8)
        .expect_err(why)
        .to_string();
    assert!(err.contains(file), "error does not name {file}: {err}");
    err
}

/// `validate` reports a problem in `file` mentioning `text`.
fn validate_reports(root: &Path, file: &str, text: &str) {
    let report = datasets::validate::validate(root, 1e-4);
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.file.to_string_lossy().contains(file) && (p.field.contains(text) || p.message.contains(text))),
        "validate did not report {file} / {text}: {:#?}",
        report.problems
    );
}

#[test]
fn missing_info_json() {
    let (_d, root) = synth(CodebaseVersion::V3_0);
    std::fs::remove_file(info(&root)).unwrap();
    open_fails(&root, "meta/info.json", "No such file");
    validate_reports(&root, "meta/info.json", "No such file");
}

#[test]
fn unknown_or_older_versions_say_which_are_supported() {
    let (_d, root) = synth(CodebaseVersion::V3_0);
    for version in ["v1.6", "v4.0", "three"] {
        edit_json(&info(&root), |v| v["codebase_version"] = version.into());
        let err = open_fails(&root, "meta/info.json", "codebase_version");
        assert!(err.contains(version) && err.contains("v3.0") && err.contains("v2.1"), "{err}");
    }
}

#[test]
fn malformed_json() {
    let (_d, root) = synth(CodebaseVersion::V3_0);
    let text = std::fs::read_to_string(info(&root)).unwrap();
    std::fs::write(info(&root), &text[..text.len() / 2]).unwrap();
    open_fails(&root, "meta/info.json", "malformed JSON");
    let (_d, root) = synth(CodebaseVersion::V2_1);
    std::fs::write(root.join("meta/episodes.jsonl"), "{\"episode_index\": 0, \"tasks\": [\n").unwrap();
    open_fails(&root, "meta/episodes.jsonl", "malformed JSON");
    edit_json(&info(&root), |v| v["fps"] = "ten".into());
    open_fails(&root, "meta/info.json", "fps");
}

#[test]
fn missing_parquet_and_mp4() {
    for version in [CodebaseVersion::V3_0, CodebaseVersion::V2_1] {
        let (_d, root) = synth(version);
        let dataset = Dataset::open(&root).unwrap();
        let data = root.join(&dataset.episodes()[1].data_file);
        let video = root.join(&dataset.episodes()[1].videos[0].file);
        drop(dataset);
        std::fs::remove_file(&video).unwrap();
        // Videos open lazily: the sample that needs the file fails, naming it.
        let dataset = Dataset::open(&root).unwrap();
        let index = dataset.episodes()[1].frames.start;
        let err = get_fails(&dataset, index, &video.to_string_lossy(), "the video is missing");
        assert!(err.contains("No such file"), "{err}");
        validate_reports(&root, video.file_name().unwrap().to_str().unwrap(), "No such file");
        std::fs::remove_file(&data).unwrap();
        open_fails(&root, data.file_name().unwrap().to_str().unwrap(), "No such file");
    }
}

#[test]
fn truncated_and_empty_mp4() {
    let (_d, root) = synth(CodebaseVersion::V3_0);
    let dataset = Dataset::open(&root).unwrap();
    let video = root.join(&dataset.episodes()[0].videos[0].file);
    let last = dataset.len() - 1;
    drop(dataset);
    let bytes = std::fs::read(&video).unwrap();
    // Cut the end off: the moov atom (written last) or the last frames go.
    std::fs::write(&video, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let dataset = Dataset::open(&root).unwrap();
    get_fails(&dataset, last, "file-000.mp4", "the video is truncated");
    validate_reports(&root, "file-000.mp4", "video: cannot open");
    std::fs::write(&video, b"").unwrap();
    let err = get_fails(&dataset, 0, "file-000.mp4", "the video is empty");
    assert!(err.contains("cannot open"), "{err}");
}

#[test]
fn parquet_missing_a_declared_column_or_with_a_wrong_vector_length() {
    let (_d, root) = synth(CodebaseVersion::V3_0);
    let data = root.join("data/chunk-000/file-000.parquet");
    edit_parquet(&data, |cols| cols.into_iter().filter(|(k, _)| k != "action").collect());
    open_fails(&root, "file-000.parquet", "action");
    validate_reports(&root, "file-000.parquet", "action");

    let (_d, root) = synth(CodebaseVersion::V2_1);
    edit_json(&info(&root), |v| v["features"]["observation.state"]["shape"] = serde_json::json!([3]));
    let err = open_fails(&root, "episode_000000.parquet", "observation.state");
    assert!(err.contains("3"), "{err}");
}

#[test]
fn episode_indices_with_a_gap() {
    let (_d, root) = synth(CodebaseVersion::V2_1);
    let path = root.join("meta/episodes.jsonl");
    let text = std::fs::read_to_string(&path).unwrap().replace("\"episode_index\":2", "\"episode_index\":5");
    std::fs::write(&path, text).unwrap();
    open_fails(&root, "meta/episodes.jsonl", "episode_index");

    let (_d, root) = synth(CodebaseVersion::V3_0);
    let path = root.join("meta/episodes/chunk-000/file-000.parquet");
    replace_column(&path, "episode_index", |_| Arc::new(Int64Array::from(vec![0, 2, 3])));
    open_fails(&root, "meta/episodes/chunk-000/file-000.parquet", "episode_index");
}

#[test]
fn timestamps_off_by_more_than_the_tolerance() {
    // v2.1 checks timestamps at open, like LeRobot's check_timestamps_sync.
    let (_d, root) = synth(CodebaseVersion::V2_1);
    let data = root.join("data/chunk-000/episode_000001.parquet");
    let shift = |column: &ArrayRef| -> ArrayRef {
        let ts = column.as_any().downcast_ref::<Float32Array>().unwrap();
        Arc::new(Float32Array::from_iter_values(
            ts.values().iter().enumerate().map(|(i, &t)| if i == 5 { t + 0.02 } else { t }),
        ))
    };
    replace_column(&data, "timestamp", shift);
    open_fails(&root, "episode_000001.parquet", "timestamp");
    validate_reports(&root, "episode_000001.parquet", "timestamp");

    // v3.0 does not: the frame lookup of that row fails instead, naming the video.
    let (_d, root) = synth(CodebaseVersion::V3_0);
    replace_column(&root.join("data/chunk-000/file-000.parquet"), "timestamp", shift);
    let dataset = Dataset::open(&root).unwrap();
    let err = get_fails(&dataset, 5, "file-000.mp4", "the timestamp is off the tolerance");
    assert!(err.contains("tolerance_s"), "{err}");
    validate_reports(&root, "file-000.mp4", "no video frame within");
}

#[test]
fn delta_timestamps_off_the_frame_grid() {
    let (_d, root) = synth(CodebaseVersion::V3_0);
    let dataset = Dataset::open(&root).unwrap();
    let mut deltas = DeltaTimestamps::new();
    deltas.insert("action".into(), vec![0.0, 0.15]);
    let err = WindowSpec::from_delta_timestamps(&deltas, dataset.info(), 1e-4).unwrap_err().to_string();
    assert!(err.contains("action") && err.contains("0.15") && err.contains("1/10"), "{err}");
    let mut deltas = DeltaTimestamps::new();
    deltas.insert("observation.nope".into(), vec![0.0]);
    let err = WindowSpec::from_delta_timestamps(&deltas, dataset.info(), 1e-4).unwrap_err().to_string();
    assert!(err.contains("observation.nope"), "{err}");
}

#[test]
fn paths_that_would_escape_the_root() {
    let (_d, root) = synth(CodebaseVersion::V3_0);
    edit_json(&info(&root), |v| {
        v["data_path"] = "../../outside/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet".into();
    });
    let err = open_fails(&root, "meta/info.json", "data_path");
    assert!(err.contains(".."), "{err}");
    edit_json(&info(&root), |v| {
        v["data_path"] = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet".into();
        v["video_path"] = "/tmp/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4".into();
    });
    let err = open_fails(&root, "meta/info.json", "video_path");
    assert!(err.contains("absolute"), "{err}");
    edit_json(&info(&root), |v| {
        v["video_path"] = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4".into();
        let camera = v["features"]["observation.image"].clone();
        v["features"].as_object_mut().unwrap().insert("../../escape".into(), camera);
    });
    open_fails(&root, "meta/info.json", "../../escape");
}

#[test]
fn wrong_totals_and_non_finite_stats() {
    let (_d, root) = synth(CodebaseVersion::V3_0);
    edit_json(&info(&root), |v| v["total_frames"] = 9999.into());
    open_fails(&root, "meta/info.json", "total_frames");
    validate_reports(&root, "meta/info.json", "total_frames");
    edit_json(&info(&root), |v| v["total_frames"] = serde_json::Value::Null);
    open_fails(&root, "meta/info.json", "total_frames");

    let (_d, root) = synth(CodebaseVersion::V3_0);
    let path = root.join("meta/stats.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let needle = "\"mean\": [";
    let at = text.find(needle).unwrap() + needle.len();
    std::fs::write(&path, format!("{}NaN, {}", &text[..at], &text[at..].split_once(',').unwrap().1)).unwrap();
    validate_reports(&root, "meta/stats.json", "non-finite");
}

/// Episode 1's data file (v3: shared by every episode of the synth dataset).
fn data_file(root: &Path) -> PathBuf {
    let dataset = Dataset::open(root).unwrap();
    root.join(&dataset.episodes()[1].data_file)
}

#[test]
fn garbage_bytes_in_parquet_pages() {
    let (_d, root) = synth(CodebaseVersion::V3_0);
    let path = data_file(&root);
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle..middle + 64].iter_mut().enumerate().for_each(|(i, b)| *b = (i as u8).wrapping_mul(37) ^ 0xA5);
    std::fs::write(&path, &bytes).unwrap();
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let err = Dataset::open(&root).expect_err("a corrupt parquet page").to_string();
    assert!(err.contains(&name), "{err}");
    validate_reports(&root, &name, "parquet: ");
}

/// A parquet file whose footer is `count` unknown fields, each a list declaring 2^31 - 1
/// booleans in 9 bytes. parquet 60.1.0 skipped such elements as zero bytes: each field spun
/// for seconds, this file for hours. Found by the `metadata` fuzz target.
fn parquet_with_billions_of_declared_booleans(count: usize) -> Vec<u8> {
    // Field header (long form: type 9 = list, field id 100), list header (size follows, element
    // type 1 = boolean), size as a varint.
    const FIELD: [u8; 9] = [0x09, 0xC8, 0x01, 0xF1, 0xFF, 0xFF, 0xFF, 0xFF, 0x07];
    let mut footer: Vec<u8> = FIELD.iter().copied().cycle().take(FIELD.len() * count).collect();
    footer.push(0); // the struct's stop
    let mut file = b"PAR1".to_vec();
    file.extend_from_slice(&footer);
    file.extend_from_slice(&(footer.len() as u32).to_le_bytes());
    file.extend_from_slice(b"PAR1");
    file
}

#[test]
fn a_parquet_footer_declaring_billions_of_booleans_is_refused_promptly() {
    let (_d, root) = synth(CodebaseVersion::V3_0);
    let path = data_file(&root);
    std::fs::write(&path, parquet_with_billions_of_declared_booleans(1000)).unwrap();
    let (done, finished) = std::sync::mpsc::channel();
    let opened = root.clone();
    std::thread::spawn(move || done.send(Dataset::open(&opened).map(|_| ()).map_err(|e| e.to_string())));
    // A watchdog, not a timing: the fixed decoder answers in milliseconds, the unfixed one in hours.
    let result = finished.recv_timeout(std::time::Duration::from_secs(120)).expect("still decoding after 120 s");
    let err = result.expect_err("a footer of garbage fields is an error");
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    assert!(err.contains(&name), "{err}");
}

#[test]
fn a_dictionary_encoded_page_without_its_dictionary_page() {
    // Found by the `parquet_table` fuzz target: parquet 60.1.0 panicked on it.
    let crash = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/regressions/parquet_table/dictionary-page-missing-08079c82");
    let (_d, root) = synth(CodebaseVersion::V3_0);
    let path = data_file(&root);
    std::fs::copy(&crash, &path).unwrap();
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let err = Dataset::open(&root).expect_err("a malformed column chunk").to_string();
    assert!(err.contains(&name) && err.contains("dictionary"), "{err}");
}

#[test]
fn parquet_files_the_decoder_panics_on_are_errors_naming_the_file() {
    // Found by the `parquet_table` fuzz target: parquet 60.1.0 asserts on a column chunk at a
    // negative offset (a documented panic), arrow-buffer on definition levels past the end of
    // their buffer; `catch_decoder_panics` makes both errors naming the file.
    let regressions = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/regressions/parquet_table");
    for (input, panic) in [
        ("negative-chunk-offset-0e41eb81", "should not be negative"),
        ("def-levels-out-of-bounds-37249a8e", "out of bounds"),
    ] {
        let (_d, root) = synth(CodebaseVersion::V3_0);
        let path = data_file(&root);
        std::fs::copy(regressions.join(input), &path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let err = Dataset::open(&root).expect_err(input).to_string();
        assert!(err.contains(&name) && err.contains(panic), "{input}: {err}");
        validate_reports(&root, &name, panic);
    }
}

#[test]
fn a_data_file_with_fewer_rows_than_its_episodes() {
    let (_d, root) = synth(CodebaseVersion::V3_0);
    let path = data_file(&root);
    edit_parquet(&path, |columns| columns.into_iter().map(|(n, c)| (n, c.slice(0, c.len() - 5))).collect());
    let err = Dataset::open(&root).expect_err("rows missing").to_string();
    assert!(err.contains("total_frames") && err.contains("rows"), "{err}");
    // `validate` used to index the short timestamp column by the episodes' rows, and panic.
    validate_reports(&root, &path.file_name().unwrap().to_string_lossy(), "rows");
}

#[test]
fn a_column_of_the_wrong_type() {
    let (_d, root) = synth(CodebaseVersion::V3_0);
    let path = data_file(&root);
    replace_column(&path, "action", |column| Arc::new(Int64Array::from_iter_values(0..column.len() as i64)));
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    open_fails(&root, &name, "action");
    validate_reports(&root, &name, "action");
}

#[test]
fn nan_and_inf_in_actions() {
    for bad in [f32::NAN, f32::INFINITY] {
        let (_d, root) = synth(CodebaseVersion::V3_0);
        let path = data_file(&root);
        replace_column(&path, "action", |column| {
            let list = column.as_any().downcast_ref::<arrow_array::FixedSizeListArray>().unwrap();
            let values = list.values().as_any().downcast_ref::<Float32Array>().unwrap();
            let mut v: Vec<f32> = values.values().to_vec();
            v[7] = bad;
            let field = Arc::new(arrow_schema::Field::new("item", arrow_schema::DataType::Float32, true));
            Arc::new(arrow_array::FixedSizeListArray::new(
                field,
                list.value_length(),
                Arc::new(Float32Array::from(v)),
                None,
            ))
        });
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let err = open_fails(&root, &name, "action");
        assert!(err.contains("non-finite"), "{err}");
        validate_reports(&root, &name, "action");
    }
}

#[test]
fn huge_declared_shapes_are_refused_before_anything_is_allocated() {
    let (_d, root) = synth(CodebaseVersion::V3_0);
    edit_json(&info(&root), |v| {
        v["features"]["observation.image"]["shape"] = serde_json::json!([100_000, 100_000, 3]);
    });
    let err = open_fails(&root, "meta/info.json", "observation.image");
    assert!(err.contains("more than"), "{err}");
    let (_d, root) = synth(CodebaseVersion::V3_0);
    edit_json(&info(&root), |v| v["features"]["observation.state"]["shape"] = serde_json::json!([1usize << 40]));
    open_fails(&root, "meta/info.json", "observation.state");
}

#[test]
fn wrong_from_timestamp_offsets() {
    let (_d, root) = synth(CodebaseVersion::V3_0);
    let episodes = std::fs::read_dir(root.join("meta/episodes/chunk-000")).unwrap().next().unwrap().unwrap().path();
    let key = "videos/observation.image/from_timestamp";
    replace_column(&episodes, key, |column| {
        let from = column.as_any().downcast_ref::<arrow_array::Float64Array>().unwrap();
        let shifted = from.values().iter().enumerate().map(|(i, t)| if i == 1 { t + 50.0 } else { *t });
        Arc::new(arrow_array::Float64Array::from_iter_values(shifted))
    });
    // The window lands past the end of the video: the frame is refused, naming the file.
    let dataset = Dataset::open(&root).unwrap();
    let video = dataset.episodes()[1].videos[0].file.to_string_lossy().into_owned();
    let index = dataset.episodes()[1].frames.start;
    get_fails(&dataset, index, &video, "a timestamp outside the video");
    validate_reports(&root, &video, "20 of its 20 frame timestamps have no video frame");
}

#[test]
fn a_video_shorter_than_its_table() {
    let (_d, root) = synth(CodebaseVersion::V2_1);
    let short = tempfile::tempdir().unwrap();
    let short_root = short.path().join("short");
    write_dataset(
        &short_root,
        &SynthConfig {
            version: CodebaseVersion::V2_1,
            episodes: 1,
            min_length: 8,
            max_length: 8,
            ..SynthConfig::default()
        },
    )
    .unwrap();
    let dataset = Dataset::open(&root).unwrap();
    let target = root.join(&dataset.episodes()[1].videos[0].file);
    let last = dataset.episodes()[1].frames.end - 1;
    drop(dataset);
    let source = Dataset::open(&short_root).unwrap();
    std::fs::copy(short_root.join(&source.episodes()[0].videos[0].file), &target).unwrap();
    let dataset = Dataset::open(&root).unwrap();
    let name = target.file_name().unwrap().to_string_lossy().into_owned();
    get_fails(&dataset, last, &name, "the table's last frame is past the video's end");
    validate_reports(&root, &name, "12 of its 20 frame timestamps have no video frame");
}

#[test]
fn a_frame_cache_truncated_while_in_use_is_noticed_before_it_is_read() {
    let (dir, root) = synth(CodebaseVersion::V3_0);
    let dataset = Dataset::open(&root).unwrap();
    let cache_dir = dir.path().join("cache");
    datasets::frame_cache::write_frame_cache(&dataset, &cache_dir, &Default::default(), &|_| {}).unwrap();
    let cache = datasets::frame_cache::FrameCache::open(&cache_dir, &dataset).unwrap();
    cache.check_intact().unwrap();
    // Another process cuts the file in place (reading the lost pages would raise SIGBUS).
    let file = datasets::frame_cache::cache_file(&cache_dir, "observation.image");
    std::fs::OpenOptions::new().write(true).open(&file).unwrap().set_len(1000).unwrap();
    let err = cache.check_intact().expect_err("the truncation is noticed").to_string();
    assert!(err.contains("observation.image") && err.contains("shrank"), "{err}");
}
