//! Runs that share a process train as each trains alone: a Python user's several loaders and
//! trainers, or a test binary's runs on its threads, share burn's generator, rayon's pool, the
//! allocator and FFmpeg, and none of these may change a run's numbers. Beside the runs, a policy
//! is loaded from a checkpoint and sampled again and again, as an evaluation beside training
//! would: loading once drew from burn's generator and moved the weights a run started from.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use burn::backend::{Autodiff, Flex};
use serde_json::json;
use trainer::{PolicyRunner, TrainConfig, train};

use crate::common::{one_sample, scratch, scratch_path, tiny_config, write_synth};

type Backend = Autodiff<Flex>;

/// Different runs on one dataset: RGB and YUV frames, two seeds, LeRobot's order and the blocks
/// order, two model sizes, and a run resumed from a checkpoint.
fn runs() -> Vec<(&'static str, serde_json::Value)> {
    vec![
        ("rgb", json!({})),
        ("yuv", json!({"dataset": {"frame_encoding": "yuv420"}})),
        ("blocks", json!({"seed": 11, "sampler": {"order": "blocks", "block_episodes": 2}})),
        ("wider", json!({"seed": 3, "batch_size": 6, "policy": {"down_dims": [32, 64, 128]}})),
        ("resumed", json!({})),
    ]
}

/// The configuration of the run `extra` describes: 4 steps, every step's loss logged.
fn config(dataset: &Path, output: &Path, extra: &serde_json::Value) -> TrainConfig {
    let mut extra = extra.clone();
    trainer::merge(&mut extra, json!({"save_checkpoint": false, "log_freq": 1}));
    tiny_config(dataset, output, 4, extra)
}

/// Every step's loss of the run named `name`, trained in a scratch folder named `folder`; the
/// resumed run continues `checkpoint` (its first 2 steps).
fn losses(
    dataset: &Path,
    checkpoint: &Path,
    folder: &str,
    (name, extra): &(&str, serde_json::Value),
) -> Vec<(usize, f64)> {
    let out = scratch(folder);
    let resume = (*name == "resumed").then_some(checkpoint);
    train::<Backend>(&config(dataset, &out, extra), resume, Default::default(), |_| {}).unwrap().losses
}

/// The first action chunk the policy of `checkpoint` predicts from a grey frame.
fn sampled_chunk(checkpoint: &Path) -> Vec<f32> {
    let mut runner = PolicyRunner::<Flex>::load(checkpoint, 5, false, Default::default()).unwrap();
    let shape = runner.features().cameras[0].1;
    let (frames, state) = (vec![128u8; 2 * shape.len()], vec![0.5f32; 2 * runner.features().state_dim]);
    runner.predict_chunk(&one_sample(&state, &frames, shape)).unwrap().into_data().to_vec().unwrap()
}

#[test]
fn runs_training_at_once_in_one_process_give_the_numbers_each_gives_alone() {
    let dataset = write_synth(&scratch_path("trainer-concurrent-synth"));
    // The RGB run, with a checkpoint half-way for the resumed run to continue.
    let saved = scratch("concurrent-saved");
    let mut with_checkpoints = config(&dataset, &saved, &json!({"save_freq": 2}));
    with_checkpoints.save_checkpoint = true;
    train::<Backend>(&with_checkpoints, None, Default::default(), |_| {}).unwrap();
    let checkpoint = saved.join("checkpoints/000002");

    let alone: Vec<_> =
        runs().iter().map(|run| losses(&dataset, &checkpoint, &format!("alone-{}", run.0), run)).collect();
    for (run, (name, _)) in alone.iter().zip(runs()) {
        let first = if name == "resumed" { 3 } else { 1 };
        assert_eq!(run.iter().map(|l| l.0).collect::<Vec<_>>(), (first..=4).collect::<Vec<_>>(), "{name}");
    }
    assert_eq!(alone[0][2..], alone[4][..], "the resumed run continues the RGB run");
    let chunk = sampled_chunk(&checkpoint);

    // Two rounds, every run twice in each: started together, they draw their initial weights,
    // load, allocate, decode and reduce at the same moments.
    for round in 0..2 {
        let done = AtomicBool::new(false);
        let together: Vec<Vec<_>> = std::thread::scope(|s| {
            let sampler = s.spawn(|| {
                let mut samples = 0;
                while !done.load(Ordering::Relaxed) || samples == 0 {
                    assert_eq!(sampled_chunk(&checkpoint), chunk, "round {round}: sampled beside training runs");
                    samples += 1;
                }
            });
            let handles: Vec<_> = (0..2)
                .flat_map(|copy| runs().into_iter().map(move |run| (copy, run)))
                .map(|(copy, run)| {
                    let (dataset, checkpoint) = (&dataset, &checkpoint);
                    s.spawn(move || losses(dataset, checkpoint, &format!("together-{round}-{copy}-{}", run.0), &run))
                })
                .collect();
            let together = handles.into_iter().map(|h| h.join().unwrap()).collect();
            done.store(true, Ordering::Relaxed);
            sampler.join().unwrap();
            together
        });
        for (i, run) in together.iter().enumerate() {
            let (name, _) = &runs()[i % alone.len()];
            assert_eq!(run, &alone[i % alone.len()], "round {round}: the {name} run trained beside others");
        }
    }
}
