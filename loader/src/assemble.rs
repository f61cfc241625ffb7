//! Filling a batch: window rows and pads, numeric columns gathered by index, camera frames from
//! the frame cache (a copy), from PNGs (a decode per frame) or from video — the frame requests
//! of the whole batch grouped by file and sorted by time, so that each GOP is decoded once for
//! all the frames needed from it, and split across the workers; in the blocks order, through
//! the buffer that decodes each camera's episode once. With several datasets, each sample is
//! read from its own dataset at its own row; video files are numbered across them.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use datasets::frame_cache::FrameCache;
use datasets::{
    Column, ColumnValues, Dataset, DatasetSet, DecoderCache, DecoderCacheConfig, Error as DatasetError, decode_chw,
    window_rows,
};
use rayon::prelude::*;

use crate::batch::{Buffer, Buffers};
use crate::episode_frames::{EpisodeFrames, EpisodeKey};
use crate::error::{Error, Result};
use crate::layout::{BatchLayout, Source, ValueType};
use crate::sampler::BatchPlan;

/// A batch whose camera frames take at least this many bytes has them copied past the CPU's
/// caches ([`bulk_copy::copy_past_caches`]): more than a last-level cache keeps until the batch
/// is read, after the batches queued before it (PushT's 96x96 frames take 3.5 MB at batch 64,
/// four 480x640 cameras as YUV planes 236 MB).
pub const PAST_CACHES_MIN_BYTES: usize = 16 << 20;

/// `from` copied into `out`, past the caches when `past_caches`.
fn copy_into(out: &mut [u8], from: &[u8], past_caches: bool) {
    if past_caches {
        bulk_copy::copy_past_caches(out, from);
    } else {
        out.copy_from_slice(from);
    }
}

/// The name of the variable that slows every batch down by its value in microseconds, in a
/// build with the `test-delay` feature only. It exists to show that CI's regression check
/// (`bench regress`) catches a slower loader; nothing else sets it.
#[cfg(feature = "test-delay")]
const TEST_DELAY_ENV: &str = "LOADER_TEST_DELAY_US";

/// The delay [`TEST_DELAY_ENV`] asks for, read once.
#[cfg(feature = "test-delay")]
fn test_delay() -> Option<std::time::Duration> {
    static DELAY: std::sync::OnceLock<Option<std::time::Duration>> = std::sync::OnceLock::new();
    *DELAY.get_or_init(|| {
        let micros: u64 = std::env::var(TEST_DELAY_ENV).ok()?.parse().ok()?;
        (micros > 0).then(|| std::time::Duration::from_micros(micros))
    })
}

/// One dataset, as the workers read it.
pub(crate) struct Part {
    dataset: Arc<Dataset>,
    cache: Option<Arc<FrameCache>>,
    /// Per video camera: the file id of each episode's video.
    episode_files: Vec<Vec<usize>>,
}

/// Everything needed to fill batches, shared by the workers.
pub(crate) struct Assembler {
    datasets: DatasetSet,
    parts: Vec<Part>,
    layout: Arc<BatchLayout>,
    /// One decoder cache per worker thread (index = rayon thread index; 0 off the pool).
    decoders: Vec<Mutex<DecoderCache>>,
    /// Absolute video paths by file id, across datasets.
    files: Vec<PathBuf>,
    /// Work is split into this many pieces (the number of workers).
    pieces: usize,
    /// In the blocks order, the episodes decoded for the current windows.
    episode_frames: Option<EpisodeFrames>,
}

/// The episodes already fetched ahead in an epoch, by dataset.
#[derive(Debug, Default)]
pub(crate) struct AskedEpisodes {
    epoch: Option<u64>,
    episodes: std::collections::HashSet<(usize, usize)>,
}

/// Per-batch bookkeeping kept between batches so that it does not reallocate.
#[derive(Default)]
pub(crate) struct Scratch {
    /// Window rows per layout field (`B·T`).
    rows: Vec<Vec<usize>>,
    /// Video frame requests of the batch.
    requests: Vec<Request>,
}

