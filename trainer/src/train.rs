//! The training loop: loader → [`Learner::step`] (transforms, normalisation, forward, MSE,
//! backward, global-norm clipping, Adam) → metrics, with checkpoints and exact resume.
//!
//! Every random draw of a step (noise, timesteps, crops, augmentation) comes from the run's seed
//! and the step number, and the loader's order from the seed and the epoch, so a run resumed from
//! a checkpoint continues exactly as an uninterrupted one would.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use burn::module::{AutodiffModule, Module};
use burn::prelude::*;
use datasets::auto_cache::{self, AutoCache, FrameCacheChoice};
use datasets::{Dataset, DatasetSet, FrameEncoding, OpenOptions, WindowSpec, diffusion_delta_timestamps, frame_cache};
use kernels::Kernels;
use loader::{Loader, SamplerState};
use transforms::{Normalizer, diffusion_mapping};

use crate::checkpoint::{self, CheckpointContents, TrainingState};
use crate::config::{DiffusionConfig, PolicyFeatures};
use crate::ema::Ema;
use crate::error::{Error, Result};
use crate::inputs::InputPipeline;
use crate::lerobot::load_resnet18;
use crate::metrics::{Metrics, MetricsWriter, big_number};
use crate::model::DiffusionModel;
use crate::parallel::{Processes, Replica, Session};
use crate::precision::LossScaler;
use crate::run_config::{DatasetConfig, TrainConfig};
use crate::step::{Learner, StepOutput, TrainingBackend};

/// What a run did.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainOutcome {
    /// Optimiser steps done in total (including before a resume).
    pub steps: usize,
    /// The mean loss of each logging period, by step.
    pub losses: Vec<(usize, f64)>,
    /// The last checkpoint written.
    pub checkpoint: Option<PathBuf>,
    /// Learnable parameters.
    pub num_params: usize,
}

/// What a run reports as it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress<'a> {
    /// A log line (parameter count, metrics, checkpoints).
    Line(&'a str),
    /// Optimiser steps done so far.
    Step(usize),
    /// Frames decoded so far into an automatic frame cache, of `total` (across its cameras).
    FrameCache {
        /// Done.
        done: u64,
        /// To do.
        total: u64,
    },
}

/// The model for `features`, seeded so that two runs start from the same weights, with the
/// pretrained backbone when the configuration names one.
pub fn init_model<B: Kernels>(
    config: &DiffusionConfig,
    features: &PolicyFeatures,
    seed: u64,
    device: &B::Device,
) -> Result<DiffusionModel<B>> {
    // The backend's generator is one per process: two models initialised at once on two threads
    // (two runs in one process, replicas) would otherwise draw from each other's seeding.
    static SEEDED_INIT: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let guard = SEEDED_INIT.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    B::seed(device, seed);
    let mut model = DiffusionModel::new(config, features, device);
    // burn initialises parameters lazily, on first use, from the device's RNG as it is then:
    // draw them all now, in a fixed order, right after seeding.
    crate::model::materialize(&model);
    drop(guard);
    if let Some(path) = &config.pretrained_backbone_weights {
        model.rgb_encoder =
            model.rgb_encoder.into_iter().map(|e| load_resnet18(e, path, device)).collect::<Result<_>>()?;
    }
    Ok(model)
}

/// The dataset side of a run, checked against the policy: the datasets, the features the policy
/// is built for, and the windows its samples need.
pub struct TrainData {
    /// The dataset, or several read as one (LeRobot's `MultiLeRobotDataset`).
    pub datasets: DatasetSet,
    /// What the policy reads and writes.
    pub features: PolicyFeatures,
    /// The observation and action windows (LeRobot's `delta_timestamps` for the policy).
    pub windows: WindowSpec,
    /// The frame cache the loader reads for each dataset (`dataset.frame_cache`; `auto` is
    /// settled by [`Self::settle_frame_cache`]).
    pub frame_caches: Vec<Option<PathBuf>>,
}

