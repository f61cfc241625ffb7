//! `lerobot_rs.Loader`: LeRobot's training `DataLoader` (its `EpisodeAwareSampler` order, its
//! collated batches) from our worker pool and prefetch channel. Each `for batch in loader` is one
//! epoch, as with a PyTorch `DataLoader`; `state_dict()` after any batch resumes exactly there.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use pyo3::exceptions::{PyStopIteration, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use datasets::FrameFormat;
use datasets::auto_cache::{self, AutoCache, FrameCacheChoice};
use loader::{Polled, SampleOrder, SampleOrdering, SamplerConfig, SamplerState};

use crate::convert::{dataset_error, numpy_to_torch};
use crate::dataset::Dataset;
use crate::memory::batch_to_dict;

/// How long a wait for a batch goes without looking for a signal (Ctrl-C).
const SIGNAL_CHECK: Duration = Duration::from_millis(50);

/// How the loader was asked to run, kept to rebuild it at `load_state_dict`.
struct Settings {
    dataset: Arc<datasets::Dataset>,
    windows: datasets::WindowSpec,
    sampler: SamplerConfig,
    num_workers: usize,
    prefetch: usize,
    frame_cache: Option<PathBuf>,
}

impl Settings {
    fn build(&self, resume: SamplerState) -> PyResult<loader::Loader> {
        let mut builder = loader::Loader::builder(self.dataset.clone())
            .sampler(self.sampler.clone())
            .windows(self.windows.clone())
            .num_workers(self.num_workers)
            .prefetch(self.prefetch)
            .resume(resume);
        if let Some(dir) = &self.frame_cache {
            builder = builder.frame_cache(dir);
        }
        builder.build().map_err(|e| dataset_error(&e))
    }
}

/// Batches of a [`Dataset`], made by native worker threads.
#[pyclass(module = "lerobot_rs")]
pub struct Loader {
    settings: Settings,
    inner: loader::Loader,
    frames: FrameFormat,
    /// The first batch of the next epoch, met while ending this one.
    pending: Option<loader::Batch>,
    /// The epoch a `for` loop is going through.
    epoch: Option<u64>,
    /// Where the sampler stands after the last batch handed out.
    state: SamplerState,
    /// Hand batches over as torch tensors (sharing the arrays' memory).
    as_torch: bool,
    /// Pin the torch tensors' memory (for fast, asynchronous copies to a CUDA device).
    pin_memory: bool,
}

#[pymethods]
impl Loader {
    /// A loader over `dataset` with LeRobot's training settings: shuffled each epoch from
    /// `seed` by LeRobot's own permutation, `drop_n_last_frames` skipped at each episode's end
    /// (Diffusion Policy: 7), `rank` of `world_size` for data-parallel runs, frames read from
    /// `frame_cache`: a `datasets cache` folder, or `"auto"` for the trainer's automatic cache
    /// (reused, or built first when the decoded frames fit its budget, by default the trainer's,
    /// or `frame_cache_budget_gb`; the `lerobot_rs` logger says which); batches of numpy
    /// arrays, or of torch tensors sharing their memory with `as_torch` (by default as the
    /// dataset's samples; pinned with `pin_memory`). `order="blocks"` takes the decode-once
    /// order: the episodes shuffled and taken `block_episodes` at a time, each window's samples
    /// shuffled, each video frame decoded once per epoch. `frames` samples exactly these frames
    /// (dataset rows) in this order instead of the episodes' (a `torch.utils.data.Subset`, or the
    /// frames of a LeRobot sampler; the dropped frames do not apply).
    #[new]
    #[pyo3(signature = (dataset, batch_size=8, *, num_workers=0, shuffle=true, seed=1000, drop_last=false, drop_n_first_frames=0, drop_n_last_frames=0, rank=0, world_size=1, prefetch=4, frame_cache=None, frame_cache_budget_gb=None, as_torch=None, pin_memory=false, order="lerobot", block_episodes=loader::DEFAULT_BLOCK_EPISODES, frames=None))]
    #[allow(clippy::too_many_arguments, reason = "a DataLoader's keyword arguments")]
    fn new(
        py: Python<'_>,
        dataset: PyRef<'_, Dataset>,
        batch_size: usize,
        num_workers: usize,
        shuffle: bool,
        seed: u64,
        drop_last: bool,
        drop_n_first_frames: usize,
        drop_n_last_frames: usize,
        rank: usize,
        world_size: usize,
        prefetch: usize,
        frame_cache: Option<PathBuf>,
        frame_cache_budget_gb: Option<f64>,
        as_torch: Option<bool>,
        pin_memory: bool,
        order: &str,
        block_episodes: usize,
        frames: Option<Vec<usize>>,
    ) -> PyResult<Self> {
        let order: SampleOrder = order.parse().map_err(PyValueError::new_err)?;
        let as_torch = as_torch.unwrap_or(dataset.as_torch);
        if pin_memory && !as_torch {
            return Err(PyValueError::new_err("pin_memory pins torch tensors: set as_torch=True too"));
        }
        if as_torch {
            py.import("torch")?;
        }
        let sampler = SamplerConfig {
            batch_size,
            shuffle,
            seed,
            drop_n_first_frames,
            drop_n_last_frames,
            drop_last,
            rank,
            world_size,
            // Listed frames are sampled as they are, of whichever episodes they are.
            episodes: if frames.is_some() { None } else { dataset.episodes.clone() },
            frames,
            weights: None,
            ordering: SampleOrdering { order, block_episodes },
        };
        let frame_cache = match frame_cache {
            Some(choice) => {
                let opened = dataset.dataset.clone();
                let budget = frame_cache_budget_gb.map(|gb| (gb.max(0.0) * 1e9) as u64);
                let (dir, line) = py.detach(|| settle_frame_cache(&opened, &choice, budget))?;
                py.import("logging")?.call_method1("getLogger", ("lerobot_rs",))?.call_method1("info", (line,))?;
                dir
            }
            None => None,
        };
        let settings = Settings {
            dataset: dataset.dataset.clone(),
            windows: dataset.windows.clone(),
            sampler,
            num_workers,
            prefetch,
            frame_cache,
        };
        let inner = py.detach(|| settings.build(SamplerState::default()))?;
        Ok(Self {
            settings,
            inner,
            frames: dataset.frames,
            pending: None,
            epoch: None,
            state: SamplerState::default(),
            as_torch,
            pin_memory,
        })
    }

