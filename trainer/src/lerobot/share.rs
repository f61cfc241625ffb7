//! Sharing a policy on the Hugging Face Hub as LeRobot does (`--policy.push_to_hub`,
//! `push_model_to_hub`): the pretrained-policy folder [`super::export()`] writes, with a model
//! card, committed to a model repository with the user's token.

use std::path::Path;

use datasets::hub::{HubEnv, RepoId, files_of_folder, upload_to_model_repo};

use crate::error::{Error, Result};

/// Where a policy is shared: LeRobot's `policy.repo_id` and `policy.private`.
#[derive(Debug, Clone, PartialEq)]
pub struct ShareTarget {
    /// The model repository, `OWNER/NAME`.
    pub repo_id: String,
    /// Make it private (`None`: the Hub's default, public).
    pub private: Option<bool>,
}

/// LeRobot's model card (`README.md`) for a Diffusion Policy trained on `dataset` (its Hub id,
/// when it has one).
pub fn model_card(dataset: Option<&str>) -> String {
    let datasets = dataset.map_or(String::new(), |id| format!("datasets: {id}\n"));
    format!(
        "---\n{datasets}library_name: lerobot\nlicense: apache-2.0\nmodel_name: diffusion\npipeline_tag: robotics\n\
         tags:\n- diffusion\n- lerobot\n- robotics\n---\n\n# Model Card for diffusion\n\n\
         A [Diffusion Policy](https://huggingface.co/papers/2303.04137) trained with lerobot-rs, in LeRobot 0.6.1's \
         format: `DiffusionPolicy.from_pretrained` and `lerobot-eval --policy.path` load it, with its pre- and \
         post-processors.\n"
    )
}

/// Commits the pretrained-policy folder `dir` (with a model card, written into it) to `target`
/// with the token of `env`; returns the commit's address.
pub fn push_policy_to_hub(dir: &Path, target: &ShareTarget, dataset: Option<&str>, env: &HubEnv) -> Result<String> {
    let repo_id: RepoId = target
        .repo_id
        .parse()
        .map_err(|_| Error::Config(format!("policy.repo_id {:?} is not a Hub id (OWNER/NAME)", target.repo_id)))?;
    let card = dir.join("README.md");
    std::fs::write(&card, model_card(dataset)).map_err(|e| Error::io(&card, e))?;
    let files = files_of_folder(dir)?;
    Ok(upload_to_model_repo(
        env,
        &repo_id,
        &files,
        "Upload policy weights, config, processors and readme",
        target.private,
    )?)
}
