//! The loader: a builder that validates the configuration against the dataset, and an iterator
//! of batches that runs either on the caller's thread (`num_workers = 0`) or on a persistent
//! worker pool behind a prefetch channel.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, unbounded};
use datasets::frame_cache::FrameCache;
use datasets::video::DecodeCounters;
use datasets::{DatasetSet, DecoderCacheConfig, FrameEncoding, WindowSpec};

use crate::assemble::{Assembler, Scratch};
use crate::batch::{Batch, Buffers};
use crate::episode_frames::EpisodeFrames;
use crate::error::{Error, Result};
use crate::layout::{BatchLayout, Source};
use crate::prefetch::{Pipeline, produce};
use crate::sampler::{EpisodeSampler, Planner, SampleOrdering, SamplerConfig, SamplerState};

/// Configures and builds a [`Loader`].
#[derive(Debug, Clone)]
pub struct LoaderBuilder {
    datasets: DatasetSet,
    sampler: SamplerConfig,
    windows: WindowSpec,
    num_workers: usize,
    prefetch: usize,
    /// One per dataset, or none at all.
    frame_caches: Vec<Option<PathBuf>>,
    decoder_cache: DecoderCacheConfig,
    resume: SamplerState,
    max_epochs: Option<u64>,
    frame_encoding: FrameEncoding,
    frame_rows: bool,
}

impl LoaderBuilder {
    /// Samples per batch. Default 8.
    pub fn batch_size(mut self, n: usize) -> Self {
        self.sampler.batch_size = n;
        self
    }

    /// Worker threads (0: batches are made on the caller's thread, without prefetch). Default 0.
    pub fn num_workers(mut self, n: usize) -> Self {
        self.num_workers = n;
        self
    }

    /// Finished batches kept waiting ahead of the consumer. Default 4.
    pub fn prefetch(mut self, depth: usize) -> Self {
        self.prefetch = depth;
        self
    }

    /// Seed of the per-epoch shuffles. Default 1000.
    pub fn seed(mut self, seed: u64) -> Self {
        self.sampler.seed = seed;
        self
    }

    /// Shuffle each epoch (default) or keep dataset order.
    pub fn shuffle(mut self, shuffle: bool) -> Self {
        self.sampler.shuffle = shuffle;
        self
    }

    /// Frames skipped at the start and end of each episode (Diffusion Policy: 0 and 7).
    pub fn drop_frames(mut self, first: usize, last: usize) -> Self {
        self.sampler.drop_n_first_frames = first;
        self.sampler.drop_n_last_frames = last;
        self
    }

    /// Drop each epoch's incomplete last batch. Default false, as LeRobot.
    pub fn drop_last(mut self, drop_last: bool) -> Self {
        self.sampler.drop_last = drop_last;
        self
    }

    /// Use only this trainer's shard: `rank` of `world_size`.
    pub fn shard(mut self, rank: usize, world_size: usize) -> Self {
        self.sampler.rank = rank;
        self.sampler.world_size = world_size;
        self
    }

    /// Sample only these episodes.
    pub fn episodes(mut self, episodes: Vec<usize>) -> Self {
        self.sampler.episodes = Some(episodes);
        self
    }

    /// Sample exactly these frames, in this order (LeRobot's `Subset` of a dataset), instead of
    /// the episodes' frames.
    pub fn frames(mut self, frames: Vec<usize>) -> Self {
        self.sampler.frames = Some(frames);
        self
    }

    /// The order of each epoch's samples: LeRobot's (default), or the decode-once blocks order
    /// with its windows of episodes ([`crate::SampleOrder::Blocks`]).
    pub fn ordering(mut self, ordering: SampleOrdering) -> Self {
        self.sampler.ordering = ordering;
        self
    }

    /// The whole sampler configuration at once (replacing what the other sampler settings,
    /// weights included, set before).
    pub fn sampler(mut self, config: SamplerConfig) -> Self {
        self.sampler = config;
        self
    }

    /// Windows (LeRobot's `delta_timestamps`, resolved). Default: none.
    pub fn windows(mut self, windows: WindowSpec) -> Self {
        self.windows = windows;
        self
    }

