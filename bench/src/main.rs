//! `bench`: throughput benchmarks of the loader, the transforms and the trainer, and the
//! regression check CI runs. Run `bench --help` for the commands.

mod loader_bench;
mod report;
mod soak;
mod sys;

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
}

fn main() -> anyhow::Result<()> {
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
        Command::Soak(args) => {
            let report = soak::run(&args)?;
            println!("{}", soak::render(&report));
        }
    }
    Ok(())
}
