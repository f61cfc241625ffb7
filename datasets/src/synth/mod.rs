//! A synthetic LeRobot dataset writer (v3.0 or v2.1), used by every test and benchmark of the
//! workspace: N episodes of a PushT-like scene, any number of cameras stored as AV1 or H.264
//! MP4s (as LeRobot writes them) or as PNGs inside parquet, vector state and action, tasks, and
//! statistics computed as LeRobot computes them. Deterministic for a given seed.

mod scene;
mod tables;

use std::path::{Path, PathBuf};

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde_json::{Map, Value, json};

use crate::error::{Error, Result};
use crate::meta::features::{FeatureKey, FrameShape};
use crate::meta::version::CodebaseVersion;
use crate::stats::{Stats, aggregate, stats_to_json};
use crate::stats::{StatsMethod, camera_stats, downsample, numeric_stats, sample_indices};
use crate::table::image::encode_png;
use crate::video::{CRF, GOP, VideoCodec, VideoWriter};

pub use scene::{Trajectory, WORLD, render, simulate};

/// One camera of a synthetic dataset.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CameraSpec {
    /// Its feature key (e.g. `observation.image`, `observation.images.top`).
    pub key: String,
    /// Frame height in pixels.
    pub height: usize,
    /// Frame width in pixels.
    pub width: usize,
}

impl CameraSpec {
    /// Its frame shape (RGB).
    pub fn shape(&self) -> FrameShape {
        FrameShape { channels: 3, height: self.height, width: self.width }
    }
}

/// How the cameras are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CameraStorage {
    /// MP4 files with this codec.
    Video(VideoCodec),
    /// PNG images inside the parquet data files (`dtype: image`).
    Images,
}

/// What to synthesise.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SynthConfig {
    /// The layout: v3.0 or v2.1. Default v3.0.
    pub version: CodebaseVersion,
    /// Number of episodes. Default 4.
    pub episodes: usize,
    /// Episode lengths are drawn uniformly from this inclusive range. Default 30..=40.
    pub min_length: usize,
    /// See `min_length`.
    pub max_length: usize,
    /// Frames per second. Default 10.
    pub fps: u32,
    /// The cameras. Default one 96×96 `observation.image`.
    pub cameras: Vec<CameraSpec>,
    /// How cameras are stored. Default AV1 video.
    pub storage: CameraStorage,
    /// Size of `observation.state`. Default 2.
    pub state_dim: usize,
    /// Size of `action`. Default 2.
    pub action_dim: usize,
    /// Task strings; episode `e` performs task `e % len`. Default two PushT tasks.
    pub tasks: Vec<String>,
    /// Add `next.reward` (float32 scalar) and `next.done` (bool), as PushT has. Default true.
    pub reward_and_done: bool,
    /// v3.0: start a new data file and new video files after this many episodes (LeRobot rolls
    /// over by size; counting makes multi-file datasets small enough for tests). Default: one
    /// file.
    pub episodes_per_file: Option<usize>,
    /// `chunks_size`. Default 1000.
    pub chunks_size: usize,
    /// `robot_type`. Default "synthetic".
    pub robot_type: String,
    /// The seed of everything random. Default 0.
    pub seed: u64,
}

impl Default for SynthConfig {
    fn default() -> Self {
        Self {
            version: CodebaseVersion::V3_0,
            episodes: 4,
            min_length: 30,
            max_length: 40,
            fps: 10,
            cameras: vec![CameraSpec { key: "observation.image".into(), height: 96, width: 96 }],
            storage: CameraStorage::Video(VideoCodec::Av1),
            state_dim: 2,
            action_dim: 2,
            tasks: vec![
                "Push the T-shaped block onto the T-shaped target.".into(),
                "Push the T-shaped block away from the target.".into(),
            ],
            reward_and_done: true,
            episodes_per_file: None,
            chunks_size: 1000,
            robot_type: "synthetic".into(),
            seed: 0,
        }
    }
}

impl SynthConfig {
    /// PushT-like: v3.0, one 96×96 AV1 camera, fps 10, 200 episodes of about 125 frames.
    pub fn pusht_like() -> Self {
        Self { episodes: 200, min_length: 100, max_length: 150, ..Self::default() }
    }

