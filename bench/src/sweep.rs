//! `bench sweep`: every throughput figure in one run — the loader over workers × batch sizes on
//! its three paths (video in LeRobot's order, video in the decode-once blocks order, the frame
//! cache), the transforms chain, and trainer steps (policies × precisions × batch sizes) phase by phase
//! with the real loop's data-wait share — written as one JSON report, a CSV per table, SVG
//! plots, and a Markdown summary appended to `bench/RESULTS.md` with the machine and revision.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use kernels::DeviceKind;
use serde::Serialize;
use trainer::{Precision, Preset};

use crate::dataset_source::DatasetSource;
use crate::loader_bench::{self, LoaderArgs, LoaderReport};
use crate::report::{Series, line_plot, markdown_table, write_csv, write_json};
use crate::sys::{git_revision, machine};
use crate::train_bench::{self, TrainStepArgs, TrainStepReport};
use crate::transforms_bench::{self, TransformsArgs, TransformsReport};
use loader::{DEFAULT_BLOCK_EPISODES, SampleOrder};

/// Arguments of `bench sweep`.
#[derive(Debug, Clone, Args)]
pub struct SweepArgs {
    /// The dataset (a pusht-like synth dataset: `datasets synth --preset pusht-like`).
    #[command(flatten)]
    pub dataset: DatasetSource,
    /// Its decoded-frame cache: the loader is swept on it, and the trainer reads from it
    /// (default: the loader is swept on the trainer's automatic cache, built first if missing).
    #[arg(long)]
    pub frame_cache: Option<PathBuf>,
    /// Loader worker counts.
    #[arg(long, value_delimiter = ',', default_value = "0,1,2,4")]
    pub workers: Vec<usize>,
    /// Loader batch sizes.
    #[arg(long, value_delimiter = ',', default_value = "8,64,256")]
    pub loader_batch: Vec<usize>,
    /// Seconds per loader cell.
    #[arg(long, default_value_t = 2.0)]
    pub loader_seconds: f64,
    /// The device of the transforms and the trainer.
    #[arg(long, default_value = "cpu")]
    pub device: DeviceKind,
    /// Policies: `tiny` (U-Net 64/128/256) and/or `classic` (PushT, 263M parameters).
    #[arg(long, value_delimiter = ',', default_value = "tiny,classic")]
    pub policies: Vec<String>,
    /// Trainer batch sizes (a GPU takes 8..256; the CPU backend wants 8).
    #[arg(long, value_delimiter = ',', default_value = "8,64,256")]
    pub train_batch: Vec<usize>,
    /// Precisions; those the device cannot compute in are reported as skipped.
    #[arg(long, value_delimiter = ',', default_value = "f32,bf16")]
    pub precisions: Vec<Precision>,
    /// Untimed trainer steps per cell first (a GPU backend compiles and autotunes its kernels on
    /// first use: give it several).
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,
    /// Timed trainer steps per cell (after the warm-up).
    #[arg(long, default_value_t = 3)]
    pub steps: usize,
    /// Steps of the real loop (loader running) per cell, for the data-wait share.
    #[arg(long, default_value_t = 5)]
    pub loop_steps: usize,
    /// Loader workers of the real loop.
    #[arg(long, default_value_t = 2)]
    pub train_workers: usize,
    /// Folder for the JSON, CSV and SVG outputs.
    #[arg(long, default_value = "target/bench/sweep")]
    pub out: PathBuf,
    /// The Markdown file the summary is appended to.
    #[arg(long, default_value = "bench/RESULTS.md")]
    pub results: PathBuf,
    /// Print the summary without appending it.
    #[arg(long)]
    pub no_append: bool,
}

/// A trainer cell that could not run (a precision the device lacks).
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    /// Policy.
    pub policy: String,
    /// Precision.
    pub precision: String,
    /// Why.
    pub reason: String,
}