/// One frame to decode: which dataset, camera, episode and file, when, and where it goes.
#[derive(Debug, Clone, Copy)]
struct Request {
    part: usize,
    camera: usize,
    /// The episode's index in its dataset.
    episode: usize,
    /// The frame's position in its episode.
    frame: usize,
    file: usize,
    time_s: f64,
    field: usize,
    slot: usize,
}

impl Assembler {
    pub(crate) fn new(
        datasets: DatasetSet,
        caches: Vec<Option<Arc<FrameCache>>>,
        layout: Arc<BatchLayout>,
        decoder_cache: DecoderCacheConfig,
        workers: usize,
        episode_frames: Option<EpisodeFrames>,
    ) -> Result<Self> {
        let mut files: Vec<PathBuf> = Vec::new();
        let mut file_ids: HashMap<PathBuf, usize> = HashMap::new();
        let mut parts = Vec::with_capacity(datasets.parts().len());
        for (dataset, cache) in datasets.parts().iter().zip(caches) {
            let mut episode_files = Vec::new();
            for camera in 0..dataset.info().video_keys().len() {
                let mut ids = Vec::with_capacity(dataset.episodes().len());
                for episode in dataset.episodes() {
                    let path = dataset.video_file(episode, camera)?;
                    let id = *file_ids.entry(path).or_insert_with_key(|path| {
                        files.push(path.clone());
                        files.len() - 1
                    });
                    ids.push(id);
                }
                episode_files.push(ids);
            }
            parts.push(Part { dataset: dataset.clone(), cache, episode_files });
        }
        let decoders = (0..workers.max(1)).map(|_| Mutex::new(DecoderCache::new(decoder_cache))).collect();
        Ok(Self { datasets, parts, layout, decoders, files, pieces: workers.max(1), episode_frames })
    }

    /// The dataset of joint index `index` and the row there.
    fn locate(&self, index: usize) -> Result<(usize, usize)> {
        self.datasets.locate(index).ok_or_else(|| Error::Config(format!("index {index} is outside the dataset")))
    }

    /// Whether some dataset is streamed: its videos are worth fetching ahead of the batches.
    pub(crate) fn streams(&self) -> bool {
        self.datasets.parts().iter().any(|d| d.is_streamed())
    }

    /// Starts fetching the video bytes of the episodes of `plan` that `asked` does not hold yet
    /// (from streamed datasets), and adds them to it.
    pub(crate) fn prefetch(&self, plan: &BatchPlan, asked: &mut AskedEpisodes) {
        if asked.epoch != Some(plan.epoch) {
            *asked = AskedEpisodes { epoch: Some(plan.epoch), ..AskedEpisodes::default() };
        }
        let mut new: Vec<Vec<usize>> = vec![Vec::new(); self.parts.len()];
        for &index in &plan.indices {
            let Some((part, row)) = self.datasets.locate(index) else { continue };
            let Some(episode) = self.parts[part].dataset.episode_of(row) else { continue };
            if asked.episodes.insert((part, episode.index)) {
                new[part].push(episode.index);
            }
        }
        for (part, episodes) in new.iter().enumerate().filter(|(_, e)| !e.is_empty()) {
            self.parts[part].dataset.prefetch_episodes(episodes);
        }
    }

    /// The blocks order's buffer of decoded episodes, if the order is that.
    pub(crate) fn episode_frames(&self) -> Option<&EpisodeFrames> {
        self.episode_frames.as_ref()
    }

    /// The decoder caches, for reporting their memory.
    pub(crate) fn decoder_caches(&self) -> &[Mutex<DecoderCache>] {
        &self.decoders
    }