impl TrainData {
    /// Opens the datasets of `config` and checks the configuration against them.
    pub fn open(config: &TrainConfig) -> Result<Self> {
        let policy = &config.policy.config;
        if config.batch_size == 0 || config.steps == 0 || config.log_freq == 0 || config.grad_accum == 0 {
            return Err(Error::Config("batch_size, steps, grad_accum and log_freq must be at least 1".into()));
        }
        config.ema.validate()?;
        config.dataset.image_transforms.validate()?;
        let roots = config.dataset.root.paths();
        if roots.is_empty() {
            return Err(Error::Config("no dataset: set dataset.root (or dataset.repo_id, resolved first)".into()));
        }
        if roots.len() > 1 && config.dataset.episodes.is_some() {
            return Err(Error::Config(
                "dataset.episodes chooses episodes of one dataset; with several, each is read whole".into(),
            ));
        }
        let options = OpenOptions { tolerance_s: config.dataset.tolerance_s };
        let mut parts = Vec::with_capacity(roots.len());
        for (name, root) in config.dataset.names().into_iter().zip(roots) {
            parts.push((name, Arc::new(Dataset::open_with(root, options)?)));
        }
        let datasets = DatasetSet::new(parts)?;
        let info = datasets.info();
        let features = PolicyFeatures::from_info(info).map_err(|e| match datasets.left_out() {
            [] => e,
            left_out => Error::Config(format!("{e} (left out as not in every dataset: {})", left_out.join(", "))),
        })?;
        policy.validate(&features)?;
        let deltas = diffusion_delta_timestamps(info, policy.n_obs_steps, policy.horizon);
        let windows = WindowSpec::from_delta_timestamps(&deltas, info, config.dataset.tolerance_s)?;
        let frame_caches = match &config.dataset.frame_cache {
            FrameCacheChoice::Dir(dir) if roots.len() == 1 => vec![Some(dir.clone())],
            FrameCacheChoice::Dir(_) => {
                return Err(Error::Config(
                    "a frame cache folder is one dataset's: with several datasets use frame_cache auto or off".into(),
                ));
            }
            FrameCacheChoice::Auto | FrameCacheChoice::Off => Vec::new(),
        };
        Ok(Self { datasets, features, windows, frame_caches })
    }

    /// The datasets' normalisation statistics (aggregated over several), as the policy uses them.
    pub fn normalizer(&self, config: &TrainConfig) -> Result<Normalizer> {
        Ok(Normalizer::new(
            self.datasets.info(),
            self.datasets.stats(),
            &diffusion_mapping(),
            config.dataset.use_imagenet_stats,
        )?)
    }

    /// The training loader, continuing from `resume`.
    pub fn loader(&self, config: &TrainConfig, resume: SamplerState) -> Result<Loader> {
        self.replica_loader(config, resume, &Replica::single())
    }

    /// The loader of `replica`'s shard of every epoch (every `N`-th sample of LeRobot's order,
    /// from its rank), continuing from `resume`.
    pub fn replica_loader(&self, config: &TrainConfig, resume: SamplerState, replica: &Replica) -> Result<Loader> {
        let mut builder = Loader::builder(self.datasets.clone())
            .shard(replica.rank(), replica.world_size())
            .batch_size(config.batch_size)
            .num_workers(config.num_workers)
            .prefetch(config.prefetch)
            .seed(config.seed)
            .drop_frames(0, config.policy.config.drop_n_last_frames)
            .windows(self.windows.clone())
            .frame_caches(self.frame_caches.clone())
            .order(config.sampler.order, config.sampler.block_episodes)
            .frame_encoding(config.dataset.frame_encoding)
            .resume(resume);
        if let Some(episodes) = &config.dataset.episodes {
            builder = builder.episodes(episodes.clone());
        }
        if let Some(weights) = &config.dataset.weights {
            builder = builder.weights(weights.clone());
        }
        Ok(builder.build()?)
    }

    /// Each dataset's fingerprint: what a checkpoint records, so that a resumed run reads the
    /// same data.
    pub fn fingerprints(&self) -> Result<Vec<u64>> {
        Ok(self.datasets.parts().iter().map(|d| frame_cache::fingerprint(d)).collect::<datasets::Result<_>>()?)
    }