    /// ALOHA-like: v3.0, two 240×320 AV1 cameras, fps 50, 20 episodes of about 400 frames,
    /// 14-dimensional state and action.
    pub fn aloha_like() -> Self {
        Self {
            episodes: 20,
            min_length: 350,
            max_length: 450,
            fps: 50,
            cameras: vec![
                CameraSpec { key: "observation.images.top".into(), height: 240, width: 320 },
                CameraSpec { key: "observation.images.wrist".into(), height: 240, width: 320 },
            ],
            state_dim: 14,
            action_dim: 14,
            tasks: vec!["Insert the peg into the socket.".into()],
            reward_and_done: false,
            ..Self::default()
        }
    }

    /// ALOHA at real size, as LeRobot users record it: v3.0, four 480×640 AV1 cameras (ALOHA's
    /// `cam_high`, `cam_low` and the two wrists), fps 50, 50 episodes of 400 frames, 14-dimensional
    /// state and action: 80,000 frames, about 74 GB decoded as RGB.
    pub fn aloha_real() -> Self {
        let camera = |name: &str| CameraSpec { key: format!("observation.images.{name}"), height: 480, width: 640 };
        Self {
            episodes: 50,
            min_length: 400,
            max_length: 400,
            cameras: ["cam_high", "cam_low", "cam_left_wrist", "cam_right_wrist"].map(camera).to_vec(),
            ..Self::aloha_like()
        }
    }

    /// DROID-like, the shape of a dataset streamed rather than copied: v3.0, three 180×320 AV1
    /// cameras (two exterior views and the wrist, as DROID 1.0.1 records them), fps 15, 2,000
    /// short episodes of 60 to 180 frames (4 to 12 s), 8-dimensional state and action (seven
    /// joints and the gripper), eight tasks, 100 episodes a file: about 240,000 frames in 20 data
    /// files and 60 video files (`episodes` takes fewer).
    pub fn droid_like() -> Self {
        let camera = |name: &str| CameraSpec { key: format!("observation.images.{name}"), height: 180, width: 320 };
        let tasks = [
            "Put the marker in the pot.",
            "Open the top drawer.",
            "Close the top drawer.",
            "Move the cup to the left.",
            "Put the spoon in the bowl.",
            "Wipe the table with the towel.",
            "Turn the faucet off.",
            "Put the lid on the pot.",
        ];
        Self {
            episodes: 2000,
            min_length: 60,
            max_length: 180,
            fps: 15,
            cameras: ["exterior_1_left", "exterior_2_left", "wrist_left"].map(camera).to_vec(),
            state_dim: 8,
            action_dim: 8,
            tasks: tasks.map(String::from).to_vec(),
            reward_and_done: false,
            episodes_per_file: Some(100),
            ..Self::default()
        }
    }

    fn check(&self) -> Result<()> {
        let bad = |m: String| Err(Error::request(format!("synth: {m}")));
        if self.episodes == 0 || self.min_length == 0 || self.min_length > self.max_length {
            return bad(format!(
                "need episodes >= 1 and 1 <= min_length <= max_length, got {} episodes of {}..={}",
                self.episodes, self.min_length, self.max_length
            ));
        }
        if self.fps == 0
            || self.tasks.is_empty()
            || self.state_dim == 0
            || self.action_dim == 0
            || self.chunks_size == 0
        {
            return bad("fps, tasks, state_dim, action_dim and chunks_size must be non-zero".into());
        }
        if self.version == CodebaseVersion::V2_0 {
            return bad("write v3.0 or v2.1".into());
        }
        for camera in &self.cameras {
            FeatureKey::new(&camera.key).map_err(|m| Error::request(format!("synth: {m}")))?;
            if camera.height == 0 || camera.width == 0 || camera.height % 2 == 1 || camera.width % 2 == 1 {
                return bad(format!(
                    "camera `{}`: sizes must be even and non-zero (yuv420p), got {}x{}",
                    camera.key, camera.height, camera.width
                ));
            }
            if self.storage == CameraStorage::Video(VideoCodec::Av1) && (camera.height < 64 || camera.width < 64) {
                return bad(format!(
                    "camera `{}`: SVT-AV1 encodes frames of at least 64x64, got {}x{} (use --codec h264 or images)",
                    camera.key, camera.height, camera.width
                ));
            }
        }
        Ok(())
    }

