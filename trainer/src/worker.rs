//! Running a step's operations on one of rayon's worker threads. Every parallel operation of
//! the CPU backend (burn-flex's and our kernels') called from a thread outside rayon's pool is
//! injected into the pool, and its caller sleeps until a worker has run it: two thread
//! switches per operation, a few hundred operations a step. Called from a worker, the
//! operation starts on that thread at once and the other workers steal what they can. On the
//! tiny policy's U-Net, forward and backward: 15 and 27 ms from the caller's thread, 11 and 20
//! on a worker.

/// `work`, run on one of rayon's worker threads while this one waits (at once where this is a
/// worker already). A blocking call in `work` holds its worker for as long: only one thread of
/// a process may do so at a time (replicas on threads, which wait for each other in their
/// reduces, would otherwise wait for workers that one of them holds).
pub fn on_worker<R: Send>(work: impl FnOnce() -> R + Send) -> R {
    rayon::scope(|_| work())
}
