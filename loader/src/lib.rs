//! The high-throughput loader: LeRobot's samples, batched, from a couple of CPU cores faster
//! than a GPU trains.
//!
//! An [`EpisodeSampler`] picks the frames of each batch exactly as LeRobot's
//! `EpisodeAwareSampler` does (anchors per episode, a permutation per epoch seeded from
//! `(seed, epoch)`, sharding across trainers) and its [`SamplerState`] resumes it exactly. A
//! [`BatchLayout`] fixes, once, the fields of every batch (LeRobot's keys and shapes). Batches are
//! filled on a persistent rayon pool of `num_workers` threads — numeric windows by index
//! arithmetic, camera frames from the frame cache, from PNGs, or from video with the batch's
//! requests grouped by file so each GOP is decoded once — into reusable buffers, and handed
//! over through a bounded prefetch channel that lives across epochs. A worker's error or panic
//! reaches the consumer as an `Err` and stops the pipeline.
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
mod error;
mod layout;
mod loader;
mod prefetch;
mod sampler;

pub use assemble::TEST_DELAY_ENV;
pub use batch::{Batch, Buffer};
pub use error::{Error, Result};
pub use layout::{BatchLayout, Field, Source, ValueType};
pub use loader::{Loader, LoaderBuilder};
pub use sampler::{EpisodeSampler, SamplerConfig, SamplerState};
