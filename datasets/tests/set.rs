//! Datasets joined as LeRobot's `MultiLeRobotDataset` joins them: one index space, each
//! dataset's own rows and tasks, statistics aggregated as `aggregate_stats` does; and a clear
//! error, naming the file and the field, where datasets cannot be trained together.

use std::path::Path;
use std::sync::Arc;

use datasets::synth::{CameraSpec, CameraStorage, SynthConfig, write_dataset};
use datasets::{Dataset, DatasetSet};

fn small(seed: u64) -> SynthConfig {
    SynthConfig {
        episodes: 3,
        min_length: 10,
        max_length: 14,
        cameras: vec![CameraSpec { key: "observation.image".into(), height: 64, width: 64 }],
        storage: CameraStorage::Images,
        seed,
        ..SynthConfig::default()
    }
}

fn open(dir: &Path, name: &str, config: &SynthConfig) -> (String, Arc<Dataset>) {
    let root = dir.join(name);
    write_dataset(&root, config).unwrap();
    (name.to_string(), Arc::new(Dataset::open(&root).unwrap()))
}

#[test]
fn two_datasets_are_one_index_space_with_their_own_rows_tasks_and_pooled_stats() {
    let dir = tempfile::tempdir().unwrap();
    let tasks = vec!["fold the towel".to_string()];
    let a = open(dir.path(), "a", &small(1));
    let b = open(dir.path(), "b", &SynthConfig { tasks: tasks.clone(), reward_and_done: false, ..small(2) });
    let (na, nb) = (a.1.len(), b.1.len());
    let set = DatasetSet::new(vec![a.clone(), b.clone()]).unwrap();
    assert_eq!(set.len(), na + nb);
    assert_eq!(set.info().total_frames, na + nb);
    assert_eq!(set.locate(0), Some((0, 0)));
    assert_eq!(set.locate(na - 1), Some((0, na - 1)));
    assert_eq!(set.locate(na), Some((1, 0)));
    assert_eq!(set.locate(na + nb), None);
    assert_eq!(set.task_of(na + 3), Some(tasks[0].as_str()));
    assert_eq!(set.task_of(3), Some(a.1.task_of(3)));
    // Only the first dataset has `next.reward` and `next.done`: left out, as LeRobot does.
    assert_eq!(set.left_out(), ["next.reward".to_string(), "next.done".to_string()]);
    assert!(set.info().feature("next.reward").is_none());
    assert_eq!(set.episode_ranges()[1][0].start, na);

    // LeRobot's aggregate_stats: count-weighted mean, pooled population variance, extremes.
    let stat = |d: &Dataset, name: &str| d.stats()["observation.state"].get(name).unwrap().values.clone();
    let joint = &set.stats()["observation.state"];
    let (ca, cb) = (stat(&a.1, "count")[0], stat(&b.1, "count")[0]);
    assert_eq!(joint.count(), Some(ca + cb));
    for k in 0..2 {
        let (ma, mb) = (stat(&a.1, "mean")[k], stat(&b.1, "mean")[k]);
        let (sa, sb) = (stat(&a.1, "std")[k], stat(&b.1, "std")[k]);
        let mean = (ca * ma + cb * mb) / (ca + cb);
        let var = (ca * (sa * sa + (ma - mean).powi(2)) + cb * (sb * sb + (mb - mean).powi(2))) / (ca + cb);
        assert!((joint.get("mean").unwrap().values[k] - mean).abs() < 1e-9);
        assert!((joint.get("std").unwrap().values[k] - var.sqrt()).abs() < 1e-9);
        let min = stat(&a.1, "min")[k].min(stat(&b.1, "min")[k]);
        assert_eq!(joint.get("min").unwrap().values[k], min);
    }
    // One dataset is kept as it is.
    let single = DatasetSet::from(a.1.clone());
    assert_eq!(single.stats(), a.1.stats());
    assert!(single.left_out().is_empty());
}

#[test]
fn datasets_that_cannot_be_trained_together_are_refused_naming_the_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let a = open(dir.path(), "a", &small(1));
    let message = |other: (String, Arc<Dataset>)| DatasetSet::new(vec![a.clone(), other]).unwrap_err().to_string();

    let fps = message(open(dir.path(), "fps", &SynthConfig { fps: 30, ..small(2) }));
    assert!(fps.contains("fps/meta/info.json") && fps.contains("`fps`") && fps.contains("30 fps"), "{fps}");

    let state = message(open(dir.path(), "state", &SynthConfig { state_dim: 3, ..small(2) }));
    assert!(
        state.contains("state/meta/info.json") && state.contains("features.observation.state") && state.contains("[3]"),
        "{state}"
    );

    let camera = SynthConfig {
        cameras: vec![CameraSpec { key: "observation.image".into(), height: 64, width: 96 }],
        ..small(2)
    };
    let camera = message(open(dir.path(), "camera", &camera));
    assert!(camera.contains("features.observation.image") && camera.contains("dataset 1 (camera)"), "{camera}");

    if cfg!(feature = "video") {
        let video = SynthConfig { storage: SynthConfig::default().storage, ..small(2) };
        let video = message(open(dir.path(), "video", &video));
        assert!(video.contains("is video") && video.contains("image of shape"), "{video}");
    }

    let (name, _) = open(dir.path(), "nostats", &small(2));
    std::fs::remove_file(dir.path().join("nostats/meta/stats.json")).unwrap();
    let nostats = message((name, Arc::new(Dataset::open(dir.path().join("nostats")).unwrap())));
    assert!(nostats.contains("nostats/meta/stats.json") && nostats.contains("no statistics"), "{nostats}");
}
