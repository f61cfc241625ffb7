//! `bench regress`: CI's throughput regression check. On a small synthetic dataset written for
//! the run, it measures in one process ratios that do not depend on how fast the machine is —
//! loader bytes/s over memcpy bandwidth (video in LeRobot's order and in the blocks order, and
//! the frame cache, which the default automatic cache reads through), a fixed reference matrix
//! product's time over the tiny policy's training step time, on the same backend, and the
//! optimiser's fused update's bytes/s over memcpy bandwidth — each the median of several
//! repeats, and fails when one falls more than the tolerance below its baseline
//! (`bench/baseline.json`).
//!
//! The ratios do depend on the kind of CPU (the video loader's is twice as high on our AMD EPYC
//! machines as on our Intel Xeon ones: decoding and copying do not scale alike), so the file
//! holds one baseline per CPU model, and a run is compared with its own model's. A model without
//! one is measured and reported, not judged. `--update` writes the current model's baseline: only
//! on purpose, in a commit of its own that says why.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use burn::backend::Flex;
use burn::prelude::*;
use clap::Args;
use datasets::synth::{SynthConfig, write_dataset};
use datasets::{Dataset, WindowSpec, diffusion_delta_timestamps};
use loader::{Loader, SampleOrder, SampleOrdering};
use serde::{Deserialize, Serialize};

use crate::report::table;
use crate::sys::{best_seconds_after_warm_up, cpu_model, git_revision, machine, memcpy_bandwidth};
use crate::train_bench::{self, TrainStepArgs};

/// Arguments of `bench regress`.
#[derive(Debug, Clone, Args)]
pub struct RegressArgs {
    /// The baseline file.
    #[arg(long, default_value = "bench/baseline.json")]
    pub baseline: PathBuf,
    /// Write the measured ratios as the new baseline instead of checking.
    #[arg(long)]
    pub update: bool,
    /// Repeats of each measurement (the median is kept).
    #[arg(long, default_value_t = 5)]
    pub repeats: usize,
    /// Where the synthetic dataset and its frame cache are written.
    #[arg(long, default_value = "target/bench/regress")]
    pub work: PathBuf,
}

/// One ratio: measured values and their median.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Ratio {
    /// Its name.
    pub name: String,
    /// What it divides.
    pub meaning: String,
    /// The median.
    pub median: f64,
    /// Every repeat.
    pub repeats: Vec<f64>,
}

/// `bench/baseline.json`: the tolerance and one baseline per CPU model.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BaselineFile {
    /// A ratio may fall this fraction below its baseline before the check fails.
    pub tolerance: f64,
    /// The baselines, one per CPU model.
    pub baselines: Vec<Baseline>,
}

/// The ratios measured on one CPU model.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Baseline {
    /// The CPU model (`/proc/cpuinfo`'s model name) they hold for.
    pub cpu: String,
    /// The machine they were measured on (cores, memory).
    pub machine: String,
    /// The revision they were measured at.
    pub revision: String,
    /// The ratios, by name.
    pub ratios: Vec<Ratio>,
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

/// The dataset (written once per work folder) and its frame cache.
fn prepare(work: &Path) -> Result<(PathBuf, PathBuf)> {
    let root = work.join("pusht");
    let cache = work.join("pusht-frames");
    if !root.join("meta/info.json").exists() {
        if root.exists() {
            std::fs::remove_dir_all(&root)?;
        }
        eprintln!("writing a synthetic dataset to {}", root.display());
        write_dataset(&root, &SynthConfig { episodes: 6, min_length: 60, max_length: 80, ..SynthConfig::default() })?;
    }
    let dataset = Dataset::open(&root)?;
    if datasets::frame_cache::FrameCache::open(&cache, &dataset).is_err() {
        if cache.exists() {
            std::fs::remove_dir_all(&cache)?;
        }
        datasets::frame_cache::write_frame_cache(&dataset, &cache, &Default::default(), &|_| {})?;
    }
    Ok((root, cache))
}

/// Episodes per window of the blocks order measured: the dataset's 6 episodes make 3 windows,
/// more than the 2 its buffer holds, so every epoch decodes again most of what it reads.
const REGRESS_BLOCK_EPISODES: usize = 2;

/// Windows a loader measurement is cut into; the fastest counts.
const LOADER_WINDOWS: u32 = 5;

