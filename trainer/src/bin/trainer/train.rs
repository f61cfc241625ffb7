//! Training (the tool's default command): the configuration resolved from the preset, a config
//! file and the flags; the dataset found or downloaded; the run, with a progress bar.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use burn::backend::Autodiff;
use kernels::{DeviceTask, Kernels, run_on};
use trainer::parallel::Processes;
use trainer::{DiffusionConfig, Progress, TrainConfig, TrainOutcome};

use crate::args::TrainArgs;
use crate::demo::demo_overrides;

/// Trains as the flags say (or the demo; or a dry run, which builds the model and prints the
/// resolved configuration).
pub fn train(args: &TrainArgs) -> Result<()> {
    let config = resolve(args)?;
    // One of several processes (mpirun, srun): MPI stays initialised while `launch` lives.
    let launch = trainer::parallel::launch()?;
    let processes = launch.processes();
    std::fs::create_dir_all(&config.output_dir).with_context(|| format!("creating {}", config.output_dir.display()))?;
    let resolved = serde_json::to_string_pretty(&config)?;
    if processes.is_main() {
        std::fs::write(config.output_dir.join("train_config.json"), &resolved)?;
    }
    if args.dry_run {
        let n = run_on(config.device, DryRun { config })??;
        println!("num_learnable_params={n} ({})", trainer::metrics::big_number(n as f64));
        println!("{resolved}");
        return Ok(());
    }
    let share = config.policy.push_to_hub.then(|| config.clone());
    let outcome = run_on(config.device, Train { config, resume: args.resume.clone(), processes })??;
    if !processes.is_main() {
        return Ok(());
    }
    if let (Some(first), Some(last)) = (outcome.losses.first(), outcome.losses.last()) {
        println!("loss {:.4} at step {} → {:.4} at step {}", first.1, first.0, last.1, last.0);
    }
    if let Some(dir) = outcome.checkpoint {
        println!("last checkpoint: {}", dir.display());
        if let Some(config) = &share {
            let repo_id = config.policy.repo_id.as_deref().context("policy.repo_id")?;
            let policy = dir.join(trainer::lerobot::LEROBOT_POLICY_DIR);
            crate::export::push(&policy, repo_id, config.policy.private, config.dataset.repo_id.as_deref())?;
        }
    }
    Ok(())
}

/// The run's configuration: the preset's defaults, the config file, the demo's choices and the
/// flags, in that order; datasets named by Hub id found (or downloaded) and given by folder.
fn resolve(args: &TrainArgs) -> Result<TrainConfig> {
    let file = args.config_file()?;
    let mut overrides = args.overrides()?;
    if args.demo {
        let output = args.config.output_dir().cloned().unwrap_or_else(|| PathBuf::from("outputs/demo"));
        let mut demo = demo_overrides(&output)?;
        // Explicit flags still win over the demo's choices.
        trainer::merge(&mut demo, overrides);
        overrides = demo;
    }
    let mut config = TrainConfig::resolve(file, overrides)?;
    if config.dataset.streaming {
        // As LeRobot's: a root given is where the dataset is, the Hub only without one.
        if config.dataset.root.is_empty() {
            let revision = config.dataset.revision.clone();
            let urls: Result<Vec<PathBuf>> =
                config.dataset.repo_ids().iter().map(|id| stream_url(id, revision.as_deref())).collect();
            config.dataset.root = trainer::DatasetRoots(urls?);
        }
        if !config.sampler.is_blocks() {
            config.sampler.order = loader::SampleOrder::Blocks;
            println!(
                "streaming: the blocks order ({} episodes a window), each window's videos read once",
                config.sampler.block_episodes
            );
        }
    }
    let requests = if config.dataset.streaming { Vec::new() } else { config.dataset.hub_requests()? };
    if !requests.is_empty() {
        let roots = requests.iter().map(|r| Ok(datasets::hub::resolve_on_terminal(r)?.root)).collect::<Result<_>>()?;
        config.dataset.root = trainer::DatasetRoots(roots);
    }
    if config.dataset.root.is_empty() {
        bail!(
            "no dataset: pass --dataset.root DIR or --dataset.repo_id OWNER/NAME (or --demo to try on a synthetic one)"
        );
    }
    if config.policy.push_to_hub {
        // Checked before training, as LeRobot does, not after hours of it.
        if config.policy.repo_id.is_none() {
            bail!("--policy.push_to_hub needs --policy.repo_id OWNER/NAME: where to push the policy");
        }
        if !config.save_checkpoint || !config.save_lerobot_policy {
            bail!(
                "--policy.push_to_hub pushes the last checkpoint's pretrained_model/: keep save_checkpoint and save_lerobot_policy on"
            );
        }
        if !cfg!(feature = "hub") {
            bail!("--policy.push_to_hub needs the `hub` feature: this build has none");
        }
    }
    Ok(config)
}

/// A dry run: the model built for the dataset, its learnable parameters counted (pretrained
/// weights are neither loaded nor downloaded: they change no count).
struct DryRun {
    config: TrainConfig,
}

impl DeviceTask for DryRun {
    type Output = Result<usize>;
    fn run<B: Kernels>(self, device: B::Device) -> Result<usize> {
        let data = trainer::TrainData::open(&self.config)?;
        let policy = DiffusionConfig { pretrained_backbone_weights: None, ..self.config.policy.config.clone() };
        let model = trainer::init_model::<B>(&policy, &data.features, self.config.seed, &device)?;
        Ok(model.num_learnable_params())
    }
}

/// The run, on this process's devices, reported on a progress bar.
struct Train {
    config: TrainConfig,
    resume: Option<PathBuf>,
    processes: Processes,
}

impl DeviceTask for Train {
    type Output = Result<TrainOutcome>;
    fn run<B: Kernels>(self, device: B::Device) -> Result<TrainOutcome> {
        let bar = indicatif::ProgressBar::new(self.config.steps as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} steps  {per_sec}  eta {eta}  {msg}")
                .expect("a valid template"),
        );
        // Processes that share a machine take the devices after those of the ones before them.
        let (count, skipped) = (self.config.num_devices, self.config.num_devices * self.processes.local_rank());
        let devices = trainer::parallel::devices_from(&device, skipped + count).split_off(skipped);
        let outcome =
            trainer::train_on::<Autodiff<B>>(
                &self.config,
                self.resume.as_deref(),
                devices,
                |progress| match progress {
                    // A hidden bar (output not a terminal) prints nothing: log lines go to stdout then.
                    Progress::Line(line) if bar.is_hidden() => println!("{line}"),
                    Progress::Line(line) => bar.println(line),
                    Progress::Step(step) => {
                        if !bar.message().is_empty() {
                            bar.set_message("");
                        }
                        bar.set_position(step as u64);
                    }
                    Progress::FrameCache { done, total } => {
                        bar.set_message(format!("frame cache {done}/{total} frames"));
                    }
                },
            );
        bar.finish_and_clear();
        Ok(outcome?)
    }
}

/// The Hub URL dataset `repo_id` streams from, at the commit `revision` names.
#[cfg(feature = "stream")]
fn stream_url(repo_id: &str, revision: Option<&str>) -> Result<PathBuf> {
    let url = datasets::remote::hub_url(repo_id, revision, &datasets::HubEnv::from_env())?;
    println!("streaming {repo_id} from {url}");
    Ok(PathBuf::from(url))
}

/// Without streaming, the Hub id as given (opening it then says how to get the feature).
#[cfg(not(feature = "stream"))]
fn stream_url(repo_id: &str, _revision: Option<&str>) -> Result<PathBuf> {
    Ok(PathBuf::from(repo_id))
}
