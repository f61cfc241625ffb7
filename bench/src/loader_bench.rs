//! `bench loader`: loader throughput over workers × batch sizes, against the memcpy bound.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;
use datasets::auto_cache::{self, AutoCache};
use datasets::frame_cache::{CacheFormat, write_frame_cache};
use datasets::{Dataset, DatasetSet, FrameEncoding, WindowSpec, diffusion_delta_timestamps};
use loader::{DEFAULT_BLOCK_EPISODES, Loader, SampleOrder, SampleOrdering};
use serde::Serialize;

use crate::dataset_source::DatasetSource;
use crate::report::{Series, line_plot, markdown_table, table, write_csv, write_json};
use crate::sys::{frame_copy_bandwidth, git_revision, machine, memcpy_bandwidth, quantile, rss_bytes};

/// Arguments of `bench loader`.
#[derive(Debug, Clone, Args)]
pub struct LoaderArgs {
    /// The dataset, or several read together.
    #[command(flatten)]
    pub dataset: DatasetSource,
    /// With several datasets, each one's share of an epoch, e.g. 0.7,0.3 (default: every frame
    /// once per epoch).
    #[arg(long, value_delimiter = ',')]
    pub weights: Option<Vec<f64>>,
    /// Read frames from this decoded-frame cache instead of the videos (one dataset only).
    #[arg(long)]
    pub frame_cache: Option<PathBuf>,
    /// Read frames from the cache the trainer's `--frame-cache auto` makes (under
    /// $LEROBOT_RS_FRAME_CACHE or /dev/shm/lerobot-rs-frames): built first, and timed, when
    /// missing.
    #[arg(long, conflicts_with = "frame_cache")]
    pub auto_frame_cache: bool,
    /// Hand the cameras' frames over as their rows in the frame cache (the loader's part when the
    /// trainer keeps the frames on the GPU, `--frames-on-device`): no frame is copied.
    #[arg(long)]
    pub frame_rows: bool,
    /// The order of each epoch's samples: lerobot (LeRobot's), or blocks (decode-once: windows
    /// of --block-episodes episodes, each frame decoded once).
    #[arg(long, default_value_t = SampleOrder::Lerobot)]
    pub order: SampleOrder,
    /// Episodes per window of the blocks order.
    #[arg(long, default_value_t = DEFAULT_BLOCK_EPISODES)]
    pub block_episodes: usize,
    /// How video frames are handed over: rgb (LeRobot's) or yuv420 (the decoder's planes).
    #[arg(long, default_value_t = FrameEncoding::Rgb)]
    pub frame_encoding: FrameEncoding,
    /// Worker counts to try.
    #[arg(long, value_delimiter = ',', default_value = "0,1,2,4")]
    pub workers: Vec<usize>,
    /// Batch sizes to try.
    #[arg(long, value_delimiter = ',', default_value = "8,32,64,256")]
    pub batch_sizes: Vec<usize>,
    /// Seconds of measurement per cell (after the first batch).
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// Prefetch depth.
    #[arg(long, default_value_t = 4)]
    pub prefetch: usize,
    /// Diffusion Policy windows: observation steps.
    #[arg(long, default_value_t = 2)]
    pub n_obs_steps: usize,
    /// Diffusion Policy windows: action horizon.
    #[arg(long, default_value_t = 16)]
    pub horizon: usize,
    /// Frames dropped at the end of each episode (Diffusion Policy: 7).
    #[arg(long, default_value_t = 7)]
    pub drop_n_last_frames: usize,
    /// Folder for the JSON, CSV and SVG results.
    #[arg(long, default_value = "target/bench")]
    pub out: PathBuf,
    /// Stream the datasets (`--root` is then a URL: s3://, gs://, az://, https://, file://) as
    /// the trainer's --dataset.streaming does.
    #[arg(long)]
    pub streaming: bool,
    /// Serve each --root folder over HTTP on 127.0.0.1 with this much latency per request, and
    /// stream it from there (implies --streaming).
    #[arg(long)]
    pub serve_latency_ms: Option<f64>,
    /// The served link's bandwidth, in Mb/s (with --serve-latency-ms).
    #[arg(long, default_value_t = 1000.0, requires = "serve_latency_ms")]
    pub serve_mbit: f64,
    /// The streamed videos' buffer, in MB.
    #[arg(long, default_value_t = 2000)]
    pub streaming_buffer_mb: usize,
}

