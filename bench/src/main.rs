//! `bench`: throughput benchmarks of the loader, the transforms and the trainer, the GPU checks,
//! and the regression check CI runs. Run `bench --help` for the commands; the code is the
//! library's (`bench::main`).

fn main() -> anyhow::Result<()> {
    bench::main()
}
