//! A dataset written again in place with other frames but the same layout (episodes, lengths,
//! timestamps: a synthetic dataset rewritten with another seed) is never served the frames
//! cached from its previous writing, by the automatic cache or by a cache named by hand; and a
//! run that reads YUV planes is never served RGB frames, nor one that reads RGB the planes.

use datasets::Dataset;
use datasets::auto_cache::{AutoCache, plan};
use datasets::frame_cache::{CacheFormat, FrameCache, write_frame_cache};
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
    let AutoCache::Build { dir: first_dir, .. } =
        plan(&first, &[CacheFormat::default()], &caches, None, &[]).unwrap().cache
    else {
        panic!("no cache yet: the plan is to build one")
    };
    write_frame_cache(&first, &first_dir, &Default::default(), &|_| {}).unwrap();
    assert!(
        matches!(plan(&first, &[CacheFormat::default()], &caches, None, &[]).unwrap().cache, AutoCache::Ready { dir } if dir == first_dir)
    );

    std::fs::remove_dir_all(&root).unwrap();
    write_dataset(&root, &synth(2)).unwrap();
    let second = Dataset::open(&root).unwrap();
    assert_eq!((first.len(), first.episodes().len()), (second.len(), second.episodes().len()), "same layout");
    match plan(&second, &[CacheFormat::default()], &caches, None, &[]).unwrap().cache {
        AutoCache::Build { dir, .. } => assert_ne!(dir, first_dir),
        other => panic!("the rewritten dataset must get a cache of its own, not {other}"),
    }
    assert!(FrameCache::open(&first_dir, &second).is_err(), "the old cache opened for the rewritten dataset");
}

#[test]
#[cfg(feature = "video")] // synthesises AV1
fn each_frame_encoding_gets_an_automatic_cache_of_its_own() {
    use datasets::FrameEncoding;
    use datasets::frame_cache::decoded_bytes;

    let dir = tempfile::tempdir().unwrap();
    let (root, caches) = (dir.path().join("dataset"), dir.path().join("caches"));
    write_dataset(&root, &SynthConfig { episodes: 2, min_length: 10, max_length: 10, ..Default::default() }).unwrap();
    let dataset = Dataset::open(&root).unwrap();
    let mut built = Vec::new();
    for encoding in [FrameEncoding::Rgb, FrameEncoding::Yuv420] {
        let AutoCache::Build { dir, bytes, .. } =
            plan(&dataset, &[CacheFormat::encoded(encoding)], &caches, None, &[]).unwrap().cache
        else {
            panic!("no {encoding} cache yet: the plan is to build one")
        };
        assert_eq!(bytes, decoded_bytes(&dataset, &CacheFormat::encoded(encoding)));
        write_frame_cache(&dataset, &dir, &CacheFormat::encoded(encoding), &|_| {}).unwrap();
        let again = plan(&dataset, &[CacheFormat::encoded(encoding)], &caches, None, &[]).unwrap().cache;
        assert!(matches!(&again, AutoCache::Ready { dir: ready } if *ready == dir), "{again}");
        built.push((dir, bytes));
    }
    let [(rgb_dir, rgb_bytes), (yuv_dir, yuv_bytes)] = &built[..] else { unreachable!() };
    assert_ne!(rgb_dir, yuv_dir);
    // 96x96 frames: 27,648 bytes as RGB, 13,824 as planes; each file has a 4 KiB header.
    assert_eq!(rgb_bytes - 4096, 2 * (yuv_bytes - 4096));
}