/// One measured configuration.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// Worker threads.
    pub workers: usize,
    /// Samples per batch.
    pub batch_size: usize,
    /// Throughput.
    pub samples_per_s: f64,
    /// Bytes delivered per second, in MB/s.
    pub mb_per_s: f64,
    /// Median time between batches, in ms.
    pub p50_ms: f64,
    /// 99th percentile time between batches, in ms.
    pub p99_ms: f64,
    /// Loader build plus the first batch, in seconds.
    pub first_batch_s: f64,
    /// Largest resident memory seen during the cell, in MB.
    pub peak_rss_mb: f64,
    /// `samples/s × bytes per sample / memcpy bytes/s`.
    pub memcpy_fraction: f64,
    /// Batches measured.
    pub batches: usize,
    /// Distinct episodes in a batch, on average (a batch's diversity).
    pub episodes_per_batch: f64,
    /// Largest memory the blocks order's buffer of decoded episodes took, in MB.
    pub frame_buffer_mb: f64,
}

/// The whole sweep.
#[derive(Debug, Clone, Serialize)]
pub struct LoaderReport {
    /// The machine.
    pub machine: String,
    /// The git revision.
    pub revision: String,
    /// The dataset.
    pub dataset: String,
    /// Frames read from a frame cache rather than video.
    pub frame_cache: bool,
    /// The order of the samples.
    pub order: SampleOrder,
    /// Episodes per window, in the blocks order.
    pub block_episodes: usize,
    /// How video frames were handed over.
    pub frame_encoding: FrameEncoding,
    /// Seconds to open the dataset.
    pub open_s: f64,
    /// Seconds to build the automatic frame cache (`--auto-frame-cache`; 0 when it was there).
    pub cache_build_s: Option<f64>,
    /// Bytes one sample moves.
    pub bytes_per_sample: usize,
    /// Single-thread memcpy bandwidth, GB/s.
    pub memcpy_gb_s: f64,
    /// The bandwidth of frame-sized copies, what reading from a frame cache is bound by.
    pub frame_copies: FrameCopies,
    /// The cells.
    pub cells: Vec<Cell>,
}

impl LoaderReport {
    /// The order, as the tables name it (`blocks of 16 episodes`, `lerobot`).
    pub fn order_label(&self) -> String {
        match self.order {
            SampleOrder::Blocks => format!("blocks of {} episodes", self.block_episodes),
            SampleOrder::Lerobot => self.order.to_string(),
        }
    }
}

/// The trainer's automatic frame cache of `dataset` in `encoding` (its folder), built first when
/// missing; with the seconds the build took (0 when it was there).
fn auto_frame_cache(dataset: &Dataset, encoding: FrameEncoding) -> Result<(PathBuf, f64)> {
    let root = auto_cache::default_root(|name| std::env::var_os(name));
    let plan = auto_cache::plan(dataset, &[CacheFormat::encoded(encoding)], &root, None, &[])?;
    for removal in &plan.removed {
        eprintln!("{removal}");
    }
    match plan.cache {
        AutoCache::Ready { dir } => Ok((dir, 0.0)),
        AutoCache::Build { dir, .. } => {
            let started = Instant::now();
            write_frame_cache(dataset, &dir, &CacheFormat::encoded(encoding), &|_| {})?;
            Ok((dir, started.elapsed().as_secs_f64()))
        }
        other => anyhow::bail!("{other}"),
    }
}

/// The bandwidth of frame-sized copies ([`frame_copy_bandwidth`]), GB/s, on one thread and on
/// two at once.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct FrameCopies {
    /// By `copy_from_slice`: one thread, two threads.
    pub copy_from_slice_gb_s: [f64; 2],
    /// Past the caches ([`bulk_copy::copy_past_caches`]): one thread, two threads.
    pub past_caches_gb_s: [f64; 2],
}

