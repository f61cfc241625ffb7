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
    /// Push the exported policy to the Hub's model repository --repo_id (with HF_TOKEN's
    /// token), as LeRobot's `push_model_to_hub`.
    #[arg(long, requires = "repo_id")]
    push_to_hub: bool,
    /// The model repository, OWNER/NAME (made if missing).
    #[arg(long, requires = "push_to_hub")]
    repo_id: Option<String>,
    /// Make the repository private when it is created.
    #[arg(long, requires = "push_to_hub")]
    private: bool,
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
    if args.push_to_hub {
        push(args)?;
    }
    Ok(())
}

/// Pushes the exported folder to `--repo_id`.
#[cfg(feature = "hub")]
fn push(args: &ExportArgs) -> Result<()> {
    use anyhow::Context;
    let target = trainer::lerobot::ShareTarget {
        repo_id: args.repo_id.clone().context("--repo_id")?,
        private: args.private.then_some(true),
    };
    // The dataset it was trained on, for the model card.
    let checkpoint = trainer::checkpoint::resolve(&args.checkpoint)?;
    let config: serde_json::Value = trainer::checkpoint::read_json(&checkpoint, "config.json")?;
    let dataset = config.pointer("/dataset/repo_id").and_then(|id| id.as_str());
    let env = datasets::hub::HubEnv::from_env();
    let url = trainer::lerobot::push_policy_to_hub(&args.out, &target, dataset, &env)?;
    println!("pushed the policy to {} ({url})", target.repo_id);
    Ok(())
}

/// Without the `hub` feature there is no HTTP client.
#[cfg(not(feature = "hub"))]
fn push(_args: &ExportArgs) -> Result<()> {
    anyhow::bail!("--push_to_hub needs the `hub` feature: this build has none")
}