    /// Settles `dataset.frame_cache = auto` (the other choices were settled by [`Self::open`]):
    /// for each dataset, reuses its cache or decodes it first when it fits the budget (what is
    /// left of it), reporting which and why through `on_progress`.
    pub fn settle_frame_cache(
        &mut self,
        config: &TrainConfig,
        on_progress: &mut impl FnMut(Progress<'_>),
    ) -> Result<()> {
        if config.dataset.frame_cache != FrameCacheChoice::Auto {
            return Ok(());
        }
        if config.dataset.frame_encoding != FrameEncoding::Rgb {
            let encoding = config.dataset.frame_encoding;
            on_progress(Progress::Line(&format!(
                "frame cache: off, the {encoding} frame encoding decodes the videos as the samples are read"
            )));
            return Ok(());
        }
        let root = auto_cache::default_root(|name| std::env::var_os(name));
        let mut budget = config.dataset.frame_cache_budget_gb.map(|gb| (gb.max(0.0) * 1e9) as u64);
        let several = self.datasets.parts().len() > 1;
        let mut caches = Vec::with_capacity(self.datasets.parts().len());
        for (part, dataset) in self.datasets.parts().iter().enumerate() {
            let plan = auto_cache::plan(dataset, &root, budget)?;
            let line = plan.to_string();
            let line = if several { format!("{}: {line}", self.datasets.name(part)) } else { line };
            on_progress(Progress::Line(&line));
            caches.push(match plan {
                AutoCache::Ready { dir } => {
                    budget = budget.map(|b| b.saturating_sub(frame_cache::decoded_bytes(dataset)));
                    Some(dir)
                }
                AutoCache::Build { dir, bytes } => {
                    budget = budget.map(|b| b.saturating_sub(bytes));
                    build_frame_cache(dataset, dir, on_progress)
                }
                AutoCache::TooBig { .. } | AutoCache::NoCameras => None,
            });
        }
        self.frame_caches = caches;
        Ok(())
    }
}

/// Decodes `dataset`'s frames into `dir` on the worker pool, from a thread of its own while this
/// one reports them ([`Progress::FrameCache`]); `None` when the build fails (a full /dev/shm,
/// say): the run goes on decoding as it reads, and a bad video file then fails it there, naming
/// the file.
fn build_frame_cache(dataset: &Dataset, dir: PathBuf, on_progress: &mut impl FnMut(Progress<'_>)) -> Option<PathBuf> {
    let total = dataset.len() as u64 * dataset.info().camera_keys().len() as u64;
    let started = Instant::now();
    let done = AtomicU64::new(0);
    let built = std::thread::scope(|scope| {
        let building = scope.spawn(|| {
            frame_cache::write_frame_cache(dataset, &dir, None, &|frames| {
                done.fetch_max(frames, Ordering::Relaxed);
            })
        });
        while !building.is_finished() {
            on_progress(Progress::FrameCache { done: done.load(Ordering::Relaxed), total });
            crate::worker::sleep_helping(Duration::from_millis(100));
        }
        building.join()
    });
    match built.unwrap_or_else(|panic| std::panic::resume_unwind(panic)) {
        Ok(_) => {
            let seconds = started.elapsed().as_secs_f64();
            on_progress(Progress::Line(&format!("frame cache: {total} frames decoded in {seconds:.1} s")));
            Some(dir)
        }
        Err(e) => {
            let message = datasets::error_message(&e);
            on_progress(Progress::Line(&format!(
                "frame cache: off, building it failed ({message}); decoding as the samples are read"
            )));
            None
        }
    }
}

/// Trains as `config` says on backend `B`'s `device`; continues from `resume` (an output folder
/// or a checkpoint) when given. `on_progress` receives every log line and every step.
pub fn train<B: TrainingBackend>(
    config: &TrainConfig,
    resume: Option<&Path>,
    device: B::Device,
    on_progress: impl FnMut(Progress<'_>),
) -> Result<TrainOutcome> {
    train_on::<B>(config, resume, vec![device], on_progress)
}

/// Trains as `config` says with one replica of the model on each of `devices` (data-parallel:
/// each replica reads its shard of every epoch, and the gradients are averaged over the
/// replicas every step; with one device, the plain loop). When [`crate::parallel::launch`]
/// found this process to be one of several, the replicas are those of every process, each
/// with its `devices`. Rank 0 logs and writes checkpoints; `on_progress` is called on this thread.
///
/// A failure in one of several processes ends them all (`MPI_Abort`, after printing the
/// error): the others wait for this one in collective calls.
pub fn train_on<B: TrainingBackend>(
    config: &TrainConfig,
    resume: Option<&Path>,
    devices: Vec<B::Device>,
    mut on_progress: impl FnMut(Progress<'_>),
) -> Result<TrainOutcome> {
    let processes = Processes::current();
    let outcome = train_processes::<B>(config, resume, devices, processes, &mut on_progress);
    if let Err(error) = &outcome
        && processes.count() > 1
    {
        processes.abort_run(error);
    }
    outcome
}

/// [`train_on`] in this process, one of `processes`.
fn train_processes<B: TrainingBackend>(
    config: &TrainConfig,
    resume: Option<&Path>,
    devices: Vec<B::Device>,
    processes: Processes,
    on_progress: &mut impl FnMut(Progress<'_>),
) -> Result<TrainOutcome> {
    if devices.is_empty() {
        return Err(Error::Config("no device to train on".into()));
    }
    let mut run = TrainData::open(config)?;
    if resume.is_none() && checkpoint::checkpoints_dir(&config.output_dir).exists() {
        return Err(Error::Config(format!(
            "{} already holds a run: pass --resume {0} to continue it, or choose another --output_dir",
            config.output_dir.display()
        )));
    }
    checkpoint::remove_partial(&config.output_dir)?;
    run.settle_frame_cache(config, &mut *on_progress)?;
    let local = devices.len();
    if local == 1 && processes.count() == 1 {
        let device = devices.into_iter().next().expect("one device");
        return train_replica::<B>(config, &run, resume, device, &Replica::single(), on_progress);
    }
    let world = local * processes.count();
    if processes.count() > 1 {
        // The datasets' folders may differ between machines; their frames may not.
        let compared = TrainConfig {
            dataset: DatasetConfig { root: Default::default(), ..config.dataset.clone() },
            ..config.clone()
        };
        let frames = run.datasets.len();
        let arguments =
            serde_json::to_vec(&(compared, local, resume, frames)).map_err(|e| Error::Config(e.to_string()))?;
        processes.check_same(twox_hash::XxHash64::oneshot(0, &arguments), "configuration, dataset or device count")?;
    }
    if processes.is_main() {
        let machines = match processes.count() {
            1 => String::new(),
            n => format!(" ({n} processes x {local} devices)"),
        };
        on_progress(Progress::Line(&format!(
            "data-parallel: {world} replicas{machines}; effective batch size {} = {} per device x {world} devices x {} \
             accumulated",
            config.batch_size * world * config.grad_accum,
            config.batch_size,
            config.grad_accum
        )));
    }
    let session = Session::new(local);
    if local == 1 {
        let device = devices.into_iter().next().expect("one device");
        return train_replica::<B>(config, &run, resume, device, &session.replicas()[0], on_progress);
    }
    train_replicas::<B>(config, &run, resume, devices, &session, on_progress)
}

/// This process's replicas, one per device on a thread of its own, supervised from this thread:
/// it forwards their progress and, when one fails, stops the others.
fn train_replicas<B: TrainingBackend>(
    config: &TrainConfig,
    run: &TrainData,
    resume: Option<&Path>,
    devices: Vec<B::Device>,
    session: &Session,
    on_progress: &mut impl FnMut(Progress<'_>),
) -> Result<TrainOutcome> {
    let local = devices.len();
    std::thread::scope(|scope| {
        let (events, reports) = std::sync::mpsc::channel::<ReplicaEvent>();
        let threads: Vec<_> = devices
            .into_iter()
            .zip(session.replicas())
            .map(|(device, replica)| {
                let events = events.clone();
                std::thread::Builder::new()
                    .name(format!("replica-{}", replica.rank()))
                    .spawn_scoped(scope, move || {
                        let mut report = |progress: Progress<'_>| {
                            // A closed channel means the supervisor is gone: nothing to tell.
                            let _ = events.send(ReplicaEvent::from(progress));
                        };
                        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            train_replica::<B>(config, run, resume, device, replica, &mut report)
                        }))
                        .unwrap_or_else(|panic| {
                            Err(Error::Replicas(format!("rank {} panicked: {}", replica.rank(), panic_message(&panic))))
                        });
                        let _ = events.send(ReplicaEvent::Done(replica.local_rank(), Box::new(outcome)));
                    })
                    .map_err(|e| Error::Replicas(format!("starting replica {}: {e}", replica.rank())))
            })
            .collect::<Result<_>>()?;
        drop(events);
        let mut outcomes: Vec<Option<Result<TrainOutcome>>> = (0..local).map(|_| None).collect();
        loop {
            let event = match reports.try_recv() {
                Ok(event) => event,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => break,
                Err(std::sync::mpsc::TryRecvError::Empty) => {
                    // The replicas hand their operations to rayon's pool; help it meanwhile.
                    crate::worker::sleep_helping(Duration::from_millis(5));
                    continue;
                }
            };
            match event {
                ReplicaEvent::Line(line) => on_progress(Progress::Line(&line)),
                ReplicaEvent::Step(step) => on_progress(Progress::Step(step)),
                ReplicaEvent::Done(local_rank, outcome) => {
                    let failed = outcome.is_err();
                    outcomes[local_rank] = Some(*outcome);
                    if failed {
                        // Wake the replicas waiting for this one, then collect what they say.
                        session.abort::<B::InnerBackend>(|| {
                            threads.iter().all(std::thread::ScopedJoinHandle::is_finished)
                        });
                    }
                }
            }
        }
        // The first error that is not "another rank failed" is the cause; otherwise the first
        // replica's run.
        let mut outcomes: Vec<Result<TrainOutcome>> = outcomes
            .into_iter()
            .zip(session.replicas())
            .map(|(o, replica)| {
                o.unwrap_or_else(|| Err(Error::Replicas(format!("rank {} ended without a word", replica.rank()))))
            })
            .collect();
        if let Some(cause) = outcomes.iter().position(|o| o.as_ref().is_err_and(|e| !is_abort(e))) {
            return outcomes.swap_remove(cause);
        }
        outcomes.swap_remove(0)
    })
}

/// What a replica's thread tells the supervising one.
enum ReplicaEvent {
    Line(String),
    Step(usize),
    Done(usize, Box<Result<TrainOutcome>>),
}

impl From<Progress<'_>> for ReplicaEvent {
    fn from(progress: Progress<'_>) -> Self {
        match progress {
            Progress::Line(line) => Self::Line(line.to_string()),
            Progress::Step(step) => Self::Step(step),
            Progress::FrameCache { done, total } => Self::Line(format!("frame cache {done}/{total}")),
        }
    }
}

/// Whether `error` is a replica stopping because another failed.
fn is_abort(error: &Error) -> bool {
    matches!(error, Error::StoppedByAnotherReplica { .. })
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(ToString::to_string)
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

/// One replica's run (the whole run with one device): joins the replicas' session, starts or
/// resumes, then steps, logging and checkpointing on rank 0, and leaves the session. After an
/// error it leaves nothing: the supervisor resets the session once a replica fails.
fn train_replica<B: TrainingBackend>(
    config: &TrainConfig,
    run: &TrainData,
    resume: Option<&Path>,
    device: B::Device,
    replica: &Replica,
    on_progress: &mut impl FnMut(Progress<'_>),
) -> Result<TrainOutcome> {
    // First: the others wait in the session for every replica to join.
    replica.register::<B::InnerBackend>(&device)?;
    let main = replica.is_main();
    let mut quiet = |_: Progress<'_>| {};
    let report: &mut dyn FnMut(Progress<'_>) = if main { on_progress } else { &mut quiet };
    let Start { learner, mut state, normalizer } = match resume {
        None => start_fresh::<B>(config, run, device, replica.world_size())?,
        Some(path) => resume_from::<B>(config, run, path, device, replica.world_size(), &mut *report)?,
    };
    let mut learner = learner.with_replica(replica.clone());
    learner.sync_weights()?;
    let mut loader = run.replica_loader(config, state.sampler, replica)?;
    if let Some(bound) = loader.frame_buffer_bound() {
        report(Progress::Line(&format!(
            "sampler: blocks of {} episodes, each video frame decoded once per epoch; their decoded frames take up \
             to {:.2} GB",
            config.sampler.block_episodes,
            bound as f64 / 1e9
        )));
    }

    let num_params = learner.model().num_learnable_params();
    report(Progress::Line(&format!("num_learnable_params={num_params} ({})", big_number(num_params as f64))));
    let mut metrics = if main { Some(MetricsWriter::open(&config.output_dir)?) } else { None };
    let saver = CheckpointWriter {
        config,
        config_json: serde_json::to_value(config).map_err(|e| Error::Config(e.to_string()))?,
        normalizer: &normalizer,
        features: &run.features,
    };
    // The frames and episodes sampled from: LeRobot's `num_frames` and `num_episodes`.
    let all = run.datasets.parts().iter().flat_map(|d| d.episodes());
    let sampled: Vec<&datasets::Episode> = match &config.dataset.episodes {
        Some(list) => all.filter(|e| list.contains(&e.index)).collect(),
        None => all.collect(),
    };
    let frames = sampled.iter().map(|e| e.frames.len()).sum::<usize>().max(1) as f64;
    let episode_len = frames / sampled.len().max(1) as f64;

    let mut losses = Vec::new();
    let mut last_checkpoint = None;
    let mut period = Period::default();
    while state.step < config.steps {
        period.add(optimiser_step(&mut learner, &mut loader, &mut state, config.grad_accum)?);
        report(Progress::Step(state.step));
        if state.step % config.log_freq == 0 || state.step == config.steps {
            // Every replica takes part: the loss logged is the mean over all of them.
            let m = period.take(state.step, state.samples, episode_len, frames, replica)?;
            losses.push((state.step, m.loss));
            report(Progress::Line(&m.line()));
            if let Some(metrics) = &mut metrics {
                metrics.write(&m)?;
            }
        }
        if saver.due(state.step) {
            learner.check_replicas_agree()?;
            if main {
                let dir = saver.save(&learner, &state)?;
                report(Progress::Line(&format!("checkpoint {}", dir.display())));
                last_checkpoint = Some(dir);
            }
        }
    }
    replica.finish::<B::InnerBackend>()?;
    Ok(TrainOutcome { steps: state.step, losses, checkpoint: last_checkpoint, num_params })
}

/// Whether two sets of sampling weights are the same, up to the last bit a JSON round trip may
/// lose.
fn same_weights(a: Option<&[f64]>, b: Option<&[f64]>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() <= 1e-12 * x.abs().max(y.abs()))
        }
        _ => false,
    }
}

/// Where a run starts: the learner, the training state and the normalisation statistics.
struct Start<B: TrainingBackend> {
    learner: Learner<B>,
    state: TrainingState,
    normalizer: Normalizer,
}

/// A new run: seeded weights, the dataset's statistics, step 0.
fn start_fresh<B: TrainingBackend>(
    config: &TrainConfig,
    run: &TrainData,
    device: B::Device,
    world_size: usize,
) -> Result<Start<B>> {
    let model = init_model::<B>(&config.policy.config, &run.features, config.seed, &device)?;
    let normalizer = run.normalizer(config)?;
    let ema = config.ema.enable.then(|| Ema::new(&model.valid(), config.ema.clone()));
    let learner = build_learner(config, run, model, &normalizer, ema, device)?;
    let state = TrainingState {
        step: 0,
        sampler: SamplerState::default(),
        seed: config.seed,
        samples: 0,
        loss_scale: None,
        datasets: run.fingerprints()?,
        weights: config.dataset.weights.clone(),
        world_size,
        sampler_order: config.sampler,
    };
    Ok(Start { learner, state, normalizer })
}

/// A run continued from the checkpoint at `path`: its weights, optimiser state, EMA, loss
/// scale, statistics and training state (sampler position included).
fn resume_from<B: TrainingBackend>(
    config: &TrainConfig,
    run: &TrainData,
    path: &Path,
    device: B::Device,
    world_size: usize,
    on_progress: &mut dyn FnMut(Progress<'_>),
) -> Result<Start<B>> {
    let policy = &config.policy.config;
    let dir = checkpoint::resolve(path)?;
    let state: TrainingState = checkpoint::read_json(&dir, "training_state.json")?;
    if state.seed != config.seed {
        return Err(Error::Config(format!(
            "the checkpoint was trained with seed {}, this run has {}",
            state.seed, config.seed
        )));
    }
    // The sampler's position means something only over the same datasets, weighted the same way
    // (checkpoints from before several datasets record none).
    let fingerprints = run.fingerprints()?;
    if !state.datasets.is_empty() && state.datasets != fingerprints {
        let names = (0..fingerprints.len()).map(|i| run.datasets.name(i)).collect::<Vec<_>>().join(", ");
        return Err(Error::Config(format!(
            "the checkpoint was trained on {} dataset(s) other than this run's {names} (another dataset, \
             or one changed since): its sampler position would mean other samples",
            state.datasets.len()
        )));
    }
    // Each replica's sampler position is in its own shard of every epoch.
    if state.world_size != world_size {
        return Err(Error::Config(format!(
            "the checkpoint was trained on {} device(s), this run has {world_size}: its sampler position \
             is one shard's of {0} (resume on {0} devices)",
            state.world_size
        )));
    }
    if !same_weights(state.weights.as_deref(), config.dataset.weights.as_deref()) {
        return Err(Error::Config(format!(
            "the checkpoint was trained with dataset weights {:?}, this run has {:?}",
            state.weights, config.dataset.weights
        )));
    }
    if !state.sampler_order.same_order(&config.sampler) {
        return Err(Error::Config(format!(
            "the checkpoint was trained in the sampler order {:?}, this run asks for {:?}: its sampler \
             position would mean other samples",
            state.sampler_order, config.sampler
        )));
    }
    let normalizer: Normalizer = checkpoint::read_json(&dir, "normalizer.json")?;
    let model = DiffusionModel::<B>::new(policy, &run.features, &device)
        .load_file(dir.join("model"), &checkpoint::recorder(), &device)
        .map_err(|e| Error::checkpoint(&dir, format!("model: {e}")))?;
    let ema = if !config.ema.enable {
        None
    } else if dir.join("ema.mpk").exists() {
        let average = DiffusionModel::<B::InnerBackend>::new(policy, &run.features, &device)
            .load_file(dir.join("ema"), &checkpoint::recorder(), &device)
            .map_err(|e| Error::checkpoint(&dir, format!("ema: {e}")))?;
        Some(Ema::new(&average, config.ema.clone()))
    } else {
        on_progress(Progress::Line("the checkpoint has no EMA: starting one from its weights"));
        Some(Ema::new(&model.valid(), config.ema.clone()))
    };
    let mut learner = build_learner(config, run, model, &normalizer, ema, device.clone())?;
    if let Some(scale) = state.loss_scale {
        learner = learner.with_loss_scaler(LossScaler::from_state(scale));
    }
    let optim = checkpoint::load_record::<B::InnerBackend, _>(&dir, "optimizer", &device).map_err(|e| match e {
        Error::Checkpoint { path, message } => Error::Checkpoint {
            path,
            message: format!(
                "{message} (checkpoints written before the flat optimiser keep burn's per-parameter \
                 Adam state, which this version cannot resume: start a new run)"
            ),
        },
        other => other,
    })?;
    let learner = learner.with_optimizer(optim).map_err(|e| Error::checkpoint(&dir, e))?;
    on_progress(Progress::Line(&format!("resuming from {} at step {}", dir.display(), state.step)));
    Ok(Start { learner, state, normalizer })
}

/// A learner for `model` set up as `config` says: input pipeline, precision, gradient
/// accumulation, EMA.
fn build_learner<B: TrainingBackend>(
    config: &TrainConfig,
    run: &TrainData,
    model: DiffusionModel<B>,
    normalizer: &Normalizer,
    ema: Option<Ema<B::InnerBackend>>,
    device: B::Device,
) -> Result<Learner<B>> {
    let policy = &config.policy.config;
    let pipeline = InputPipeline::new(
        policy.clone(),
        run.features.clone(),
        normalizer.clone(),
        config.dataset.image_transforms.clone(),
    );
    let learner = Learner::new(model, policy.clone(), pipeline, config.seed, config.steps, device)
        .with_precision(config.precision)?
        .with_grad_accum(config.grad_accum);
    match ema {
        Some(ema) => learner.with_ema(ema),
        None => Ok(learner),
    }
}

/// What one optimiser step did and how long it waited for data and computed.
struct StepDone<B: Backend> {
    output: StepOutput<B>,
    data_s: f64,
    compute_s: f64,
    samples: usize,
}

/// One optimiser step over `grad_accum` batches from `loader`; advances `state`.
fn optimiser_step<B: TrainingBackend>(
    learner: &mut Learner<B>,
    loader: &mut Loader,
    state: &mut TrainingState,
    grad_accum: usize,
) -> Result<StepDone<B::InnerBackend>> {
    let (mut data_s, mut compute_s, mut samples) = (0.0, 0.0, 0);
    for micro in 0..grad_accum {
        let waited = Instant::now();
        let batch = loader.next().ok_or(Error::LoaderEnded { step: state.step })??;
        data_s += waited.elapsed().as_secs_f64();
        let computed = Instant::now();
        learner.accumulate(&batch, state.step, micro)?;
        compute_s += computed.elapsed().as_secs_f64();
        samples += batch.len();
        state.sampler = batch.state();
    }
    let computed = Instant::now();
    let output = learner.finish(state.step)?;
    compute_s += computed.elapsed().as_secs_f64();
    state.step += 1;
    // Every replica's batches are as long as this one's (the shards are equally long).
    let samples = samples * learner.replica().world_size();
    state.samples += samples as u64;
    state.loss_scale = learner.loss_scaler().map(LossScaler::state);
    Ok(StepDone { output, data_s, compute_s, samples })
}

/// Writes the run's checkpoints: when they are due, and what goes in them beside the weights.
struct CheckpointWriter<'a> {
    config: &'a TrainConfig,
    config_json: serde_json::Value,
    normalizer: &'a Normalizer,
    features: &'a PolicyFeatures,
}

impl CheckpointWriter<'_> {
    /// Whether a checkpoint is due after optimiser step `step`: every `save_freq` steps and at
    /// the end.
    fn due(&self, step: usize) -> bool {
        let config = self.config;
        config.save_checkpoint
            && (step == config.steps || (config.save_freq > 0 && step.is_multiple_of(config.save_freq)))
    }

