//! What a run reports as it goes ([`Progress`]) and what it did ([`TrainOutcome`]).

use std::path::PathBuf;

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
