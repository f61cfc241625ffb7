//! A run from its start: the run's data opened, then one replica, or several supervised.

use std::path::Path;

use super::data::TrainData;
use super::outcome::{Progress, TrainOutcome};
use super::{replicas, steps};
use crate::checkpoint;
use crate::error::{Error, Result};
use crate::parallel::{Processes, Replica};
use crate::step::TrainingBackend;
use crate::train_config::TrainConfig;

/// Trains as `config` says on backend `B`'s `device`; continues from `resume` (an output folder
/// or a checkpoint) when given. `on_progress` receives every log line and every step.
pub fn train<B: TrainingBackend>(
    config: &TrainConfig,
    resume: Option<&Path>,
    device: B::Device,
    on_progress: impl FnMut(Progress<'_>),
) -> Result<TrainOutcome> {
    train_on::<B>(config, resume, vec![device], on_progress)
}

/// Trains as `config` says with one replica of the model on each of `devices` (data-parallel:
/// each replica reads its shard of every epoch, and the gradients are averaged over the
/// replicas every step; with one device, the plain loop). When [`crate::parallel::launch`]
/// found this process to be one of several, the replicas are those of every process, each
/// with its `devices`. Rank 0 logs and writes checkpoints; `on_progress` is called on this thread.
///
/// A failure in one of several processes ends them all (`MPI_Abort`, after printing the
/// error): the others wait for this one in collective calls.
pub fn train_on<B: TrainingBackend>(
    config: &TrainConfig,
    resume: Option<&Path>,
    devices: Vec<B::Device>,
    mut on_progress: impl FnMut(Progress<'_>),
) -> Result<TrainOutcome> {
    let processes = Processes::current();
    let outcome = train_processes::<B>(config, resume, devices, processes, &mut on_progress);
    if let Err(error) = &outcome
        && processes.count() > 1
    {
        processes.abort_run(error);
    }
    outcome
}

/// [`train_on`] in this process, one of `processes`.
fn train_processes<B: TrainingBackend>(
    config: &TrainConfig,
    resume: Option<&Path>,
    devices: Vec<B::Device>,
    processes: Processes,
    on_progress: &mut impl FnMut(Progress<'_>),
) -> Result<TrainOutcome> {
    if devices.is_empty() {
        return Err(Error::Config("no device to train on".into()));
    }
    let mut run = TrainData::open(config)?;
    if resume.is_none() && checkpoint::checkpoints_dir(&config.output_dir).exists() {
        return Err(Error::Config(format!(
            "{} already holds a run: pass --resume {0} to continue it, or choose another --output_dir",
            config.output_dir.display()
        )));
    }
    checkpoint::remove_partial(&config.output_dir)?;
    run.settle_frame_cache(config, &mut *on_progress)?;
    run.settle_frames_on_device::<B>(config, &devices[0], &mut *on_progress)?;
    if devices.len() == 1 && processes.count() == 1 {
        let device = devices.into_iter().next().expect("one device");
        return steps::train_replica::<B>(config, &run, resume, device, &Replica::single(), on_progress);
    }
    replicas::train_data_parallel::<B>(config, &run, resume, devices, processes, on_progress)
}