    fn lengths(&self) -> Vec<usize> {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        rng.set_stream(u64::MAX);
        (0..self.episodes).map(|_| rng.random_range(self.min_length..=self.max_length)).collect()
    }

    /// The (chunk, file) index of each episode's data and video files (v3.0).
    fn file_of(&self, episode: usize) -> (usize, usize) {
        let group = self.episodes_per_file.map_or(0, |n| episode / n.max(1));
        (group / self.chunks_size, group % self.chunks_size)
    }
}

/// What was written.
#[derive(Debug, Clone, PartialEq)]
pub struct SynthSummary {
    /// The dataset folder.
    pub root: PathBuf,
    /// Episode lengths.
    pub lengths: Vec<usize>,
    /// Total frames.
    pub frames: usize,
}

/// The generated rows of one episode.
struct EpisodeRows {
    index: usize,
    start: usize,
    len: usize,
    task: usize,
    trajectory: Trajectory,
    state: Vec<f32>,
    action: Vec<f32>,
}

impl EpisodeRows {
    fn new(cfg: &SynthConfig, index: usize, start: usize, len: usize) -> Self {
        let trajectory = simulate(cfg.seed, index, len);
        let extra = |t: usize, d: usize| (t as f32 * 0.1 + d as f32).sin() * 0.5;
        let mut state = Vec::with_capacity(len * cfg.state_dim);
        let mut action = Vec::with_capacity(len * cfg.action_dim);
        for t in 0..len {
            state.extend((0..cfg.state_dim).map(|d| if d < 2 { trajectory.agent[t][d] } else { extra(t, d) }));
            action.extend((0..cfg.action_dim).map(|d| if d < 2 { trajectory.target[t][d] } else { extra(t + 1, d) }));
        }
        Self { index, start, len, task: index % cfg.tasks.len(), trajectory, state, action }
    }

    /// The numeric columns of this episode, in feature order: key, values (row-major, as f64),
    /// width, and whether the feature is stored as floats (or booleans) rather than integers.
    fn numeric(&self, cfg: &SynthConfig) -> Vec<(&'static str, Vec<f64>, usize, bool)> {
        let n = self.len;
        let mut out = vec![
            ("observation.state", self.state.iter().map(|&v| f64::from(v)).collect(), cfg.state_dim, true),
            ("action", self.action.iter().map(|&v| f64::from(v)).collect(), cfg.action_dim, true),
        ];
        if cfg.reward_and_done {
            out.push(("next.reward", self.trajectory.reward.iter().map(|&v| f64::from(v)).collect(), 1, true));
            out.push(("next.done", (0..n).map(|t| if t + 1 == n { 1.0 } else { 0.0 }).collect(), 1, true));
        }
        out.push(("timestamp", (0..n).map(|t| f64::from(timestamp(t, cfg.fps))).collect(), 1, true));
        out.push(("frame_index", (0..n).map(|t| t as f64).collect(), 1, false));
        out.push(("episode_index", vec![self.index as f64; n], 1, false));
        out.push(("index", (self.start..self.start + n).map(|i| i as f64).collect(), 1, false));
        out.push(("task_index", vec![self.task as f64; n], 1, false));
        out
    }
}

/// `frame / fps` in float32, as LeRobot stores `timestamp`.
fn timestamp(frame: usize, fps: u32) -> f32 {
    frame as f32 / fps as f32
}