/// Everything one sweep measured.
#[derive(Debug, Clone, Serialize)]
pub struct SweepReport {
    /// CPU model, cores, memory.
    pub machine: String,
    /// `git describe`.
    pub revision: String,
    /// The command line.
    pub command: String,
    /// Loader on the videos (or images), in LeRobot's order.
    pub loader_video: LoaderReport,
    /// Loader on the videos in the blocks order (decode-once).
    pub loader_video_blocks: LoaderReport,
    /// Loader on the frame cache (the one given, or the automatic one; none when the dataset's
    /// frames do not fit the automatic cache's budget).
    pub loader_frame_cache: Option<LoaderReport>,
    /// The default augmentation chain at 96×96, batch 64 × 2 frames.
    pub transforms: TransformsReport,
    /// Trainer cells.
    pub train: Vec<TrainStepReport>,
    /// Trainer cells skipped.
    pub skipped: Vec<Skipped>,
}

/// Runs the sweep, writes its files and (unless `--no-append`) its summary.
pub fn run(args: &SweepArgs) -> Result<SweepReport> {
    let root = args.dataset.one("sweep")?;
    let loader = |frame_cache: Option<PathBuf>, auto_frame_cache: bool, order: SampleOrder| {
        loader_bench::run(&LoaderArgs {
            dataset: DatasetSource::folders(vec![root.clone()]),
            weights: None,
            frame_cache,
            auto_frame_cache,
            frame_rows: false,
            order,
            block_episodes: DEFAULT_BLOCK_EPISODES,
            frame_encoding: datasets::FrameEncoding::Rgb,
            workers: args.workers.clone(),
            batch_sizes: args.loader_batch.clone(),
            seconds: args.loader_seconds,
            prefetch: 4,
            n_obs_steps: 2,
            horizon: 16,
            drop_n_last_frames: 7,
            out: args.out.clone(),
            streaming: false,
            serve_latency_ms: None,
            serve_mbit: 1000.0,
            streaming_buffer_mb: 2000,
        })
    };
    eprintln!("loader, from the dataset's files");
    let loader_video = loader(None, false, SampleOrder::Lerobot)?;
    eprintln!("loader, from the dataset's files in the blocks order");
    let loader_video_blocks = loader(None, false, SampleOrder::Blocks)?;
    let loader_frame_cache = match &args.frame_cache {
        Some(cache) => {
            eprintln!("loader, frame cache");
            Some(loader(Some(cache.clone()), false, SampleOrder::Lerobot)?)
        }
        None => {
            eprintln!("loader, automatic frame cache");
            loader(None, true, SampleOrder::Lerobot).inspect_err(|e| eprintln!("no automatic frame cache: {e:#}")).ok()
        }
    };
    eprintln!("transforms");
    let transforms = transforms_bench::run(&TransformsArgs {
        device: args.device,
        batch: 64,
        frames: 2,
        size: "96x96".into(),
        seconds: 3.0,
    })?;
    let mut train = Vec::new();
    let mut skipped = Vec::new();
    for policy in &args.policies {
        let tiny = match policy.as_str() {
            "tiny" => true,
            "classic" => false,
            other => anyhow::bail!("unknown policy {other:?}: expected tiny or classic"),
        };
        for &precision in &args.precisions {
            eprintln!("trainer: {policy} {precision} at batch {:?}", args.train_batch);
            let cell = TrainStepArgs {
                dataset: DatasetSource::folders(vec![root.clone()]),
                weights: None,
                frame_cache: args.frame_cache.clone(),
                frames_on_device: false,
                preset: Preset::Classic,
                tiny,
                use_group_norm: None,
                batch: args.train_batch.clone(),
                warmup: args.warmup,
                steps: args.steps,
                loop_steps: args.loop_steps,
                num_workers: args.train_workers,
                device: args.device,
                count_launches: false,
                profiler_range: false,
                max_launches: None,
                precision,
            };
            match train_bench::run(&cell) {
                Ok(reports) => train.extend(reports),
                Err(e) if e.to_string().contains("does not compute in") => skipped.push(Skipped {
                    policy: policy.clone(),
                    precision: precision.to_string(),
                    reason: e.to_string(),
                }),
                Err(e) => return Err(e),
            }
        }
    }
    let report = SweepReport {
        machine: machine(),
        revision: git_revision(),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        loader_video,
        loader_video_blocks,
        loader_frame_cache,
        transforms,
        train,
        skipped,
    };
    write_files(args, &report)?;
    let summary = markdown(&report);
    if !args.no_append {
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&args.results)
            .with_context(|| format!("opening {}", args.results.display()))?;
        file.write_all(summary.as_bytes()).with_context(|| format!("appending to {}", args.results.display()))?;
    }
    println!("{summary}");
    Ok(report)
}

