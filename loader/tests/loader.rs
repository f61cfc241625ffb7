//! One expectation over every code path: the same batches, bit for bit, whatever the number of
//! workers, the prefetch depth, or the camera source (video or frame cache); each sample equal
//! to what `datasets sample` (Dataset::get) returns; errors delivered, never a hang. The blocks
//! order gives the same samples, decoding each frame once.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use datasets::synth::{CameraSpec, SynthConfig, write_dataset};
use datasets::{
    CodebaseVersion, CollatedBatch, Dataset, DecoderCache, DecoderCacheConfig, FrameEncoding, FrameFormat, Tensor,
    WindowSpec,
};
use loader::{Loader, LoaderBuilder, SampleOrdering, SamplerState};

struct Fixture {
    _dir: tempfile::TempDir,
    dataset: Arc<Dataset>,
    cache: std::path::PathBuf,
    windows: WindowSpec,
}

fn fixture(cfg: SynthConfig) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ds");
    write_dataset(&root, &cfg).unwrap();
    let dataset = Arc::new(Dataset::open(&root).unwrap());
    let cache = dir.path().join("frames");
    datasets::frame_cache::write_frame_cache(&dataset, &cache, &Default::default(), &|_| {}).unwrap();
    let deltas = datasets::diffusion_delta_timestamps(dataset.info(), 2, 16);
    let windows = WindowSpec::from_delta_timestamps(&deltas, dataset.info(), 1e-4).unwrap();
    Fixture { _dir: dir, dataset, cache, windows }
}

fn small() -> SynthConfig {
    SynthConfig {
        episodes: 5,
        min_length: 20,
        max_length: 30,
        episodes_per_file: Some(2),
        cameras: vec![
            CameraSpec { key: "observation.images.top".into(), height: 64, width: 64 },
            CameraSpec { key: "observation.images.side".into(), height: 64, width: 96 },
        ],
        seed: 9,
        ..SynthConfig::default()
    }
}

fn builder(f: &Fixture) -> LoaderBuilder {
    Loader::builder(f.dataset.clone()).batch_size(16).drop_frames(0, 7).seed(5).windows(f.windows.clone())
}

fn collect(loader: Loader, n: usize) -> Vec<(BTreeMap<String, Tensor>, Vec<usize>, SamplerState)> {
    loader
        .take(n)
        .map(|b| {
            let b = b.unwrap();
            (b.to_tensors(), b.indices().to_vec(), b.state())
        })
        .collect()
}

#[test]
fn every_path_gives_the_same_batches() {
    let f = fixture(small());
    let epoch = builder(&f).build().unwrap().sampler().batches_per_epoch();
    let n = 2 * epoch + 1;
    let reference = collect(builder(&f).num_workers(0).build().unwrap(), n);
    assert_eq!(reference.len(), n);
    for (workers, prefetch, cache) in [(1, 1, false), (4, 8, false), (1, 8, true), (4, 1, true), (0, 4, true)] {
        let mut b = builder(&f).num_workers(workers).prefetch(prefetch);
        if cache {
            b = b.frame_cache(&f.cache);
        }
        let got = collect(b.build().unwrap(), n);
        assert!(got == reference, "workers {workers}, prefetch {prefetch}, frame cache {cache}: batches differ");
    }
}

/// Batches whose frames pass the loader's threshold for copies past the CPU's caches
/// ([`loader::PAST_CACHES_MIN_BYTES`], 16 MiB: 24 samples of two 240x320 cameras at two time
/// steps take 22 MB) are the same from the frame cache as from the videos.
#[test]
fn large_batches_copied_past_the_caches_are_the_same_from_the_frame_cache() {
    let camera = |key: &str| CameraSpec { key: key.into(), height: 240, width: 320 };
    let f = fixture(SynthConfig {
        episodes: 3,
        min_length: 20,
        max_length: 24,
        episodes_per_file: Some(2),
        cameras: vec![camera("observation.images.top"), camera("observation.images.side")],
        seed: 4,
        ..SynthConfig::default()
    });
    let large = || Loader::builder(f.dataset.clone()).batch_size(24).seed(5).windows(f.windows.clone()).num_workers(2);
    let from_videos = collect(large().build().unwrap(), 3);
    assert_eq!(from_videos.len(), 3);
    let is_frames = |key: &str| key.starts_with("observation.images") && !key.ends_with("_is_pad");
    let frames: usize = from_videos[0].0.iter().filter(|(key, _)| is_frames(key)).map(|(_, t)| t.values.len()).sum();
    assert!(frames >= loader::PAST_CACHES_MIN_BYTES, "a batch's frames take {frames} bytes, under the threshold");
    let from_cache = collect(large().frame_cache(&f.cache).build().unwrap(), 3);
    assert!(from_cache == from_videos, "large batches differ between the frame cache and the videos");
}

