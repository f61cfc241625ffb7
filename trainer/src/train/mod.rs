//! A training run, by job: where it starts ([`train`], [`train_on`]: the run's data opened,
//! then one replica, or several supervised), and the rooms it goes through:
//!
//! - `data`: the datasets checked against the policy, their statistics, the frame cache settled
//!   (and whether its frames live on the device) and each replica's loader ([`TrainData`]);
//! - `start`: the first step's state, fresh ([`init_model`]) or from a checkpoint (resume);
//! - `steps`: the loop: optimiser steps over the loader's batches, the metrics of each logging
//!   period;
//! - `checkpoints`: when a checkpoint is written and what goes in it (the files and their atomic
//!   write are [`crate::checkpoint`]'s);
//! - `replicas`: a data-parallel run: the processes' agreement, this process's replicas on
//!   threads of their own, supervised.
//!
//! Every random draw of a step (noise, timesteps, crops, augmentation) comes from the run's seed
//! and the step number, and the loader's order from the seed and the epoch, so a run resumed from
//! a checkpoint continues exactly as an uninterrupted one would.

use std::path::{Path, PathBuf};

use crate::checkpoint;
use crate::error::{Error, Result};
use crate::parallel::{Processes, Replica};
use crate::step::TrainingBackend;
use crate::train_config::TrainConfig;

mod checkpoints;
mod data;
mod eval;
mod frame_encoding;
mod frames_on_device;
mod replicas;
mod start;
mod steps;

pub use data::{Sampled, TrainData};
pub use frame_encoding::FrameEncodingChoice;
pub use frames_on_device::FramesOnDevice;
pub use start::{init_model, step_runner};

/// What a run did.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainOutcome {
    /// Optimiser steps done in total (including before a resume).
    pub steps: usize,
    /// The mean loss of each logging period, by step.
    pub losses: Vec<(usize, f64)>,
    /// The last checkpoint written.
    pub checkpoint: Option<PathBuf>,
    /// Learnable parameters.
    pub num_params: usize,
}

/// What a run reports as it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress<'a> {
    /// A log line (parameter count, metrics, checkpoints).
    Line(&'a str),
    /// Optimiser steps done so far.
    Step(usize),
    /// Frames decoded so far into an automatic frame cache, of `total` (across its cameras).
    FrameCache {
        /// Done.
        done: u64,
        /// To do.
        total: u64,
    },
}

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