    /// Read camera frames from this decoded-frame cache (`datasets cache`) instead of videos
    /// (one dataset; with several, give one per dataset with [`Self::frame_caches`]).
    pub fn frame_cache(mut self, dir: impl Into<PathBuf>) -> Self {
        self.frame_caches = vec![Some(dir.into())];
        self
    }

    /// Each dataset's decoded-frame cache, if it has one (one entry per dataset).
    pub fn frame_caches(mut self, dirs: Vec<Option<PathBuf>>) -> Self {
        self.frame_caches = dirs;
        self
    }

    /// With several datasets, the share of each epoch each one gets (see
    /// [`EpisodeSampler::epoch_order`]). Default: every frame of every dataset once per epoch.
    pub fn weights(mut self, weights: Vec<f64>) -> Self {
        self.sampler.weights = Some(weights);
        self
    }

    /// How video frames are handed over: RGB (default, LeRobot's frames) or the decoder's YUV
    /// 4:2:0 planes, half the bytes, for the training device to convert
    /// ([`FrameEncoding::Yuv420`]: from video, or a frame cache stored so (`datasets cache
    /// --frame-encoding yuv420`); images in parquet, or a cache of another encoding, are refused).
    pub fn frame_encoding(mut self, encoding: FrameEncoding) -> Self {
        self.frame_encoding = encoding;
        self
    }

    /// Hand each camera frame over as its row in the frame caches ([`crate::ValueType::FrameRow`],
    /// read with [`Batch::frame_rows`]) instead of its bytes, for a consumer that holds the
    /// caches' frames itself (the trainer keeps them in the GPU's memory): the batch then copies
    /// no frame. Every dataset needs a frame cache. Default false.
    pub fn frame_rows(mut self, rows: bool) -> Self {
        self.frame_rows = rows;
        self
    }

    /// Limits of each worker's decoder cache.
    pub fn decoder_cache(mut self, config: DecoderCacheConfig) -> Self {
        self.decoder_cache = config;
        self
    }

    /// Continue from a saved state (the `state()` of the last batch consumed).
    pub fn resume(mut self, state: SamplerState) -> Self {
        self.resume = state;
        self
    }

    /// Stop after this many epochs. Default: never (the iterator is endless, as LeRobot's
    /// training loop cycles its DataLoader).
    pub fn max_epochs(mut self, epochs: u64) -> Self {
        self.max_epochs = Some(epochs);
        self
    }

    /// Checks the configuration and starts the workers.
    pub fn build(mut self) -> Result<Loader> {
        self.sample_read_episodes_only()?;
        let sampler = EpisodeSampler::for_datasets(self.sampler.clone(), &self.datasets.episode_ranges())?;
        let parts = self.datasets.parts();
        if !self.frame_caches.is_empty() && self.frame_caches.len() != parts.len() {
            return Err(Error::Config(format!(
                "{} frame caches for {} datasets: give one per dataset (none where a dataset has none)",
                self.frame_caches.len(),
                parts.len()
            )));
        }
        let mut caches = Vec::with_capacity(parts.len());
        for (part, dataset) in parts.iter().enumerate() {
            let dir = self.frame_caches.get(part).and_then(Option::as_ref);
            caches.push(dir.map(|dir| FrameCache::open(dir, dataset)).transpose()?.map(Arc::new));
        }
        let borrowed: Vec<Option<&FrameCache>> = caches.iter().map(Option::as_deref).collect();
        let layout = Arc::new(BatchLayout::new(
            &self.datasets,
            &self.windows,
            &borrowed,
            self.sampler.batch_size,
            self.frame_encoding,
            self.frame_rows,
        )?);
        let frame_buffer_bound = frame_buffer_bound(&self.datasets, &layout, &self.sampler);
        let (episode_frames, frame_buffer_reservation) = match frame_buffer_bound {
            Some(bound) => {
                let reservation = reserve_memory(bound, &self.sampler)?;
                let cameras = video_cameras(&layout).count();
                (Some(EpisodeFrames::new(2 * self.sampler.ordering.block_episodes * cameras)), Some(reservation))
            }
            None => (None, None),
        };
        let assembler = Arc::new(Assembler::new(
            self.datasets,
            caches,
            layout.clone(),
            self.decoder_cache,
            self.num_workers,
            episode_frames,
        )?);
        let planner = Planner::new(sampler.clone(), self.resume, self.max_epochs);
        let (recycle_tx, recycle_rx) = unbounded();
        let engine = if self.num_workers == 0 {
            Engine::Inline { planner: Box::new(planner), scratch: Scratch::default(), recycle: recycle_rx }
        } else {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(self.num_workers)
                .thread_name(|i| format!("loader-worker-{i}"))
                .build()
                .map_err(|e| Error::Config(format!("cannot start {} workers: {e}", self.num_workers)))?;
            let pipeline =
                Pipeline::start(assembler.clone(), Arc::new(pool), planner, layout.clone(), self.prefetch, recycle_rx)
                    .map_err(|e| Error::Config(format!("cannot start the prefetch thread: {e}")))?;
            Engine::Pool(pipeline)
        };
        Ok(Loader {
            layout,
            sampler,
            assembler,
            engine,
            recycle: recycle_tx,
            failed: false,
            frame_buffer_bound,
            _frame_buffer_reservation: frame_buffer_reservation,
        })
    }
}

