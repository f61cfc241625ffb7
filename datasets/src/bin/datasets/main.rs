//! `datasets`: inspect, validate, synthesise and sample LeRobot datasets.
//!
//! Run `datasets --help` (or `cargo run -p datasets -- --help`) for the commands.

mod commands;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

/// Inspect, validate, synthesise and sample LeRobot datasets (v3.0 and v2.1).
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the version, frame rate, sizes, features, cameras and tasks of a dataset.
    Info {
        #[command(flatten)]
        dataset: commands::DatasetArgs,
    },
    /// Read every file and report every problem with its file and field; exit 1 if any.
    Validate {
        #[command(flatten)]
        dataset: commands::DatasetArgs,
        /// Allowed timestamp error in seconds.
        #[arg(long, default_value_t = datasets::DEFAULT_TOLERANCE_S)]
        tolerance_s: f64,
    },
    /// Compute statistics as LeRobot does and compare them with the stored ones.
    Stats {
        #[command(flatten)]
        dataset: commands::DatasetArgs,
        /// Write the computed statistics (v3.0: meta/stats.json; v2.1:
        /// meta/episodes_stats.jsonl).
        #[arg(long)]
        write: bool,
    },
    /// Decode every camera frame once into a memory-mapped cache (one file per camera); or show
    /// (--list) or free (--clear) the automatic caches that training runs make.
    Cache {
        #[command(flatten)]
        dataset: commands::DatasetArgs,
        /// The cache folder to write, e.g. /dev/shm/pusht-frames.
        #[arg(long, required_unless_present_any = ["list", "clear"])]
        out: Option<PathBuf>,
        /// Resize every frame to HxW (bilinear) while caching.
        #[arg(long)]
        resize: Option<String>,
        /// How frames are stored: rgb, or yuv420 (the decoder's planes, half the bytes) for a
        /// loader that reads yuv420 (`--frame-encoding yuv420`); the trainer reads a cache in
        /// its own encoding (`--frame-encoding auto`, its default).
        #[arg(long, default_value_t = datasets::FrameEncoding::Rgb)]
        frame_encoding: datasets::FrameEncoding,
        /// List the automatic caches (under $LEROBOT_RS_FRAME_CACHE, by default
        /// /dev/shm/lerobot-rs-frames): each one's dataset, size, last use and state.
        #[arg(long, conflicts_with_all = ["out", "resize", "clear"])]
        list: bool,
        /// Remove every automatic cache no process is reading or writing, and what ended
        /// processes left.
        #[arg(long, conflicts_with_all = ["out", "resize"])]
        clear: bool,
    },
    /// Write a synthetic dataset.
    Synth(commands::SynthArgs),
    /// Write LeRobot's samples for some indices as one collated safetensors batch.
    Sample {
        #[command(flatten)]
        dataset: commands::DatasetArgs,
        /// Frame indices, comma-separated, in the order wanted.
        #[arg(long, value_delimiter = ',', required = true)]
        indices: Vec<usize>,
        /// Resolve windows as LeRobot does for this policy.
        #[arg(long, value_enum)]
        preset: Option<Preset>,
        /// Observation steps of the diffusion preset.
        #[arg(long, default_value_t = 2)]
        n_obs_steps: usize,
        /// Action horizon of the diffusion preset.
        #[arg(long, default_value_t = 16)]
        horizon: usize,
        /// Explicit `delta_timestamps` as JSON, e.g. '{"action": [0.0, 0.1]}' (overrides the
        /// preset's keys).
        #[arg(long)]
        delta_timestamps: Option<String>,
        /// Camera frames as raw uint8 instead of float32 in [0, 1].
        #[arg(long)]
        uint8: bool,
        /// Allowed distance between a query timestamp and its frame, in seconds.
        #[arg(long, default_value_t = datasets::DEFAULT_TOLERANCE_S)]
        tolerance_s: f64,
        /// The safetensors file to write.
        #[arg(long)]
        out: PathBuf,
    },
}

/// Policies whose windows `sample` can resolve.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Preset {
    /// Diffusion Policy: observations at `range(1-n_obs, 1)/fps`, actions at
    /// `range(1-n_obs, 1-n_obs+horizon)/fps`.
    Diffusion,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Info { dataset } => dataset.resolve().and_then(|root| commands::info(&root)),
        Command::Validate { dataset, tolerance_s } => {
            dataset.resolve().and_then(|root| commands::validate(&root, tolerance_s))
        }
        Command::Stats { dataset, write } => dataset.resolve().and_then(|root| commands::stats(&root, write)),
        Command::Cache { list: true, .. } => commands::list_caches(),
        Command::Cache { clear: true, .. } => commands::clear_caches(),
        Command::Cache { dataset, out, resize, frame_encoding, .. } => {
            let out = out.expect("clap asks for --out without --list or --clear");
            dataset.resolve().and_then(|root| commands::cache(&root, &out, resize.as_deref(), frame_encoding))
        }
        Command::Synth(args) => commands::synth(&args),
        Command::Sample {
            dataset,
            indices,
            preset,
            n_obs_steps,
            horizon,
            delta_timestamps,
            uint8,
            tolerance_s,
            out,
        } => {
            let diffusion = preset.map(|Preset::Diffusion| (n_obs_steps, horizon));
            dataset.resolve().and_then(|root| {
                commands::sample(&commands::SampleArgs {
                    root,
                    indices,
                    diffusion,
                    delta_timestamps,
                    uint8,
                    tolerance_s,
                    out,
                })
            })
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", datasets::error_message(e.as_ref()));
            ExitCode::FAILURE
        }
    }
}
