//! LeRobot 0.6's normalisation rules, against the formulas written out in plain Rust.

use std::collections::BTreeMap;
use std::path::Path;

use burn::backend::Flex;
use burn::prelude::*;
use datasets::{DatasetInfo, FeatureStats, StatArray, Stats};
use serde_json::json;
use transforms::{
    EPS, FeatureType, IMAGENET_MEAN, IMAGENET_STD, NormalizationMode, Normalizer, diffusion_mapping, frames_to_float,
};

type B = Flex;

fn info() -> DatasetInfo {
    let scalar = |dtype: &str| json!({"dtype": dtype, "shape": [1], "names": null});
    let value = json!({
        "codebase_version": "v3.0", "fps": 10, "total_episodes": 1, "total_frames": 1, "total_tasks": 1,
        "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
        "video_path": "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4",
        "features": {
            "observation.image": {"dtype": "video", "shape": [4, 5, 3], "names": ["height", "width", "channels"]},
            "observation.state": {"dtype": "float32", "shape": [2], "names": null},
            "observation.environment_state": {"dtype": "float32", "shape": [3], "names": null},
            "action": {"dtype": "float32", "shape": [2], "names": null},
            "next.reward": scalar("float32"),
            "timestamp": scalar("float32"), "frame_index": scalar("int64"), "episode_index": scalar("int64"),
            "index": scalar("int64"), "task_index": scalar("int64")
        }
    });
    DatasetInfo::from_json(Path::new("meta/info.json"), &value).unwrap()
}

fn stats() -> Stats {
    let entry = |pairs: &[(&str, Vec<f64>)], per_channel: bool| {
        FeatureStats(
            pairs
                .iter()
                .map(|(k, v)| {
                    (
                        k.to_string(),
                        if per_channel { StatArray::per_channel(v.clone()) } else { StatArray::vector(v.clone()) },
                    )
                })
                .collect(),
        )
    };
    let mut s = Stats::new();
    s.insert(
        "observation.image".into(),
        entry(
            &[
                ("mean", vec![0.5, 0.4, 0.3]),
                ("std", vec![0.2, 0.25, 0.1]),
                ("min", vec![0.0; 3]),
                ("max", vec![1.0; 3]),
            ],
            true,
        ),
    );
    s.insert(
        "observation.state".into(),
        entry(
            &[
                ("min", vec![10.0, 5.0]),
                ("max", vec![500.0, 5.0]),
                ("q01", vec![12.0, 5.0]),
                ("q99", vec![480.0, 6.0]),
                ("q10", vec![50.0, 5.0]),
                ("q90", vec![400.0, 5.5]),
            ],
            false,
        ),
    );
    s.insert("action".into(), entry(&[("min", vec![-1.0, 0.0]), ("max", vec![3.0, 2.0])], false));
    s.insert("observation.environment_state".into(), entry(&[("min", vec![0.0; 3]), ("max", vec![1.0; 3])], false));
    s
}

fn values<const D: usize>(t: Tensor<B, D>) -> Vec<f32> {
    t.into_data().convert::<f32>().to_vec().unwrap()
}

#[test]
fn diffusion_defaults_normalise_cameras_with_imagenet_and_vectors_to_minus_one_one() {
    let info = info();
    let n = Normalizer::new(&info, &stats(), &diffusion_mapping(), true).unwrap();
    assert_eq!(FeatureType::of(&info, "observation.environment_state"), Some(FeatureType::Env));
    assert!(!n.features.contains_key("observation.environment_state"), "ENV is not in the diffusion mapping");
    assert!(!n.features.contains_key("next.reward"));

    let device = Default::default();
    let bytes: Vec<u8> = (0..2 * 3 * 4 * 5).map(|i| (i * 7 % 256) as u8).collect();
    let frames = frames_to_float::<B>(&bytes, [2, 3, 4, 5], &device);
    let got = values(n.normalize("observation.image", frames));
    for (i, (&b, &g)) in bytes.iter().zip(&got).enumerate() {
        let c = (i / 20) % 3;
        let x = f32::from(b) / 255.0;
        let want = (x - IMAGENET_MEAN[c]) / (IMAGENET_STD[c] + EPS);
        assert_eq!(g, want, "pixel {i}");
    }

    let state = Tensor::<B, 2>::from_data([[10.0f32, 5.0], [255.0, 5.0], [500.0, 7.0]], &device);
    let normed = n.normalize("observation.state", state.clone());
    // min == max on the second dimension: eps replaces the zero range.
    let expected = [-1.0f32, (2.0 * 0.0) / EPS - 1.0, (2.0 * 245.0) / 490.0 - 1.0, -1.0, 1.0, (2.0 * 2.0) / EPS - 1.0];
    assert_eq!(values(normed.clone()), expected);
    let back = values(n.unnormalize("observation.state", normed));
    for (b, s) in back.iter().zip(values(state)) {
        assert!((b - s).abs() < 1e-3, "{b} vs {s}");
    }
}

#[test]
fn imagenet_override_can_be_turned_off_and_other_modes_follow_lerobot() {
    let info = info();
    let n = Normalizer::new(&info, &stats(), &diffusion_mapping(), false).unwrap();
    let image = &n.features["observation.image"];
    assert_eq!(image.low, vec![0.5, 0.4, 0.3]);
    assert_eq!(image.spread, vec![0.2, 0.25, 0.1]);

    let device = Default::default();
    let mapping = BTreeMap::from([
        (FeatureType::State, NormalizationMode::Quantiles),
        (FeatureType::Action, NormalizationMode::MinMax),
    ]);
    let q = Normalizer::new(&info, &stats(), &mapping, true).unwrap();
    let x = Tensor::<B, 2>::from_data([[246.0f32, 5.5]], &device);
    let y = values(q.normalize("observation.state", x.clone()));
    assert_eq!(y, [2.0 * (246.0 - 12.0) / 468.0 - 1.0, 2.0 * 0.5 - 1.0]);
    // LeRobot's quantile inverse: (x + 1) · denom / 2 + q01.
    let back = values(q.unnormalize("observation.state", Tensor::<B, 2>::from_data([[0.0f32, 0.0]], &device)));
    assert_eq!(back, [(0.0 + 1.0) * 468.0 / 2.0 + 12.0, 1.0 / 2.0 + 5.0]);
    let mapping = BTreeMap::from([(FeatureType::State, NormalizationMode::Quantile10)]);
    let q10 = Normalizer::new(&info, &stats(), &mapping, true).unwrap();
    assert_eq!(
        values(q10.normalize("observation.state", x)),
        [2.0 * (246.0 - 50.0) / 350.0 - 1.0, 2.0 * 0.5 / 0.5 - 1.0]
    );
}

#[test]
fn missing_or_non_finite_statistics_are_errors_naming_the_feature() {
    let info = info();
    let mut s = stats();
    s.remove("action");
    let err = Normalizer::new(&info, &s, &diffusion_mapping(), true).unwrap_err().to_string();
    assert!(err.contains("`action`") && err.contains("missing"), "{err}");
    let mut s = stats();
    s.get_mut("observation.state").unwrap().0.get_mut("max").unwrap().values[0] = f64::NAN;
    let err = Normalizer::new(&info, &s, &diffusion_mapping(), true).unwrap_err().to_string();
    assert!(err.contains("observation.state") && err.contains("NaN"), "{err}");
    let mapping = BTreeMap::from([(FeatureType::Action, NormalizationMode::Quantiles)]);
    let err = Normalizer::new(&info, &stats(), &mapping, true).unwrap_err().to_string();
    assert!(err.contains("`q01` missing"), "{err}");
}