impl FrameCopies {
    /// Measured now.
    fn measure() -> Self {
        let gb_s = |past_caches: bool| [1, 2].map(|threads| frame_copy_bandwidth(5, past_caches, threads) / 1e9);
        Self { copy_from_slice_gb_s: gb_s(false), past_caches_gb_s: gb_s(true) }
    }
}

/// Runs the sweep and writes its results.
pub fn run(args: &LoaderArgs) -> Result<LoaderReport> {
    let memcpy = memcpy_bandwidth(5);
    let roots = args.dataset.resolve()?;
    if args.frame_cache.is_some() && roots.len() > 1 {
        anyhow::bail!("--frame-cache names one dataset's cache; with several datasets use --auto-frame-cache");
    }
    let opened = Instant::now();
    let mut parts = Vec::with_capacity(roots.len());
    let mut streams = Vec::new();
    for (name, root) in &roots {
        let dataset = if args.streaming || args.serve_latency_ms.is_some() {
            let (dataset, files) = open_streamed(args, root)?;
            streams.push(files);
            dataset
        } else {
            Dataset::open(root)?
        };
        parts.push((name.clone(), Arc::new(dataset)));
    }
    let datasets = DatasetSet::new(parts)?;
    let open_s = opened.elapsed().as_secs_f64();
    let (frame_caches, cache_build_s) = if args.auto_frame_cache {
        let mut dirs = Vec::new();
        let mut seconds = 0.0;
        for dataset in datasets.parts() {
            let (dir, s) = auto_frame_cache(dataset, args.frame_encoding)?;
            dirs.push(Some(dir));
            seconds += s;
        }
        (dirs, Some(seconds))
    } else {
        (args.frame_cache.iter().map(|dir| Some(dir.clone())).collect(), None)
    };
    let info = datasets.info();
    let deltas = diffusion_delta_timestamps(info, args.n_obs_steps, args.horizon);
    let windows = WindowSpec::from_delta_timestamps(&deltas, info, datasets.parts()[0].options().tolerance_s)?;
    let mut cells = Vec::new();
    let mut bytes_per_sample = 0;
    for &batch_size in &args.batch_sizes {
        for &workers in &args.workers {
            let started = Instant::now();
            let mut builder = Loader::builder(datasets.clone())
                .batch_size(batch_size)
                .num_workers(workers)
                .prefetch(args.prefetch)
                .drop_frames(0, args.drop_n_last_frames)
                .windows(windows.clone())
                .frame_caches(frame_caches.clone())
                .ordering(SampleOrdering { order: args.order, block_episodes: args.block_episodes })
                .frame_encoding(args.frame_encoding)
                .frame_rows(args.frame_rows);
            if let Some(weights) = &args.weights {
                builder = builder.weights(weights.clone());
            }
            let mut loader = builder.build()?;
            bytes_per_sample = loader.layout().bytes_per_sample();
            loader.next().context("the loader produced no batch")??;
            let first_batch_s = started.elapsed().as_secs_f64();
            let mut latencies = Vec::new();
            let mut samples = 0;
            let mut peak_rss = rss_bytes();
            let mut peak_buffer = 0;
            let mut episodes_seen = 0;
            let window = Instant::now();
            let mut last = Instant::now();
            while window.elapsed().as_secs_f64() < args.seconds || latencies.len() < 5 {
                let batch = loader.next().context("the loader ended")??;
                samples += batch.len();
                latencies.push(last.elapsed().as_secs_f64() * 1e3);
                last = Instant::now();
                peak_rss = peak_rss.max(rss_bytes());
                peak_buffer = peak_buffer.max(loader.frame_buffer_bytes());
                episodes_seen += distinct_episodes(&datasets, batch.indices());
            }
            let elapsed = window.elapsed().as_secs_f64();
            let counters = loader.decode_counters();
            print_stream_counters(&streams, samples + batch_size);
            let samples_per_s = samples as f64 / elapsed;
            let cell = Cell {
                workers,
                batch_size,
                samples_per_s,
                mb_per_s: samples_per_s * bytes_per_sample as f64 / 1e6,
                p50_ms: quantile(&latencies, 0.5),
                p99_ms: quantile(&latencies, 0.99),
                first_batch_s,
                peak_rss_mb: peak_rss as f64 / 1e6,
                memcpy_fraction: samples_per_s * bytes_per_sample as f64 / memcpy,
                batches: latencies.len(),
                episodes_per_batch: episodes_seen as f64 / latencies.len() as f64,
                frame_buffer_mb: peak_buffer as f64 / 1e6,
            };
            let total_samples = (samples + batch_size) as f64;
            eprintln!(
                "workers {workers:>2} batch {batch_size:>4}: {:>10.0} samples/s ({:.2} frames decoded, {:.2} seeks, {:.2} converted per sample; {:.1} episodes per batch)",
                cell.samples_per_s,
                counters.frames_decoded as f64 / total_samples,
                counters.seeks as f64 / total_samples,
                counters.frames_converted as f64 / total_samples,
                cell.episodes_per_batch
            );
            cells.push(cell);
        }
    }
    let report = LoaderReport {
        machine: machine(),
        revision: git_revision(),
        dataset: roots.iter().map(|(name, _)| name.as_str()).collect::<Vec<_>>().join(" + "),
        frame_cache: !frame_caches.is_empty(),
        order: args.order,
        block_episodes: args.block_episodes,
        frame_encoding: args.frame_encoding,
        open_s,
        cache_build_s,
        bytes_per_sample,
        memcpy_gb_s: memcpy / 1e9,
        frame_copies: FrameCopies::measure(),
        cells,
    };
    write_outputs(&args.out, &report)?;
    Ok(report)
}