/// Loader samples/s × bytes per sample over memcpy bytes/s, over `seconds` of batches cut into
/// [`LOADER_WINDOWS`] windows, the fastest of which counts: best-of, as the memcpy bandwidth
/// and the step timings are, so that a neighbour stealing the CPU for a moment does not read as
/// a regression (one window's mean over the whole second spread 1.2–2.0 between runs of one
/// binary on our Xeon machines).
fn loader_fraction(root: &Path, cache: Option<&Path>, order: SampleOrder, seconds: f64) -> Result<f64> {
    let memcpy = memcpy_bandwidth(5);
    let dataset = Arc::new(Dataset::open(root)?);
    let deltas = diffusion_delta_timestamps(dataset.info(), 2, 16);
    let windows = WindowSpec::from_delta_timestamps(&deltas, dataset.info(), dataset.options().tolerance_s)?;
    let mut builder = Loader::builder(dataset)
        .batch_size(32)
        .num_workers(2)
        .prefetch(4)
        .drop_frames(0, 7)
        .windows(windows)
        .ordering(SampleOrdering { order, block_episodes: REGRESS_BLOCK_EPISODES });
    if let Some(cache) = cache {
        builder = builder.frame_cache(cache);
    }
    let mut loader = builder.build()?;
    let bytes = loader.layout().bytes_per_sample() as f64;
    loader.next().context("the loader gave no batch")??;
    let window_s = seconds / f64::from(LOADER_WINDOWS);
    let mut best = 0f64;
    for _ in 0..LOADER_WINDOWS {
        let started = Instant::now();
        let mut samples = 0;
        while started.elapsed().as_secs_f64() < window_s {
            samples += loader.next().context("the loader ended")??.len();
        }
        best = best.max(samples as f64 / started.elapsed().as_secs_f64());
    }
    Ok(best * bytes / memcpy)
}

/// Milliseconds of a 1024 × 1024 × 1024 f32 matrix product on the CPU backend (best of 5).
fn reference_matmul_ms() -> f64 {
    let device = Default::default();
    let a = Tensor::<Flex, 2>::ones([1024, 1024], &device);
    let b = Tensor::<Flex, 2>::ones([1024, 1024], &device);
    1e3 * best_seconds_after_warm_up(5, || {
        let _ = a.clone().matmul(b.clone()).into_data();
    })
}

/// The optimiser's fused update (Adam with decay and an EMA over 16 M weights, the CPU's
/// in-place pass) in bytes/s over memcpy bytes/s: it reads the gradient, weight, both moments
/// and the average and writes back the last four, 36 bytes a weight. Best of 5.
fn fused_update_fraction() -> f64 {
    use burn::tensor::TensorPrimitive;
    use kernels::{AdamStep, FlatBuffers, OptimiserKernels};
    const N: usize = 1 << 24;
    let memcpy = memcpy_bandwidth(5);
    let device = Default::default();
    let mut flat = FlatBuffers::<Flex>::zeros(N, true, &device);
    flat.grads = Tensor::<Flex, 1>::ones([N], &device).into_primitive().tensor();
    let scale = Tensor::<Flex, 1>::ones([1], &device).into_primitive().tensor();
    let mut weights = Tensor::<Flex, 1>::ones([N], &device).into_primitive().tensor();
    let mut best = f64::INFINITY;
    for time in 1..=6 {
        let step = AdamStep {
            lr: 1e-4,
            beta_1: 0.95,
            beta_2: 0.999,
            epsilon: 1e-8,
            weight_decay: 1e-6,
            time,
            ema_weight: Some(0.5),
        };
        let started = Instant::now();
        weights = Flex::adam_update(weights, &mut flat, 0, &scale, &step);
        // The first call warms the pages up; the rest are timed.
        if time > 1 {
            best = best.min(started.elapsed().as_secs_f64());
        }
    }
    let _ = Tensor::<Flex, 1>::from_primitive(TensorPrimitive::Float(weights));
    (36 * N) as f64 / best / memcpy
}

/// Measures every ratio `repeats` times.
pub fn measure(root: &Path, cache: &Path, repeats: usize) -> Result<Vec<Ratio>> {
    let mut video = Vec::new();
    let mut blocks = Vec::new();
    let mut cached = Vec::new();
    let mut train = Vec::new();
    let mut update = Vec::new();
    let step_args = TrainStepArgs {
        dataset: crate::dataset_source::DatasetSource::folders(vec![root.to_path_buf()]),
        weights: None,
        frame_cache: Some(cache.to_path_buf()),
        frames_on_device: false,
        preset: trainer::Preset::Classic,
        tiny: true,
        use_group_norm: None,
        batch: vec![8],
        warmup: 1,
        steps: 3,
        loop_steps: 0,
        num_workers: 1,
        device: kernels::DeviceKind::Cpu,
        count_launches: false,
        profiler_range: false,
        max_launches: None,
        precision: trainer::Precision::F32,
    };
    for i in 0..repeats {
        video.push(loader_fraction(root, None, SampleOrder::Lerobot, 1.5)?);
        blocks.push(loader_fraction(root, None, SampleOrder::Blocks, 1.5)?);
        cached.push(loader_fraction(root, Some(cache), SampleOrder::Lerobot, 1.0)?);
        // Best-of timings on both sides: the least disturbed by whatever else the machine runs.
        let reference = reference_matmul_ms();
        let step = train_bench::run(&step_args)?[0].step_ms_min;
        train.push(reference.min(reference_matmul_ms()) / step);
        update.push(fused_update_fraction());
        eprintln!(
            "repeat {}/{repeats}: loader video {:.4}, blocks {:.4}, frame cache {:.4}, train {:.4}, update {:.4}",
            i + 1,
            video[i],
            blocks[i],
            cached[i],
            train[i],
            update[i]
        );
    }
    let ratio = |name: &str, meaning: &str, repeats: Vec<f64>| Ratio {
        name: name.into(),
        meaning: meaning.into(),
        median: median(&repeats),
        repeats,
    };
    Ok(vec![
        ratio("loader_video", "best window's loader bytes/s (video, 2 workers, batch 32) / memcpy bytes/s", video),
        ratio(
            "loader_video_blocks",
            "best window's loader bytes/s (video in the blocks order of 2 episodes, 2 workers, batch 32) / memcpy bytes/s",
            blocks,
        ),
        ratio(
            "loader_frame_cache",
            "best window's loader bytes/s (frame cache, 2 workers, batch 32) / memcpy bytes/s",
            cached,
        ),
        ratio("train_step_tiny", "best 1024³ matmul ms / best tiny policy train step ms (batch 8, Flex)", train),
        ratio("fused_update", "fused Adam + EMA update bytes/s (16 M weights, Flex) / memcpy bytes/s", update),
    ])
}

