//! Running a step's operations on one of rayon's worker threads. Every parallel operation of
//! the CPU backend (burn-flex's and our kernels') called from a thread outside rayon's pool is
//! injected into the pool, and its caller sleeps until a worker has run it: two thread
//! switches per operation, a few hundred operations a step. Called from a worker, the
//! operation starts on that thread at once and the other workers steal what they can. On the
//! tiny policy's U-Net, forward and backward: 15 and 27 ms from the caller's thread, 11 and 20
//! on a worker.

use std::sync::{Mutex, PoisonError};

/// Held by the work [`on_worker`] runs: one at a time in a process. A worker waiting inside
/// one step's parallel operation takes up whatever job the pool holds; a second step taken up
/// that way would run whole on the first one's stack and wait for burn's autodiff graph, which
/// the first one holds until the second returns (seen with the tests' concurrent runs).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// `work`, run on one of rayon's worker threads while this one waits (at once where this is a
/// worker already), one such `work` at a time in the process. A blocking call in `work` holds
/// its worker and the turn for as long: only one thread of a process may wait on others inside
/// it (replicas on threads, which wait for each other in their reduces, run their steps on
/// their own threads instead).
pub fn on_worker<R: Send>(work: impl FnOnce() -> R + Send) -> R {
    if rayon::current_thread_index().is_some() {
        return work();
    }
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    rayon::scope(|_| work())
}
