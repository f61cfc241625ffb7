//! `trainer export`: a checkpoint written as a LeRobot pretrained policy.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
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
        let repo_id = args.repo_id.as_deref().context("--repo_id")?;
        // The dataset it was trained on, for the model card.
        let checkpoint = trainer::checkpoint::resolve(&args.checkpoint)?;
        let trained: serde_json::Value = trainer::checkpoint::read_json(&checkpoint, "config.json")?;
        let dataset = trained.pointer("/dataset/repo_id").and_then(|id| id.as_str());
        push(&args.out, repo_id, args.private.then_some(true), dataset)?;
    }
    Ok(())
}

/// Pushes the pretrained-policy folder `policy` to the Hub's model repository `repo_id` (made,
/// private when `private`, if missing) with the environment's token, and says where it went.
#[cfg(feature = "hub")]
pub fn push(policy: &Path, repo_id: &str, private: Option<bool>, dataset: Option<&str>) -> Result<()> {
    let target = trainer::lerobot::ShareTarget { repo_id: repo_id.to_string(), private };
    let url = trainer::lerobot::push_policy_to_hub(policy, &target, dataset, &datasets::hub::HubEnv::from_env())?;
    println!("pushed the policy to {repo_id} ({url})");
    Ok(())
}

/// Without the `hub` feature there is no HTTP client.
#[cfg(not(feature = "hub"))]
pub fn push(_policy: &Path, _repo_id: &str, _private: Option<bool>, _dataset: Option<&str>) -> Result<()> {
    anyhow::bail!("pushing to the Hub needs the `hub` feature: this build has none")
}
