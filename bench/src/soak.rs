//! `bench soak`: many epochs through one loader, with resident memory and decoder-cache memory
//! sampled after every epoch, to show both stay flat.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;
use datasets::{Dataset, DecoderCacheConfig, WindowSpec, diffusion_delta_timestamps};
use loader::Loader;
use serde::Serialize;

use crate::dataset_source::DatasetSource;
use crate::report::{table, write_json};
use crate::sys::rss_bytes;

/// Arguments of `bench soak`.
#[derive(Debug, Clone, Args)]
pub struct SoakArgs {
    /// The dataset.
    #[command(flatten)]
    pub dataset: DatasetSource,
    /// Read frames from this decoded-frame cache instead of the videos.
    #[arg(long)]
    pub frame_cache: Option<PathBuf>,
    /// Epochs to run.
    #[arg(long, default_value_t = 20)]
    pub epochs: u64,
    /// Worker threads.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Samples per batch.
    #[arg(long, default_value_t = 64)]
    pub batch_size: usize,
    /// Most decoders open per worker.
    #[arg(long, default_value_t = DecoderCacheConfig::default().max_decoders)]
    pub max_decoders: usize,
    /// Decoder memory budget per worker, in MiB.
    #[arg(long, default_value_t = DecoderCacheConfig::default().max_bytes >> 20)]
    pub max_decoder_mib: usize,
    /// Where to write the JSON record.
    #[arg(long, default_value = "target/bench/soak.json")]
    pub out: PathBuf,
}

/// One epoch's figures.
#[derive(Debug, Clone, Serialize)]
pub struct EpochRow {
    /// The epoch.
    pub epoch: u64,
    /// Samples in it.
    pub samples: usize,
    /// Throughput.
    pub samples_per_s: f64,
    /// Resident memory at its end, MB.
    pub rss_mb: f64,
    /// Estimated decoder memory at its end, MB.
    pub decoder_mb: f64,
}

/// The soak run.
#[derive(Debug, Clone, Serialize)]
pub struct SoakReport {
    /// The dataset.
    pub dataset: String,
    /// Per-epoch figures.
    pub epochs: Vec<EpochRow>,
    /// Largest relative RSS change from the end of epoch 1 (after warm-up) to any later epoch.
    pub rss_drift: f64,
    /// The decoder budget summed over workers, MB.
    pub decoder_budget_mb: f64,
}

/// Runs the soak.
pub fn run(args: &SoakArgs) -> Result<SoakReport> {
    let root = args.dataset.one("soak")?;
    let dataset = Arc::new(Dataset::open(&root)?);
    let deltas = diffusion_delta_timestamps(dataset.info(), 2, 16);
    let windows = WindowSpec::from_delta_timestamps(&deltas, dataset.info(), dataset.options().tolerance_s)?;
    let decoders = DecoderCacheConfig { max_decoders: args.max_decoders, max_bytes: args.max_decoder_mib << 20 };
    let mut builder = Loader::builder(dataset)
        .batch_size(args.batch_size)
        .num_workers(args.workers)
        .drop_frames(0, 7)
        .windows(windows)
        .decoder_cache(decoders)
        // One epoch more than measured, so the pipeline is still running (not shutting down)
        // when the last measured epoch ends.
        .max_epochs(args.epochs + 1);
    if let Some(cache) = &args.frame_cache {
        builder = builder.frame_cache(cache);
    }
    let mut loader = builder.build()?;
    let per_epoch = loader.sampler().batches_per_epoch();
    let mut rows = Vec::new();
    for epoch in 0..args.epochs {
        let started = Instant::now();
        let mut samples = 0;
        for _ in 0..per_epoch {
            samples += loader.next().context("the loader ended early")??.len();
        }
        rows.push(EpochRow {
            epoch,
            samples,
            samples_per_s: samples as f64 / started.elapsed().as_secs_f64(),
            rss_mb: rss_bytes() as f64 / 1e6,
            decoder_mb: loader.decoder_bytes() as f64 / 1e6,
        });
        eprintln!(
            "epoch {epoch:>3}: {:>8.0} samples/s, RSS {:.1} MB",
            rows.last().map_or(0.0, |r| r.samples_per_s),
            rss_bytes() as f64 / 1e6
        );
    }
    let base = rows.get(1).or(rows.first()).map_or(1.0, |r| r.rss_mb);
    let rss_drift = rows.iter().skip(1).map(|r| (r.rss_mb - base).abs() / base).fold(0.0, f64::max);
    let report = SoakReport {
        dataset: root.display().to_string(),
        epochs: rows,
        rss_drift,
        decoder_budget_mb: (args.workers.max(1) * (args.max_decoder_mib << 20)) as f64 / 1e6,
    };
    if let Some(dir) = args.out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    write_json(&args.out, &report)?;
    Ok(report)
}

/// The soak as a table.
pub fn render(report: &SoakReport) -> String {
    let rows: Vec<Vec<String>> = report
        .epochs
        .iter()
        .map(|r| {
            vec![
                r.epoch.to_string(),
                r.samples.to_string(),
                format!("{:.0}", r.samples_per_s),
                format!("{:.1}", r.rss_mb),
                format!("{:.1}", r.decoder_mb),
            ]
        })
        .collect();
    format!(
        "{}\n{}RSS drift after epoch 1: {:.2}%; decoder budget {:.0} MB\n",
        report.dataset,
        table(&["epoch", "samples", "samples/s", "RSS MB", "decoders MB"], &rows),
        100.0 * report.rss_drift,
        report.decoder_budget_mb
    )
}