#[test]
fn yuv420_batches_are_the_same_from_the_videos_and_from_a_yuv420_frame_cache() {
    let f = fixture(small());
    let planes = f.cache.with_file_name("yuv420-frames");
    let format = datasets::frame_cache::CacheFormat::encoded(FrameEncoding::Yuv420);
    datasets::frame_cache::write_frame_cache(&f.dataset, &planes, &format, &|_| {}).unwrap();
    let yuv = || builder(&f).num_workers(2).frame_encoding(FrameEncoding::Yuv420);
    let n = builder(&f).build().unwrap().sampler().batches_per_epoch() + 1;
    let decoded = collect(yuv().build().unwrap(), n);
    let cached = collect(yuv().frame_cache(&planes).build().unwrap(), n);
    assert!(cached == decoded, "batches differ");
    let frames = &decoded[0].0["observation.images.side"];
    assert_eq!(frames.shape, vec![16, 2, 64 * 96 * 3 / 2], "a window of two frames' planes a sample");

    let err = yuv().frame_cache(&f.cache).build().err().unwrap().to_string();
    assert!(err.contains("holds rgb frames, not the yuv420 asked for"), "{err}");
    let err = builder(&f).frame_cache(&planes).build().err().unwrap().to_string();
    assert!(err.contains("holds yuv420 frames, not the rgb asked for"), "{err}");
}

#[test]
fn samples_are_what_datasets_sample_returns() {
    let f = fixture(small());
    let mut loader = builder(&f).num_workers(2).max_epochs(1).build().unwrap();
    check_against_dataset(&f, &mut loader, |batch| {
        let shape = batch.shape("observation.images.side").unwrap();
        assert_eq!(shape, vec![batch.len(), 2, 3, 64, 96]);
        assert_eq!(batch.pad("action").unwrap().len(), batch.len() * 16);
    });
}

#[test]
fn an_epoch_visits_every_anchor_once_and_shards_split_it() {
    let f = fixture(SynthConfig { episodes: 3, min_length: 20, max_length: 20, seed: 1, ..SynthConfig::default() });
    let anchors = builder(&f).build().unwrap().sampler().anchors().to_vec();
    assert_eq!(anchors.len(), 3 * 13);
    let mut seen: Vec<usize> = Vec::new();
    for rank in 0..3 {
        for batch in builder(&f).shard(rank, 3).max_epochs(1).num_workers(1).build().unwrap() {
            seen.extend(batch.unwrap().indices());
        }
    }
    seen.sort_unstable();
    assert_eq!(seen, anchors);
    let sizes: Vec<usize> = builder(&f).max_epochs(1).build().unwrap().map(|b| b.unwrap().len()).collect();
    assert_eq!(sizes, vec![16, 16, 7]);
    let sizes: Vec<usize> =
        builder(&f).drop_last(true).max_epochs(1).build().unwrap().map(|b| b.unwrap().len()).collect();
    assert_eq!(sizes, vec![16, 16]);
}

#[test]
fn resuming_from_a_batch_state_continues_exactly() {
    let f = fixture(small());
    let straight = collect(builder(&f).num_workers(2).build().unwrap(), 12);
    for cut in [1, 5, 9] {
        let state = straight[cut - 1].2;
        let resumed = collect(builder(&f).num_workers(2).resume(state).build().unwrap(), 12 - cut);
        assert!(resumed[..] == straight[cut..], "resuming after batch {cut} differs");
    }
}

/// Checks every batch of `loader` against `Dataset::get` (and with `also`), and returns the
/// indices it held.
fn check_against_dataset(f: &Fixture, loader: &mut Loader, mut also: impl FnMut(&loader::Batch)) -> Vec<usize> {
    let mut decoders = DecoderCache::default();
    let mut seen = Vec::new();
    for batch in loader.by_ref() {
        let batch = batch.unwrap();
        let samples: Vec<_> = batch
            .indices()
            .iter()
            .map(|&i| f.dataset.get(i, &f.windows, &mut decoders, FrameFormat::Uint8).unwrap())
            .collect();
        let expected = CollatedBatch::collate(&samples).unwrap();
        assert!(batch.to_tensors() == expected.tensors, "batch {} of epoch {}", batch.index_in_epoch(), batch.epoch());
        also(&batch);
        seen.extend(batch.indices());
    }
    seen
}

