//! `trainer::worker::join_rayon_pool` in a process of its own (rayon's global pool is one per
//! process).

use rayon::prelude::*;

/// The joining thread becomes worker 0 of the global pool, with at least one more worker to
/// share its parallel work; the pool is built once, so a second call changes nothing.
#[test]
fn the_joining_thread_becomes_worker_zero_of_the_global_pool() {
    assert_eq!(rayon::current_thread_index(), None);
    let joined = trainer::worker::join_rayon_pool();
    // The pool's size as rayon picks it: `RAYON_NUM_THREADS`, else one thread per core.
    let threads = std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
    if threads < 2 {
        assert!(!joined, "a single-thread pool is not joined");
        return;
    }
    assert!(joined);
    assert_eq!(rayon::current_thread_index(), Some(0));
    assert!(rayon::current_num_threads() >= 2);
    // Work split over the workers, the other ones too.
    let threads: std::collections::BTreeSet<usize> = (0..64)
        .into_par_iter()
        .map(|_| {
            std::thread::sleep(std::time::Duration::from_millis(2));
            rayon::current_thread_index().expect("on a worker")
        })
        .collect();
    assert!(threads.len() >= 2, "ran on workers {threads:?}");
    assert!(!trainer::worker::join_rayon_pool(), "the pool exists already");
}
