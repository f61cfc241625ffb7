//! `trainer export`: a checkpoint written as a LeRobot pretrained policy.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use trainer::PolicyRunner;

/// Arguments of `trainer export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The checkpoint (an output folder or a checkpoint folder).
    #[arg(long)]
    checkpoint: PathBuf,
    /// The folder to write.
    #[arg(long)]
    out: PathBuf,
    /// Export the trained weights even when the checkpoint has an EMA of them.
    #[arg(long)]
    no_ema: bool,
}

/// Writes the checkpoint's policy (its EMA, when it has one) as LeRobot's `model.safetensors`,
/// `config.json` and pre/post-processors.
pub fn export(args: &ExportArgs) -> Result<()> {
    let runner = PolicyRunner::<burn::backend::Flex>::load(&args.checkpoint, 0, !args.no_ema, Default::default())?;
    let (config, features, normalizer) =
        (runner.config().clone(), runner.features().clone(), runner.normalizer().clone());
    let model = runner.into_model();
    trainer::lerobot::export(&model, &config, &features, &normalizer, &args.out)?;
    println!("wrote a LeRobot Diffusion Policy to {}", args.out.display());
    Ok(())
}