/// Writes a synthetic dataset into `out`, which must not exist or be empty.
pub fn write_dataset(out: &Path, cfg: &SynthConfig) -> Result<SynthSummary> {
    cfg.check()?;
    if out.exists() && std::fs::read_dir(out).map_err(|e| Error::io(out, e))?.next().is_some() {
        return Err(Error::request(format!("synth: {} exists and is not empty", out.display())));
    }
    std::fs::create_dir_all(out.join("meta")).map_err(|e| Error::io(out, e))?;
    let lengths = cfg.lengths();
    let mut start = 0;
    let episodes: Vec<EpisodeRows> = lengths
        .iter()
        .enumerate()
        .map(|(i, &len)| {
            let e = EpisodeRows::new(cfg, i, start, len);
            start += len;
            e
        })
        .collect();
    let frames = start;

    // Per camera, write its videos (or render its PNGs) and compute its per-episode stats.
    let camera_outputs: Vec<CameraOutput> = cfg
        .cameras
        .par_iter()
        .enumerate()
        .map(|(c, cam)| write_camera(out, cfg, c, cam, &episodes))
        .collect::<Result<_>>()?;

    // Per-episode statistics of every feature.
    let method = StatsMethod::of(cfg.version);
    let mut episode_stats: Vec<Stats> = episodes
        .iter()
        .map(|e| {
            e.numeric(cfg)
                .into_iter()
                .map(|(k, v, w, float)| (k.to_string(), numeric_stats(&v, e.len, w, float, method)))
                .collect()
        })
        .collect();
    for (cam, output) in cfg.cameras.iter().zip(&camera_outputs) {
        for (stats, s) in episode_stats.iter_mut().zip(&output.stats) {
            stats.insert(cam.key.clone(), s.clone());
        }
    }

    write_data_files(out, cfg, &episodes, &camera_outputs)?;
    let info = info_json(cfg, frames);
    write_json(&out.join(crate::meta::info::INFO_PATH), &info)?;
    if cfg.version.is_v3() {
        write_v3_meta(out, cfg, &episodes, &episode_stats)?;
    } else {
        write_v2_meta(out, cfg, &episodes, &episode_stats)?;
    }
    Ok(SynthSummary { root: out.to_path_buf(), lengths, frames })
}

/// A camera's contribution: per-episode stats and, for image storage, the PNGs per episode.
struct CameraOutput {
    stats: Vec<crate::stats::FeatureStats>,
    pngs: Vec<Vec<Vec<u8>>>,
}

fn write_camera(
    out: &Path,
    cfg: &SynthConfig,
    camera: usize,
    spec: &CameraSpec,
    episodes: &[EpisodeRows],
) -> Result<CameraOutput> {
    let shape = spec.shape();
    let method = StatsMethod::of(cfg.version);
    let mut frame = vec![0u8; shape.len()];
    let mut stats = Vec::with_capacity(episodes.len());
    let mut pngs = Vec::new();
    let mut writer: Option<(PathBuf, VideoWriter)> = None;
    for e in episodes {
        let sampled = sample_indices(e.len);
        let mut samples = Vec::with_capacity(sampled.len());
        let mut episode_pngs = Vec::new();
        if let CameraStorage::Video(codec) = cfg.storage {
            let path = out.join(video_file(cfg, &spec.key, e.index));
            if writer.as_ref().is_none_or(|(p, _)| *p != path) {
                if let Some((_, w)) = writer.take() {
                    w.finish()?;
                }
                writer = Some((path.clone(), VideoWriter::create(&path, shape, cfg.fps, codec)?));
            }
        }
        for t in 0..e.len {
            render(&e.trajectory, t, camera, shape, &mut frame);
            if let Some((_, w)) = writer.as_mut() {
                w.push_chw(&frame)?;
            } else {
                episode_pngs.push(
                    encode_png(shape, &frame)
                        .map_err(|m| Error::request(format!("synth: PNG encoding failed: {m}")))?,
                );
            }
            // `sample_indices` may repeat an index for short episodes; take each occurrence.
            for _ in sampled.iter().filter(|&&s| s == t) {
                samples.push(downsample(&frame, shape));
            }
        }
        let reduced_shape = samples.first().map_or(shape, |(_, s)| *s);
        let pixels: Vec<Vec<u8>> = samples.into_iter().map(|(p, _)| p).collect();
        stats.push(camera_stats(&pixels, reduced_shape, method));
        pngs.push(episode_pngs);
    }
    if let Some((_, w)) = writer {
        w.finish()?;
    }
    Ok(CameraOutput { stats, pngs })
}

fn video_file(cfg: &SynthConfig, key: &str, episode: usize) -> PathBuf {
    if cfg.version.is_v3() {
        let (chunk, file) = cfg.file_of(episode);
        PathBuf::from(format!("videos/{key}/chunk-{chunk:03}/file-{file:03}.mp4"))
    } else {
        PathBuf::from(format!("videos/chunk-{:03}/{key}/episode_{episode:06}.mp4", episode / cfg.chunks_size))
    }
}

fn data_file(cfg: &SynthConfig, episode: usize) -> PathBuf {
    if cfg.version.is_v3() {
        let (chunk, file) = cfg.file_of(episode);
        PathBuf::from(format!("data/chunk-{chunk:03}/file-{file:03}.parquet"))
    } else {
        PathBuf::from(format!("data/chunk-{:03}/episode_{episode:06}.parquet", episode / cfg.chunks_size))
    }
}

