//! The high-throughput loader: LeRobot's samples, batched, from a couple of CPU cores faster
//! than a GPU trains.
//!
//! The user's guide to the loader from Rust and Python is the repository's `README.md` and
//! `docs/python.md`; its sampling orders and frame cache, `docs/datasets.md`.
//!
//! An [`EpisodeSampler`] picks the frames of each batch as LeRobot 0.6's `EpisodeAwareSampler`
//! does: the same anchors (per episode `[from + drop_n_first, to − drop_n_last)`, over the
//! episodes asked for, episodes left empty skipped), and with one trainer the same order, frame
//! for frame: a new permutation every epoch, LeRobot's own for `(seed, epoch)` (numpy's
//! `SeedSequence` into torch's `randperm`, reproduced and checked against LeRobot in
//! `loader/tests/lerobot_order.rs`). Batches are consecutive runs of that order, the last one
//! short unless `drop_last`, as LeRobot's `DataLoader(drop_last=False)` cuts them. What differs:
//! with several trainers we shard the order element by element (rank `r` takes every
//! `world_size`-th frame from `r`), where `accelerate` hands out whole batches in turn; and from
//! 214,748,364 anchors on, where torch's `randperm` changes algorithm, the order is ours. Its
//! [`SamplerState`] (epoch, position) resumes it exactly, as LeRobot's `state_dict` does. A
//! [`BatchLayout`] fixes, once, the fields of every batch (LeRobot's keys and shapes). Batches are
//! filled on a persistent rayon pool of `num_workers` threads — numeric windows by index
//! arithmetic, camera frames from the frame cache, from PNGs, or from video with the batch's
//! requests grouped by file so each GOP is decoded once — into reusable buffers, and handed
//! over through a bounded prefetch channel that lives across epochs. A worker's error or panic
//! reaches the consumer as an `Err` and stops the pipeline. In the opt-in blocks order
//! ([`SampleOrder::Blocks`]) each camera's episode is decoded once per epoch into a bounded
//! buffer that the samples of its window read.
//!
//! ```no_run
//! use std::sync::Arc;
//! use datasets::{Dataset, WindowSpec, diffusion_delta_timestamps};
//! use loader::Loader;
//!
//! let dataset = Arc::new(Dataset::open("/dev/shm/pusht")?);
//! let deltas = diffusion_delta_timestamps(dataset.info(), 2, 16);
//! let windows = WindowSpec::from_delta_timestamps(&deltas, dataset.info(), 1e-4)?;
//! let loader = Loader::builder(dataset).batch_size(64).num_workers(2).drop_frames(0, 7).windows(windows).build()?;
//! for batch in loader.take(10) {
//!     let batch = batch?;
//!     let frames: &[u8] = batch.u8("observation.image").unwrap(); // [B, 2, 3, 96, 96]
//!     let actions: &[f32] = batch.f32("action").unwrap(); // [B, 16, 2]
//!     let _resume_from = batch.state();
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod assemble;
mod batch;
mod episode_frames;
mod error;
mod layout;
mod loader;
mod permutation;
mod prefetch;
mod sampler;

pub use assemble::PAST_CACHES_MIN_BYTES;
pub use batch::{Batch, Buffer};
pub use error::{Error, Result};
pub use layout::{BatchLayout, Field, Source, ValueType};
pub use loader::{Loader, LoaderBuilder, Polled};
pub use sampler::{DEFAULT_BLOCK_EPISODES, EpisodeSampler, SampleOrder, SampleOrdering, SamplerConfig, SamplerState};
