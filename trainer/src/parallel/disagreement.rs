//! The errors of processes started with other arguments than process 0, as each channel
//! (MPI, the meeting) reports them.

use crate::error::Error;

/// What the processes of a run must share, named where one differs.
const AGREED: &str = "configuration, dataset or device count";

/// The error of process `rank` of `count`, started with another [`AGREED`] than process 0.
pub(super) fn started_otherwise(rank: usize, count: usize) -> Error {
    Error::Replicas(format!(
        "process {rank} of {count} was started with another {AGREED} than process 0: every process of a run must be"
    ))
}

/// The error of processes `ranks` of `count`, started with another [`AGREED`] than process 0, as
/// process 0 says it.
pub(super) fn others_started_otherwise(ranks: &[usize], count: usize) -> Error {
    let ranks: Vec<String> = ranks.iter().map(ToString::to_string).collect();
    Error::Replicas(format!(
        "process(es) {} of {count} were started with another {AGREED} than process 0: every process of a run must be",
        ranks.join(", ")
    ))
}

/// The error of a process that agreed with process 0, where another did not.
pub(super) fn another_started_otherwise() -> Error {
    Error::Replicas(format!(
        "another process was started with another {AGREED} than process 0 (its own error says which)"
    ))
}