fn write_data_files(out: &Path, cfg: &SynthConfig, episodes: &[EpisodeRows], cameras: &[CameraOutput]) -> Result<()> {
    let mut groups: Vec<(PathBuf, Vec<&EpisodeRows>)> = Vec::new();
    for e in episodes {
        let path = out.join(data_file(cfg, e.index));
        match groups.last_mut() {
            Some((p, members)) if *p == path => members.push(e),
            _ => groups.push((path, vec![e])),
        }
    }
    groups.par_iter().try_for_each(|(path, members)| {
        let batches = members.iter().map(|e| episode_batch(path, cfg, e, cameras)).collect::<Result<Vec<_>>>()?;
        let hf = json!({"info": {"features": hf_features(cfg)}}).to_string();
        tables::write_parquet(path, &batches, vec![("huggingface".into(), hf)])
    })
}

fn episode_batch(
    path: &Path,
    cfg: &SynthConfig,
    e: &EpisodeRows,
    cameras: &[CameraOutput],
) -> Result<arrow_array::RecordBatch> {
    let n = e.len;
    let mut columns: Vec<(String, arrow_array::ArrayRef)> = Vec::new();
    if cfg.storage == CameraStorage::Images {
        for (cam, output) in cfg.cameras.iter().zip(cameras) {
            let names: Vec<String> = (0..n).map(|t| format!("frame-{t:06}.png")).collect();
            columns.push((cam.key.clone(), tables::images(&output.pngs[e.index], &names)));
        }
    }
    columns.push(("observation.state".into(), tables::f32_vectors(&e.state, cfg.state_dim)));
    columns.push(("action".into(), tables::f32_vectors(&e.action, cfg.action_dim)));
    if cfg.reward_and_done {
        columns.push(("next.reward".into(), tables::f32_scalars(e.trajectory.reward.clone())));
        columns.push(("next.done".into(), tables::bools((0..n).map(|t| t + 1 == n).collect())));
    }
    columns.push(("timestamp".into(), tables::f32_scalars((0..n).map(|t| timestamp(t, cfg.fps)).collect())));
    columns.push(("frame_index".into(), tables::i64_scalars((0..n as i64).collect())));
    columns.push(("episode_index".into(), tables::i64_scalars(vec![e.index as i64; n])));
    columns.push(("index".into(), tables::i64_scalars((e.start as i64..(e.start + n) as i64).collect())));
    columns.push(("task_index".into(), tables::i64_scalars(vec![e.task as i64; n])));
    tables::batch(path, columns)
}

/// The `features` entries of `info.json`, in column order.
fn features_json(cfg: &SynthConfig) -> Map<String, Value> {
    let mut f = Map::new();
    for cam in &cfg.cameras {
        let shape = json!([cam.height, cam.width, 3]);
        let entry = match cfg.storage {
            CameraStorage::Video(codec) => {
                let mut info = json!({
                    "video.height": cam.height, "video.width": cam.width, "video.codec": codec.info_name(),
                    "video.pix_fmt": "yuv420p", "video.fps": cfg.fps, "video.channels": 3, "has_audio": false,
                });
                let extra = if cfg.version.is_v3() {
                    json!({"video.g": GOP, "video.crf": CRF, "video.preset": 12, "is_depth_map": false})
                } else {
                    json!({"video.is_depth_map": false})
                };
                info.as_object_mut().expect("object").extend(extra.as_object().expect("object").clone());
                json!({"dtype": "video", "shape": shape, "names": ["height", "width", "channels"], "info": info})
            }
            CameraStorage::Images => json!({"dtype": "image", "shape": shape, "names": ["height", "width", "channel"]}),
        };
        f.insert(cam.key.clone(), entry);
    }
    let names = |d: usize| {
        if d == 2 { json!(["x", "y"]) } else { json!((0..d).map(|i| format!("joint_{i}")).collect::<Vec<_>>()) }
    };
    f.insert(
        "observation.state".into(),
        json!({"dtype": "float32", "shape": [cfg.state_dim], "names": names(cfg.state_dim)}),
    );
    f.insert("action".into(), json!({"dtype": "float32", "shape": [cfg.action_dim], "names": names(cfg.action_dim)}));
    if cfg.reward_and_done {
        f.insert("next.reward".into(), json!({"dtype": "float32", "shape": [1], "names": null}));
        f.insert("next.done".into(), json!({"dtype": "bool", "shape": [1], "names": null}));
    }
    f.insert("timestamp".into(), json!({"dtype": "float32", "shape": [1], "names": null}));
    for key in ["frame_index", "episode_index", "index", "task_index"] {
        f.insert(key.into(), json!({"dtype": "int64", "shape": [1], "names": null}));
    }
    f
}

