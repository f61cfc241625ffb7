//! `bench transforms`: images/s of the full default augmentation chain on a device — uint8
//! upload, LeRobot's default `image_transforms` (enabled: 3 of brightness, contrast,
//! saturation, hue, sharpness and affine per sample) and ImageNet normalisation.

use std::time::Instant;

use anyhow::Result;
use clap::Args;
use kernels::{DeviceKind, DeviceTask, Kernels, run_on};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use transforms::{IMAGENET_MEAN, IMAGENET_STD, ImageTransformsConfig, apply_plan, frames_to_float, normalize_channels};

/// Arguments of `bench transforms`.
#[derive(Debug, Clone, Args)]
pub struct TransformsArgs {
    /// cpu, wgpu or cuda (the last two need the bench built with that feature).
    #[arg(long, default_value = "cpu")]
    pub device: DeviceKind,
    /// Samples per batch.
    #[arg(long, default_value_t = 64)]
    pub batch: usize,
    /// Frames per sample (Diffusion Policy: 2 observation steps).
    #[arg(long, default_value_t = 2)]
    pub frames: usize,
    /// Image size, HxW.
    #[arg(long, default_value = "96x96")]
    pub size: String,
    /// Seconds of measurement after two warm-up batches.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
}

/// The measurement.
#[derive(Debug, Clone, Serialize)]
pub struct TransformsReport {
    /// The device.
    pub device: String,
    /// Samples per batch.
    pub batch: usize,
    /// Frames per sample.
    pub frames: usize,
    /// Height and width.
    pub size: (usize, usize),
    /// Batches measured.
    pub batches: usize,
    /// Images (frames) per second through the whole chain.
    pub images_per_s: f64,
    /// Milliseconds per batch: whole chain, and upload / augmentation / normalisation alone.
    pub ms_per_batch: f64,
    /// Upload and conversion to float, ms per batch.
    pub upload_ms: f64,
    /// Augmentation, ms per batch.
    pub augment_ms: f64,
    /// Normalisation, ms per batch.
    pub normalize_ms: f64,
}

struct Task {
    args: TransformsArgs,
    size: (usize, usize),
}

impl DeviceTask for Task {
    type Output = TransformsReport;

    fn run<B: Kernels>(self, device: B::Device) -> TransformsReport {
        let (h, w) = self.size;
        let n = self.args.batch * self.args.frames;
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let bytes: Vec<u8> = (0..n * 3 * h * w).map(|_| rng.random_range(0..=255u8)).collect();
        let cfg = ImageTransformsConfig { enable: true, ..ImageTransformsConfig::default() };
        let sync = || B::sync(&device).expect("the device synchronises");
        let stage = |step: u64, timed: bool| -> (f64, f64, f64) {
            let plan = cfg.sample_plan(self.args.batch, self.size, step);
            let t0 = Instant::now();
            let x = frames_to_float::<B>(&bytes, [n, 3, h, w], &device);
            if timed {
                sync();
            }
            let t1 = Instant::now();
            let x = apply_plan(x, &plan, self.args.frames);
            if timed {
                sync();
            }
            let t2 = Instant::now();
            let x = normalize_channels(x, &IMAGENET_MEAN, &IMAGENET_STD);
            drop(x);
            sync();
            let t3 = Instant::now();
            ((t1 - t0).as_secs_f64(), (t2 - t1).as_secs_f64(), (t3 - t2).as_secs_f64())
        };
        stage(0, false);
        stage(1, false);
        // Whole-chain throughput: one synchronisation per batch.
        let started = Instant::now();
        let mut batches = 0;
        while started.elapsed().as_secs_f64() < self.args.seconds || batches < 3 {
            stage(2 + batches as u64, false);
            batches += 1;
        }
        let elapsed = started.elapsed().as_secs_f64();
        // Stage breakdown: synchronised after every stage.
        let parts: Vec<(f64, f64, f64)> = (0..batches.min(10)).map(|i| stage(1000 + i as u64, true)).collect();
        let mean = |f: fn(&(f64, f64, f64)) -> f64| 1e3 * parts.iter().map(f).sum::<f64>() / parts.len() as f64;
        TransformsReport {
            device: self.args.device.to_string(),
            batch: self.args.batch,
            frames: self.args.frames,
            size: self.size,
            batches,
            images_per_s: (batches * n) as f64 / elapsed,
            ms_per_batch: 1e3 * elapsed / batches as f64,
            upload_ms: mean(|p| p.0),
            augment_ms: mean(|p| p.1),
            normalize_ms: mean(|p| p.2),
        }
    }
}

/// Runs the measurement.
pub fn run(args: &TransformsArgs) -> Result<TransformsReport> {
    let (h, w) = args.size.split_once('x').ok_or_else(|| anyhow::anyhow!("--size {:?}: expected HxW", args.size))?;
    let size = (h.parse()?, w.parse()?);
    Ok(run_on(args.device, Task { args: args.clone(), size })?)
}

/// One line for the terminal and RESULTS.md.
pub fn render(r: &TransformsReport) -> String {
    format!(
        "| {} | {} x {} | {}x{} | {:.0} | {:.1} | {:.1} | {:.1} | {:.1} |",
        r.device,
        r.batch,
        r.frames,
        r.size.0,
        r.size.1,
        r.images_per_s,
        r.ms_per_batch,
        r.upload_ms,
        r.augment_ms,
        r.normalize_ms
    )
}