/// Runs the check (or the update). `Ok(false)` when a ratio regressed.
pub fn run(args: &RegressArgs) -> Result<bool> {
    let (root, cache) = prepare(&args.work)?;
    let measured = measure(&root, &cache, args.repeats.max(1))?;
    let cpu = cpu_model();
    if args.update {
        let mut file = if args.baseline.exists() {
            read_baselines(&args.baseline)?
        } else {
            BaselineFile { tolerance: 0.3, baselines: Vec::new() }
        };
        let entry =
            Baseline { cpu: cpu.clone(), machine: machine(), revision: git_revision(), ratios: measured.clone() };
        match file.baselines.iter_mut().find(|b| b.cpu == cpu) {
            Some(existing) => *existing = entry,
            None => file.baselines.push(entry),
        }
        let text = serde_json::to_string_pretty(&file)? + "\n";
        std::fs::write(&args.baseline, text).with_context(|| format!("writing {}", args.baseline.display()))?;
        println!("{}", render(&measured, None, file.tolerance));
        println!("wrote the {cpu} baseline into {}", args.baseline.display());
        return Ok(true);
    }
    let file = read_baselines(&args.baseline)?;
    let Some(baseline) = file.baselines.iter().find(|b| b.cpu == cpu) else {
        println!("{}", render(&measured, None, file.tolerance));
        let known: Vec<&str> = file.baselines.iter().map(|b| b.cpu.as_str()).collect();
        println!(
            "no baseline for CPU {cpu:?} in {} (it has {known:?}): measured, not checked; \
             `bench regress --update` on this kind of machine adds one",
            args.baseline.display()
        );
        return Ok(true);
    };
    println!("{}", render(&measured, Some(baseline), file.tolerance));
    Ok(regressions(&measured, baseline, file.tolerance).is_empty())
}

fn read_baselines(path: &Path) -> Result<BaselineFile> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// The names of the ratios more than `tolerance` below their baseline.
pub fn regressions(measured: &[Ratio], baseline: &Baseline, tolerance: f64) -> Vec<String> {
    measured
        .iter()
        .filter(|m| {
            baseline.ratios.iter().find(|b| b.name == m.name).is_some_and(|b| m.median < b.median * (1.0 - tolerance))
        })
        .map(|m| m.name.clone())
        .collect()
}

/// The table printed either way.
pub fn render(measured: &[Ratio], baseline: Option<&Baseline>, tolerance: f64) -> String {
    let failing = baseline.map(|b| regressions(measured, b, tolerance)).unwrap_or_default();
    let rows: Vec<Vec<String>> = measured
        .iter()
        .map(|m| {
            let min = m.repeats.iter().copied().fold(f64::INFINITY, f64::min);
            let max = m.repeats.iter().copied().fold(0.0, f64::max);
            let base = baseline.and_then(|b| b.ratios.iter().find(|r| r.name == m.name));
            vec![
                m.name.clone(),
                format!("{:.4}", m.median),
                format!("{min:.4} .. {max:.4}"),
                base.map_or("-".into(), |b| format!("{:.4}", b.median)),
                base.map_or("-".into(), |b| format!("{:+.1}%", 100.0 * (m.median / b.median - 1.0))),
                match baseline {
                    None => "measured".into(),
                    Some(_) if failing.contains(&m.name) => "REGRESSED".into(),
                    Some(_) => "ok".into(),
                },
            ]
        })
        .collect();
    let tolerance = baseline.map_or(String::new(), |_| format!(" (fails below baseline − {:.0}%)", 100.0 * tolerance));
    format!(
        "{}{tolerance}\n{}",
        machine(),
        table(&["ratio", "median", "repeats", "baseline", "change", "status"], &rows)
    )
}