/// The HF `datasets` features written in the parquet's `huggingface` metadata.
fn hf_features(cfg: &SynthConfig) -> Map<String, Value> {
    features_json(cfg)
        .into_iter()
        .filter(|(_, v)| v["dtype"] != "video")
        .map(|(k, v)| {
            let dtype = v["dtype"].as_str().unwrap_or_default().to_string();
            let width = v["shape"][0].as_u64().unwrap_or(1);
            let hf = match dtype.as_str() {
                "image" => json!({"_type": "Image"}),
                _ if v["shape"] == json!([1]) => json!({"dtype": dtype, "_type": "Value"}),
                _ => json!({"feature": {"dtype": dtype, "_type": "Value"}, "length": width, "_type": "List"}),
            };
            (k, hf)
        })
        .collect()
}

fn info_json(cfg: &SynthConfig, frames: usize) -> Value {
    let has_video = matches!(cfg.storage, CameraStorage::Video(_)) && !cfg.cameras.is_empty();
    let mut info = json!({
        "codebase_version": cfg.version.as_str(),
        "robot_type": cfg.robot_type,
        "total_episodes": cfg.episodes,
        "total_frames": frames,
        "total_tasks": cfg.tasks.len(),
        "chunks_size": cfg.chunks_size,
        "fps": cfg.fps,
        "splits": {"train": format!("0:{}", cfg.episodes)},
    });
    let obj = info.as_object_mut().expect("object");
    if cfg.version.is_v3() {
        obj.insert("data_files_size_in_mb".into(), json!(100));
        obj.insert("video_files_size_in_mb".into(), json!(200));
        obj.insert("data_path".into(), json!("data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"));
        obj.insert(
            "video_path".into(),
            if has_video {
                json!("videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4")
            } else {
                Value::Null
            },
        );
    } else {
        let videos = if has_video { cfg.episodes * cfg.cameras.len() } else { 0 };
        obj.insert("total_videos".into(), json!(videos));
        obj.insert("total_chunks".into(), json!(cfg.episodes.div_ceil(cfg.chunks_size)));
        obj.insert("data_path".into(), json!("data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet"));
        obj.insert(
            "video_path".into(),
            if has_video {
                json!("videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4")
            } else {
                Value::Null
            },
        );
    }
    obj.insert("features".into(), Value::Object(features_json(cfg)));
    info
}

fn write_json(path: &Path, value: &Value) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    }
    let text = serde_json::to_string_pretty(value).expect("JSON values serialise");
    std::fs::write(path, text + "\n").map_err(|e| Error::io(path, e))
}

fn write_jsonl(path: &Path, lines: impl Iterator<Item = Value>) -> Result<()> {
    let text: String = lines.map(|v| v.to_string() + "\n").collect();
    std::fs::write(path, text).map_err(|e| Error::io(path, e))
}

fn write_v2_meta(out: &Path, cfg: &SynthConfig, episodes: &[EpisodeRows], stats: &[Stats]) -> Result<()> {
    write_jsonl(
        &out.join(crate::meta::episodes::EPISODES_JSONL),
        episodes.iter().map(|e| json!({"episode_index": e.index, "tasks": [cfg.tasks[e.task]], "length": e.len})),
    )?;
    write_jsonl(
        &out.join(crate::meta::tasks::TASKS_JSONL),
        cfg.tasks.iter().enumerate().map(|(i, t)| json!({"task_index": i, "task": t})),
    )?;
    write_jsonl(
        &out.join(crate::stats::EPISODES_STATS_JSONL),
        episodes.iter().zip(stats).map(|(e, s)| json!({"episode_index": e.index, "stats": stats_to_json(s)})),
    )
}