    /// Saves the model, optimiser, EMA and `state` atomically; returns the checkpoint folder.
    fn save<B: TrainingBackend>(&self, learner: &Learner<B>, state: &TrainingState) -> Result<PathBuf> {
        let contents = CheckpointContents {
            state,
            config: &self.config_json,
            normalizer: self.normalizer,
            features: self.features,
        };
        let optim_record = learner.optimizer().to_record();
        let ema = learner.ema_model();
        checkpoint::save::<B, _>(&self.config.output_dir, learner.model(), &contents, |tmp| {
            checkpoint::save_record::<B::InnerBackend, _>(tmp, "optimizer", optim_record)?;
            match ema {
                Some(ema) => checkpoint::save_record::<B::InnerBackend, _>(tmp, "ema", ema.into_record()),
                None => Ok(()),
            }
        })
    }
}

/// Sums over one logging period, on the device until read.
struct Period<B: Backend> {
    loss: Option<Tensor<B, 1>>,
    norm: Option<Tensor<B, 1>>,
    lr: f64,
    steps: usize,
    samples: usize,
    data_s: f64,
    update_s: f64,
    skipped: usize,
    loss_scale: Option<f32>,
    started: Instant,
}

impl<B: Backend> Default for Period<B> {
    fn default() -> Self {
        Self {
            loss: None,
            norm: None,
            lr: 0.0,
            steps: 0,
            samples: 0,
            data_s: 0.0,
            update_s: 0.0,
            skipped: 0,
            loss_scale: None,
            started: Instant::now(),
        }
    }
}

