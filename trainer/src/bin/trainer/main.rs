//! `trainer`: trains LeRobot's Diffusion Policy on a LeRobot dataset (`trainer --dataset.root
//! DIR ...`), runs trained checkpoints (`trainer sample ...`) and exports them to LeRobot
//! (`trainer export ...`).
//!
//! One module per command: `train` (with its flags in `args` and the `--demo` in `demo`),
//! `sample`, `export`.

mod args;
mod demo;
mod export;
mod sample;
mod train;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Train LeRobot's Diffusion Policy on a LeRobot dataset, fast.
#[derive(Debug, Parser)]
#[command(version, about, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    train: args::TrainArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Predict action chunks for dataset frames with a trained checkpoint.
    Sample(sample::SampleArgs),
    /// Write a checkpoint as a LeRobot pretrained policy (model.safetensors, config.json,
    /// pre/post-processors) that LeRobot's `DiffusionPolicy.from_pretrained` loads.
    Export(export::ExportArgs),
}

fn main() -> ExitCode {
    trainer::memory::keep_freed_memory();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    trainer::worker::join_rayon_pool();
    let cli = Cli::parse();
    let outcome = match cli.command {
        Some(Command::Sample(args)) => sample::sample(&args),
        Some(Command::Export(args)) => export::export(&args),
        None => train::train(&cli.train),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", datasets::error_message(e.as_ref()));
            ExitCode::FAILURE
        }
    }
}