/// Opens the dataset at `root` streamed: from the URL, or from the folder served with the link
/// `--serve-*` asks for. Returns the stream too, for its counters.
#[cfg(feature = "stream")]
fn open_streamed(args: &LoaderArgs, root: &Path) -> Result<(Dataset, Arc<datasets::remote::RemoteFiles>)> {
    use datasets::remote::{RemoteFiles, RemoteRoot, StreamOptions};
    let url = match args.serve_latency_ms {
        Some(ms) => {
            let link = crate::file_server::Link {
                latency: std::time::Duration::from_secs_f64(ms / 1e3),
                bytes_per_s: args.serve_mbit * 1e6 / 8.0,
            };
            let server = crate::file_server::FileServer::serve(root, link)?;
            eprintln!("serving {} at {} ({ms} ms a request, {} Mb/s)", root.display(), server.url, args.serve_mbit);
            server.url
        }
        None => root.to_string_lossy().into_owned(),
    };
    let options = StreamOptions { buffer_bytes: args.streaming_buffer_mb << 20, ..StreamOptions::default() };
    let files = RemoteFiles::connect(RemoteRoot::parse(&url)?, options)?;
    let mirror = args.out.join("stream-mirror");
    let dataset = Dataset::open_streaming(Arc::clone(&files), &mirror, Default::default(), None)?;
    Ok((dataset, files))
}

/// Without the `stream` feature: says how to get it.
#[cfg(not(feature = "stream"))]
fn open_streamed(_args: &LoaderArgs, root: &Path) -> Result<(Dataset, Arc<()>)> {
    anyhow::bail!("{}: --streaming needs bench built with the `stream` feature (a default one)", root.display())
}

/// The streams' requests, bytes and retries so far, per sample delivered.
#[cfg(feature = "stream")]
fn print_stream_counters(streams: &[Arc<datasets::remote::RemoteFiles>], samples: usize) {
    for files in streams {
        let c = files.counters();
        eprintln!(
            "  stream {}: {} requests, {:.1} MB ({:.1} kB a sample), {} retries, buffer peak {:.1} MB",
            files.root().url(),
            c.requests,
            c.bytes as f64 / 1e6,
            c.bytes as f64 / 1e3 / samples.max(1) as f64,
            c.retries,
            c.peak_buffer_bytes as f64 / 1e6
        );
    }
}

#[cfg(not(feature = "stream"))]
fn print_stream_counters(_streams: &[Arc<()>], _samples: usize) {}

