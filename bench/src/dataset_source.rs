//! Which datasets a bench reads: folders, or Hub ids found (or downloaded) where LeRobot keeps
//! them, as `trainer` and `datasets` take them.

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::{ArgAction, Args};
use datasets::DatasetRequest;

/// `--root` (repeatable) or `--dataset.repo_id`, with the Hub's revision and download switch.
#[derive(Debug, Clone, Args)]
pub struct DatasetSource {
    /// The dataset folder; repeat it to read several datasets together (`bench loader`). With
    /// --dataset.repo_id: where the dataset is or is to be downloaded.
    #[arg(long = "root", alias = "dataset.root", required_unless_present = "repo_id")]
    pub roots: Vec<PathBuf>,
    /// The dataset's Hub id, OWNER/NAME, or several separated by commas: looked for under
    /// HF_LEROBOT_HOME and LeRobot's Hub cache, downloaded from the Hub if missing.
    #[arg(long = "dataset.repo_id")]
    pub repo_id: Option<String>,
    /// The Hub revision: a branch, tag or commit (default: LeRobot's codebase version, v3.0).
    #[arg(long = "dataset.revision", requires = "repo_id")]
    pub revision: Option<String>,
    /// Whether a missing dataset may be downloaded (HF_HUB_OFFLINE=1 forbids it too).
    #[arg(long = "dataset.download", default_value_t = true, action = ArgAction::Set)]
    pub download: bool,
}

impl DatasetSource {
    /// Dataset folders.
    pub fn folders(roots: Vec<PathBuf>) -> Self {
        Self { roots, repo_id: None, revision: None, download: false }
    }

    /// The datasets' folders with the names they go by (Hub ids, or the folders as given),
    /// resolving Hub ids first.
    pub fn resolve(&self) -> Result<Vec<(String, PathBuf)>> {
        let Some(ids) = &self.repo_id else {
            return Ok(self.roots.iter().map(|r| (r.display().to_string(), r.clone())).collect());
        };
        DatasetRequest::for_ids(ids, &self.roots, self.revision.as_deref(), self.download)?
            .iter()
            .map(|request| Ok((request.repo_id.to_string(), datasets::hub::resolve_on_terminal(request)?.root)))
            .collect()
    }

    /// The one dataset's folder, for benches that read one (`command`).
    pub fn one(&self, command: &str) -> Result<PathBuf> {
        match self.resolve()?.as_slice() {
            [(_, root)] => Ok(root.clone()),
            several => bail!("`bench {command}` reads one dataset; {} were given", several.len()),
        }
    }
}
