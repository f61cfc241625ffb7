//! `trainer sample`: action chunks predicted for dataset frames by a trained checkpoint, written
//! as a safetensors batch.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;
use datasets::{CollatedBatch, Dataset, DecoderCache, FrameFormat, Values, WindowSpec, diffusion_delta_timestamps};
use kernels::{DeviceKind, DeviceTask, Kernels, run_on};
use trainer::{HostObservation, PolicyRunner};

/// Arguments of `trainer sample`.
#[derive(Debug, Args)]
pub struct SampleArgs {
    /// The checkpoint (an output folder or a checkpoint folder).
    #[arg(long)]
    checkpoint: PathBuf,
    /// The dataset whose frames to observe.
    #[arg(long)]
    root: PathBuf,
    /// Frame indices, comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    indices: Vec<usize>,
    /// The safetensors file to write.
    #[arg(long)]
    out: PathBuf,
    /// Seed of the diffusion noise.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Use the trained weights even when the checkpoint has an EMA of them.
    #[arg(long)]
    no_ema: bool,
    /// Start the reverse diffusion from the `noise` tensor `[B, horizon, A]` of this
    /// safetensors file (to compare with LeRobot's `generate_actions(batch, noise)`).
    #[arg(long)]
    initial_noise: Option<PathBuf>,
    /// cpu, wgpu or cuda.
    #[arg(long, default_value = "cpu")]
    device: DeviceKind,
}

/// Predicts the action chunks of `args.indices` and writes them, with the indices, to
/// `args.out`.
pub fn sample(args: &SampleArgs) -> Result<()> {
    let (actions, shape) = run_on(args.device, Sample { args })??;
    let mut tensors = BTreeMap::new();
    tensors.insert("action".to_string(), datasets::Tensor::new(shape.to_vec(), Values::F32(actions)));
    tensors.insert(
        "index".to_string(),
        datasets::Tensor::new(vec![args.indices.len()], Values::I64(args.indices.iter().map(|&i| i as i64).collect())),
    );
    let batch = CollatedBatch { tensors, tasks: Vec::new() };
    let mut meta = BTreeMap::new();
    meta.insert("checkpoint".to_string(), args.checkpoint.display().to_string());
    meta.insert("seed".to_string(), args.seed.to_string());
    batch.write_safetensors(&args.out, &meta)?;
    println!("wrote {} action chunks of shape {:?} to {}", args.indices.len(), &shape[1..], args.out.display());
    Ok(())
}

/// The prediction, on the device the arguments name.
struct Sample<'a> {
    args: &'a SampleArgs,
}

impl DeviceTask for Sample<'_> {
    type Output = Result<(Vec<f32>, [usize; 3])>;
    fn run<B: Kernels>(self, device: B::Device) -> Result<(Vec<f32>, [usize; 3])> {
        let args = self.args;
        let mut runner = PolicyRunner::<B>::load(&args.checkpoint, args.seed, !args.no_ema, device)?;
        let dataset = Dataset::open(&args.root)?;
        let n_obs = runner.config().n_obs_steps;
        let deltas: datasets::DeltaTimestamps =
            diffusion_delta_timestamps(dataset.info(), n_obs, runner.config().horizon)
                .into_iter()
                .filter(|(k, _)| k.starts_with("observation."))
                .collect();
        let windows = WindowSpec::from_delta_timestamps(&deltas, dataset.info(), dataset.options().tolerance_s)?;
        let mut decoders = DecoderCache::default();
        let samples = args
            .indices
            .iter()
            .map(|&i| dataset.get(i, &windows, &mut decoders, FrameFormat::Uint8))
            .collect::<datasets::Result<Vec<_>>>()?;
        let batch = CollatedBatch::collate(&samples)?;
        let host = HostObservation::from_collated(&batch, runner.features())?;
        let initial = args.initial_noise.as_deref().map(read_noise).transpose()?;
        let actions = runner.predict_chunk_from(&host, initial)?;
        let dims = actions.dims();
        Ok((actions.into_data().convert::<f32>().to_vec().expect("f32 data"), dims))
    }
}

/// The float32 `noise` tensor of a safetensors file.
fn read_noise(path: &Path) -> Result<Vec<f32>> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let tensors =
        safetensors::SafeTensors::deserialize(&bytes).with_context(|| format!("parsing {}", path.display()))?;
    let noise = tensors.tensor("noise").with_context(|| format!("{}: no `noise` tensor", path.display()))?;
    if noise.dtype() != safetensors::Dtype::F32 {
        bail!("{}: `noise` is {:?}, expected F32", path.display(), noise.dtype());
    }
    Ok(noise.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
}
