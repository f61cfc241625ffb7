//! The held-out loss, as LeRobot 0.6.1's `--dataset.eval_split` and `--eval_steps` compute it, on
//! a dataset LeRobot wrote (PushT's images, 10 episodes of one task): the last episodes held out
//! of training, their loss logged every `eval_steps` steps beside the training loss.

use std::path::Path;

use burn::backend::{Autodiff, Flex};
use loader::SamplerState;
use serde_json::json;
use trainer::{Progress, TrainConfig, TrainData};

use crate::common::{scratch, tiny_config};

const DATASET: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/lerobot-0.6.1/pusht_images");

fn config(output: &Path, steps: usize, extra: serde_json::Value) -> TrainConfig {
    let mut overrides = json!({"num_workers": 1, "batch_size": 8});
    trainer::merge(&mut overrides, extra);
    tiny_config(Path::new(DATASET), output, steps, overrides)
}

#[test]
fn the_last_episodes_are_held_out_and_never_trained_on() {
    let out = scratch("held-out-episodes");
    // 10 episodes of one task at 0.2: ceil(2.0) = 2 held out, the last two; at 0.25, ceil(2.5) = 3.
    let data = TrainData::open(&config(&out, 1, json!({"dataset": {"eval_split": 0.2}}))).unwrap();
    assert_eq!((data.train_episodes.clone(), data.eval_episodes.clone()), (Some((0..8).collect()), vec![8, 9]));
    let quarter = TrainData::open(&config(&out, 1, json!({"dataset": {"eval_split": 0.25}}))).unwrap();
    assert_eq!(quarter.eval_episodes, vec![7, 8, 9]);
    // With --dataset.episodes, the split is of those.
    let chosen = config(&out, 1, json!({"dataset": {"eval_split": 0.2, "episodes": [1, 2, 5, 6, 9]}}));
    let chosen = TrainData::open(&chosen).unwrap();
    assert_eq!((chosen.train_episodes, chosen.eval_episodes), (Some(vec![1, 2, 5, 6]), vec![9]));

    // A whole epoch of the training loader reads no held-out frame; the evaluation reads every
    // held-out frame once, in order.
    let dataset = datasets::Dataset::open(DATASET).unwrap();
    let held_out: Vec<usize> = [8, 9].iter().flat_map(|&e| dataset.episodes()[e].frames.clone()).collect();
    let config = config(&out, 1, json!({"dataset": {"eval_split": 0.2}}));
    let mut loader = data.loader(&config, SamplerState::default()).unwrap();
    let per_epoch = loader.sampler().batches_per_epoch();
    for _ in 0..per_epoch {
        let batch = loader.next().unwrap().unwrap();
        assert!(
            batch.indices().iter().all(|i| !held_out.contains(i)),
            "a held-out frame trained: {:?}",
            batch.indices()
        );
    }
    let read: Vec<usize> =
        data.eval_loader(&config).unwrap().flat_map(|batch| batch.unwrap().indices().to_vec()).collect();
    assert_eq!(read, held_out);

    // LeRobot's --max_eval_samples: the first frames of each task (here one) of the held-out ones.
    let capped = self::config(&out, 1, json!({"dataset": {"eval_split": 0.2}, "max_eval_samples": 5}));
    let capped_data = TrainData::open(&capped).unwrap();
    let read: Vec<usize> =
        capped_data.eval_loader(&capped).unwrap().flat_map(|batch| batch.unwrap().indices().to_vec()).collect();
    assert_eq!(read, held_out[..5]);
}

#[test]
fn the_held_out_loss_is_logged_every_eval_steps() {
    let out = scratch("held-out-loss");
    let config = config(&out, 4, json!({"dataset": {"eval_split": 0.2}, "eval_steps": 2, "log_freq": 2}));
    let mut lines = Vec::new();
    trainer::train::<Autodiff<Flex>>(&config, None, Default::default(), |p| {
        if let Progress::Line(l) = p {
            lines.push(l.to_string());
        }
    })
    .unwrap();
    assert!(
        lines.iter().any(|l| l == "held out for the eval loss: 2 episodes (eval_split 0.2), training on 8"),
        "{lines:#?}"
    );
    let logged: Vec<(usize, f64)> = lines
        .iter()
        .filter_map(|l| {
            let (step, loss) = l.strip_prefix("step ")?.split_once(": eval_loss=")?;
            Some((step.parse().unwrap(), loss.parse().unwrap()))
        })
        .collect();
    assert_eq!(logged.iter().map(|&(step, _)| step).collect::<Vec<_>>(), [2, 4], "{lines:#?}");
    assert!(logged.iter().all(|&(_, loss)| loss.is_finite() && loss > 0.0), "{logged:?}");
    // The same figures in eval_metrics.csv (and TensorBoard's eval/eval_loss).
    let csv = std::fs::read_to_string(out.join("eval_metrics.csv")).unwrap();
    let rows: Vec<(usize, f64)> = csv
        .lines()
        .skip(1)
        .map(|row| {
            let (step, loss) = row.split_once(',').unwrap();
            (step.parse().unwrap(), loss.parse().unwrap())
        })
        .collect();
    assert_eq!(csv.lines().next(), Some("step,eval_loss"));
    for ((step, loss), (logged_step, logged_loss)) in rows.iter().zip(&logged) {
        assert_eq!(step, logged_step);
        assert!((loss - logged_loss).abs() <= 5e-5, "{loss} logged as {logged_loss}");
    }
}

#[test]
fn what_lerobot_refuses_is_refused() {
    let out = scratch("held-out-refusals");
    let refused = |extra: serde_json::Value, expected: &str| {
        let err = TrainData::open(&config(&out, 1, extra)).err().expect("refused").to_string();
        assert!(err.contains(expected), "{err}");
    };
    refused(json!({"eval_steps": 5}), "eval_steps needs held-out episodes");
    refused(json!({"dataset": {"eval_split": 1.0}}), "must be in [0, 1)");
    refused(json!({"dataset": {"eval_split": 0.5, "episodes": [4]}}), "none is left to train on");
}
