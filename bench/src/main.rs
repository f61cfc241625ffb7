//! `bench`: throughput benchmarks of the loader, the transforms and the trainer (not built yet).
fn main() {
    eprintln!("error: the benchmarks are not implemented yet (see the loader issue)");
    std::process::exit(2);
}