fn write_v3_meta(out: &Path, cfg: &SynthConfig, episodes: &[EpisodeRows], stats: &[Stats]) -> Result<()> {
    let aggregated = aggregate(stats).map_err(|m| Error::request(format!("synth: {m}")))?;
    write_json(&out.join(crate::stats::STATS_JSON), &stats_to_json(&aggregated))?;

    let tasks_path = out.join(crate::meta::tasks::TASKS_PARQUET);
    let pandas = json!({
        "index_columns": ["task"],
        "column_indexes": [{"name": null, "field_name": null, "pandas_type": "unicode", "numpy_type": "object", "metadata": {"encoding": "UTF-8"}}],
        "columns": [
            {"name": "task_index", "field_name": "task_index", "pandas_type": "int64", "numpy_type": "int64", "metadata": null},
            {"name": "task", "field_name": "task", "pandas_type": "unicode", "numpy_type": "object", "metadata": null}
        ],
        "attributes": {}, "creator": {"library": "pyarrow", "version": "26.0.1"}, "pandas_version": "2.3.3"
    });
    let tasks = tables::batch(
        &tasks_path,
        vec![
            ("task_index".into(), tables::i64_scalars((0..cfg.tasks.len() as i64).collect())),
            ("task".into(), std::sync::Arc::new(arrow_array::StringArray::from_iter_values(&cfg.tasks))),
        ],
    )?;
    tables::write_parquet(&tasks_path, &[tasks], vec![("pandas".into(), pandas.to_string())])?;

    let path = out.join("meta/episodes/chunk-000/file-000.parquet");
    let n = episodes.len();
    let ints = |f: &dyn Fn(&EpisodeRows) -> usize| tables::i64_scalars(episodes.iter().map(|e| f(e) as i64).collect());
    let mut columns: Vec<(String, arrow_array::ArrayRef)> = vec![
        ("episode_index".into(), ints(&|e| e.index)),
        (
            "tasks".into(),
            tables::string_lists(&episodes.iter().map(|e| vec![cfg.tasks[e.task].clone()]).collect::<Vec<_>>()),
        ),
        ("length".into(), ints(&|e| e.len)),
        ("data/chunk_index".into(), ints(&|e| cfg.file_of(e.index).0)),
        ("data/file_index".into(), ints(&|e| cfg.file_of(e.index).1)),
        ("dataset_from_index".into(), ints(&|e| e.start)),
        ("dataset_to_index".into(), ints(&|e| e.start + e.len)),
    ];
    if matches!(cfg.storage, CameraStorage::Video(_)) {
        // Offsets inside each file: the summed durations of the episodes before, in that file.
        let mut from = vec![0.0f64; n];
        for i in 1..n {
            if cfg.file_of(i) == cfg.file_of(i - 1) {
                from[i] = from[i - 1] + episodes[i - 1].len as f64 / f64::from(cfg.fps);
            }
        }
        for cam in &cfg.cameras {
            let key = &cam.key;
            columns.push((format!("videos/{key}/chunk_index"), ints(&|e| cfg.file_of(e.index).0)));
            columns.push((format!("videos/{key}/file_index"), ints(&|e| cfg.file_of(e.index).1)));
            columns.push((format!("videos/{key}/from_timestamp"), tables::f64_scalars(from.clone())));
            let to = episodes.iter().zip(&from).map(|(e, f)| f + e.len as f64 / f64::from(cfg.fps)).collect();
            columns.push((format!("videos/{key}/to_timestamp"), tables::f64_scalars(to)));
        }
    }
    let first = &stats[0];
    for (feature, names) in first {
        for stat in names.0.keys() {
            let shape = &names.0[stat].shape;
            let values: Vec<f64> = stats.iter().flat_map(|s| s[feature].0[stat].values.clone()).collect();
            let array = if stat == "count" {
                tables::nested_i64(values.iter().map(|&v| v as i64).collect(), n, shape)
            } else {
                tables::nested_f64(values, n, shape)
            };
            columns.push((format!("stats/{feature}/{stat}"), array));
        }
    }
    columns.push(("meta/episodes/chunk_index".into(), tables::i64_scalars(vec![0; n])));
    columns.push(("meta/episodes/file_index".into(), tables::i64_scalars(vec![0; n])));
    let batch = tables::batch(&path, columns)?;
    tables::write_parquet(&path, &[batch], Vec::new())
}