const TRAIN_HEADER: [&str; 14] = [
    "policy",
    "precision",
    "batch",
    "step ms",
    "samples/s",
    "transfer",
    "transforms",
    "forward",
    "backward",
    "optimiser",
    "loop samples/s",
    "data wait",
    "final loss",
    "device",
];

fn train_rows(report: &SweepReport) -> Vec<Vec<String>> {
    report
        .train
        .iter()
        .map(|r| {
            let p = &r.phases;
            let (rate, wait) = r.real_loop.as_ref().map_or(("-".into(), "-".into()), |l| {
                (format!("{:.1}", l.samples_per_s), format!("{:.1}%", 100.0 * l.data_wait_share))
            });
            vec![
                r.policy.clone(),
                r.precision.clone(),
                r.batch.to_string(),
                format!("{:.0}", p.total),
                format!("{:.1}", r.samples_per_s),
                format!("{:.1}", p.transfer),
                format!("{:.1}", (p.prepare - p.transfer).max(0.0)),
                format!("{:.0}", p.forward),
                format!("{:.0}", p.backward),
                format!("{:.0}", p.clip + p.optim),
                rate,
                wait,
                r.losses.last().map_or("-".into(), |l| format!("{l:.3}")),
                r.device.clone(),
            ]
        })
        .collect()
}

fn write_files(args: &SweepArgs, report: &SweepReport) -> Result<()> {
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    write_json(&args.out.join("sweep.json"), report)?;
    write_csv(&args.out.join("train.csv"), &TRAIN_HEADER, &train_rows(report))?;
    let mut series: Vec<Series> = Vec::new();
    for r in &report.train {
        let label = format!("{} {}", r.policy, r.precision);
        match series.iter_mut().find(|s| s.label == label) {
            Some(s) => s.points.push((r.batch as f64, r.samples_per_s)),
            None => series.push(Series { label, points: vec![(r.batch as f64, r.samples_per_s)] }),
        }
    }
    line_plot(&args.out.join("train.svg"), "trainer samples/s", "batch", "samples/s", &series)
}

/// The Markdown summary: context, then one table per part.
pub fn markdown(report: &SweepReport) -> String {
    let mut text = format!(
        "\n## Sweep (`bench sweep`), {}\n\nMachine: {}. Revision: {}.\n\n```sh\n{}\n```\n\n",
        chrono::Utc::now().format("%Y-%m-%d"),
        report.machine,
        report.revision,
        report.command
    );
    let loader = |name: &str, r: &LoaderReport| {
        format!(
            "Loader, {name} ({} bytes/sample, memcpy {:.1} GB/s):\n\n{}\n",
            r.bytes_per_sample,
            r.memcpy_gb_s,
            loader_bench::markdown(r)
        )
    };
    text += &loader("from the dataset's files (video or images in parquet)", &report.loader_video);
    let blocks = &report.loader_video_blocks;
    text += &loader(&format!("from the dataset's files, {} order", blocks.order_label()), blocks);
    if let Some(cache) = &report.loader_frame_cache {
        text += &loader("frame cache", cache);
    }
    let t = &report.transforms;
    text += &format!(
        "Transforms (default augmentation chain, {}, batch {} × {} frames at {}×{}): {:.0} images/s, {:.1} ms/batch.\n\n",
        t.device, t.batch, t.frames, t.size.0, t.size.1, t.images_per_s, t.ms_per_batch
    );
    text += "Trainer (phases in ms; transforms = prepare − transfer; optimiser = clipping + Adam; data \
             wait from the real loop with the loader running):\n\n";
    text += &markdown_table(&TRAIN_HEADER, &train_rows(report));
    for s in &report.skipped {
        text += &format!("\nSkipped {} {}: {}.", s.policy, s.precision, s.reason);
    }
    text + "\n"
}
