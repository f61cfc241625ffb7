//! The `datasets` subcommands: argument handling and printing around the library.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{ArgAction, Args, ValueEnum};
use datasets::DatasetRequest;
use datasets::synth::{CameraSpec, CameraStorage, SynthConfig, write_dataset};
use datasets::video::VideoCodec;
use datasets::{
    CodebaseVersion, CollatedBatch, Dataset, DecoderCache, DeltaTimestamps, FrameFormat, OpenOptions, WindowSpec,
    diffusion_delta_timestamps,
};

/// Which dataset: a folder, or a Hub id found or downloaded as LeRobot finds it.
#[derive(Debug, Args)]
pub struct DatasetArgs {
    /// The dataset folder (with --dataset.repo_id: where it is, or is to be downloaded).
    #[arg(long, alias = "dataset.root")]
    root: Option<PathBuf>,
    /// The dataset's Hub id, OWNER/NAME: looked for under HF_LEROBOT_HOME and LeRobot's Hub
    /// cache, downloaded from the Hub if missing.
    #[arg(long = "dataset.repo_id")]
    repo_id: Option<String>,
    /// The Hub revision: a branch, tag or commit (default: LeRobot's codebase version, v3.0).
    #[arg(long = "dataset.revision", requires = "repo_id")]
    revision: Option<String>,
    /// Whether a missing dataset may be downloaded (HF_HUB_OFFLINE=1 forbids it too).
    #[arg(long = "dataset.download", default_value_t = true, action = ArgAction::Set)]
    download: bool,
}

impl DatasetArgs {
    /// The dataset's folder: `--root`, or where `--dataset.repo_id` was found or downloaded to.
    pub fn resolve(&self) -> Result<PathBuf> {
        let Some(repo_id) = &self.repo_id else {
            return self.root.clone().context("a dataset is needed: --root DIR or --dataset.repo_id OWNER/NAME");
        };
        let roots: Vec<PathBuf> = self.root.iter().cloned().collect();
        let requests = DatasetRequest::for_ids(repo_id, &roots, self.revision.as_deref(), self.download)?;
        let [request] = requests.as_slice() else {
            anyhow::bail!("--dataset.repo_id {repo_id:?}: this command reads one dataset");
        };
        Ok(datasets::hub::resolve_on_terminal(request)?.root)
    }
}

/// Prints what a dataset holds.
pub fn info(root: &Path) -> Result<ExitCode> {
    let dataset = Dataset::open(root)?;
    let info = dataset.info();
    let (files, bytes) = folder_size(root)?;
    println!("dataset   {}", root.display());
    println!("version   {} (robot_type {})", info.version, info.robot_type.as_deref().unwrap_or("none"));
    println!("fps       {}", info.fps);
    println!("episodes  {}    frames {}    tasks {}", dataset.episodes().len(), dataset.len(), dataset.tasks().len());
    println!("size      {:.1} MB in {files} files", bytes as f64 / 1e6);
    println!("features:");
    println!("  {:<36} {:<8} {:<14} names", "key", "dtype", "shape");
    for f in &info.features {
        let shape = f.shape.iter().map(ToString::to_string).collect::<Vec<_>>().join("x");
        let names = if f.names.is_null() { String::new() } else { f.names.to_string() };
        println!("  {:<36} {:<8} {:<14} {}", f.key, f.dtype.as_str(), shape, truncate(&names, 40));
    }
    let cameras = info.camera_keys();
    if !cameras.is_empty() {
        println!("cameras:");
        for key in cameras {
            let f = info.feature(key.as_str()).expect("a feature");
            let shape = f.frame_shape().expect("a camera");
            let codec = f
                .video_info()
                .and_then(|i| i.get("video.codec"))
                .and_then(|c| c.as_str())
                .unwrap_or(if f.is_video() { "?" } else { "png/jpeg in parquet" });
            let mut distinct: Vec<&Path> = Vec::new();
            if let Some(c) = info.video_keys().iter().position(|k| *k == key) {
                for e in dataset.episodes() {
                    if distinct.last() != Some(&e.videos[c].file.as_path()) {
                        distinct.push(&e.videos[c].file);
                    }
                }
            }
            let files = if distinct.is_empty() { String::new() } else { format!(", {} file(s)", distinct.len()) };
            println!("  {key}: {}x{} {codec}{files}", shape.height, shape.width);
        }
    }
    println!("tasks:");
    for (i, t) in dataset.tasks().iter().enumerate().take(10) {
        println!("  {i:>4}  {t}");
    }
    if dataset.tasks().len() > 10 {
        println!("  ... {} more", dataset.tasks().len() - 10);
    }
    Ok(ExitCode::SUCCESS)
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n { s.to_string() } else { format!("{}...", s.chars().take(n - 3).collect::<String>()) }
}

