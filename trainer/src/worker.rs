//! The process's thread policy for training: the main thread, which runs the steps of a run of
//! one device, is one of rayon's workers, and helps the pool while it waits.
//!
//! Every parallel operation of the CPU backend (burn-flex's and our kernels') called from a
//! thread outside rayon's pool is injected into the pool, and its caller sleeps until a worker
//! has run it: two thread switches per operation, a few hundred operations a step, most of them
//! small. Called from a worker, an operation starts on that thread at once and the other workers
//! steal what they can: the tiny policy's U-Net, forward and backward, took 15 and 27 ms from a
//! thread outside the pool and 11 and 20 on a worker. The main thread itself becomes the worker,
//! rather than handing each step to one of the pool's own threads: glibc serves a thread other
//! than the main one from heaps of at most 64 MiB and maps larger blocks afresh every time
//! ([`crate::memory`]), which made PushT's backward pass twice as slow there.

use std::time::{Duration, Instant};

/// Makes the calling thread worker 0 of rayon's global pool, with the pool's usual number of
/// threads (`RAYON_NUM_THREADS`, else one per core): its parallel operations then run as a
/// worker's. Call it once, first thing in the main thread of a program that trains, as
/// [`crate::memory::keep_freed_memory`]. Does nothing, and says so in the log, where the pool
/// already exists, or where it would have a single thread (then the calling thread would be
/// the only worker, and work other threads hand the pool would wait while it does anything
/// else). Returns whether the calling thread is now a worker.
pub fn join_rayon_pool() -> bool {
    let threads = std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .or_else(|| std::thread::available_parallelism().ok().map(usize::from))
        .unwrap_or(1);
    if threads < 2 {
        tracing::debug!("one thread for rayon: the main thread stays outside its pool");
        return false;
    }
    match rayon::ThreadPoolBuilder::new().num_threads(threads).use_current_thread().build_global() {
        Ok(()) => true,
        Err(e) => {
            tracing::debug!("the main thread stays outside rayon's pool: {e}");
            false
        }
    }
}

/// Sleeps for `duration` where the calling thread is no worker; a worker runs the pool's pending
/// jobs meanwhile, and naps a millisecond at a time when there are none. The main thread as
/// worker 0 never takes up jobs by itself: waiting on other threads that hand work to the pool
/// (a frame-cache build, replicas on threads), it would otherwise leave the pool a thread short.
pub fn sleep_helping(duration: Duration) {
    if rayon::current_thread_index().is_none() {
        std::thread::sleep(duration);
        return;
    }
    let deadline = Instant::now() + duration;
    while let Some(left) = deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()) {
        if rayon::yield_now() != Some(rayon::Yield::Executed) {
            std::thread::sleep(left.min(Duration::from_millis(1)));
        }
    }
}
