//! The held-out loss, as LeRobot 0.6.1 computes it (`--dataset.eval_split`, `--eval_steps`): the
//! last episodes of each task are kept out of training ([`super::held_out`]), and every
//! `eval_steps` steps the loss over all their frames is measured with the model in evaluation
//! mode (LeRobot's `policy.eval()` under `torch.no_grad()`), as the mean of the batches' losses.

use burn::prelude::*;
use loader::Loader;

use super::data::TrainData;
use crate::error::Result;
use crate::step::{StepRunner, TrainingBackend};
use crate::train_config::TrainConfig;

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