#[test]
fn the_blocks_order_gives_the_same_samples_decoding_each_frame_once() {
    // Six episodes of 20-30 frames, two cameras, two episodes per video file.
    let f = fixture(SynthConfig { episodes: 6, ..small() });
    let anchors = builder(&f).build().unwrap().sampler().anchors().to_vec();
    let frames = (f.dataset.len() * 2) as u64;
    for workers in [0, 2] {
        let mut blocks =
            builder(&f).ordering(SampleOrdering::blocks(2)).num_workers(workers).max_epochs(1).build().unwrap();
        let mut seen = check_against_dataset(&f, &mut blocks, |_| {});
        seen.sort_unstable();
        assert_eq!(seen, anchors, "every anchor once per epoch");
        let decoded = blocks.decode_counters();
        assert!(decoded.frames_converted <= frames, "{} frames converted of {frames}", decoded.frames_converted);
        let mut lerobot = builder(&f).num_workers(workers).max_epochs(1).build().unwrap();
        lerobot.by_ref().for_each(|b| drop(b.unwrap()));
        let lerobot = lerobot.decode_counters();
        assert!(
            decoded.frames_decoded * 3 < lerobot.frames_decoded * 2,
            "{workers} workers: blocks decoded {} frames, LeRobot's order {}",
            decoded.frames_decoded,
            lerobot.frames_decoded
        );
        assert!(blocks.frame_buffer_bytes() > 0);
    }
}

#[test]
fn the_blocks_order_resumes_exactly_and_reports_a_cut_video() {
    let f = fixture(small());
    let blocks = || builder(&f).ordering(SampleOrdering::blocks(2)).num_workers(2);
    let straight = collect(blocks().build().unwrap(), 10);
    for cut in [2, 7] {
        let resumed = collect(blocks().resume(straight[cut - 1].2).build().unwrap(), 10 - cut);
        assert!(resumed[..] == straight[cut..], "resuming after batch {cut} differs");
    }
    let video = break_last_video(&f);
    let error = blocks().build().unwrap().find_map(Result::err).expect("the cut video fails a batch");
    let text = format!("{error}: {}", std::error::Error::source(&error).map(ToString::to_string).unwrap_or_default());
    assert!(text.contains(&*video.to_string_lossy()), "{text}");
}

/// Cuts the video holding the last episodes so that decoding them fails.
fn break_last_video(f: &Fixture) -> std::path::PathBuf {
    let last = f.dataset.episodes().last().unwrap();
    let video = f.dataset.video_file(last, 0).unwrap();
    let bytes = std::fs::read(&video).unwrap();
    std::fs::write(&video, &bytes[..bytes.len() / 2]).unwrap();
    video
}

#[test]
fn a_worker_error_reaches_the_consumer_and_stops_the_pipeline() {
    for workers in [0, 1, 3] {
        let f = fixture(small());
        let video = break_last_video(&f);
        let started = Instant::now();
        let mut loader = builder(&f).num_workers(workers).prefetch(2).shuffle(false).build().unwrap();
        let mut good = 0;
        let error = loop {
            match loader.next().expect("the error is delivered before the end") {
                Ok(_) => good += 1,
                Err(e) => break e,
            }
        };
        let text =
            format!("{error}: {}", std::error::Error::source(&error).map(ToString::to_string).unwrap_or_default());
        assert!(text.contains(&*video.to_string_lossy()), "workers {workers}: {text}");
        assert!(text.contains("epoch 0"), "{text}");
        assert!(good > 0, "batches before the broken file arrive first");
        assert!(loader.next().is_none(), "the pipeline stops after an error");
        assert!(started.elapsed() < Duration::from_secs(60));
    }
}

