//! Faults during training, with the real binary and the real file system: `kill -9` while a
//! checkpoint is being written, a disk that fills up, a corrupt video met mid-run, and a run
//! whose gradients stop being finite.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use burn::backend::{Autodiff, Flex};
use serde_json::json;
use trainer::checkpoint::{self, TrainingState};
use trainer::{PolicyRunner, TrainConfig, train};

type Backend = Autodiff<Flex>;

use crate::common;

use crate::common::{checkpoint_weights as weights, tiny_config, write_synth};

/// An empty scratch folder `name`, removed when the test passes.
fn scratch(name: &str) -> common::Scratch {
    let dir = common::scratch(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A fresh 3-episode dataset under `dir`.
fn dataset(dir: &Path) -> PathBuf {
    write_synth(&dir.join("dataset"))
}

/// The tiny policy of the other training tests, as the binary runs it.
fn tiny(root: &Path, output: &Path, steps: usize, save_freq: usize) -> TrainConfig {
    tiny_config(root, output, steps, json!({"log_freq": 100, "save_freq": save_freq, "num_workers": 1}))
}

fn config_file(config: &TrainConfig, dir: &Path) -> PathBuf {
    let path = dir.join("run.json");
    std::fs::write(&path, serde_json::to_string_pretty(config).unwrap()).unwrap();
    path
}

fn checkpoint_entries(output: &Path) -> Vec<String> {
    std::fs::read_dir(checkpoint::checkpoints_dir(output))
        .map(|d| d.filter_map(Result::ok).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default()
}

#[test]
fn a_run_killed_while_writing_a_checkpoint_resumes_from_the_previous_one_exactly() {
    let dir = scratch("fault-kill");
    let root = dataset(&dir);
    let output = dir.join("run");
    let config = tiny(&root, &output, 12, 1);
    let file = config_file(&config, &dir);
    let mut child = common::trainer_command()
        .arg("--config_path")
        .arg(&file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait for a checkpoint being written while an earlier one is complete, and kill -9.
    let started = Instant::now();
    loop {
        assert!(child.try_wait().unwrap().is_none(), "the run ended before it could be killed");
        assert!(started.elapsed() < Duration::from_secs(300), "no checkpoint write seen");
        let entries = checkpoint_entries(&output);
        if entries.iter().any(|e| e == "last") && entries.iter().any(|e| e.starts_with(".tmp-")) {
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    // `last` names a complete checkpoint, which loads.
    let dir_before = checkpoint::resolve(&output).unwrap();
    let state: TrainingState = checkpoint::read_json(&dir_before, "training_state.json").unwrap();
    assert!(state.step >= 1 && state.step < 12, "killed at step {}", state.step);
    PolicyRunner::<Flex>::load(&output, 0, true, Default::default()).expect("the previous checkpoint loads");

    // Resuming cleans the half-written folder up and ends where an uninterrupted run ends.
    train::<Backend>(&config, Some(&output), Default::default(), |_| {}).unwrap();
    assert!(!checkpoint_entries(&output).iter().any(|e| e.starts_with('.')), "{:?}", checkpoint_entries(&output));
    let reference = dir.join("reference");
    train::<Backend>(&tiny(&root, &reference, 12, 0), None, Default::default(), |_| {}).unwrap();
    // Compare values: the record's bytes also hold parameter ids, which differ per process.
    assert!(weights(&output) == weights(&reference), "the resumed run ends with other weights");
}

#[test]
fn a_full_disk_while_checkpointing_is_an_error_and_leaves_no_partial_checkpoint() {
    let dir = scratch("fault-full-disk");
    let root = dataset(&dir);
    let output = dir.join("run");
    let file = config_file(&tiny(&root, &output, 2, 1), &dir);
    // A 16 MiB file-size limit: the model record (tens of MB) hits it as a full disk would
    // (the write fails with EFBIG instead of ENOSPC; SIGXFSZ is ignored so that it returns).
    let script = format!(
        "trap '' XFSZ; ulimit -f 16384; exec '{}' --config_path '{}'",
        env!("CARGO_BIN_EXE_trainer"),
        file.display()
    );
    let out = Command::new("bash").arg("-c").arg(script).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the run should fail: {stderr}");
    // The message names the file being written and the OS's reason.
    assert!(stderr.contains("model.mpk") && stderr.contains("File too large"), "{stderr}");
    let entries = checkpoint_entries(&output);
    assert!(entries.is_empty(), "no checkpoint, partial or named, is left: {entries:?}");
}

#[test]
fn a_corrupt_video_met_mid_run_ends_it_with_an_error_and_keeps_the_checkpoints_before() {
    let dir = scratch("fault-corrupt-video");
    let root = dataset(&dir);
    let output = dir.join("run");
    // Three steps on the intact dataset, a checkpoint after each.
    train::<Backend>(&tiny(&root, &output, 3, 1), None, Default::default(), |_| {}).unwrap();

    // Cut the last episode's frames off the (shared) video file, then go on to step 40: every
    // epoch samples that episode, so the run meets the cut within its first few batches.
    let ds = datasets::Dataset::open(&root).unwrap();
    let video = root.join(&ds.episodes()[2].videos[0].file);
    drop(ds);
    let bytes = std::fs::read(&video).unwrap();
    std::fs::write(&video, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let config = tiny(&root, &output, 40, 1);
    let err = train::<Backend>(&config, Some(&output), Default::default(), |_| {})
        .expect_err("the broken video stops the run");
    let text = datasets::error_message(&err);
    assert!(text.contains(&*video.file_name().unwrap().to_string_lossy()), "{text}");

    // The checkpoints written before the error are intact: `last` loads, at a step before 40.
    let last = checkpoint::resolve(&output).expect("a last checkpoint");
    let state: TrainingState = checkpoint::read_json(&last, "training_state.json").unwrap();
    assert!((3..40).contains(&state.step), "last checkpoint at step {}", state.step);
    PolicyRunner::<Flex>::load(&output, 0, true, Default::default()).expect("checkpoints before the error load");
}

#[test]
fn a_run_that_diverges_stops_with_an_error_and_saves_nothing_after() {
    let dir = scratch("fault-diverged");
    let root = dataset(&dir);
    let output = dir.join("run");
    // A learning rate no model survives: Adam's first step moves every weight by about 1e30,
    // and the next forward overflows f32, so its gradients are NaN.
    let diverging = |log_freq: usize, save_freq: usize| {
        tiny_config(
            &root,
            &output,
            8,
            json!({"log_freq": log_freq, "save_freq": save_freq, "num_workers": 1,
                   "policy": {"optimizer_lr": 1e30, "scheduler_warmup_steps": 0}}),
        )
    };
    let err = train::<Backend>(&diverging(100, 1), None, Default::default(), |_| {}).expect_err("the run diverges");
    let trainer::Error::Diverged { first, last, last_checkpoint } = &err else { panic!("another error: {err}") };
    assert_eq!(first, last, "checked before each checkpoint, so at the step itself");
    assert_eq!(*last, 2, "step 1 moves every weight by about 1e30, step 2 overflows");
    let text = err.to_string();
    assert!(text.contains(&format!("step {last}")) && text.contains("optimizer_lr"), "{text}");

    // Every checkpoint written is from before the step, `last` the one just before it, and its
    // weights are finite.
    let newest = checkpoint::resolve(&output).expect("checkpoints before the step");
    assert_eq!(last_checkpoint.as_deref(), Some(newest.as_path()), "{text}");
    assert!(text.contains(&newest.display().to_string()), "{text}");
    let state: TrainingState = checkpoint::read_json(&newest, "training_state.json").unwrap();
    assert_eq!(state.step, last - 1);
    assert!(weights(&output).iter().all(|w| w.is_finite()), "the last checkpoint's weights are finite");
    let written = checkpoint_entries(&output).into_iter().filter(|e| e != "last").count();
    assert_eq!(written, last - 1, "{:?}", checkpoint_entries(&output));

    // Resumed, the same run names the checkpoint it resumed from; between checkpoints the check
    // runs where the loss is logged, over the steps since (their metrics logged first).
    let err =
        train::<Backend>(&diverging(4, 0), Some(&output), Default::default(), |_| {}).expect_err("it diverges again");
    let trainer::Error::Diverged { first, last: at, last_checkpoint } = &err else { panic!("another error: {err}") };
    assert_eq!((*first, *at), (*last, 4), "{err}");
    assert_eq!(last_checkpoint.as_deref(), Some(newest.as_path()), "{err}");
    assert!(err.to_string().contains(&format!("a step from {last} to 4")), "{err}");
    let metrics = std::fs::read_to_string(output.join("metrics.csv")).unwrap();
    assert!(metrics.lines().any(|line| line.starts_with("4,")), "step 4's metrics are logged first: {metrics}");
}

#[test]
fn f16_steps_skipped_for_overflowing_gradients_do_not_stop_the_run() {
    let dir = scratch("fault-f16-skips");
    let root = dataset(&dir);
    let output = dir.join("run");
    let config = |steps| {
        tiny_config(
            &root,
            &output,
            steps,
            json!({"log_freq": 100, "save_freq": 1, "num_workers": 1, "precision": "f16"}),
        )
    };
    train::<Backend>(&config(1), None, Default::default(), |_| {}).unwrap();
    // A loss scale of 2^24 overflows f16's gradients (their norm is infinite): the steps after
    // are skipped, each halving it, until the scaled gradients fit (at 2^16 here).
    let newest = checkpoint::resolve(&output).unwrap();
    let mut state: serde_json::Value = checkpoint::read_json(&newest, "training_state.json").unwrap();
    state["loss_scale"]["scale"] = json!(2f32.powi(24));
    std::fs::write(newest.join("training_state.json"), state.to_string()).unwrap();

    let steps = 12;
    train::<Backend>(&config(steps), Some(&output), Default::default(), |_| {})
        .expect("skipped steps' infinite norms are not a divergence");
    let state: TrainingState =
        checkpoint::read_json(&checkpoint::resolve(&output).unwrap(), "training_state.json").unwrap();
    let scale = state.loss_scale.expect("f16 keeps its loss scale").scale;
    assert_eq!(state.step, steps);
    assert!(scale <= 2f32.powi(20), "four steps or more were skipped: the scale is {scale}");
    assert!(weights(&output).iter().all(|w| w.is_finite()));
}