impl LoaderBuilder {
    /// A dataset opened with some episodes only ([`datasets::Dataset::open_episodes`]) is
    /// sampled in those: they are the episodes when none are chosen, and episodes or frames
    /// chosen beyond them are refused.
    fn sample_read_episodes_only(&mut self) -> Result<()> {
        let parts = self.datasets.parts();
        let Some((dataset, read)) = parts.iter().find_map(|d| d.read_episodes().map(|r| (d, r))) else {
            return Ok(());
        };
        if parts.len() > 1 {
            return Err(Error::Config(format!(
                "{} was opened with some episodes only: such a dataset is sampled alone",
                dataset.root().display()
            )));
        }
        let unread = match (&self.sampler.episodes, &self.sampler.frames) {
            (_, Some(frames)) => {
                frames.iter().filter_map(|&f| dataset.episode_of(f).map(|e| e.index)).find(|&e| !dataset.has_frames(e))
            }
            (Some(episodes), None) => episodes.iter().copied().find(|&e| !dataset.has_frames(e)),
            (None, None) => {
                self.sampler.episodes = Some(read.to_vec());
                None
            }
        };
        match unread {
            Some(episode) => Err(Error::Config(format!(
                "episode {episode} was not read: {} was opened with episodes {read:?} only",
                dataset.root().display()
            ))),
            None => Ok(()),
        }
    }
}

/// The camera fields read from video in some dataset: those the blocks order's buffer holds.
fn video_cameras(layout: &BatchLayout) -> impl Iterator<Item = &crate::layout::Field> {
    layout.fields.iter().filter(|f| f.frame.is_some() && f.sources.iter().any(|s| matches!(s, Source::Video { .. })))
}

/// In the blocks order with video cameras, the most its buffer of decoded episodes can take:
/// two windows (a batch may span the end of one and the start of the next) of every camera,
/// each episode as long as the longest.
fn frame_buffer_bound(datasets: &DatasetSet, layout: &BatchLayout, sampler: &SamplerConfig) -> Option<u64> {
    if !sampler.ordering.is_blocks() || !sampler.shuffle {
        return None;
    }
    let frame_bytes: u64 = video_cameras(layout).map(|f| f.step_len as u64).sum();
    let longest = datasets.parts().iter().flat_map(|d| d.episodes()).map(|e| e.len() as u64).max().unwrap_or(0);
    (frame_bytes > 0).then(|| 2 * sampler.ordering.block_episodes as u64 * frame_bytes * longest)
}

/// The bounds of the blocks-order buffers of the loaders alive in this process (one per replica
/// of a data-parallel run), checked together.
static FRAME_BUFFERS_RESERVED: AtomicU64 = AtomicU64::new(0);

/// A loader's share of [`FRAME_BUFFERS_RESERVED`], given back when the loader is dropped.
struct FrameBufferReservation(u64);

