//! The held-out loss, as LeRobot 0.6.1 computes it (`--dataset.eval_split`, `--eval_steps`): the
//! last episodes of each task are kept out of training ([`split_train_eval`]), and every
//! `eval_steps` steps the loss over all their frames is measured with the model in evaluation
//! mode (LeRobot's `policy.eval()` under `torch.no_grad()`), as the mean of the batches' losses.

use burn::prelude::*;
use loader::Loader;

use super::TrainData;
use crate::error::{Error, Result};
use crate::step::{StepRunner, TrainingBackend};
use crate::train_config::TrainConfig;

/// LeRobot's train/eval split of `episodes` (index and first task of each, in ascending order):
/// grouped by task, the last `ceil(n · eval_split)` episodes of each task's `n` are held out.
/// Returns the training episodes and the held-out ones, each ascending.
pub(crate) fn split_train_eval(episodes: &[(usize, &str)], eval_split: f64) -> (Vec<usize>, Vec<usize>) {
    let mut tasks: Vec<(&str, Vec<usize>)> = Vec::new();
    for &(episode, task) in episodes {
        match tasks.iter_mut().find(|(t, _)| *t == task) {
            Some((_, list)) => list.push(episode),
            None => tasks.push((task, vec![episode])),
        }
    }
    let (mut train, mut eval) = (Vec::new(), Vec::new());
    for (_, list) in tasks {
        let held_out = (list.len() as f64 * eval_split).ceil() as usize;
        let kept = list.len().saturating_sub(held_out);
        train.extend_from_slice(&list[..kept]);
        eval.extend_from_slice(&list[kept..]);
    }
    train.sort_unstable();
    eval.sort_unstable();
    (train, eval)
}

/// The episodes a run trains on and those it holds out, from `config`'s `dataset.episodes` and
/// `dataset.eval_split` (checked here: in [0, 1), one dataset, some episodes left to train on).
pub(super) fn choose_episodes(data: &TrainData, config: &TrainConfig) -> Result<(Option<Vec<usize>>, Vec<usize>)> {
    let split = config.dataset.eval_split;
    if !(0.0..1.0).contains(&split) {
        return Err(Error::Config(format!("dataset.eval_split is {split}: it must be in [0, 1)")));
    }
    if config.eval_steps > 0 && split == 0.0 {
        return Err(Error::Config("eval_steps needs held-out episodes: set dataset.eval_split above 0".into()));
    }
    if split == 0.0 {
        return Ok((config.dataset.episodes.clone(), Vec::new()));
    }
    let [dataset] = data.datasets.parts() else {
        return Err(Error::Config("dataset.eval_split holds out episodes of one dataset: train on one".into()));
    };
    let chosen = |index: usize| config.dataset.episodes.as_ref().is_none_or(|list| list.contains(&index));
    let episodes: Vec<(usize, &str)> = dataset
        .episodes()
        .iter()
        .filter(|e| chosen(e.index))
        .map(|e| (e.index, e.tasks.first().map_or("", String::as_str)))
        .collect();
    let (train, eval) = split_train_eval(&episodes, split);
    if train.is_empty() {
        return Err(Error::Config(format!(
            "dataset.eval_split {split} holds out every one of the {} episodes: none is left to train on",
            episodes.len()
        )));
    }
    Ok((Some(train), eval))
}

/// LeRobot's `--max_eval_samples` cap on the held-out frames (`held_out`, in dataset order, each
/// with its `task_index`): for each task in ascending order, its first `max(1, max_samples /
/// tasks)` frames, task after task, as LeRobot's `Subset` of the evaluation dataset lists them.
pub(crate) fn cap_eval_frames(held_out: &[(usize, i64)], max_samples: usize) -> Vec<usize> {
    let mut tasks: Vec<i64> = held_out.iter().map(|&(_, task)| task).collect();
    tasks.sort_unstable();
    tasks.dedup();
    let per_task = (max_samples / tasks.len().max(1)).max(1);
    tasks
        .iter()
        .flat_map(|&task| held_out.iter().filter(move |&&(_, t)| t == task).take(per_task).map(|&(frame, _)| frame))
        .collect()
}