    /// Fills `buffers` with the samples of `plan`. Runs on the calling thread, spreading the
    /// frame work over the current rayon pool when there is one.
    pub(crate) fn fill(&self, plan: &BatchPlan, buffers: &mut Buffers, scratch: &mut Scratch) -> Result<()> {
        #[cfg(feature = "test-delay")]
        if let Some(delay) = test_delay() {
            std::thread::sleep(delay);
        }
        for cache in self.parts.iter().filter_map(|p| p.cache.as_ref()) {
            cache.check_intact()?;
        }
        let b = plan.indices.len();
        buffers.len = b;
        buffers.epoch = plan.epoch;
        buffers.batch = plan.batch;
        buffers.state = plan.after;
        buffers.indices.clear();
        buffers.indices.extend_from_slice(&plan.indices);
        buffers.dataset_index.clear();
        for &index in &plan.indices {
            buffers.dataset_index.push(self.locate(index)?.0 as i64);
        }
        let fields = &self.layout.fields;
        scratch.rows.resize_with(fields.len(), Vec::new);

        // Window rows and pads.
        for (f, field) in fields.iter().enumerate() {
            let rows = &mut scratch.rows[f];
            rows.clear();
            match &field.offsets {
                Some(offsets) => {
                    let pads = &mut buffers.pads[f];
                    let mut pad_scratch = std::mem::take(pads);
                    pad_scratch.clear();
                    for &index in &plan.indices {
                        let (part, row) = self.locate(index)?;
                        let dataset = &self.parts[part].dataset;
                        let episode = dataset
                            .episode_of(row)
                            .ok_or_else(|| Error::Config(format!("index {index} is outside the dataset")))?;
                        let first = rows.len();
                        window_rows(row, offsets, &episode.frames, rows, &mut pad_scratch);
                        // A window never leaves its episode, so never its dataset.
                        let start = self.datasets.start(part);
                        rows[first..].iter_mut().for_each(|r| *r += start);
                    }
                    let capacity = self.layout.batch_size * offsets.len();
                    pad_scratch.resize(capacity.max(pad_scratch.len()), false);
                    *pads = pad_scratch;
                }
                None => rows.extend_from_slice(&plan.indices),
            }
        }

        // Numeric columns: index arithmetic and slice copies, a run of rows of one dataset at a time.
        for (f, field) in fields.iter().enumerate() {
            if field.sources[0] != Source::Column {
                continue;
            }
            let rows = &scratch.rows[f];
            let mut done = 0;
            while done < rows.len() {
                let (part, _) = self.locate(rows[done])?;
                let (start, end) =
                    (self.datasets.start(part), self.datasets.start(part) + self.parts[part].dataset.len());
                let run = rows[done..].iter().take_while(|&&r| (start..end).contains(&r)).count();
                let column: &Column =
                    self.parts[part].dataset.table().column(&field.key).expect("every numeric feature has a column");
                let w = column.width;
                let (run_rows, at) = (&rows[done..done + run], done * w);
                match (&column.values, &mut buffers.values[f]) {
                    (ColumnValues::F32(src), Buffer::F32(dst)) => gather(src, &mut dst[at..], run_rows, w, start),
                    (ColumnValues::I64(src), Buffer::I64(dst)) => gather(src, &mut dst[at..], run_rows, w, start),
                    (ColumnValues::Bool(src), Buffer::Bool(dst)) => gather(src, &mut dst[at..], run_rows, w, start),
                    _ => return Err(Error::Config(format!("feature `{}` changed type", field.key))),
                }
                done += run;
            }
        }

        self.fill_frames(buffers, scratch)
    }

