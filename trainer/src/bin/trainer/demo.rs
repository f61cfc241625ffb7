//! `trainer --demo`: a tiny policy trained for a few dozen steps on a synthetic PushT-like
//! dataset, to try the trainer on a fresh machine.

use std::path::Path;

use anyhow::Result;
use serde_json::{Value, json};

/// The demo's configuration: a tiny policy (U-Net widths 64/128/256, 84×84 crop) trained for a
/// few dozen steps on a synthetic PushT-like dataset written to `output/demo-dataset` (once).
/// A demo starts over each time: what an earlier demo wrote in `output` is removed first, and
/// never anything else.
pub fn demo_overrides(output: &Path) -> Result<Value> {
    let checkpoints = trainer::checkpoint::checkpoints_dir(output);
    if checkpoints.exists() {
        std::fs::remove_dir_all(&checkpoints)?;
    }
    if output.exists() {
        for entry in std::fs::read_dir(output)? {
            let path = entry?.path();
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if name == "metrics.csv" || name.starts_with("events.out.tfevents.") {
                std::fs::remove_file(&path)?;
            }
        }
    }
    let root = output.join("demo-dataset");
    if !root.join("meta/info.json").exists() {
        if root.exists() {
            std::fs::remove_dir_all(&root)?;
        }
        eprintln!("writing a synthetic PushT-like dataset to {}", root.display());
        datasets::synth::write_dataset(
            &root,
            &datasets::synth::SynthConfig {
                episodes: 6,
                min_length: 40,
                max_length: 60,
                // A build without FFmpeg stores the frames as images in parquet, which it reads.
                storage: if cfg!(feature = "video") {
                    datasets::synth::SynthConfig::default().storage
                } else {
                    datasets::synth::CameraStorage::Images
                },
                ..Default::default()
            },
        )?;
    }
    Ok(json!({
        "dataset": {"root": root},
        "policy": {"down_dims": [64, 128, 256], "diffusion_step_embed_dim": 64, "optimizer_lr": 1e-3, "scheduler_warmup_steps": 5},
        "batch_size": 8, "steps": 40, "log_freq": 5, "save_freq": 0, "num_workers": 1,
        "output_dir": output,
    }))
}
