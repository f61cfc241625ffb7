//! A dataset written again in place with other frames but the same layout (episodes, lengths,
//! timestamps: a synthetic dataset rewritten with another seed) is never served the frames
//! cached from its previous writing, by the automatic cache or by a cache named by hand.

use datasets::Dataset;
use datasets::auto_cache::{AutoCache, plan};
use datasets::frame_cache::{FrameCache, write_frame_cache};
use datasets::synth::{CameraStorage, SynthConfig, write_dataset};

fn synth(seed: u64) -> SynthConfig {
    SynthConfig {
        episodes: 3,
        min_length: 20,
        max_length: 20,
        storage: CameraStorage::Images,
        seed,
        ..Default::default()
    }
}

#[test]
fn a_dataset_rewritten_in_place_gets_a_cache_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let (root, caches) = (dir.path().join("dataset"), dir.path().join("caches"));
    write_dataset(&root, &synth(1)).unwrap();
    let first = Dataset::open(&root).unwrap();
    let AutoCache::Build { dir: first_dir, .. } = plan(&first, &caches, None, &[]).unwrap().cache else {
        panic!("no cache yet: the plan is to build one")
    };
    write_frame_cache(&first, &first_dir, None, &|_| {}).unwrap();
    assert!(matches!(plan(&first, &caches, None, &[]).unwrap().cache, AutoCache::Ready { dir } if dir == first_dir));

    std::fs::remove_dir_all(&root).unwrap();
    write_dataset(&root, &synth(2)).unwrap();
    let second = Dataset::open(&root).unwrap();
    assert_eq!((first.len(), first.episodes().len()), (second.len(), second.episodes().len()), "same layout");
    match plan(&second, &caches, None, &[]).unwrap().cache {
        AutoCache::Build { dir, .. } => assert_ne!(dir, first_dir),
        other => panic!("the rewritten dataset must get a cache of its own, not {other}"),
    }
    assert!(FrameCache::open(&first_dir, &second).is_err(), "the old cache opened for the rewritten dataset");
}