    /// The folder of decoded frames the loader reads (`None`: it decodes the dataset's files).
    #[getter]
    fn frame_cache(&self) -> Option<PathBuf> {
        self.settings.frame_cache.clone()
    }

    /// Batches per epoch.
    fn __len__(&self) -> usize {
        self.inner.sampler().batches_per_epoch()
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next batch of this epoch: LeRobot's collated dict (numpy arrays, `task` a list).
    fn __next__<'py>(mut slf: PyRefMut<'py, Self>, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let batch = match slf.pending.take() {
            Some(batch) => batch,
            // Waited for without the GIL, a slice at a time, so that Ctrl-C (or any signal
            // handler raising) interrupts the wait.
            None => loop {
                let inner = &mut slf.inner;
                match py.detach(|| inner.next_within(SIGNAL_CHECK)) {
                    Polled::Ready(Ok(batch)) => break batch,
                    Polled::Ready(Err(e)) => return Err(dataset_error(&e)),
                    Polled::Waiting => py.check_signals()?,
                    Polled::Finished => return Err(PyStopIteration::new_err(())),
                }
            },
        };
        let epoch = *slf.epoch.get_or_insert(batch.epoch());
        if batch.epoch() != epoch {
            slf.pending = Some(batch);
            slf.epoch = None;
            return Err(PyStopIteration::new_err(()));
        }
        slf.state = batch.state();
        let dataset = &slf.settings.dataset;
        let tasks: Vec<String> = batch.indices().iter().map(|&i| dataset.task_of(i).to_string()).collect();
        let collated = batch_to_dict(py, batch, slf.frames)?;
        if slf.as_torch {
            numpy_to_torch(py, &collated, slf.pin_memory)?;
        }
        collated.set_item("task", tasks)?;
        Ok(collated)
    }

    /// Where the loader stands: `{"epoch": e, "position": p}` after the last batch handed out.
    fn state_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let state = PyDict::new(py);
        state.set_item("epoch", self.state.epoch)?;
        state.set_item("position", self.state.position)?;
        Ok(state)
    }

    /// Continues from a `state_dict()`: the next batch is the one that followed it.
    fn load_state_dict(&mut self, py: Python<'_>, state: &Bound<'_, PyDict>) -> PyResult<()> {
        let field = |name: &str| -> PyResult<Bound<'_, PyAny>> {
            state.get_item(name)?.ok_or_else(|| PyValueError::new_err(format!("the state has no `{name}`")))
        };
        let resume = SamplerState { epoch: field("epoch")?.extract()?, position: field("position")?.extract()? };
        let settings = &self.settings;
        self.inner = py.detach(|| settings.build(resume))?;
        self.pending = None;
        self.epoch = None;
        self.state = resume;
        Ok(())
    }
}

/// The frame cache folder a `frame_cache` argument names: a folder as given, none for `"off"`,
/// and for `"auto"` the automatic cache of `dataset` (under `LEROBOT_RS_FRAME_CACHE`, by default
/// `/dev/shm/lerobot-rs-frames`), built first when missing and within `budget` bytes (by default
/// the trainer's); with the line that says which.
fn settle_frame_cache(
    dataset: &datasets::Dataset,
    choice: &Path,
    budget: Option<u64>,
) -> PyResult<(Option<PathBuf>, String)> {
    match choice.to_string_lossy().parse::<FrameCacheChoice>().expect("infallible") {
        FrameCacheChoice::Off => Ok((None, "frame cache: off".into())),
        FrameCacheChoice::Dir(dir) => {
            // What the automatic cache says when it reads one.
            let line = AutoCache::Ready { dir: dir.clone() }.to_string();
            Ok((Some(dir), line))
        }
        FrameCacheChoice::Auto => {
            let root = auto_cache::default_root(|name| std::env::var_os(name));
            let plan =
                auto_cache::plan(dataset, &[Default::default()], &root, budget, &[]).map_err(|e| dataset_error(&e))?;
            let mut lines: Vec<String> = plan.removed.iter().map(ToString::to_string).collect();
            lines.push(plan.cache.to_string());
            let dir = match plan.cache {
                AutoCache::Ready { dir } => Some(dir),
                // A build that fails (a full /dev/shm, say) leaves the loader decoding as it
                // reads, as the trainer does; a bad video then fails it there, naming the file.
                AutoCache::Build { dir, .. } => {
                    match datasets::frame_cache::write_frame_cache(dataset, &dir, &Default::default(), &|_| {}) {
                        Ok(_) => Some(dir),
                        Err(e) => {
                            lines.push(auto_cache::build_failed_line(&e));
                            None
                        }
                    }
                }
                AutoCache::TooBig { .. } | AutoCache::NoCameras | AutoCache::SomeEpisodes => None,
            };
            Ok((dir, lines.join("\n")))
        }
    }
}
