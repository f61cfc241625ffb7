//! Times MPI's all-reduce of a flat gradient buffer between the processes `mpirun` starts: the
//! second level of a multi-machine step (`bench/RESULTS.md` records what it gave).
//!
//! ```sh
//! cargo build --release -p trainer --features mpi --example all_reduce
//! mpirun -np 2 target/release/examples/all_reduce 262709026   # PushT classic's weights
//! ```

use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let floats: usize = match std::env::args().nth(1) {
        Some(n) => n.parse()?,
        None => 262_709_026,
    };
    let repeats = 5;
    // As the `trainer` tool: large freed buffers stay in malloc's heap, not returned to the
    // system to be faulted in again at the next call.
    trainer::memory::keep_freed_memory();
    let launch = trainer::parallel::launch()?;
    let processes = launch.processes();
    let mut values = vec![processes.rank() as f32; floats];
    let mut seconds = Vec::with_capacity(repeats);
    for _ in 0..=repeats {
        let start = Instant::now();
        processes.all_reduce_sum(&mut values)?;
        seconds.push(start.elapsed().as_secs_f64());
    }
    // The first call sets up MPI's buffers and connections: not counted.
    seconds.remove(0);
    seconds.sort_by(f64::total_cmp);
    // The ranks' sum, summed again by every call after the first.
    let ranks = (processes.count() * (processes.count() - 1) / 2) as f32;
    let expected = ranks * (processes.count() as f32).powi(repeats as i32);
    if values.iter().any(|v| *v != expected) {
        return Err(format!("the sum is {expected}, got {}", values[0]).into());
    }
    if processes.is_main() {
        let bytes = (floats * 4) as f64;
        let median = seconds[repeats / 2];
        println!(
            "{} processes, {floats} floats ({:.1} MB): median {:.1} ms, fastest {:.1} ms over {repeats}; \
             {:.2} GB/s of buffer",
            processes.count(),
            bytes / 1e6,
            median * 1e3,
            seconds[0] * 1e3,
            bytes / median / 1e9
        );
    }
    Ok(())
}