    /// Camera frames of every camera field (or their rows in the frame caches).
    fn fill_frames(&self, buffers: &mut Buffers, scratch: &mut Scratch) -> Result<()> {
        let fields = &self.layout.fields;
        for (f, field) in fields.iter().enumerate() {
            if let (ValueType::FrameRow, Buffer::I64(rows)) = (field.value_type, &mut buffers.values[f]) {
                // Joint rows are the datasets' cached frames laid end to end (each cache holds
                // every frame of its dataset).
                rows.iter_mut().zip(&scratch.rows[f]).for_each(|(out, &row)| *out = row as i64);
            }
        }
        // Mutable frame slots of every camera field, taken out one by one as work is planned.
        let mut slots: Vec<Vec<Option<&mut [u8]>>> = buffers
            .values
            .iter_mut()
            .zip(fields)
            .zip(&scratch.rows)
            .map(|((buffer, field), rows)| match (buffer, field.frame) {
                (Buffer::U8(v), Some(_)) => v.chunks_mut(field.step_len).take(rows.len()).map(Some).collect(),
                _ => Vec::new(),
            })
            .collect();
        let frame_bytes: usize = slots.iter().flatten().flatten().map(|slot| slot.len()).sum();
        let past_caches = frame_bytes >= PAST_CACHES_MIN_BYTES;

        // Frame cache and PNG frames (independent per slot) apart from video frames (every
        // request of the batch, grouped by file and sorted by time).
        let mut copies: Vec<(usize, usize, &mut [u8])> = Vec::new();
        let requests = &mut scratch.requests;
        requests.clear();
        for (f, field) in fields.iter().enumerate() {
            if field.frame.is_none() || field.value_type == ValueType::FrameRow {
                continue;
            }
            for (slot, &row) in scratch.rows[f].iter().enumerate() {
                let (part, local) = self.locate(row)?;
                match field.sources[part] {
                    Source::Video { camera } => {
                        let here = &self.parts[part];
                        let episode = here.dataset.episode_of(local).expect("rows are inside the dataset");
                        let time_s = episode.videos[camera].from_timestamp + here.dataset.timestamp(local);
                        let file = here.episode_files[camera][episode.index];
                        let (episode, frame) = (episode.index, local - episode.frames.start);
                        requests.push(Request { part, camera, episode, frame, file, time_s, field: f, slot });
                    }
                    _ => copies.push((f, row, slots[f][slot].take().expect("each slot once"))),
                }
            }
        }
        let copy_one =
            |(f, row, out): (usize, usize, &mut [u8])| -> Result<()> { self.copy_frame(f, row, out, past_caches) };
        if self.pieces > 1 && copies.len() > 1 {
            let chunk = copies.len().div_ceil(self.pieces);
            let mut pieces: Vec<Vec<(usize, usize, &mut [u8])>> = Vec::new();
            let mut iter = copies.into_iter().peekable();
            while iter.peek().is_some() {
                pieces.push(iter.by_ref().take(chunk).collect());
            }
            pieces.into_par_iter().try_for_each(|piece| piece.into_iter().try_for_each(copy_one))?;
        } else {
            copies.into_iter().try_for_each(copy_one)?;
        }

        if requests.is_empty() {
            return Ok(());
        }
        requests.sort_by(|a, b| a.file.cmp(&b.file).then(a.time_s.total_cmp(&b.time_s)));
        let per_piece = requests.len().div_ceil(self.pieces);
        let mut pieces: Vec<Vec<(Request, &mut [u8])>> = Vec::with_capacity(self.pieces);
        for chunk in requests.chunks(per_piece) {
            pieces.push(chunk.iter().map(|r| (*r, slots[r.field][r.slot].take().expect("each slot once"))).collect());
        }
        if pieces.len() > 1 {
            pieces.into_par_iter().try_for_each(|piece| self.decode_piece(piece, past_caches))
        } else {
            pieces.into_iter().try_for_each(|piece| self.decode_piece(piece, past_caches))
        }
    }

