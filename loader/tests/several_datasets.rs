//! Several datasets in one loader: each sample is its own dataset's (as `Dataset::get` returns it
//! at its own row, features not in every dataset left out, `dataset_index` added, as LeRobot's
//! `MultiLeRobotDataset` returns it), whatever the camera source of each; sampling weights are
//! met exactly over an epoch; resuming continues exactly.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use datasets::frame_cache::FrameCache;
use datasets::synth::{CameraSpec, SynthConfig, write_dataset};
use datasets::{CollatedBatch, Dataset, DatasetSet, DecoderCache, FrameFormat, Tensor, Values, WindowSpec};
use loader::{Loader, LoaderBuilder};

struct Fixture {
    _dir: tempfile::TempDir,
    set: DatasetSet,
    /// The first dataset's frame cache.
    cache: PathBuf,
    windows: WindowSpec,
}

/// Two datasets: 5 episodes with cameras `top` and `side`, then 3 with `wrist` and `top` (so that
/// `top` is another video key's position in each).
fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let top = CameraSpec { key: "observation.images.top".into(), height: 64, width: 80 };
    let side = CameraSpec { key: "observation.images.side".into(), height: 64, width: 64 };
    let wrist = CameraSpec { key: "observation.images.wrist".into(), height: 64, width: 64 };
    let configs = [
        SynthConfig {
            episodes: 5,
            min_length: 20,
            max_length: 30,
            cameras: vec![top.clone(), side],
            seed: 3,
            ..Default::default()
        },
        SynthConfig {
            episodes: 3,
            min_length: 15,
            max_length: 20,
            cameras: vec![wrist, top],
            seed: 4,
            ..Default::default()
        },
    ];
    let mut parts = Vec::new();
    for (i, config) in configs.iter().enumerate() {
        let root = dir.path().join(format!("ds{i}"));
        write_dataset(&root, config).unwrap();
        parts.push((format!("ds{i}"), Arc::new(Dataset::open(&root).unwrap())));
    }
    let cache = dir.path().join("frames0");
    datasets::frame_cache::write_frame_cache(&parts[0].1, &cache, &Default::default(), &|_| {}).unwrap();
    let set = DatasetSet::new(parts).unwrap();
    let deltas = datasets::diffusion_delta_timestamps(set.info(), 2, 16);
    let windows = WindowSpec::from_delta_timestamps(&deltas, set.info(), 1e-4).unwrap();
    Fixture { _dir: dir, set, cache, windows }
}

fn builder(f: &Fixture) -> LoaderBuilder {
    Loader::builder(f.set.clone()).batch_size(8).drop_frames(0, 7).seed(11).windows(f.windows.clone())
}

/// What LeRobot's `MultiLeRobotDataset` would return for `indices`, collated.
fn expected(f: &Fixture, indices: &[usize], decoders: &mut DecoderCache) -> BTreeMap<String, Tensor> {
    let samples: Vec<_> = indices
        .iter()
        .map(|&i| {
            let (part, row) = f.set.locate(i).unwrap();
            let mut sample = f.set.parts()[part].get(row, &f.windows, decoders, FrameFormat::Uint8).unwrap();
            sample.tensors.retain(|key, _| !f.set.left_out().iter().any(|k| key.starts_with(k.as_str())));
            sample
        })
        .collect();
    let mut tensors = CollatedBatch::collate(&samples).unwrap().tensors;
    let index = indices.iter().map(|&i| f.set.locate(i).unwrap().0 as i64).collect();
    tensors.insert("dataset_index".into(), Tensor::new(vec![indices.len()], Values::I64(index)));
    tensors
}

#[test]
fn each_sample_is_its_own_datasets_and_features_not_everywhere_are_left_out() {
    let f = fixture();
    assert_eq!(f.set.left_out(), ["observation.images.side".to_string(), "observation.images.wrist".to_string()]);
    let mut decoders = DecoderCache::default();
    // The first dataset from its frame cache and the second from video, then both from video.
    let mut runs = Vec::new();
    for caches in [vec![Some(f.cache.clone()), None], vec![]] {
        let loader = builder(&f).num_workers(2).frame_caches(caches).max_epochs(1).build().unwrap();
        let mut seen = [0usize; 2];
        let mut batches = Vec::new();
        for batch in loader {
            let batch = batch.unwrap();
            let tensors = batch.to_tensors();
            assert_eq!(tensors, expected(&f, batch.indices(), &mut decoders), "batch {}", batch.index_in_epoch());
            assert!(!tensors.contains_key("observation.images.side"));
            batch.dataset_index().iter().for_each(|&d| seen[d as usize] += 1);
            batches.push(tensors);
        }
        assert!(seen[0] > 0 && seen[1] > 0, "{seen:?}");
        runs.push(batches);
    }
    assert!(runs[0] == runs[1], "the frame cache and the videos give different batches");
}

