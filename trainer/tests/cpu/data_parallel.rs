//! Data-parallel training on the CPU: two replicas of batch B train as one of batch 2B, stay
//! identical (the run checks them at every checkpoint), resume exactly, and a replica's failure
//! ends the run with its error instead of leaving the other waiting.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use burn::backend::{Autodiff, Flex};
use serde_json::json;
use trainer::checkpoint::{self, TrainingState};
use trainer::{TrainConfig, train, train_on};

type Backend = Autodiff<Flex>;

use crate::common;

use crate::common::{
    checkpoint_weights as weights, compare, cut_second_episode_video, data_parallel_config, scratch, scratch_path,
    tiny_config, write_forty_frames,
};

/// The 40-frame dataset, written once for this module.
fn dataset() -> &'static Path {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| write_forty_frames(&scratch_path("data-parallel-synth")))
}

/// The tiny policy at `batch` per replica on [`dataset`].
fn tiny(output: &Path, steps: usize, batch: usize, extra: serde_json::Value) -> TrainConfig {
    data_parallel_config(dataset(), output, steps, batch, extra)
}

fn two_cpus() -> Vec<burn::backend::flex::FlexDevice> {
    trainer::parallel::devices_from(&Default::default(), 2)
}

/// A run's logged losses and last weights.
type Run = (Vec<(usize, f64)>, Vec<f32>);

/// One replica at batch 4 and two at batch 2, `steps` steps each: their losses and last weights,
/// and the single replica's weights at step 5 when it got there.
fn one_and_two(name: &str, steps: usize, extra: serde_json::Value) -> ([Run; 2], Option<Vec<f32>>) {
    let (one, two) = (scratch(&format!("{name}-one")), scratch(&format!("{name}-two")));
    let single = tiny(&one, steps, 4, extra.clone());
    let losses_one = train::<Backend>(&single, None, Default::default(), |_| {}).unwrap().losses;
    let mut lines = Vec::new();
    let pair = tiny(&two, steps, 2, extra);
    let losses_two = train_on::<Backend>(&pair, None, two_cpus(), |p| {
        if let trainer::Progress::Line(l) = p {
            lines.push(l.to_string());
        }
    })
    .unwrap()
    .losses;
    assert!(lines.iter().any(|l| l.contains("effective batch size 4 = 2 per device x 2 devices x 1")), "{lines:?}");
    let last = format!("checkpoints/{steps:06}");
    let step_5 = (steps >= 5).then(|| weights(&one.join("checkpoints/000005")));
    ([(losses_one, weights(&one.join(&last))), (losses_two, weights(&two.join(&last)))], step_5)
}

#[test]
fn two_replicas_of_batch_b_train_like_one_of_batch_2b() {
    // The same samples, noise and initial weights: only the order of the sums differs. After
    // one step the loss is the same, and so is every weight but those whose gradient is so small
    // that Adam's first update (±lr·g/(|g| + ε)) turns a rounding difference into up to 2·lr.
    let ([(l1, w1), (l2, w2)], _) = one_and_two("dp-one-step", 1, json!({}));
    assert!((l1[0].1 - l2[0].1).abs() <= 1e-6 * l1[0].1, "loss {l1:?} vs {l2:?}");
    let (close, max, _) = compare(&w1, &w2);
    assert!(close >= 0.999 && max <= 2e-3 + 1e-6, "{close} of the weights agree, the largest difference {max}");

    // Over 10 steps Adam amplifies those differences (in these runs, to ~1e-3 of the weights'
    // norm; 4e-5 with ε = 1e-2). With ε = lr = 1 Adam's update is about the gradient itself
    // (SGD's): after one step the runs agree to 3e-8 of the weights' norm, the reduction's
    // rounding. Later steps can move further apart by jumps: a rounding difference that swaps
    // which of two nearly equal values a max-pooling window takes moves that window's gradient
    // to another pixel (in these runs, 2.5e-6 at step 2 and 1.2e-5 at step 10; 3e-7 at step 10
    // with the U-Net's convolutions composed of burn's operations, which round differently). A
    // fault of the data-parallel mechanics (a sample counted twice or left out, a wrong mean)
    // moves the weights by 1e-2 of their norm or more.
    let ([(l1, w1), (l2, w2)], step_5) =
        one_and_two("dp-ten-steps", 10, json!({"policy": {"optimizer_eps": 1.0, "optimizer_lr": 1.0}}));
    let (_, _, relative) = compare(&w1, &w2);
    assert!(relative < 1e-4, "weights differ by {relative:e} of their norm");
    // ... and not because nothing moved: steps 5 to 10 moved the weights far more than that.
    let (_, _, moved) = compare(&w1, &step_5.expect("a checkpoint at step 5"));
    assert!(moved > 100.0 * relative, "the weights moved by {moved:e} of their norm");
    for ((s1, a), (s2, b)) in l1.iter().zip(&l2) {
        assert!(s1 == s2 && (a - b).abs() < 1e-5 * a, "loss at step {s1}: {a} vs {b}");
    }
}

