//! A training run, by job: where it starts (`run`: [`train`], [`train_on`], the run's data
//! opened, then one replica, or several supervised), what it reports (`outcome`: [`Progress`],
//! [`TrainOutcome`]), and the rooms it goes through:
//!
//! - `data`: the datasets checked against the policy, their statistics, the frame cache settled
//!   (and whether its frames live on the device, decided in `device_frames`), the
//!   episodes trained on and held out (`held_out`: LeRobot's split), and each replica's loader
//!   ([`TrainData`]);
//! - `start`: the first step's state, fresh ([`init_model`]) or from a checkpoint (resume);
//! - `steps`: the loop: optimiser steps over the loader's batches, the metrics of each logging
//!   period;
//! - `checkpoints`: when a checkpoint is written and what goes in it (the files and their atomic
//!   write are [`crate::checkpoint`]'s);
//! - `eval`: the held-out loss, every `eval_steps` steps;
//! - `replicas`: a data-parallel run: the processes' agreement, this process's replicas on
//!   threads of their own, supervised.
//!
//! Every random draw of a step (noise, timesteps, crops, augmentation) comes from the run's seed
//! and the step number, and the loader's order from the seed and the epoch, so a run resumed from
//! a checkpoint continues exactly as an uninterrupted one would.

mod checkpoints;
mod data;
mod eval;
mod held_out;
mod outcome;
mod replicas;
mod run;
mod start;
mod steps;
mod streaming;

pub use data::{Sampled, TrainData};
pub use outcome::{Progress, TrainOutcome};
pub use run::{train, train_on};
pub use start::{init_model, step_runner};
