//! Times burn-collective's all-reduce of a flat gradient buffer between the replicas of one
//! process on the CPU, as `--num_devices 2` makes it (a sum; centralized: made once and
//! copied to every replica): the first level of a data-parallel step (`bench/RESULTS.md`).
//!
//! ```sh
//! cargo run --release -p trainer --example local_all_reduce -- 262709026 2   # PushT classic
//! cargo run --release -p trainer --example local_all_reduce -- 262709026 2 ring
//! ```
//!
//! The third argument picks burn-collective's strategy: `centralized` (the trainer's), `ring`
//! or `tree`.

use std::sync::Barrier;
use std::time::Instant;

use burn::backend::Flex;
use burn::prelude::*;
use burn::tensor::TensorPrimitive;
use burn_collective::{AllReduceStrategy, BroadcastStrategy, CollectiveConfig, PeerId, ReduceOperation};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    // As the `trainer` tool: large freed buffers stay in malloc's heap, not returned to the
    // system to be faulted in again at the next call.
    trainer::memory::keep_freed_memory();
    let floats: usize = args.next().map_or(Ok(262_709_026), |n| n.parse())?;
    let replicas: usize = args.next().map_or(Ok(2), |n| n.parse())?;
    let strategy = match args.next().as_deref() {
        None | Some("centralized") => AllReduceStrategy::Centralized,
        Some("ring") => AllReduceStrategy::Ring,
        Some("tree") => AllReduceStrategy::Tree(2),
        Some(other) => return Err(format!("no strategy {other}: centralized, ring or tree").into()),
    };
    let repeats = 5;
    let ready = Barrier::new(replicas);
    let seconds = std::thread::scope(|scope| {
        let ready = &ready;
        let threads: Vec<_> = (0..replicas)
            .map(|rank| scope.spawn(move || replica(rank, replicas, strategy, floats, repeats, ready)))
            .collect();
        threads.into_iter().map(|t| t.join().expect("a replica panicked")).collect::<Result<Vec<_>, String>>()
    })?;
    // A call ends when the last replica has its copy: the slowest replica's time.
    let mut per_call: Vec<f64> = (0..repeats).map(|i| seconds.iter().map(|s| s[i]).fold(0.0, f64::max)).collect();
    per_call.sort_by(f64::total_cmp);
    let bytes = (floats * 4) as f64;
    let median = per_call[repeats / 2];
    println!(
        "{replicas} replicas, {floats} floats ({:.1} MB): median {:.1} ms, fastest {:.1} ms over {repeats}; {:.2} GB/s \
         of buffer",
        bytes / 1e6,
        median * 1e3,
        per_call[0] * 1e3,
        bytes / median / 1e9
    );
    Ok(())
}

/// Replica `rank`'s calls with `strategy`, each started once every replica is `ready`; the
/// seconds each call took on it.
fn replica(
    rank: usize,
    replicas: usize,
    strategy: AllReduceStrategy,
    floats: usize,
    repeats: usize,
    ready: &Barrier,
) -> Result<Vec<f64>, String> {
    let device = Default::default();
    let peer = PeerId(rank as u32);
    let config = CollectiveConfig::default()
        .with_num_devices(replicas)
        .with_local_all_reduce_strategy(strategy)
        .with_local_broadcast_strategy(BroadcastStrategy::Centralized);
    burn_collective::register::<Flex>(peer, device, config).map_err(|e| format!("{e:?}"))?;
    let mut seconds = Vec::with_capacity(repeats + 1);
    let mut sum = None;
    for _ in 0..=repeats {
        let values = Tensor::<Flex, 1>::full([floats], rank as f32, &device);
        // Every replica's buffer is filled before the clock starts, so that no call waits for
        // another replica's fill.
        ready.wait();
        let start = Instant::now();
        let reduced = burn_collective::all_reduce::<Flex>(peer, values.into_primitive().tensor(), ReduceOperation::Sum)
            .map_err(|e| format!("{e:?}"))?;
        seconds.push(start.elapsed().as_secs_f64());
        sum = Some(Tensor::<Flex, 1>::from_primitive(TensorPrimitive::Float(reduced)));
    }
    burn_collective::finish_collective::<Flex>(peer).map_err(|e| format!("{e:?}"))?;
    // The first call allocates: not counted.
    seconds.remove(0);
    let expected = (replicas * (replicas - 1) / 2) as f32;
    let off = sum.expect("at least one call").sub_scalar(expected).abs().max().into_scalar();
    if off > 1e-6 {
        return Err(format!("the sum of the ranks is {expected}, got values {off} away from it"));
    }
    Ok(seconds)
}