#[test]
fn a_two_replica_run_resumes_exactly_on_two_replicas_only() {
    let whole = scratch("dp-whole");
    let pair = tiny(&whole, 10, 2, json!({}));
    train_on::<Backend>(&pair, None, two_cpus(), |_| {}).unwrap();
    let state: TrainingState = checkpoint::read_json(&whole.join("checkpoints/000010"), "training_state.json").unwrap();
    assert_eq!((state.world_size, state.samples), (2, 40));

    // Resumed from step 5 on two replicas: the same bits as the uninterrupted run (which also
    // checked, at each checkpoint, that its replicas held the same bits).
    let resumed = scratch("dp-resumed");
    let again = TrainConfig { output_dir: resumed.to_path_buf(), ..pair.clone() };
    train_on::<Backend>(&again, Some(&whole.join("checkpoints/000005")), two_cpus(), |_| {}).unwrap();
    let model = |dir: &Path| std::fs::read(dir.join("checkpoints/000010/model.mpk")).unwrap();
    assert!(model(&whole) == model(&resumed), "the resumed two-replica run ends with other weights");
    // On one device, the shards' positions would mean other samples: refused.
    let elsewhere = scratch("dp-resumed-on-one");
    let on_one = TrainConfig { output_dir: elsewhere.to_path_buf(), ..pair };
    let error = train::<Backend>(&on_one, Some(&whole.join("checkpoints/000005")), Default::default(), |_| {})
        .expect_err("refused")
        .to_string();
    assert!(error.contains("trained on 2 device(s), this run has 1"), "{error}");
}

#[test]
fn a_replica_that_fails_ends_the_run_with_its_error() {
    let dir = scratch("dp-failure");
    let root = write_forty_frames(&dir.join("dataset"));
    // Cut the second episode's frames off the shared video file: both shards meet it soon.
    let video = cut_second_episode_video(&root);
    let config = tiny_config(&root, &dir.join("run"), 20, json!({"batch_size": 2, "num_workers": 1}));

    // On a thread of its own, so that a deadlock fails the test instead of hanging it.
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(train_on::<Backend>(&config, None, two_cpus(), |_| {}).map(|o| o.steps));
    });
    let result = receiver.recv_timeout(Duration::from_secs(300)).expect("the replicas did not stop");
    let error = datasets::error_message(&result.expect_err("the broken video stops the run"));
    assert!(error.contains(&*video.file_name().unwrap().to_string_lossy()), "{error}");
    assert!(!error.contains("another rank failed"), "the cause is reported, not its echo: {error}");
}

#[test]
fn the_tool_takes_a_device_list_and_refuses_other_launches() {
    let out = scratch("dp-cli");
    let trainer = || {
        let mut command = common::trainer_command();
        command.arg("--dataset.root").arg(dataset()).arg("--output_dir").arg(&*out);
        command
    };
    let output = trainer().args(["--devices", "cpu:0,cpu:1", "--dry-run"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let resolved: serde_json::Value = serde_json::from_str(stdout.split_once('\n').unwrap().1).unwrap();
    assert_eq!((resolved["device"].as_str(), resolved["num_devices"].as_u64()), (Some("cpu"), Some(2)));

    let output = trainer().args(["--devices", "cuda:1", "--dry-run"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && stderr.contains("CUDA_VISIBLE_DEVICES"), "{stderr}");

    // torchrun's WORLD_SIZE without the variables torchrun sets beside it: refused, naming one.
    let output = trainer().args(["--steps", "1"]).env("WORLD_SIZE", "2").env_remove("RANK").output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && stderr.contains("WORLD_SIZE=2 but RANK is not set"), "{stderr}");
}

#[test]
fn replicas_that_diverge_stop_together_naming_the_last_checkpoint() {
    let dir = scratch("dp-diverged");
    let output = dir.join("run");
    let config = tiny(&output, 8, 2, json!({"save_freq": 1, "policy": {"optimizer_lr": 1e30}}));
    // On a thread of its own, so that replicas disagreeing about when to stop fail the test
    // instead of hanging it.
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(train_on::<Backend>(&config, None, two_cpus(), |_| {}).map(|o| o.steps));
    });
    let result = receiver.recv_timeout(Duration::from_secs(300)).expect("the replicas did not stop");
    let err = result.expect_err("the run diverges");
    // Whichever replica's error is reported names the checkpoint rank 0 wrote.
    let trainer::Error::Diverged { last, last_checkpoint, .. } = &err else { panic!("another error: {err}") };
    assert_eq!(*last, 2, "{err}");
    assert_eq!(last_checkpoint.as_deref(), Some(output.join("checkpoints/000001").as_path()), "{err}");
    assert_eq!(checkpoint::resolve(&output).unwrap(), output.join("checkpoints/000001"));
}
