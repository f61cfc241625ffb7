//! LeRobot 0.6.1's split of episodes into those trained on and those held out
//! (`--dataset.eval_split`), and the cap on the held-out frames an evaluation reads.

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
