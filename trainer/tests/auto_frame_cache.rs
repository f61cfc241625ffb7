//! `--frame-cache auto`, the trainer's default: the first run decodes the dataset's frames into a
//! cache of its own and reads them there, the next run reuses it, a budget too small for the
//! frames leaves the cache off, a cache that cannot be written is reported and gone without, and
//! every way trains on the same frames (the same losses). A policy that resizes its images gets
//! its frames cached already resized when they do not fit at their own size.

use std::path::{Path, PathBuf};

use datasets::synth::{CameraStorage, SynthConfig, write_dataset};

mod common;

/// Trains 3 steps of a tiny policy on `root` with automatic caches under `caches`, plus `flags`;
/// returns what it printed and its losses.
fn train(root: &Path, caches: &Path, output: &Path, flags: &[&str]) -> (String, Vec<String>) {
    let run = common::trainer_command()
        .env("LEROBOT_RS_FRAME_CACHE", caches)
        .arg("--dataset.root")
        .arg(root)
        .arg("--output_dir")
        .arg(output)
        .args(["--policy.down_dims", "16,32,64", "--policy.crop_shape", "32x32", "--batch_size", "4"])
        .args(["--steps", "3", "--log_freq", "1", "--save_freq", "0", "--num_workers", "2", "--seed", "3"])
        .args(flags)
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&run.stdout).into_owned();
    assert!(run.status.success(), "trainer failed: {printed}{}", String::from_utf8_lossy(&run.stderr));
    let metrics = std::fs::read_to_string(output.join("metrics.csv")).unwrap();
    let losses = metrics.lines().skip(1).map(|row| row.split(',').nth(4).unwrap().to_string()).collect();
    (printed, losses)
}

fn cache_files(caches: &Path) -> Vec<PathBuf> {
    let Ok(dirs) = std::fs::read_dir(caches) else { return Vec::new() };
    dirs.flat_map(|dir| std::fs::read_dir(dir.unwrap().path()).unwrap())
        .map(|file| file.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "frames"))
        .collect()
}

/// 3 episodes of 20 frames of one 96x96 camera in `scratch/dataset`: images in parquet, so that
/// the builds with and without FFmpeg run these tests alike.
fn images_dataset(scratch: &Path) -> PathBuf {
    let root = scratch.join("dataset");
    let synth = SynthConfig {
        episodes: 3,
        min_length: 20,
        max_length: 20,
        storage: CameraStorage::Images,
        ..Default::default()
    };
    write_dataset(&root, &synth).unwrap();
    root
}

#[test]
fn a_run_makes_its_frame_cache_the_next_reuses_it_and_a_small_budget_goes_without() {
    let scratch = common::scratch("trainer-auto-frame-cache");
    let root = images_dataset(&scratch);
    let caches = scratch.join("caches");

    let (first, built) = train(&root, &caches, &scratch.join("first"), &[]);
    assert!(first.contains("frame cache: decoding every frame once into"), "{first}");
    assert!(first.contains("frame cache: 60 frames decoded"), "{first}");
    let files = cache_files(&caches);
    assert_eq!(files.len(), 1, "one camera, one cache file: {files:?}");
    let written = std::fs::metadata(&files[0]).unwrap().modified().unwrap();

    let (second, reused) = train(&root, &caches, &scratch.join("second"), &[]);
    assert!(second.contains("frame cache: reading the decoded frames in"), "{second}");
    assert_eq!(std::fs::metadata(&files[0]).unwrap().modified().unwrap(), written, "the cache was not rewritten");

    let elsewhere = scratch.join("other-caches");
    let (small, without) = train(&root, &elsewhere, &scratch.join("small"), &["--frame-cache-budget", "0.0001"]);
    assert!(small.contains("frame cache: off, the decoded frames"), "{small}");
    assert!(cache_files(&elsewhere).is_empty(), "nothing was written over the budget");

    // A cache that cannot be written (here, under a file; in life, a full /dev/shm): the run
    // says so and goes on without it.
    let file = scratch.join("a-file");
    std::fs::write(&file, b"not a folder").unwrap();
    let (failed, unwritable) = train(&root, &file.join("caches"), &scratch.join("failed"), &[]);
    assert!(failed.contains("frame cache: off, building it failed"), "{failed}");

    let (off, plain) = train(&root, &elsewhere, &scratch.join("off"), &["--frame-cache", "off"]);
    assert!(!off.contains("frame cache"), "{off}");

    assert_eq!(built.len(), 3);
    assert_eq!(built, reused, "the reused cache gives the same frames");
    assert_eq!(built, without, "the cache gives the dataset's own frames");
    assert_eq!(built, unwritable);
    assert_eq!(built, plain);
}

#[test]
fn frames_too_large_to_cache_are_cached_resized_for_a_policy_that_resizes() {
    let scratch = common::scratch("trainer-auto-frame-cache-resized");
    let root = images_dataset(&scratch);
    let caches = scratch.join("caches");
    // 60 frames of 96x96: 1.66 MB as read, 0.42 MB at 48x48; the budget fits only the latter.
    let resized = ["--policy.resize_shape", "48x48", "--frame-cache-budget", "0.001"];
    let (first, cached) = train(&root, &caches, &scratch.join("first"), &resized);
    assert!(first.contains("the frames as read (0.00 GB) are over the budget"), "{first}");
    assert!(first.contains("resized to the policy's resize_shape 48x48"), "{first}");
    let files = cache_files(&caches);
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(std::fs::metadata(&files[0]).unwrap().len(), 4096 + 60 * 3 * 48 * 48);
    let (second, _) = train(&root, &caches, &scratch.join("second"), &resized);
    assert!(second.contains("frame cache: reading the decoded frames in") && second.contains("-48x48"), "{second}");

    let (_, decoded) =
        train(&root, &caches, &scratch.join("off"), &[&resized[..2], &["--frame-cache", "off"]].concat());
    assert_eq!(cached.len(), 3);
    for (step, (a, b)) in cached.iter().zip(&decoded).enumerate() {
        let (a, b): (f64, f64) = (a.parse().unwrap(), b.parse().unwrap());
        println!("step {step}: loss {a} from the resized cache, {b} resized on the device");
        // Frames within one level of the resize on the device: the same run, nearly.
        assert!((a - b).abs() <= 1e-3 * b.abs(), "step {step}: {a} from the resized cache, {b} resized on the device");
    }
}
