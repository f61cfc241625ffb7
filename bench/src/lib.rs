//! `bench`: throughput benchmarks of the loader, the transforms and the trainer, the GPU checks,
//! and the regression check CI runs; [`main`] is the `bench` command (`bench --help` lists its
//! commands). The checks' and the regression check's own tests call [`gpu_check`] and
//! [`regress`] from `tests/`.

#[cfg(feature = "cudnn")]
mod cudnn_check;
mod dataset_source;
#[cfg(feature = "stream")]
mod file_server;
pub mod gpu_check;
#[cfg(feature = "cuda")]
mod graph_check;
#[cfg(feature = "cuda")]
mod graph_step_check;
#[cfg(feature = "cudnn")]
mod linear_check;
mod loader_bench;
mod nccl_check;
pub mod regress;
mod report;
mod soak;
mod sweep;
mod sys;
mod train_bench;
mod transforms_bench;

use clap::{Parser, Subcommand};

/// Throughput benchmarks.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Loader samples/s over workers × batch sizes, against the memcpy bound.
    Loader(loader_bench::LoaderArgs),
    /// Many epochs through one loader: RSS and decoder memory per epoch.
    Soak(soak::SoakArgs),
    /// Images/s of the default augmentation chain on a device.
    Transforms(transforms_bench::TransformsArgs),
    /// The trainer's step time, phase by phase, and the real loop's data-wait share.
    TrainStep(train_bench::TrainStepArgs),
    /// Loader, transforms and trainer together: JSON, CSV, SVG and a summary in RESULTS.md.
    Sweep(sweep::SweepArgs),
    /// CI's regression check: machine-independent throughput ratios against a baseline.
    Regress(regress::RegressArgs),
    /// The GPU path against the CPU: a training step, half precision, the input pipeline,
    /// checkpoints moved between devices and YUV frames converted to RGB (needs a GPU and the
    /// cuda or wgpu feature).
    GpuCheck(gpu_check::GpuCheckArgs),
    /// NCCL's sums between processes on cuda, one process of a torchrun-style launch (or
    /// alone): exact sums, the broadcast, the all-reduce timed, optionally a short training run
    /// (needs a GPU and the cuda feature).
    NcclCheck(nccl_check::NcclCheckArgs),
}

/// The `bench` command: parses the arguments, runs the command they name and prints its report.
pub fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().command {
        Command::Loader(args) => {
            let report = loader_bench::run(&args)?;
            println!("{}", loader_bench::render(&report));
            println!("{}", loader_bench::markdown(&report));
        }
        Command::Transforms(args) => {
            let report = transforms_bench::run(&args)?;
            println!(
                "| device | batch x frames | size | images/s | ms/batch | upload ms | augment ms | normalise ms |"
            );
            println!("{}", transforms_bench::render(&report));
        }
        Command::TrainStep(args) => {
            // As the trainer runs (trainer::memory, trainer::worker); `regress` keeps malloc's and
            // rayon's defaults, which its baselines were taken with.
            trainer::memory::keep_freed_memory();
            trainer::worker::join_rayon_pool();
            let reports = train_bench::run(&args)?;
            println!("{}", train_bench::HEADER);
            for r in &reports {
                println!("{}", train_bench::render(r));
            }
            println!("{}", serde_json::to_string_pretty(&reports)?);
        }
        Command::Sweep(args) => {
            trainer::memory::keep_freed_memory();
            trainer::worker::join_rayon_pool();
            sweep::run(&args)?;
        }
        Command::Regress(args) => {
            if !regress::run(&args)? {
                eprintln!(
                    "throughput regressed (see the table); if intended, run `bench regress --update` in its own commit"
                );
                std::process::exit(1);
            }
        }
        Command::GpuCheck(args) => {
            gpu_check::run(&args)?;
        }
        Command::NcclCheck(args) => {
            nccl_check::run(&args)?;
        }
        Command::Soak(args) => {
            let report = soak::run(&args)?;
            println!("{}", soak::render(&report));
        }
    }
    Ok(())
}
