//! `lerobot_rs.Dataset`: LeRobot's `LeRobotDataset` for reading: `len(ds)`, `ds[i]` (a dict with
//! LeRobot's keys, shapes and dtypes) and `ds.meta`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use pyo3::exceptions::{PyIndexError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use datasets::{DecoderCache, FrameFormat, OpenOptions, WindowSpec};

use crate::convert::{dataset_error, f64_to_numpy, frame_format, json_to_python, numpy_to_torch, tensor_to_numpy};

/// A LeRobot dataset (v3.0 or v2.1), read as LeRobot reads it.
#[pyclass(module = "lerobot_rs", frozen)]
pub struct Dataset {
    pub(crate) dataset: Arc<datasets::Dataset>,
    pub(crate) windows: WindowSpec,
    pub(crate) episodes: Option<Vec<usize>>,
    /// The frames of the episodes asked for, in order (`None`: every frame).
    rows: Option<Vec<usize>>,
    pub(crate) frames: FrameFormat,
    /// Samples as torch tensors (as `LeRobotDataset` returns them) rather than numpy arrays.
    pub(crate) as_torch: bool,
    decoders: Mutex<DecoderCache>,
}

#[pymethods]
impl Dataset {
    /// Opens a dataset by Hub id (found where LeRobot keeps it, or downloaded) or by folder,
    /// with LeRobot's `delta_timestamps` windows and `episodes` subset; frames come as float32 in
    /// [0, 1] (LeRobot's default) or, with `frames="uint8"`, as stored; samples are numpy
    /// arrays, or torch tensors with `as_torch`. With `streaming=True` nothing is downloaded:
    /// `root` is a URL (`s3://`, `gs://`, `az://`, `https://`, `file://`), or `repo_id` is read
    /// from the Hub by ranges (LeRobot's `streaming`), videos through a bounded buffer.
    #[new]
    #[pyo3(signature = (repo_id=None, root=None, *, episodes=None, delta_timestamps=None, tolerance_s=1e-4, revision=None, download=true, frames="float32", as_torch=false, streaming=false))]
    #[allow(clippy::too_many_arguments, reason = "LeRobotDataset's keyword arguments")]
    fn new(
        py: Python<'_>,
        repo_id: Option<String>,
        root: Option<PathBuf>,
        episodes: Option<Vec<usize>>,
        delta_timestamps: Option<BTreeMap<String, Vec<f64>>>,
        tolerance_s: f64,
        revision: Option<String>,
        download: bool,
        frames: &str,
        as_torch: bool,
        streaming: bool,
    ) -> PyResult<Self> {
        let frames = frame_format(frames)?;
        if as_torch {
            py.import("torch")?;
        }
        let options = OpenOptions { tolerance_s };
        let dataset = if streaming {
            // As LeRobot's: a root given is where the dataset is, the Hub only without one.
            let url = match (&root, &repo_id) {
                (Some(root), _) => root.to_string_lossy().into_owned(),
                (None, Some(repo_id)) => py.detach(|| hub_url(repo_id, revision.as_deref()))?,
                (None, None) => return Err(PyValueError::new_err("give repo_id or root")),
            };
            py.detach(|| open_streamed(&url, options, episodes.as_deref())).map_err(|e| dataset_error(&e))?
        } else {
            open_folder(py, repo_id, root, revision, download, options, episodes.as_deref())?
        };
        Self::with_dataset(dataset, delta_timestamps, tolerance_s, episodes, frames, as_torch)
    }

    /// The number of frames (of the episodes asked for).
    fn __len__(&self) -> usize {
        self.rows.as_ref().map_or(self.dataset.len(), Vec::len)
    }

    /// Sample `index` (negative counts from the end): LeRobot's dict, numpy arrays and `task`.
    fn __getitem__<'py>(&self, py: Python<'py>, index: isize) -> PyResult<Bound<'py, PyDict>> {
        let len = self.__len__();
        let position = if index < 0 { index + len as isize } else { index };
        if position < 0 || position as usize >= len {
            return Err(PyIndexError::new_err(format!("index {index} is out of range for {len} frames")));
        }
        let position = position as usize;
        let row = self.rows.as_ref().map_or(position, |rows| rows[position]);
        let sample = py
            .detach(|| {
                let mut decoders = self.decoders.lock().unwrap_or_else(PoisonError::into_inner);
                self.dataset.get(row, &self.windows, &mut decoders, self.frames)
            })
            .map_err(|e| dataset_error(&e))?;
        let item = PyDict::new(py);
        for (key, tensor) in sample.tensors {
            item.set_item(key, tensor_to_numpy(py, tensor)?)?;
        }
        if self.as_torch {
            numpy_to_torch(py, &item, false)?;
        }
        item.set_item("task", sample.task)?;
        Ok(item)
    }

    /// Frames (of the episodes asked for): LeRobot's `num_frames`.
    #[getter]
    fn num_frames(&self) -> usize {
        self.__len__()
    }

    /// Episodes (asked for): LeRobot's `num_episodes`.
    #[getter]
    fn num_episodes(&self) -> usize {
        self.episodes.as_ref().map_or(self.dataset.episodes().len(), Vec::len)
    }

    /// The dataset's folder.
    #[getter]
    fn root(&self) -> PathBuf {
        self.dataset.root().to_path_buf()
    }

    /// LeRobot's `meta`: `fps`, `features` (as in `info.json`), `info`, `stats` (numpy arrays
    /// by feature and statistic), `tasks`, `total_episodes`, `total_frames`, `robot_type`.
    #[getter]
    fn meta<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let info = self.dataset.info();
        let fields = PyDict::new(py);
        fields.set_item("fps", info.fps)?;
        let raw = json_to_python(py, &info.raw)?;
        fields.set_item("features", raw.get_item("features")?)?;
        fields.set_item("info", raw)?;
        let stats = PyDict::new(py);
        for (key, feature) in self.dataset.stats() {
            let named = PyDict::new(py);
            for (name, array) in &feature.0 {
                named.set_item(name, f64_to_numpy(py, &array.shape, array.values.clone())?)?;
            }
            stats.set_item(key, named)?;
        }
        fields.set_item("stats", stats)?;
        fields.set_item("tasks", self.dataset.tasks().to_vec())?;
        fields.set_item("total_episodes", info.total_episodes)?;
        fields.set_item("total_frames", info.total_frames)?;
        fields.set_item("robot_type", info.robot_type.clone())?;
        py.import("types")?.getattr("SimpleNamespace")?.call((), Some(&fields))
    }

    fn __repr__(&self) -> String {
        format!("Dataset(root={:?}, frames={}, episodes={})", self.dataset.root(), self.__len__(), self.num_episodes())
    }
}