const HEADER: [&str; 11] = [
    "workers",
    "batch",
    "samples/s",
    "MB/s",
    "p50 ms",
    "p99 ms",
    "first batch s",
    "peak RSS MB",
    "of memcpy",
    "episodes/batch",
    "frame buffer MB",
];

/// The distinct episodes (of any dataset) the samples at `indices` come from.
fn distinct_episodes(datasets: &DatasetSet, indices: &[usize]) -> usize {
    let mut episodes: Vec<(usize, usize)> = indices
        .iter()
        .filter_map(|&i| {
            let (part, row) = datasets.locate(i)?;
            Some((part, datasets.parts()[part].episode_of(row)?.index))
        })
        .collect();
    episodes.sort_unstable();
    episodes.dedup();
    episodes.len()
}

fn rows(report: &LoaderReport) -> Vec<Vec<String>> {
    report
        .cells
        .iter()
        .map(|c| {
            vec![
                c.workers.to_string(),
                c.batch_size.to_string(),
                format!("{:.0}", c.samples_per_s),
                format!("{:.1}", c.mb_per_s),
                format!("{:.2}", c.p50_ms),
                format!("{:.2}", c.p99_ms),
                format!("{:.3}", c.first_batch_s),
                format!("{:.0}", c.peak_rss_mb),
                format!("{:.1}%", 100.0 * c.memcpy_fraction),
                format!("{:.1}", c.episodes_per_batch),
                format!("{:.0}", c.frame_buffer_mb),
            ]
        })
        .collect()
}

/// The sweep as an aligned table, with its context line.
pub fn render(report: &LoaderReport) -> String {
    format!(
        "{}\n{} ({}, {} order, {} frames), open {:.3}s, {} bytes/sample, memcpy {:.1} GB/s \
         (frame-sized copies on 1 / 2 threads {:.1} / {:.1}, past the caches {:.1} / {:.1}), {}\n{}",
        report.machine,
        report.dataset,
        match (report.frame_cache, report.cache_build_s) {
            (true, Some(s)) => format!("automatic frame cache, built in {s:.2}s"),
            (true, None) => "frame cache".to_string(),
            (false, _) => "video".to_string(),
        },
        report.order_label(),
        report.frame_encoding,
        report.open_s,
        report.bytes_per_sample,
        report.memcpy_gb_s,
        report.frame_copies.copy_from_slice_gb_s[0],
        report.frame_copies.copy_from_slice_gb_s[1],
        report.frame_copies.past_caches_gb_s[0],
        report.frame_copies.past_caches_gb_s[1],
        report.revision,
        table(&HEADER, &rows(report))
    )
}

/// The sweep as a Markdown table, for `RESULTS.md`.
pub fn markdown(report: &LoaderReport) -> String {
    markdown_table(&HEADER, &rows(report))
}

fn write_outputs(dir: &Path, report: &LoaderReport) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let stem = match (report.frame_cache, report.order) {
        (true, _) => "loader-frame-cache",
        (false, SampleOrder::Blocks) => "loader-video-blocks",
        (false, SampleOrder::Lerobot) => "loader-video",
    };
    let stem = match report.frame_encoding {
        FrameEncoding::Rgb => stem.to_string(),
        other => format!("{stem}-{other}"),
    };
    write_json(&dir.join(format!("{stem}.json")), report)?;
    write_csv(&dir.join(format!("{stem}.csv")), &HEADER, &rows(report))?;
    let mut batch_sizes: Vec<usize> = report.cells.iter().map(|c| c.batch_size).collect();
    batch_sizes.dedup();
    let series: Vec<Series> = batch_sizes
        .iter()
        .map(|&b| Series {
            label: format!("batch {b}"),
            points: report
                .cells
                .iter()
                .filter(|c| c.batch_size == b)
                .map(|c| (c.workers as f64, c.samples_per_s))
                .collect(),
        })
        .collect();
    let title = format!("loader samples/s ({})", if report.frame_cache { "frame cache" } else { "video" });
    line_plot(&dir.join(format!("{stem}.svg")), &title, "workers", "samples/s", &series)
}
