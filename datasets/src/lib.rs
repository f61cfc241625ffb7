//! Read LeRobot datasets (v3.0 and v2.1) exactly as LeRobot reads them, and write synthetic
//! ones for tests.
//!
//! The user's guide to datasets, the frame cache and the `datasets` tool is `docs/datasets.md`
//! in the repository.
//!
//! A dataset is a folder: `meta/info.json` ([`DatasetInfo`]) declares the version, the frame
//! rate, path templates and features; the episode table ([`Episode`]) says where each episode's
//! frames are; parquet files hold every non-video feature ([`FrameTable`], read once into
//! contiguous columns from memory-mapped files); MP4 files hold the cameras
//! ([`VideoDecoder`], frame-exact). [`Dataset::open`] reads and cross-checks all of it;
//! [`Dataset::get`] returns the [`Sample`] LeRobot's `__getitem__` returns for a frame index
//! and a [`WindowSpec`] (LeRobot's `delta_timestamps`), with its `*_is_pad` masks.
//!
//! ```no_run
//! use datasets::{Dataset, DecoderCache, FrameFormat, WindowSpec, diffusion_delta_timestamps};
//!
//! let dataset = Dataset::open("/dev/shm/pusht")?;
//! let deltas = diffusion_delta_timestamps(dataset.info(), 2, 16);
//! let spec = WindowSpec::from_delta_timestamps(&deltas, dataset.info(), 1e-4)?;
//! let mut decoders = DecoderCache::default();
//! let sample = dataset.get(42, &spec, &mut decoders, FrameFormat::Float)?;
//! assert_eq!(sample.tensors["action"].shape, vec![16, 2]);
//! # Ok::<(), datasets::Error>(())
//! ```
//!
//! [`synth::write_dataset`] writes datasets with LeRobot's layout and encoders;
//! [`validate::validate`] checks one thoroughly; [`frame_cache`] decodes every frame once into
//! memory-mapped files for training.

mod cache_home;
mod dataset;
mod error;
mod meta;
mod sample;
mod set;
mod source;
mod table;
mod window;

pub mod auto_cache;
pub mod frame_cache;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod hub;
#[cfg(feature = "stream")]
pub mod remote;
pub mod stats;
pub mod synth;
pub mod validate;
pub mod video;

pub use dataset::{DEFAULT_TOLERANCE_S, Dataset, FrameFormat, OpenOptions, pixels_to_unit_floats};
pub use error::{BoxError, Error, Result, error_message, panic_message};
pub use hub::{DatasetRequest, HubEnv, RepoId};
pub use meta::episodes::{Episode, EpisodeVideo, read_episodes};
pub use meta::features::{Dtype, Feature, FeatureKey, FrameEncoding, FrameShape, MAX_FEATURE_VALUES};
pub use meta::info::{DEFAULT_FEATURES, DatasetInfo, INFO_PATH};
pub use meta::paths::{PathTemplate, TemplateArg, join_under};
pub use meta::tasks::read_tasks;
pub use meta::version::CodebaseVersion;
pub use sample::{CollatedBatch, Sample, Tensor, Values};
pub use set::{DATASET_INDEX, DatasetSet};
pub use stats::{FeatureStats, StatArray, Stats};
pub use table::image::{decode_chw, encode_png};
pub use table::{Column, ColumnValues, EncodedImages, FrameTable};
pub use video::{DecoderCache, DecoderCacheConfig, VideoDecoder};
pub use window::{DeltaTimestamps, Window, WindowSpec, diffusion_delta_timestamps, window_rows};