impl Drop for FrameBufferReservation {
    fn drop(&mut self) {
        FRAME_BUFFERS_RESERVED.fetch_sub(self.0, Ordering::Relaxed);
    }
}

/// Reserves `bound` bytes for a blocks-order buffer, refusing it when, with the buffers of this
/// process's other loaders, it could take more than half of the memory available.
fn reserve_memory(bound: u64, sampler: &SamplerConfig) -> Result<FrameBufferReservation> {
    let others = FRAME_BUFFERS_RESERVED.fetch_add(bound, Ordering::Relaxed);
    // Given back if refused.
    let reservation = FrameBufferReservation(bound);
    check_memory(others, bound, sampler)?;
    Ok(reservation)
}

/// Refuses a blocks-order buffer that, beside `others` bytes of other loaders' buffers, could
/// take more than half of the memory available, saying how many episodes per window fit.
fn check_memory(others: u64, bound: u64, sampler: &SamplerConfig) -> Result<()> {
    let Some(available) = datasets::auto_cache::memory_available() else { return Ok(()) };
    if others + bound <= available / 2 {
        return Ok(());
    }
    let per_episode = bound / (2 * sampler.ordering.block_episodes as u64);
    let fit = (available / 2).saturating_sub(others) / (2 * per_episode);
    let advice = if fit == 0 {
        "not even one episode per window fits: use LeRobot's order".to_string()
    } else {
        format!("lower block_episodes to {fit}")
    };
    let beside = if others > 0 {
        format!(" beside the {:.1} GB of this process's other loaders", others as f64 / 1e9)
    } else {
        String::new()
    };
    Err(Error::Config(format!(
        "the blocks order's buffer of decoded frames (two windows of {} episodes) may take {:.1} GB{beside}, \
         more than half of the memory available ({:.1} GB): {advice}",
        sampler.ordering.block_episodes,
        bound as f64 / 1e9,
        available as f64 / 1e9
    )))
}

/// Where batches are made.
enum Engine {
    /// On the caller's thread, when asked.
    Inline { planner: Box<Planner>, scratch: Scratch, recycle: Receiver<Box<Buffers>> },
    /// On the worker pool, ahead of time.
    Pool(Pipeline),
}

/// An endless (or `max_epochs`-long) iterator of batches.
pub struct Loader {
    layout: Arc<BatchLayout>,
    sampler: EpisodeSampler,
    assembler: Arc<Assembler>,
    engine: Engine,
    recycle: Sender<Box<Buffers>>,
    failed: bool,
    frame_buffer_bound: Option<u64>,
    _frame_buffer_reservation: Option<FrameBufferReservation>,
}

impl Loader {
    /// A builder for a dataset (an `Arc<Dataset>`) or several ([`DatasetSet`]) with LeRobot's
    /// defaults (batch 8, shuffled, seed 1000, no windows, 0 workers, prefetch 4).
    pub fn builder(datasets: impl Into<DatasetSet>) -> LoaderBuilder {
        LoaderBuilder {
            datasets: datasets.into(),
            sampler: SamplerConfig::default(),
            windows: WindowSpec::none(),
            num_workers: 0,
            prefetch: 4,
            frame_caches: Vec::new(),
            decoder_cache: DecoderCacheConfig::default(),
            resume: SamplerState::default(),
            max_epochs: None,
            frame_encoding: FrameEncoding::Rgb,
            frame_rows: false,
        }
    }

    /// The layout of every batch.
    pub fn layout(&self) -> &BatchLayout {
        &self.layout
    }

    /// The sampler (anchors, epoch length).
    pub fn sampler(&self) -> &EpisodeSampler {
        &self.sampler
    }

    /// The estimated memory held by the open video decoders, summed over workers.
    pub fn decoder_bytes(&self) -> usize {
        self.assembler.decoder_caches().iter().map(|c| c.lock().unwrap_or_else(PoisonError::into_inner).bytes()).sum()
    }

    /// In the blocks order with video cameras, the most its buffer of decoded episodes can take,
    /// in bytes (`None` otherwise).
    pub fn frame_buffer_bound(&self) -> Option<u64> {
        self.frame_buffer_bound
    }