impl Dataset {
    /// The Python object of an opened `dataset`.
    fn with_dataset(
        dataset: datasets::Dataset,
        delta_timestamps: Option<BTreeMap<String, Vec<f64>>>,
        tolerance_s: f64,
        episodes: Option<Vec<usize>>,
        frames: FrameFormat,
        as_torch: bool,
    ) -> PyResult<Self> {
        let windows = match &delta_timestamps {
            Some(deltas) => {
                WindowSpec::from_delta_timestamps(deltas, dataset.info(), tolerance_s).map_err(|e| dataset_error(&e))?
            }
            None => WindowSpec::none(),
        };
        let rows = match &episodes {
            Some(list) => {
                let count = dataset.episodes().len();
                if let Some(bad) = list.iter().find(|&&e| e >= count) {
                    return Err(PyValueError::new_err(format!(
                        "episode {bad} is not in the dataset ({count} episodes)"
                    )));
                }
                // As LeRobot: the episodes asked for, in dataset order.
                let selected = dataset.episodes().iter().filter(|e| list.contains(&e.index));
                Some(selected.flat_map(|e| e.frames.clone()).collect())
            }
            None => None,
        };
        Ok(Self {
            dataset: Arc::new(dataset),
            windows,
            episodes,
            rows,
            frames,
            as_torch,
            decoders: Mutex::new(DecoderCache::default()),
        })
    }
}

/// The dataset in a folder: `root`, or where the Hub's `repo_id` is (downloaded if missing).
fn open_folder(
    py: Python<'_>,
    repo_id: Option<String>,
    root: Option<PathBuf>,
    revision: Option<String>,
    download: bool,
    options: OpenOptions,
    episodes: Option<&[usize]>,
) -> PyResult<datasets::Dataset> {
    let root = match (repo_id, root) {
        (Some(repo_id), root) => {
            let request = datasets::DatasetRequest {
                repo_id: repo_id.parse().map_err(|e: datasets::Error| dataset_error(&e))?,
                root,
                revision,
                download,
                episodes: episodes.map(<[usize]>::to_vec),
            };
            let env = datasets::HubEnv::from_env();
            py.detach(|| datasets::hub::resolve(&request, &env, &mut |_| {})).map_err(|e| dataset_error(&e))?.root
        }
        (None, Some(root)) => root,
        (None, None) => return Err(PyValueError::new_err("give repo_id or root")),
    };
    py.detach(|| datasets::Dataset::open_for(&root, options, episodes)).map_err(|e| dataset_error(&e))
}

/// The dataset at `url`, streamed (with the Hub's token where `url` is the Hub's).
#[cfg(feature = "stream")]
fn open_streamed(url: &str, options: OpenOptions, episodes: Option<&[usize]>) -> datasets::Result<datasets::Dataset> {
    datasets::remote::open_url(url, datasets::remote::StreamOptions::default(), options, episodes)
}

#[cfg(not(feature = "stream"))]
fn open_streamed(url: &str, _options: OpenOptions, _episodes: Option<&[usize]>) -> datasets::Result<datasets::Dataset> {
    Err(datasets::Error::request(format!("{url}: streaming needs the module built with the `stream` feature")))
}

/// The Hub URL dataset `repo_id` streams from.
fn hub_url(repo_id: &str, revision: Option<&str>) -> PyResult<String> {
    #[cfg(feature = "stream")]
    return datasets::remote::hub_url(repo_id, revision, &datasets::HubEnv::from_env()).map_err(|e| dataset_error(&e));
    #[cfg(not(feature = "stream"))]
    return Err(PyValueError::new_err(format!(
        "{repo_id}: streaming needs the module built with the `stream` feature ({revision:?})"
    )));
}