/// The held-out frames each evaluation reads when `max_eval_samples` caps them (`None`: every
/// frame of the held-out episodes).
pub(super) fn eval_frames(data: &TrainData, config: &TrainConfig) -> Result<Option<Vec<usize>>> {
    if config.max_eval_samples == 0 || data.eval_episodes.is_empty() {
        return Ok(None);
    }
    let [dataset] = data.datasets.parts() else { return Ok(None) };
    let Some(task_index) = dataset.table().column("task_index").and_then(|c| c.as_i64()) else {
        return Err(Error::Config(format!("{}: task_index is not an integer column", dataset.root().display())));
    };
    let held_out: Vec<(usize, i64)> = dataset
        .episodes()
        .iter()
        .filter(|e| data.eval_episodes.contains(&e.index))
        .flat_map(|e| e.frames.clone())
        .map(|frame| (frame, task_index[frame]))
        .collect();
    Ok(Some(cap_eval_frames(&held_out, config.max_eval_samples)))
}

/// Whether the held-out loss is due after optimiser step `step` (counted from 1).
pub(super) fn due(config: &TrainConfig, step: usize) -> bool {
    config.eval_steps > 0 && step.is_multiple_of(config.eval_steps)
}

/// The held-out loss after optimiser step `step`: the mean of the losses of the held-out
/// frames' batches (every frame once, in dataset order, the last batch possibly shorter).
pub(super) fn held_out_loss<B: TrainingBackend>(
    runner: &StepRunner<B>,
    run: &TrainData,
    config: &TrainConfig,
    step: usize,
) -> Result<f64> {
    let loader: Loader = run.eval_loader(config)?;
    let mut sum: Option<Tensor<B::InnerBackend, 1>> = None;
    let mut batches = 0;
    for batch in loader {
        let loss = runner.eval_loss(&batch?, step, batches)?;
        sum = Some(sum.map_or(loss.clone(), |s| s + loss));
        batches += 1;
    }
    let sum = sum.map_or(0.0, |s| f64::from(s.into_scalar().elem::<f32>()));
    Ok(sum / batches.max(1) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_episodes_of_each_task_are_held_out_rounding_up() {
        // Two tasks, interleaved: 5 of "push" (ceil(0.5) = 1 held out), 3 of "pick" (ceil(0.3) = 1).
        let episodes =
            [(0, "push"), (1, "pick"), (2, "push"), (3, "push"), (4, "pick"), (5, "push"), (6, "pick"), (7, "push")];
        assert_eq!(split_train_eval(&episodes, 0.1), (vec![0, 1, 2, 3, 4, 5], vec![6, 7]));
        // 206 episodes of one task at 0.1: ceil(20.6) = 21 held out, the last ones (185-205).
        let pusht: Vec<(usize, &str)> = (0..206).map(|i| (i, "push the T")).collect();
        let (train, eval) = split_train_eval(&pusht, 0.1);
        assert_eq!((train.len(), eval), (185, (185..206).collect::<Vec<_>>()));
        assert_eq!(split_train_eval(&pusht[..3], 0.0), (vec![0, 1, 2], vec![]));
    }

    #[test]
    fn max_eval_samples_takes_the_first_frames_of_each_task_task_after_task() {
        // Frames 10-15 held out: task 1 on 10, 11, 14, 15, task 0 on 12, 13.
        let held_out = [(10, 1), (11, 1), (12, 0), (13, 0), (14, 1), (15, 1)];
        assert_eq!(cap_eval_frames(&held_out, 5), vec![12, 13, 10, 11]);
        assert_eq!(cap_eval_frames(&held_out, 6), vec![12, 13, 10, 11, 14]);
        assert_eq!(cap_eval_frames(&held_out, 1), vec![12, 10]);
        assert_eq!(cap_eval_frames(&held_out, 100), vec![12, 13, 10, 11, 14, 15]);
    }
}