#[test]
fn weights_set_each_datasets_share_of_an_epoch() {
    let f = fixture();
    let weights = [0.3, 0.7];
    let loader = builder(&f).weights(weights.to_vec()).max_epochs(2).build().unwrap();
    let epoch_len = loader.sampler().anchors().len();
    let quotas = loader.sampler().quotas().unwrap().to_vec();
    let mut counts = [[0usize; 2]; 2];
    for batch in loader {
        let batch = batch.unwrap();
        for &d in batch.dataset_index() {
            counts[batch.epoch() as usize][d as usize] += 1;
        }
    }
    for epoch in counts {
        assert_eq!(epoch.to_vec(), quotas);
        for (count, weight) in epoch.iter().zip(weights) {
            let share = *count as f64 / epoch_len as f64;
            assert!((share - weight).abs() <= 1.0 / epoch_len as f64, "{share} against {weight}");
        }
    }
}

#[test]
fn a_resumed_loader_continues_with_the_same_batches() {
    let f = fixture();
    let take = |b: LoaderBuilder, n: usize| -> Vec<_> {
        b.build().unwrap().take(n).map(|b| b.unwrap()).map(|b| (b.to_tensors(), b.state())).collect()
    };
    let weighted = || builder(&f).weights(vec![1.0, 2.0]);
    let per_epoch = weighted().build().unwrap().sampler().batches_per_epoch();
    let straight = take(weighted(), 2 * per_epoch + 2);
    for cut in [1, per_epoch, per_epoch + 1] {
        let resumed = take(weighted().resume(straight[cut - 1].1).num_workers(1), straight.len() - cut);
        assert!(resumed == straight[cut..], "resumed after batch {cut}: batches differ");
    }
}

#[test]
fn frame_caches_must_match_the_datasets() {
    let f = fixture();
    let err = builder(&f).frame_cache(&f.cache).build().err().unwrap();
    assert!(err.to_string().contains("1 frame caches for 2 datasets"), "{err}");
}

#[test]
fn a_resized_frame_cache_sets_the_frame_shape_which_every_dataset_must_give() {
    let f = fixture();
    let resized = f._dir.path().join("frames0-small");
    datasets::frame_cache::write_frame_cache(
        &f.set.parts()[0],
        &resized,
        &datasets::frame_cache::CacheFormat { resize: Some((32, 40)), ..Default::default() },
        &|_| {},
    )
    .unwrap();
    let single = Loader::builder(f.set.parts()[0].clone()).batch_size(4).windows(f.windows.clone());
    let batch = single.frame_cache(&resized).build().unwrap().next().unwrap().unwrap();
    assert_eq!(batch.shape("observation.images.top").unwrap(), vec![4, 2, 3, 32, 40]);

    let err = builder(&f).frame_caches(vec![Some(resized), None]).build().err().unwrap().to_string();
    assert!(err.contains("`observation.images.top`") && err.contains("ds1") && err.contains("ds0"), "{err}");
}

/// With `frame_rows`, a camera's frames come as their rows among both datasets' cached frames
/// laid end to end: each row names the frame the same loader copies from the caches, windows
/// padded at the episodes' starts included; everything else is the same. A dataset without a
/// frame cache is refused, named.
#[test]
fn frame_rows_name_the_frames_the_caches_give() {
    let f = fixture();
    let second = f.cache.with_file_name("frames1");
    datasets::frame_cache::write_frame_cache(&f.set.parts()[1], &second, &Default::default(), &|_| {}).unwrap();
    let both = vec![Some(f.cache.clone()), Some(second)];
    let caches: Vec<FrameCache> =
        both.iter().zip(f.set.parts()).map(|(dir, d)| FrameCache::open(dir.as_ref().unwrap(), d).unwrap()).collect();
    let key = "observation.images.top";
    let framed = builder(&f).frame_caches(both.clone()).max_epochs(1).build().unwrap();
    let rowed = builder(&f).num_workers(2).frame_caches(both).frame_rows(true).max_epochs(1).build().unwrap();
    let mut padded = 0;
    for (framed, rowed) in framed.zip(rowed) {
        let (framed, rowed) = (framed.unwrap(), rowed.unwrap());
        let (frames, rows) = (framed.u8(key).unwrap(), rowed.frame_rows(key).unwrap());
        assert_eq!(rowed.shape(key).unwrap(), vec![rowed.len(), 2], "a row per window step");
        assert_eq!(rows.len(), 2 * rowed.len());
        let frame_len = frames.len() / rows.len();
        for (k, &row) in rows.iter().enumerate() {
            let (part, local) = f.set.locate(row as usize).unwrap();
            let cached = caches[part].camera(key).unwrap().frame(local);
            assert_eq!(cached, &frames[k * frame_len..(k + 1) * frame_len], "slot {k}, row {row}");
        }
        padded += rowed.pad(key).unwrap().iter().filter(|&&pad| pad).count();
        let (mut framed, mut rowed) = (framed.to_tensors(), rowed.to_tensors());
        framed.remove(key);
        rowed.remove(key);
        assert_eq!(framed, rowed, "the other fields");
    }
    assert!(padded > 0, "some windows start before their episode");

    let err = builder(&f).frame_caches(vec![Some(f.cache.clone()), None]).frame_rows(true).build().err().unwrap();
    assert!(err.to_string().contains("`observation.images.top` of ds1 is not read from a frame cache"), "{err}");
}
