//! Conformance with LeRobot: every key of every reference sample that LeRobot's own loader
//! wrote for the fixture datasets (which LeRobot's own writer made) equals ours, to the bit:
//! vectors, indices, pads and camera frames (decoded from AV1 by our FFmpeg 5.1 and LeRobot's
//! torchcodec on FFmpeg 7.1, or from PNG). The count of compared and differing frame values is
//! printed, so that a change of decoder shows what it moved.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use datasets::{Dataset, DecoderCache, DeltaTimestamps, FrameFormat, Sample, Values, WindowSpec};
use serde_json::Value;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures")
}

/// A tensor from a reference file: dtype name, shape and raw little-endian bytes.
struct RefTensor {
    dtype: safetensors::Dtype,
    shape: Vec<usize>,
    bytes: Vec<u8>,
}

struct Reference {
    index: usize,
    task: String,
    tensors: BTreeMap<String, RefTensor>,
}

fn read_reference(path: &Path) -> Reference {
    let bytes = std::fs::read(path).unwrap();
    let (_, metadata) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    let meta = metadata.metadata().clone().unwrap_or_default();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let tensors = file
        .tensors()
        .into_iter()
        .map(|(k, v)| (k, RefTensor { dtype: v.dtype(), shape: v.shape().to_vec(), bytes: v.data().to_vec() }))
        .collect();
    Reference { index: meta["index"].parse().unwrap(), task: meta["task"].clone(), tensors }
}

/// What comparing one dataset's references found.
#[derive(Default, Debug)]
struct Tally {
    samples: usize,
    keys: usize,
    frame_values: usize,
    frame_values_differing: usize,
    max_frame_diff: u8,
}

fn compare(dataset: &Dataset, config: &str, spec: &WindowSpec) -> Tally {
    let name = dataset.root().file_name().unwrap().to_str().unwrap();
    let dir = dataset.root().with_file_name(format!("{name}.reference")).join(config);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(files.len() >= 40, "{}: only {} reference samples", dir.display(), files.len());
    let cameras: Vec<String> = dataset.info().camera_keys().iter().map(ToString::to_string).collect();
    let mut decoders = DecoderCache::default();
    let mut tally = Tally::default();
    for file in files {
        let reference = read_reference(&file);
        let ours: Sample = dataset.get(reference.index, spec, &mut decoders, FrameFormat::Uint8).unwrap();
        let context = format!("{} (index {})", file.display(), reference.index);
        assert_eq!(ours.task, reference.task, "{context}: task");
        let our_keys: Vec<&String> = ours.tensors.keys().collect();
        let ref_keys: Vec<&String> = reference.tensors.keys().collect();
        assert_eq!(our_keys, ref_keys, "{context}: keys");
        for (key, expected) in &reference.tensors {
            let got = &ours.tensors[key];
            assert_eq!(got.shape, expected.shape, "{context}: shape of `{key}`");
            tally.keys += 1;
            match (&got.values, expected.dtype) {
                (Values::F32(v), safetensors::Dtype::F32) => {
                    let want: Vec<f32> =
                        expected.bytes.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
                    assert_eq!(v, &want, "{context}: `{key}`");
                }
                (Values::I64(v), safetensors::Dtype::I64) => {
                    let want: Vec<i64> =
                        expected.bytes.chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap())).collect();
                    assert_eq!(v, &want, "{context}: `{key}`");
                }
                (Values::Bool(v), safetensors::Dtype::BOOL) => {
                    let want: Vec<bool> = expected.bytes.iter().map(|&b| b != 0).collect();
                    assert_eq!(v, &want, "{context}: `{key}`");
                }
                (Values::U8(v), safetensors::Dtype::U8) => {
                    assert!(cameras.contains(key), "{context}: `{key}` is uint8 but not a camera");
                    for (a, b) in v.iter().zip(&expected.bytes) {
                        let d = a.abs_diff(*b);
                        tally.max_frame_diff = tally.max_frame_diff.max(d);
                        tally.frame_values_differing += usize::from(d != 0);
                    }
                    tally.frame_values += v.len();
                }
                (got, dtype) => panic!("{context}: `{key}` is {} here and {dtype:?} in LeRobot", got.dtype_name()),
            }
        }
        tally.samples += 1;
    }
    eprintln!("{} / {config}: {tally:?}", dataset.root().display());
    assert!(tally.frame_values > 0, "{}: no frame values compared", dataset.root().display());
    assert_eq!(
        tally.frame_values_differing,
        0,
        "{} / {config}: {} of {} frame values differ from LeRobot's (by up to {} on uint8)",
        dataset.root().display(),
        tally.frame_values_differing,
        tally.frame_values,
        tally.max_frame_diff
    );
    tally
}

