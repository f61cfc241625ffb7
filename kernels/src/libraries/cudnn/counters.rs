//! What the cuDNN, cuBLAS and NCCL paths did in this process, counted: calls, searches, kept
//! choices, and the blocking round trips their buffers' device pointers took.

use std::sync::atomic::{AtomicU64, Ordering};

/// Convolution passes cuDNN has run in this process.
pub(crate) static CALLS: AtomicU64 = AtomicU64::new(0);

/// 1-D convolution passes run as cuBLAS's products over the unfolded input.
pub(crate) static BLAS_CALLS: AtomicU64 = AtomicU64::new(0);

/// The Linear layers' matrix products run in cuBLAS (`LEROBOT_RS_LINEAR=cublas`).
pub(crate) static PRODUCT_CALLS: AtomicU64 = AtomicU64::new(0);

/// How many of the Linear layers' matrix products cuBLAS has run in this process.
pub fn product_calls() -> u64 {
    PRODUCT_CALLS.load(Ordering::Relaxed)
}

/// Those of them on channels-last tensors (NHWC, KRSC filters).
pub(crate) static CHANNELS_LAST_CALLS: AtomicU64 = AtomicU64::new(0);

/// How many convolution passes cuDNN has run on channels-last tensors in this process
/// (`LEROBOT_RS_CHANNELS_LAST=1`).
pub fn channels_last_calls() -> u64 {
    CHANNELS_LAST_CALLS.load(Ordering::Relaxed)
}

/// Those of them run by a plan of the graph API (not by the legacy algorithm kept beside it).
pub(crate) static GRAPH_CALLS: AtomicU64 = AtomicU64::new(0);

/// How many convolution passes a plan of cuDNN's graph API has run in this process.
pub fn graph_calls() -> u64 {
    GRAPH_CALLS.load(Ordering::Relaxed)
}

/// The algorithm searches this process has run (one a pass of a problem on a device, where no
/// kept choice was taken).
pub(crate) static SEARCHES: AtomicU64 = AtomicU64::new(0);

/// The legacy searches whose second round chose another algorithm than their first.
pub(crate) static SECOND_ROUND_CHANGES: AtomicU64 = AtomicU64::new(0);

/// The passes of problems that took a kept algorithm (an earlier run's, or another device's in
/// this run) instead of searching.
pub(crate) static EARLIER_RUNS_CHOICES: AtomicU64 = AtomicU64::new(0);

/// How many algorithm searches (legacy, with the graph API's where it is on) this process has
/// run.
pub fn searches() -> u64 {
    SEARCHES.load(Ordering::Relaxed)
}

/// How many legacy searches chose another algorithm in their second round, the one whose
/// times count, than in their first, where each algorithm's first launch also loaded its code.
pub fn second_round_changes() -> u64 {
    SECOND_ROUND_CHANGES.load(Ordering::Relaxed)
}

/// How many passes of problems took a kept algorithm (an earlier run's, or another device's of
/// the same model in this run), without searching, in this process.
pub fn earlier_runs_choices() -> u64 {
    EARLIER_RUNS_CHOICES.load(Ordering::Relaxed)
}

/// How many 1-D convolution passes ran as cuBLAS's products over their unfolded input
/// (`LEROBOT_RS_CONV1D=cublas`) in this process.
pub fn blas_calls() -> u64 {
    BLAS_CALLS.load(Ordering::Relaxed)
}

/// How many convolution passes cuDNN has enqueued in this process (the checks tell by it that
/// cuDNN ran, not burn's convolution).
pub fn calls() -> u64 {
    CALLS.load(Ordering::Relaxed)
}

/// The blocking round trips to cubecl's runner made for buffers' device pointers (one per
/// library call: cuDNN's, cuBLAS's, NCCL's).
pub(crate) static POINTER_ROUND_TRIPS: AtomicU64 = AtomicU64::new(0);

/// The buffers whose device pointers those round trips gave (what one round trip each, cubecl's
/// own `get_resource`, would have cost).
pub(crate) static POINTERS: AtomicU64 = AtomicU64::new(0);

/// The blocking round trips to cubecl's runner this process made for buffers' device pointers,
/// and the buffers they gave: `(round trips, buffers)`.
pub fn pointer_round_trips() -> (u64, u64) {
    (POINTER_ROUND_TRIPS.load(Ordering::Relaxed), POINTERS.load(Ordering::Relaxed))
}
