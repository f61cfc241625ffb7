//! A run's data: the datasets opened and checked against the policy, their normalisation
//! statistics, the frame cache settled (`--frame-cache auto` reuses or builds one) and the
//! loader of each replica's shard.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use datasets::auto_cache::{self, AutoCache, FrameCacheChoice};
use datasets::frame_cache::{CacheFormat, FrameCache};
use datasets::{
    Dataset, DatasetSet, FrameEncoding, FrameShape, OpenOptions, WindowSpec, diffusion_delta_timestamps, frame_cache,
};
use kernels::Kernels;
use loader::{Loader, SamplerState};
use transforms::{Normalizer, diffusion_mapping};

use super::held_out::{cap_eval_frames, split_train_eval};
use super::outcome::Progress;
use crate::device_frames;
use crate::device_frames::DeviceFrames;
use crate::error::{Error, Result};
use crate::frame_encoding::{self, FrameEncodingChoice};
use crate::parallel::Replica;
use crate::policy_config::PolicyFeatures;
use crate::train_config::TrainConfig;

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
    /// How the loaders hand video frames over (`dataset.frame_encoding`; `auto` is the frame
    /// cache folder's encoding when one is named, else RGB until [`Self::settle_frame_cache`]).
    pub frame_encoding: FrameEncoding,
    /// The episodes trained on: `dataset.episodes` less those held out (none: every episode).
    pub train_episodes: Option<Vec<usize>>,
    /// The episodes held out for the held-out loss (`dataset.eval_split`).
    pub eval_episodes: Vec<usize>,
    /// The held-out frames read, in order, when `max_eval_samples` caps them (none: every frame
    /// of the held-out episodes, in dataset order).
    pub eval_frames: Option<Vec<usize>>,
    /// Whether the training loaders hand the cameras' frames over as their rows in the frame
    /// caches, whose frames each replica keeps on its device (`dataset.frames_on_device`,
    /// settled by [`Self::settle_frames_on_device`]; [`Self::device_frames`]).
    pub frames_on_device: bool,
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
            let dataset = if config.dataset.streaming {
                super::streaming::open_streamed(root, &config.dataset, options)?
            } else {
                Dataset::open_for(root, options, config.dataset.episodes.as_deref())?
            };
            if let Some(read) = dataset.read_episodes() {
                tracing::info!("{name}: reading episodes {read:?} only (the other episodes' files are not here)");
            }
            parts.push((name, Arc::new(dataset)));
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
        let mut frame_encoding = config.dataset.frame_encoding.fixed().unwrap_or_default();
        let frame_caches = match &config.dataset.frame_cache {
            FrameCacheChoice::Dir(_) if config.dataset.streaming => {
                return Err(Error::Config(
                    "a frame cache folder holds a local dataset's frames: with dataset.streaming, frames are decoded \
                     from the stream (frame_cache auto or off)"
                        .into(),
                ));
            }
            FrameCacheChoice::Dir(dir) if roots.len() == 1 => {
                if config.dataset.frame_encoding == FrameEncodingChoice::Auto {
                    frame_encoding = FrameCache::open(dir, &datasets.parts()[0])?.encoding();
                }
                vec![Some(dir.clone())]
            }
            FrameCacheChoice::Dir(_) => {
                return Err(Error::Config(
                    "a frame cache folder is one dataset's: with several datasets use frame_cache auto or off".into(),
                ));
            }
            FrameCacheChoice::Auto | FrameCacheChoice::Off => Vec::new(),
        };
        let mut data = Self {
            datasets,
            features,
            windows,
            frame_caches,
            frame_encoding,
            train_episodes: None,
            eval_episodes: Vec::new(),
            eval_frames: None,
            frames_on_device: false,
        };
        (data.train_episodes, data.eval_episodes) = choose_episodes(&data, config)?;
        data.eval_frames = eval_frames(&data, config)?;
        Ok(data)
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
            .ordering(config.sampler)
            .frame_encoding(self.frame_encoding)
            .frame_rows(self.frames_on_device)
            .resume(resume);
        if let Some(episodes) = &self.train_episodes {
            builder = builder.episodes(episodes.clone());
        }
        if let Some(weights) = &config.dataset.weights {
            builder = builder.weights(weights.clone());
        }
        Ok(builder.build()?)
    }

    /// The held-out episodes' frames, every one once in dataset order (or those `eval_frames`
    /// lists, in its order), the last batch possibly shorter, as LeRobot's evaluation
    /// `DataLoader` gives them.
    pub fn eval_loader(&self, config: &TrainConfig) -> Result<Loader> {
        let builder = Loader::builder(self.datasets.clone());
        let builder = match &self.eval_frames {
            Some(frames) => builder.frames(frames.clone()),
            None => builder.episodes(self.eval_episodes.clone()),
        };
        Ok(builder
            .batch_size(config.batch_size)
            .num_workers(config.num_workers)
            .prefetch(config.prefetch)
            .shuffle(false)
            .drop_last(false)
            .drop_frames(0, 0)
            .windows(self.windows.clone())
            .frame_caches(self.frame_caches.clone())
            .frame_encoding(self.frame_encoding)
            .max_epochs(1)
            .build()?)
    }

    /// Each dataset's fingerprint: what a checkpoint records, so that a resumed run reads the
    /// same data.
    pub fn fingerprints(&self) -> Result<Vec<u64>> {
        Ok(self.datasets.parts().iter().map(|d| frame_cache::fingerprint(d)).collect::<datasets::Result<_>>()?)
    }

    /// The frames and episodes trained on (the chosen episodes less the held-out ones, or all): LeRobot's
    /// `num_frames` and `num_episodes`, from which the log counts epochs and episodes.
    pub fn sampled(&self) -> Sampled {
        let all = self.datasets.parts().iter().flat_map(|d| d.episodes());
        let sampled: Vec<&datasets::Episode> = match &self.train_episodes {
            Some(list) => all.filter(|e| list.contains(&e.index)).collect(),
            None => all.collect(),
        };
        Sampled { frames: sampled.iter().map(|e| e.frames.len()).sum(), episodes: sampled.len() }
    }

    /// Settles `dataset.frame_encoding = auto` and `dataset.frame_cache = auto` (the other
    /// choices were settled by [`Self::open`]), reporting each choice and why through
    /// `on_progress`: the encoding the device prefers; then, for each
    /// dataset, its cache reused, or decoded first when it fits the budget (what is left of
    /// it). A cache fixes the run's encoding to its own (the policy's images resized, in RGB,
    /// where the planes do not fit), which the caches of the datasets after it then share.
    pub fn settle_frame_cache(
        &mut self,
        config: &TrainConfig,
        on_progress: &mut impl FnMut(Progress<'_>),
    ) -> Result<()> {
        let root = auto_cache::default_root(|name| std::env::var_os(name));
        self.settle_frame_cache_in(config, &root, on_progress)
    }

    /// [`Self::settle_frame_cache`] with the automatic caches in `root` (where
    /// [`auto_cache::default_root`] would say).
    pub fn settle_frame_cache_in(
        &mut self,
        config: &TrainConfig,
        root: &Path,
        on_progress: &mut impl FnMut(Progress<'_>),
    ) -> Result<()> {
        let auto_encoding = config.dataset.frame_encoding == FrameEncodingChoice::Auto;
        let mut encoding_line = None;
        if auto_encoding {
            encoding_line = Some(match &config.dataset.frame_cache {
                FrameCacheChoice::Dir(dir) => stored_encoding_line(self.frame_encoding, dir),
                FrameCacheChoice::Auto | FrameCacheChoice::Off => {
                    let (encoding, line) = frame_encoding::preferred(config.device, &self.datasets);
                    self.frame_encoding = encoding;
                    line
                }
            });
        }
        // A streamed dataset's frames are decoded from the stream, in the blocks order.
        if config.dataset.frame_cache != FrameCacheChoice::Auto || config.dataset.streaming {
            if let Some(line) = encoding_line {
                on_progress(Progress::Line(&line));
            }
            if config.dataset.streaming {
                on_progress(Progress::Line("frame cache: off, the dataset is streamed (its frames decoded as read)"));
            }
            return Ok(());
        }
        let budget = config.dataset.frame_cache_budget_gb.map(|gb| (gb.max(0.0) * 1e9) as u64);
        let several = self.datasets.parts().len() > 1;
        // The encoding is the run's own until a cache is read: then every cache has to share it.
        let mut encoding_fixed = !auto_encoding;
        let mut caches: Vec<Option<PathBuf>> = Vec::with_capacity(self.datasets.parts().len());
        for (part, dataset) in self.datasets.parts().iter().enumerate() {
            let formats = cache_formats(config, &self.datasets, self.frame_encoding, encoding_fixed);
            let chosen: Vec<PathBuf> = caches.iter().flatten().cloned().collect();
            let plan = auto_cache::plan(dataset, &formats, root, budget, &chosen)?;
            for removal in &plan.removed {
                on_progress(Progress::Line(&removal.to_string()));
            }
            let line = plan.cache.to_string();
            let line = if several { format!("{}: {line}", self.datasets.name(part)) } else { line };
            on_progress(Progress::Line(&line));
            let cache = match plan.cache {
                AutoCache::Ready { dir } => Some(dir),
                AutoCache::Build { dir, format, .. } => build_frame_cache(dataset, dir, &format, on_progress),
                AutoCache::TooBig { .. } | AutoCache::NoCameras | AutoCache::SomeEpisodes => None,
            };
            if let Some(dir) = &cache {
                let stored = FrameCache::open(dir, dataset)?.encoding();
                if stored != self.frame_encoding {
                    encoding_line = Some(stored_encoding_line(stored, dir));
                }
                self.frame_encoding = stored;
                encoding_fixed = true;
            }
            caches.push(cache);
        }
        if let Some(line) = encoding_line {
            on_progress(Progress::Line(&line));
        }
        self.frame_caches = caches;
        Ok(())
    }

    /// Settles `dataset.frames_on_device` for a run on `device` (after
    /// [`Self::settle_frame_cache`]), reporting the choice and why through `on_progress`.
    pub fn settle_frames_on_device<B: Kernels>(
        &mut self,
        config: &TrainConfig,
        device: &B::Device,
        on_progress: &mut impl FnMut(Progress<'_>),
    ) -> Result<()> {
        let caches = self.open_frame_caches()?;
        let choice = config.dataset.frames_on_device;
        let (on, line) = device_frames::decide::<B>(choice, &caches, &self.camera_keys(), device)?;
        if let Some(line) = line {
            on_progress(Progress::Line(&line));
        }
        self.frames_on_device = on;
        Ok(())
    }

    /// The frames of the policy's cameras in `device`'s memory, where the run keeps them there
    /// ([`Self::frames_on_device`]).
    pub fn device_frames<B: Kernels>(&self, device: &B::Device) -> Result<Option<DeviceFrames<B>>> {
        if !self.frames_on_device {
            return Ok(None);
        }
        let caches: Vec<FrameCache> = self.open_frame_caches()?.into_iter().flatten().collect();
        Ok(Some(DeviceFrames::upload(&caches, &self.camera_keys(), device)?))
    }

    /// Each dataset's frame cache, opened (none where it has none).
    fn open_frame_caches(&self) -> Result<Vec<Option<FrameCache>>> {
        let parts = self.datasets.parts();
        (0..parts.len())
            .map(|part| match self.frame_caches.get(part).and_then(Option::as_ref) {
                Some(dir) => Ok(Some(FrameCache::open(dir, &parts[part])?)),
                None => Ok(None),
            })
            .collect()
    }

    /// The policy's cameras, by key.
    fn camera_keys(&self) -> Vec<String> {
        self.features.cameras.iter().map(|(key, _)| key.clone()).collect()
    }
}

/// The log line of a run reading the frames in `encoding` because the frame cache in `dir` stores
/// them so.
fn stored_encoding_line(encoding: FrameEncoding, dir: &Path) -> String {
    format!("frame encoding: {encoding}, as the frame cache in {} stores the frames", dir.display())
}

/// The automatic cache's formats for a dataset of a run reading frames in `encoding`, in its
/// order of preference: the frames as read; then, when the policy resizes its images
/// (`resize_shape`) and no augmentation comes before that resize, the frames already resized
/// (in RGB, within one level of the resize on the device), for a dataset too large to cache at
/// its cameras' size: when the run reads RGB, or may still switch to it (its `encoding` not
/// `fixed` by an earlier dataset's cache or the configuration).
fn cache_formats(
    config: &TrainConfig,
    datasets: &DatasetSet,
    encoding: FrameEncoding,
    fixed: bool,
) -> Vec<CacheFormat> {
    let mut formats = vec![CacheFormat::encoded(encoding)];
    let info = datasets.info();
    let cameras: Vec<FrameShape> = info
        .camera_keys()
        .iter()
        .filter_map(|k| info.feature(k.as_str()).and_then(datasets::Feature::frame_shape))
        .collect();
    if let Some([height, width]) = config.policy.config.resize_shape
        && (encoding == FrameEncoding::Rgb || !fixed)
        && !config.dataset.image_transforms.is_active()
        && cameras.iter().any(|c| (c.height, c.width) != (height, width))
    {
        formats.push(CacheFormat { resize: Some((height, width)), encoding: FrameEncoding::Rgb });
    }
    formats
}

/// Decodes `dataset`'s frames into `dir` on the worker pool, from a thread of its own while this
/// one reports them ([`Progress::FrameCache`]); `None` when the build fails (a full /dev/shm,
/// say): the run goes on decoding as it reads, and a bad video file then fails it there, naming
/// the file.
fn build_frame_cache(
    dataset: &Dataset,
    dir: PathBuf,
    format: &CacheFormat,
    on_progress: &mut impl FnMut(Progress<'_>),
) -> Option<PathBuf> {
    let total = dataset.len() as u64 * dataset.info().camera_keys().len() as u64;
    let started = Instant::now();
    let done = AtomicU64::new(0);
    let built = std::thread::scope(|scope| {
        let building = scope.spawn(|| {
            frame_cache::write_frame_cache(dataset, &dir, format, &|frames| {
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
            on_progress(Progress::Line(&auto_cache::build_failed_line(&e)));
            None
        }
    }
}

/// How much a run samples from: LeRobot's `num_frames` and `num_episodes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sampled {
    /// Frames of the sampled episodes.
    pub frames: usize,
    /// Episodes sampled.
    pub episodes: usize,
}

/// The episodes a run trains on and those it holds out, from `config`'s `dataset.episodes` and
/// `dataset.eval_split` (checked here: in [0, 1), one dataset, some episodes left to train on).
fn choose_episodes(data: &TrainData, config: &TrainConfig) -> Result<(Option<Vec<usize>>, Vec<usize>)> {
    let split = config.dataset.eval_split;
    if !(0.0..1.0).contains(&split) {
        return Err(Error::Config(format!("dataset.eval_split is {split}: it must be in [0, 1)")));
    }
    if config.eval_steps > 0 && split == 0.0 {
        return Err(Error::Config("eval_steps needs held-out episodes: set dataset.eval_split above 0".into()));
    }
    if split == 0.0 {
        return Ok((config.dataset.episodes.clone(), Vec::new()));
    }
    let [dataset] = data.datasets.parts() else {
        return Err(Error::Config("dataset.eval_split holds out episodes of one dataset: train on one".into()));
    };
    let chosen = |index: usize| config.dataset.episodes.as_ref().is_none_or(|list| list.contains(&index));
    let episodes: Vec<(usize, &str)> = dataset
        .episodes()
        .iter()
        .filter(|e| chosen(e.index))
        .map(|e| (e.index, e.tasks.first().map_or("", String::as_str)))
        .collect();
    let (train, eval) = split_train_eval(&episodes, split);
    if train.is_empty() {
        return Err(Error::Config(format!(
            "dataset.eval_split {split} holds out every one of the {} episodes: none is left to train on",
            episodes.len()
        )));
    }
    Ok((Some(train), eval))
}

/// The held-out frames each evaluation reads when `max_eval_samples` caps them (`None`: every
/// frame of the held-out episodes).
fn eval_frames(data: &TrainData, config: &TrainConfig) -> Result<Option<Vec<usize>>> {
    if config.max_eval_samples == 0 || data.eval_episodes.is_empty() {
        return Ok(None);
    }
    let [dataset] = data.datasets.parts() else { return Ok(None) };
    let Some(task_index) = dataset.table().column("task_index").and_then(|c| c.as_i64()) else {
        return Err(Error::Config(format!("{}: task_index is not an integer column", dataset.root().display())));
    };
    let held_out: Vec<(usize, i64)> = dataset
        .episodes()
        .iter()
        .filter(|e| data.eval_episodes.contains(&e.index))
        .flat_map(|e| e.frames.clone())
        .map(|frame| (frame, task_index[frame]))
        .collect();
    Ok(Some(cap_eval_frames(&held_out, config.max_eval_samples)))
}