    /// Decodes a sorted run of requests with this thread's decoders; the frames it copies (a
    /// repeated one, one from the blocks order's buffer) past the caches when `past_caches`.
    fn decode_piece(&self, mut piece: Vec<(Request, &mut [u8])>, past_caches: bool) -> Result<()> {
        let worker = rayon::current_thread_index().unwrap_or(0) % self.decoders.len();
        let mut decoders = self.decoders[worker].lock().unwrap_or_else(PoisonError::into_inner);
        for i in 0..piece.len() {
            let (done, rest) = piece.split_at_mut(i);
            let (request, out) = &mut rest[0];
            // A repeated frame (a padded window) is copied, not decoded again.
            if let Some((previous, from)) = done.last()
                && previous.file == request.file
                && previous.time_s == request.time_s
            {
                copy_into(out, from, past_caches);
                continue;
            }
            let dataset = &self.parts[request.part].dataset;
            let decoder = decoders.get_with(&self.files[request.file], |p| dataset.open_video(p))?;
            let field = &self.layout.fields[request.field];
            let declared = field.frame.expect("cameras have a frame shape");
            if decoder.shape() != declared {
                return Err(DatasetError::field(
                    dataset.root().join(datasets::INFO_PATH),
                    format!("features.{}.shape", field.key),
                    format!(
                        "declares {declared} but {} decodes to {}",
                        self.files[request.file].display(),
                        decoder.shape()
                    ),
                )
                .into());
            }
            let (tolerance_s, encoding) = (dataset.options().tolerance_s, field.encoding);
            let Some(buffer) = &self.episode_frames else {
                decoder.encoded_frame_at(request.time_s, tolerance_s, encoding, out)?;
                continue;
            };
            // The blocks order: the episode decoded front to back, once, as far as asked.
            let episode = &dataset.episodes()[request.episode];
            let from_s = episode.videos[request.camera].from_timestamp;
            let key = EpisodeKey { part: request.part, camera: request.camera, episode: request.episode };
            let held = buffer.episode(key, episode.len(), out.len());
            let mut held = held.lock().unwrap_or_else(PoisonError::into_inner);
            let decode = |j: usize, into: &mut [u8]| {
                let t = from_s + dataset.timestamp(episode.frames.start + j);
                decoder.encoded_frame_at(t, tolerance_s, encoding, into).map(|_| ())
            };
            let frame = held.frame(request.frame, decode)?.expect("a sample's frames are inside its episode");
            copy_into(out, frame, past_caches);
        }
        Ok(())
    }

    /// One frame (joint index `index`) from the frame cache or a PNG in parquet, copied past the
    /// caches when `past_caches`.
    fn copy_frame(&self, field: usize, index: usize, out: &mut [u8], past_caches: bool) -> Result<()> {
        let field = &self.layout.fields[field];
        let (part, row) = self.locate(index)?;
        let Part { dataset, cache, .. } = &self.parts[part];
        match field.sources[part] {
            Source::FrameCache => {
                let cache = cache.as_ref().expect("a frame-cache field has a cache");
                copy_into(out, cache.camera(&field.key).expect("checked at build").frame(row), past_caches);
            }
            Source::Image => {
                let Some(ColumnValues::Image(images)) = dataset.table().column(&field.key).map(|c| &c.values) else {
                    return Err(Error::Config(format!("`{}` has no image column", field.key)));
                };
                let image_error = |message: String| DatasetError::Image {
                    path: dataset.table().file_of(row).to_path_buf(),
                    field: field.key.clone(),
                    row,
                    message,
                };
                let (shape, chw) = decode_chw(images.get(row)).map_err(image_error)?;
                let declared = field.frame.expect("cameras have a frame shape");
                if shape != declared {
                    return Err(image_error(format!("image is {shape}, meta/info.json declares {declared}")).into());
                }
                copy_into(out, &chw, past_caches);
            }
            _ => unreachable!("only cached and image frames are copied"),
        }
        Ok(())
    }
}

/// Copies `width` values per row of `rows` (joint indices of a dataset starting at `start`) from
/// that dataset's `src` into the front of `dst`.
fn gather<T: Copy>(src: &[T], dst: &mut [T], rows: &[usize], width: usize, start: usize) {
    for (k, &row) in rows.iter().enumerate() {
        let row = row - start;
        dst[k * width..(k + 1) * width].copy_from_slice(&src[row * width..(row + 1) * width]);
    }
}