fn folder_size(root: &Path) -> Result<(usize, u64)> {
    let mut stack = vec![root.to_path_buf()];
    let (mut files, mut bytes) = (0, 0);
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
            let entry = entry?;
            // Followed: a Hub snapshot's files are links to its blobs.
            let meta = std::fs::metadata(entry.path())?;
            if meta.is_dir() {
                // A download's blobs and bookkeeping (`.cache/`) are not the dataset's files.
                if entry.file_name() != ".cache" {
                    stack.push(entry.path());
                }
            } else {
                files += 1;
                bytes += meta.len();
            }
        }
    }
    Ok((files, bytes))
}

/// Validates a dataset and prints every problem.
pub fn validate(root: &Path, tolerance_s: f64) -> Result<ExitCode> {
    let started = Instant::now();
    let report = datasets::validate::validate(root, tolerance_s);
    for problem in &report.problems {
        println!("{problem}");
    }
    println!(
        "checked {} data files ({} rows) and {} video files ({} frames) in {:.1}s: {}",
        report.data_files,
        report.rows,
        report.video_files,
        report.video_frames,
        started.elapsed().as_secs_f64(),
        if report.is_ok() { "no problems".to_string() } else { format!("{} problem(s)", report.problems.len()) }
    );
    Ok(if report.is_ok() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Recomputes statistics and compares (or writes) them.
pub fn stats(root: &Path, write: bool) -> Result<ExitCode> {
    let dataset = Dataset::open(root)?;
    let (per_episode, computed) = datasets::stats::compute_stats(&dataset)?;
    let differences = datasets::stats::compare_stats(&computed, dataset.stats());
    println!("{:<44} {:>12} {:>12}", "feature.stat", "max |diff|", "max rel");
    for d in &differences {
        println!("{:<44} {:>12.3e} {:>12.3e}", d.name, d.max_abs, d.max_rel);
    }
    if dataset.stats().is_empty() {
        println!("(the dataset stores no statistics)");
    }
    if write {
        match dataset.info().version {
            CodebaseVersion::V2_1 => {
                let path = root.join(datasets::stats::EPISODES_STATS_JSONL);
                let text: String = per_episode
                    .iter()
                    .enumerate()
                    .map(|(i, s)| {
                        serde_json::json!({"episode_index": i, "stats": datasets::stats::stats_to_json(s)}).to_string()
                            + "\n"
                    })
                    .collect();
                write_atomically(&path, text.as_bytes())?;
                println!("wrote {}", path.display());
            }
            _ => {
                let path = root.join(datasets::stats::STATS_JSON);
                let text = serde_json::to_string_pretty(&datasets::stats::stats_to_json(&computed))? + "\n";
                write_atomically(&path, text.as_bytes())?;
                println!("wrote {}", path.display());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
    Ok(())
}

/// Writes the decoded-frame cache.
pub fn cache(root: &Path, out: &Path, resize: Option<&str>, encoding: datasets::FrameEncoding) -> Result<ExitCode> {
    let dataset = Dataset::open(root)?;
    let resize = resize
        .map(|r| -> Result<(usize, usize)> {
            let (h, w) = r.split_once('x').with_context(|| format!("--resize {r:?}: expected HxW"))?;
            Ok((h.parse()?, w.parse()?))
        })
        .transpose()?;
    let cameras = dataset.info().camera_keys().len();
    let bar = indicatif::ProgressBar::new((dataset.len() * cameras) as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {bar:40} {pos}/{len} frames  {per_sec}  eta {eta}")
            .expect("a valid template"),
    );
    let started = Instant::now();
    let format = datasets::frame_cache::CacheFormat { resize, encoding };
    let files = datasets::frame_cache::write_frame_cache(&dataset, out, &format, &|done| bar.set_position(done))?;
    bar.finish_and_clear();
    let bytes: u64 = files.iter().map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0)).sum();
    println!(
        "cached {} frames of {cameras} camera(s) as {encoding} into {} ({:.1} MB) in {:.1}s",
        dataset.len() * cameras,
        out.display(),
        bytes as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

/// Prints the automatic frame caches: folder, dataset, size, last use, state.
pub fn list_caches() -> Result<ExitCode> {
    let root = datasets::auto_cache::default_root(|name| std::env::var_os(name));
    let entries = datasets::frame_cache::store::entries(&root)?;
    if entries.is_empty() {
        println!("no automatic frame caches in {}", root.display());
        return Ok(ExitCode::SUCCESS);
    }
    let total: u64 = entries.iter().map(|e| e.bytes).sum();
    println!(
        "{} automatic frame cache(s) in {} ({:.2} GB), least recently used first:",
        entries.len(),
        root.display(),
        total as f64 / 1e9
    );
    for entry in &entries {
        let name = entry.dir.file_name().unwrap_or_default().to_string_lossy();
        let dataset = entry.record.as_ref().map_or("(not complete)".into(), |r| r.dataset.display().to_string());
        let age = entry.last_used.elapsed().map_or("just now".into(), |d| format!("{} ago", human_age(d)));
        println!(
            "  {name}  {:>8.2} GB  {:<9}  used {age:<12}  {dataset}",
            entry.bytes as f64 / 1e9,
            entry.state.to_string()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Removes the automatic frame caches no process uses, saying what each freed.
pub fn clear_caches() -> Result<ExitCode> {
    let root = datasets::auto_cache::default_root(|name| std::env::var_os(name));
    let removed = datasets::frame_cache::store::clear(&root)?;
    for removal in &removed {
        println!("{removal}");
    }
    let freed: u64 = removed.iter().map(|r| r.bytes).sum();
    let left = datasets::frame_cache::store::entries(&root)?;
    println!("freed {:.2} GB in {}; {} cache(s) in use stay", freed as f64 / 1e9, root.display(), left.len());
    Ok(ExitCode::SUCCESS)
}

/// A duration as a person reads it: seconds, minutes, hours or days.
fn human_age(d: Duration) -> String {
    match d.as_secs() {
        s if s < 120 => format!("{s} s"),
        s if s < 7200 => format!("{} min", s / 60),
        s if s < 172_800 => format!("{} h", s / 3600),
        s => format!("{} days", s / 86_400),
    }
}

/// Dataset presets of `synth`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum SynthPreset {
    /// 4 short episodes, one 96x96 camera: the tests' dataset.
    Tiny,
    /// v3.0, one 96x96 AV1 camera, fps 10, 200 episodes of ~125 frames.
    PushtLike,
    /// v3.0, two 240x320 AV1 cameras, fps 50, 20 episodes of ~400 frames.
    AlohaLike,
    /// v3.0, four 480x640 AV1 cameras, fps 50, 50 episodes of 400 frames (ALOHA at real size;
    /// `--cameras` for three).
    AlohaReal,
    /// v3.0, three 180x320 AV1 cameras, fps 15, 2,000 episodes of 60-180 frames in files of 100
    /// episodes (DROID's shape, for streaming; `--episodes` for fewer).
    DroidLike,
}

/// How cameras are stored.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum CodecArg {
    /// AV1 (libsvtav1), as LeRobot.
    Av1,
    /// H.264 (libx264).
    H264,
    /// PNG images inside parquet.
    Images,
}

/// Arguments of `synth`.
#[derive(Debug, Args)]
pub struct SynthArgs {
    /// The folder to create (must not exist or be empty).
    #[arg(long)]
    out: PathBuf,
    /// Start from a preset; the other flags override it.
    #[arg(long, value_enum, default_value = "tiny")]
    preset: SynthPreset,
    /// Layout version: v3.0 or v2.1.
    #[arg(long)]
    version: Option<String>,
    /// Number of episodes.
    #[arg(long)]
    episodes: Option<usize>,
    /// Episode length: N, or MIN..MAX (inclusive).
    #[arg(long)]
    length: Option<String>,
    /// Frames per second.
    #[arg(long)]
    fps: Option<u32>,
    /// Cameras as HxW or KEY=HxW, comma-separated (e.g. `observation.images.top=240x320`);
    /// `none` for no camera.
    #[arg(long, value_delimiter = ',')]
    cameras: Option<Vec<String>>,
    /// How cameras are stored.
    #[arg(long, value_enum)]
    codec: Option<CodecArg>,
    /// Size of observation.state.
    #[arg(long)]
    state_dim: Option<usize>,
    /// Size of action.
    #[arg(long)]
    action_dim: Option<usize>,
    /// v3.0: start new data and video files every N episodes.
    #[arg(long)]
    episodes_per_file: Option<usize>,
    /// Random seed.
    #[arg(long)]
    seed: Option<u64>,
}

/// Writes a synthetic dataset.
pub fn synth(args: &SynthArgs) -> Result<ExitCode> {
    let mut cfg = match args.preset {
        SynthPreset::Tiny => SynthConfig::default(),
        SynthPreset::PushtLike => SynthConfig::pusht_like(),
        SynthPreset::AlohaLike => SynthConfig::aloha_like(),
        SynthPreset::AlohaReal => SynthConfig::aloha_real(),
        SynthPreset::DroidLike => SynthConfig::droid_like(),
    };
    if let Some(v) = &args.version {
        cfg.version = match CodebaseVersion::parse(v) {
            Some(v @ (CodebaseVersion::V3_0 | CodebaseVersion::V2_1)) => v,
            _ => bail!("--version must be v3.0 or v2.1, not {v:?}"),
        };
    }
    if let Some(n) = args.episodes {
        cfg.episodes = n;
    }
    if let Some(length) = &args.length {
        let (lo, hi) = match length.split_once("..") {
            Some((a, b)) => (a.parse()?, b.trim_start_matches('=').parse()?),
            None => (length.parse()?, length.parse()?),
        };
        (cfg.min_length, cfg.max_length) = (lo, hi);
    }
    if let Some(fps) = args.fps {
        cfg.fps = fps;
    }
    if let Some(cameras) = &args.cameras {
        cfg.cameras = parse_cameras(cameras)?;
    }
    if let Some(codec) = args.codec {
        cfg.storage = match codec {
            CodecArg::Av1 => CameraStorage::Video(VideoCodec::Av1),
            CodecArg::H264 => CameraStorage::Video(VideoCodec::H264),
            CodecArg::Images => CameraStorage::Images,
        };
    }
    if let Some(d) = args.state_dim {
        cfg.state_dim = d;
    }
    if let Some(d) = args.action_dim {
        cfg.action_dim = d;
    }
    if args.episodes_per_file.is_some() {
        cfg.episodes_per_file = args.episodes_per_file;
    }
    if let Some(s) = args.seed {
        cfg.seed = s;
    }
    let started = Instant::now();
    let summary = write_dataset(&args.out, &cfg)?;
    println!(
        "wrote {} ({} episodes, {} frames) in {:.1}s",
        summary.root.display(),
        summary.lengths.len(),
        summary.frames,
        started.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

fn parse_cameras(specs: &[String]) -> Result<Vec<CameraSpec>> {
    if specs.len() == 1 && specs[0] == "none" {
        return Ok(Vec::new());
    }
    let mut cameras = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let (key, size) = match spec.split_once('=') {
            Some((k, s)) => (k.to_string(), s),
            None if specs.len() == 1 => ("observation.image".to_string(), spec.as_str()),
            None => (format!("observation.images.cam{i}"), spec.as_str()),
        };
        let (h, w) = size.split_once('x').with_context(|| format!("camera {spec:?}: expected HxW"))?;
        cameras.push(CameraSpec { key, height: h.parse()?, width: w.parse()? });
    }
    Ok(cameras)
}

/// Arguments of `sample`.
pub struct SampleArgs {
    /// The dataset folder.
    pub root: PathBuf,
    /// Frame indices.
    pub indices: Vec<usize>,
    /// `(n_obs_steps, horizon)` of the diffusion preset.
    pub diffusion: Option<(usize, usize)>,
    /// Explicit `delta_timestamps` JSON.
    pub delta_timestamps: Option<String>,
    /// Raw uint8 frames.
    pub uint8: bool,
    /// Timestamp tolerance.
    pub tolerance_s: f64,
    /// Output file.
    pub out: PathBuf,
}

/// Writes the collated samples of some indices.
pub fn sample(args: &SampleArgs) -> Result<ExitCode> {
    let dataset = Dataset::open_with(&args.root, OpenOptions { tolerance_s: args.tolerance_s })?;
    let mut deltas: DeltaTimestamps = match args.diffusion {
        Some((n_obs, horizon)) => diffusion_delta_timestamps(dataset.info(), n_obs, horizon),
        None => DeltaTimestamps::new(),
    };
    if let Some(json) = &args.delta_timestamps {
        let explicit: BTreeMap<String, Vec<f64>> =
            serde_json::from_str(json).context("--delta-timestamps must be a JSON object of lists of seconds")?;
        deltas.extend(explicit);
    }
    let spec = WindowSpec::from_delta_timestamps(&deltas, dataset.info(), args.tolerance_s)?;
    let format = if args.uint8 { FrameFormat::Uint8 } else { FrameFormat::Float };
    let mut decoders = DecoderCache::default();
    let started = Instant::now();
    let samples = args
        .indices
        .iter()
        .map(|&i| dataset.get(i, &spec, &mut decoders, format))
        .collect::<datasets::Result<Vec<_>>>()?;
    let elapsed = started.elapsed().as_secs_f64();
    let batch = CollatedBatch::collate(&samples)?;
    let mut metadata = BTreeMap::new();
    metadata.insert("index".to_string(), serde_json::to_string(&args.indices)?);
    metadata.insert("delta_timestamps".to_string(), serde_json::to_string(&deltas)?);
    metadata.insert("codebase_version".to_string(), dataset.info().version.to_string());
    batch.write_safetensors(&args.out, &metadata)?;
    println!(
        "wrote {} samples to {} ({:.0} samples/s on one thread)",
        samples.len(),
        args.out.display(),
        samples.len() as f64 / elapsed.max(1e-9)
    );
    Ok(ExitCode::SUCCESS)
}
