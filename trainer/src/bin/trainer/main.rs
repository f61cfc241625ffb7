//! `trainer`: trains LeRobot's Diffusion Policy on a LeRobot dataset (`trainer --dataset.root
//! DIR ...`), and runs trained checkpoints (`trainer sample ...`).

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    trainer::memory::keep_freed_memory();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    trainer::worker::join_rayon_pool();
    let cli = cli::Cli::parse();
    match cli::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", datasets::error_message(e.as_ref()));
            ExitCode::FAILURE
        }
    }
}