fn references_json(name: &str) -> Value {
    let path = fixtures().join(name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The diffusion `delta_timestamps` recorded with a fixture's references.
fn diffusion_deltas(references: &Value, fps: f64) -> DeltaTimestamps {
    if let Some(config) = references["configs"]["diffusion"].as_object() {
        return config
            .iter()
            .map(|(k, v)| (k.clone(), v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()))
            .collect();
    }
    references["delta_indices"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_array().unwrap().iter().map(|x| x.as_i64().unwrap() as f64 / fps).collect()))
        .collect()
}

fn check_dataset(dir: &str, with_plain: bool) {
    let dataset = Dataset::open(fixtures().join(dir)).unwrap();
    let references = references_json(&format!("{dir}.reference/references.json"));
    let deltas = diffusion_deltas(&references, dataset.info().fps);
    let spec = WindowSpec::from_delta_timestamps(&deltas, dataset.info(), 1e-4).unwrap();
    // LeRobot's diffusion preset resolves to the same windows as the recorded config.
    let preset = datasets::diffusion_delta_timestamps(dataset.info(), 2, 16);
    assert_eq!(WindowSpec::from_delta_timestamps(&preset, dataset.info(), 1e-4).unwrap(), spec);
    let tally = compare(&dataset, "diffusion", &spec);
    assert!(tally.samples >= 40 && tally.keys > 0);
    if with_plain {
        compare(&dataset, "plain", &WindowSpec::none());
    }
}

#[test]
#[cfg(feature = "video")] // decodes video
fn v3_video_matches_lerobot() {
    check_dataset("lerobot-0.6.1/pusht_mini", true);
}

#[test]
fn v3_images_in_parquet_match_lerobot() {
    check_dataset("lerobot-0.6.1/pusht_images", true);
}

#[test]
#[cfg(feature = "video")] // decodes video
fn v21_video_matches_lerobot() {
    check_dataset("lerobot-0.3.3/v21_pusht", false);
}

#[test]
#[cfg(feature = "video")] // decodes video
fn float_frames_are_uint8_over_255() {
    let dataset = Dataset::open(fixtures().join("lerobot-0.6.1/pusht_mini")).unwrap();
    let mut decoders = DecoderCache::default();
    let spec = WindowSpec::none();
    let raw = dataset.get(135, &spec, &mut decoders, FrameFormat::Uint8).unwrap();
    let float = dataset.get(135, &spec, &mut decoders, FrameFormat::Float).unwrap();
    let (Values::U8(r), Values::F32(f)) =
        (&raw.tensors["observation.image"].values, &float.tensors["observation.image"].values)
    else {
        panic!("unexpected dtypes")
    };
    assert_eq!(raw.tensors["observation.image"].shape, vec![3, 96, 96]);
    assert!(r.iter().zip(f).all(|(&a, &b)| f32::from(a) / 255.0 == b));
}

#[test]
fn v21_stats_aggregate_like_lerobot() {
    // meta/episodes_stats.jsonl aggregated with LeRobot's count-weighted parallel variance
    // gives the pooled statistics of the frames themselves.
    let dataset = Dataset::open(fixtures().join("lerobot-0.3.3/v21_pusht")).unwrap();
    let stats = &dataset.stats()["observation.state"];
    let column = dataset.table().column("observation.state").unwrap().as_f32().unwrap();
    for d in 0..2 {
        let values: Vec<f64> = column.iter().skip(d).step_by(2).map(|&v| f64::from(v)).collect();
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let std = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt();
        assert!((stats.get("mean").unwrap().values[d] - mean).abs() < 1e-3, "mean[{d}]");
        assert!((stats.get("std").unwrap().values[d] - std).abs() < 1e-3, "std[{d}]");
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        assert!((stats.get("min").unwrap().values[d] - min).abs() < 1e-4);
    }
    assert_eq!(stats.count(), Some(496.0));
}