    /// The memory the blocks order's buffer of decoded episodes takes now (0 in LeRobot's order).
    pub fn frame_buffer_bytes(&self) -> usize {
        self.assembler.episode_frames().map_or(0, EpisodeFrames::bytes)
    }

    /// Decoding work so far (frames decoded, seeks, frames converted), summed over workers.
    pub fn decode_counters(&self) -> DecodeCounters {
        let mut total = DecodeCounters::default();
        for cache in self.assembler.decoder_caches() {
            let c = cache.lock().unwrap_or_else(PoisonError::into_inner).counters();
            total.frames_decoded += c.frames_decoded;
            total.seeks += c.seeks;
            total.frames_converted += c.frames_converted;
        }
        total
    }

    /// Video files opened so far, summed over workers.
    pub fn files_opened(&self) -> u64 {
        self.assembler
            .decoder_caches()
            .iter()
            .map(|c| c.lock().unwrap_or_else(PoisonError::into_inner).files_opened())
            .sum()
    }
}

/// What [`Loader::next_within`] found.
#[derive(Debug)]
pub enum Polled {
    /// The next batch, or the error that stopped the loader.
    Ready(Result<Batch>),
    /// No batch yet: ask again (a caller that waits this way can notice an interrupt between).
    Waiting,
    /// Every batch asked for was handed out (`max_epochs`), or the loader stopped on an error.
    Finished,
}

impl Loader {
    /// The next batch, waiting at most `timeout` for the workers (with `num_workers = 0` the
    /// batch is made on this thread, however long that takes).
    pub fn next_within(&mut self, timeout: Duration) -> Polled {
        self.advance(Some(timeout))
    }

    /// The next batch, waiting at most `timeout` (without end when `None`).
    fn advance(&mut self, timeout: Option<Duration>) -> Polled {
        if self.failed {
            return Polled::Finished;
        }
        let made = match &mut self.engine {
            Engine::Inline { planner, scratch, recycle } => {
                let Some(plan) = planner.next_plan() else { return Polled::Finished };
                let mut buffers = recycle.try_recv().unwrap_or_else(|_| Box::new(Buffers::new(&self.layout)));
                produce(&self.assembler, &plan, &mut buffers, scratch).map(|()| buffers)
            }
            Engine::Pool(pipeline) => match pipeline.next(timeout) {
                Ok(Some(made)) => made,
                Ok(None) => return Polled::Finished,
                Err(()) => return Polled::Waiting,
            },
        };
        Polled::Ready(match made {
            Ok(buffers) => Ok(Batch::new(buffers, self.layout.clone(), Some(self.recycle.clone()))),
            Err(e) => {
                // The error is delivered once; the loader stops here.
                self.failed = true;
                Err(e)
            }
        })
    }
}

impl Iterator for Loader {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Result<Batch>> {
        match self.advance(None) {
            Polled::Ready(made) => Some(made),
            Polled::Finished => None,
            Polled::Waiting => unreachable!("a wait without a timeout ends with a batch or the end"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_is_checked_beside_the_other_loaders_of_the_process() {
        let config = SamplerConfig { ordering: SampleOrdering::blocks(16), ..SamplerConfig::default() };
        let kilobytes = 2 * 16 * 1000;
        if datasets::auto_cache::memory_available().is_none() {
            return; // Nothing to check against (not Linux).
        }
        check_memory(0, kilobytes, &config).unwrap();
        let error = check_memory(u64::MAX / 4, kilobytes, &config).unwrap_err().to_string();
        assert!(error.contains("beside the") && error.contains("other loaders"), "{error}");
        assert!(error.contains("not even one episode per window fits"), "{error}");
        // A reservation is given back when refused, and when its loader goes.
        let before = FRAME_BUFFERS_RESERVED.load(Ordering::Relaxed);
        let held = reserve_memory(kilobytes, &config).unwrap();
        assert!(reserve_memory(u64::MAX / 4, &config).is_err());
        drop(held);
        assert_eq!(FRAME_BUFFERS_RESERVED.load(Ordering::Relaxed), before);
    }
}