#[test]
fn dropping_a_busy_loader_does_not_hang() {
    let f = fixture(small());
    let started = Instant::now();
    for workers in [1, 4] {
        let mut loader = builder(&f).num_workers(workers).prefetch(8).build().unwrap();
        let held: Vec<_> = loader.by_ref().take(3).collect();
        std::thread::sleep(Duration::from_millis(50)); // let the prefetch queue fill
        drop(loader);
        drop(held);
    }
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[test]
fn decoder_memory_stays_within_its_budget() {
    // v2.1: one file per episode, so many decoders would open without a bound.
    let f = fixture(SynthConfig {
        version: CodebaseVersion::V2_1,
        episodes: 12,
        min_length: 12,
        max_length: 14,
        seed: 2,
        ..SynthConfig::default()
    });
    let one = DecoderCacheConfig { max_decoders: 3, max_bytes: usize::MAX };
    let mut loader = builder(&f).num_workers(2).decoder_cache(one).build().unwrap();
    for _ in 0..10 {
        loader.next().unwrap().unwrap();
        assert!(loader.decoder_bytes() <= 2 * 3 * (96 * 96 * 3 / 2 * 11 + (1 << 20)));
    }
    assert!(loader.files_opened() > 6, "files were reopened under the bound: {}", loader.files_opened());
    let budget = DecoderCacheConfig { max_decoders: 100, max_bytes: 3 << 20 };
    let mut loader = builder(&f).num_workers(1).decoder_cache(budget).build().unwrap();
    for _ in 0..10 {
        loader.next().unwrap().unwrap();
        assert!(loader.decoder_bytes() <= 3 << 20, "{}", loader.decoder_bytes());
    }
}

fn rewrite_header_byte(path: &Path, offset: u64, value: u8) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.write_all_at(&[value], offset).unwrap();
}

#[test]
fn stale_foreign_or_old_frame_caches_are_refused() {
    let f = fixture(SynthConfig { episodes: 2, seed: 3, ..SynthConfig::default() });
    let other = fixture(SynthConfig { episodes: 2, seed: 4, ..SynthConfig::default() });
    let err = builder(&f).frame_cache(&other.cache).build().err().unwrap().to_string();
    assert!(err.contains("another dataset") && err.contains("observation.image.frames"), "{err}");

    let file = datasets::frame_cache::cache_file(&f.cache, "observation.image");
    rewrite_header_byte(&file, 8, 7); // format version 7
    let err = builder(&f).frame_cache(&f.cache).build().err().unwrap().to_string();
    assert!(err.contains("format version 7"), "{err}");
    rewrite_header_byte(&file, 8, datasets::frame_cache::FORMAT_VERSION as u8);
    builder(&f).frame_cache(&f.cache).build().unwrap();

    let len = std::fs::metadata(&file).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&file).unwrap().set_len(len - 100).unwrap();
    let err = builder(&f).frame_cache(&f.cache).build().err().unwrap().to_string();
    assert!(err.contains("truncated"), "{err}");
}

/// Copies what a download of `episodes` leaves: the metadata and the data and video files they
/// live in.
fn copy_episodes(dataset: &Dataset, to: &Path, episodes: &[usize]) {
    fn copy_dir(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let path = entry.unwrap().path();
            let target = to.join(path.file_name().unwrap());
            if path.is_dir() {
                copy_dir(&path, &target);
            } else {
                std::fs::copy(&path, &target).unwrap();
            }
        }
    }
    copy_dir(&dataset.root().join("meta"), &to.join("meta"));
    for &e in episodes {
        let episode = &dataset.episodes()[e];
        for file in std::iter::once(&episode.data_file).chain(episode.videos.iter().map(|v| &v.file)) {
            std::fs::create_dir_all(to.join(file).parent().unwrap()).unwrap();
            std::fs::copy(dataset.root().join(file), to.join(file)).unwrap();
        }
    }
}

#[test]
fn a_dataset_of_some_episodes_gives_the_whole_datasets_batches_of_them() {
    let f = fixture(small());
    let dir = tempfile::tempdir().unwrap();
    let partial = dir.path().join("ds");
    // Episode 4 has a file of its own; episode 1 shares one with episode 0, which is not read.
    copy_episodes(&f.dataset, &partial, &[1, 4]);
    let opened = Dataset::open_for(&partial, Default::default(), Some(&[1, 4])).unwrap();
    assert_eq!(opened.read_episodes(), Some(&[1, 4][..]));
    let opened = Arc::new(opened);
    let partial_builder =
        || Loader::builder(opened.clone()).batch_size(16).drop_frames(0, 7).seed(5).windows(f.windows.clone());
    let whole = collect(builder(&f).episodes(vec![1, 4]).num_workers(2).build().unwrap(), 5);
    let some = collect(partial_builder().num_workers(2).build().unwrap(), 5);
    assert_eq!(some.len(), 5);
    assert!(some == whole, "the batches of episodes 1 and 4 differ from the whole dataset's");

    let refused = |b: LoaderBuilder| b.build().err().expect("refused").to_string();
    assert!(refused(partial_builder().episodes(vec![0, 1])).contains("episode 0 was not read"));
    assert!(refused(partial_builder().frame_cache(&f.cache)).contains("opened with episodes [1, 4] only"));
}