impl<B: Backend> Period<B> {
    fn add(&mut self, step: StepDone<B>) {
        let StepDone { output, data_s, compute_s: update_s, samples } = step;
        let add = |acc: Option<Tensor<B, 1>>, x: Tensor<B, 1>| Some(acc.map_or(x.clone(), |a| a + x));
        self.loss = add(self.loss.take(), output.loss);
        self.norm = add(self.norm.take(), output.grad_norm);
        self.lr = output.lr;
        self.skipped += usize::from(!output.applied);
        self.loss_scale = output.loss_scale;
        self.steps += 1;
        self.samples += samples;
        self.data_s += data_s;
        self.update_s += update_s;
    }

    /// The period's metrics (the loss averaged over the replicas: each takes part), and a new
    /// period.
    fn take(&mut self, step: usize, samples: u64, episode_len: f64, frames: f64, replica: &Replica) -> Result<Metrics> {
        let n = self.steps.max(1) as f64;
        if let Some(loss) = self.loss.take() {
            self.loss = Some(replica.all_reduce_mean(loss)?);
        }
        let scalar = |t: Option<Tensor<B, 1>>| t.map_or(0.0, |t| f64::from(t.into_scalar().elem::<f32>()));
        let m = Metrics {
            step,
            samples,
            episodes: samples as f64 / episode_len,
            epochs: samples as f64 / frames,
            loss: scalar(self.loss.take()) / n,
            grad_norm: scalar(self.norm.take()) / n,
            lr: self.lr,
            update_s: self.update_s / n,
            data_s: self.data_s / n,
            samples_per_s: self.samples as f64 / self.started.elapsed().as_secs_f64().max(1e-9),
            loss_scale: self.loss_scale,
            skipped: self.skipped,
        };
        *self = Self::default();
        Ok(m)
    }
}
