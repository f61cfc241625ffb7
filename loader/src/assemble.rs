//! Filling a batch: window rows and pads, numeric columns gathered by index, camera frames from
//! the frame cache (a copy), from PNGs (a decode per frame) or from video — the frame requests
//! of the whole batch grouped by file and sorted by time, so that each GOP is decoded once for
//! all the frames needed from it, and split across the workers.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use datasets::frame_cache::FrameCache;
use datasets::{
    ColumnValues, Dataset, DecoderCache, DecoderCacheConfig, Error as DatasetError, decode_chw, window_rows,
};
use rayon::prelude::*;

use crate::batch::{Buffer, Buffers};
use crate::error::{Error, Result};
use crate::layout::{BatchLayout, Source};
use crate::sampler::BatchPlan;

/// The name of the test-only variable that slows every batch down by its value in
/// microseconds. It exists to show that CI's regression check (`bench regress`) catches a slower
/// loader; nothing else sets it.
pub(crate) const TEST_DELAY_ENV: &str = "LOADER_TEST_DELAY_US";

/// The delay [`TEST_DELAY_ENV`] asks for, read once.
fn test_delay() -> Option<std::time::Duration> {
    static DELAY: std::sync::OnceLock<Option<std::time::Duration>> = std::sync::OnceLock::new();
    *DELAY.get_or_init(|| {
        let micros: u64 = std::env::var(TEST_DELAY_ENV).ok()?.parse().ok()?;
        (micros > 0).then(|| std::time::Duration::from_micros(micros))
    })
}

/// Everything needed to fill batches, shared by the workers.
pub(crate) struct Assembler {
    dataset: Arc<Dataset>,
    layout: Arc<BatchLayout>,
    cache: Option<Arc<FrameCache>>,
    /// One decoder cache per worker thread (index = rayon thread index; 0 off the pool).
    decoders: Vec<Mutex<DecoderCache>>,
    /// Per video camera: the file id of each episode's video.
    episode_files: Vec<Vec<usize>>,
    /// Absolute video paths by file id.
    files: Vec<PathBuf>,
    /// Work is split into this many pieces (the number of workers).
    pieces: usize,
}

/// Per-batch bookkeeping kept between batches so that it does not reallocate.
#[derive(Default)]
pub(crate) struct Scratch {
    /// Window rows per layout field (`B·T`).
    rows: Vec<Vec<usize>>,
    /// Video frame requests of the batch.
    requests: Vec<Request>,
}

/// One frame to decode: which file, when, and where it goes.
#[derive(Debug, Clone, Copy)]
struct Request {
    file: usize,
    time_s: f64,
    field: usize,
    slot: usize,
}

impl Assembler {
    pub(crate) fn new(
        dataset: Arc<Dataset>,
        layout: Arc<BatchLayout>,
        cache: Option<Arc<FrameCache>>,
        decoder_cache: DecoderCacheConfig,
        workers: usize,
    ) -> Result<Self> {
        let mut files: Vec<PathBuf> = Vec::new();
        let mut episode_files = Vec::new();
        for camera in 0..dataset.info().video_keys().len() {
            let mut ids = Vec::with_capacity(dataset.episodes().len());
            for episode in dataset.episodes() {
                let path = dataset.video_file(episode, camera)?;
                let id = match files.iter().rposition(|p| *p == path) {
                    Some(id) => id,
                    None => {
                        files.push(path);
                        files.len() - 1
                    }
                };
                ids.push(id);
            }
            episode_files.push(ids);
        }
        let decoders = (0..workers.max(1)).map(|_| Mutex::new(DecoderCache::new(decoder_cache))).collect();
        Ok(Self { dataset, layout, cache, decoders, episode_files, files, pieces: workers.max(1) })
    }

    /// The decoder caches, for reporting their memory.
    pub(crate) fn decoder_caches(&self) -> &[Mutex<DecoderCache>] {
        &self.decoders
    }

    /// Fills `buffers` with the samples of `plan`. Runs on the calling thread, spreading the
    /// frame work over the current rayon pool when there is one.
    pub(crate) fn fill(&self, plan: &BatchPlan, buffers: &mut Buffers, scratch: &mut Scratch) -> Result<()> {
        if let Some(delay) = test_delay() {
            std::thread::sleep(delay);
        }
        if let Some(cache) = &self.cache {
            cache.check_intact()?;
        }
        let b = plan.indices.len();
        buffers.len = b;
        buffers.epoch = plan.epoch;
        buffers.batch = plan.batch;
        buffers.state = plan.after;
        buffers.indices.clear();
        buffers.indices.extend_from_slice(&plan.indices);
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
                        let episode = self
                            .dataset
                            .episode_of(index)
                            .ok_or_else(|| Error::Config(format!("index {index} is outside the dataset")))?;
                        window_rows(index, offsets, &episode.frames, rows, &mut pad_scratch);
                    }
                    let capacity = self.layout.batch_size * offsets.len();
                    pad_scratch.resize(capacity.max(pad_scratch.len()), false);
                    *pads = pad_scratch;
                }
                None => rows.extend_from_slice(&plan.indices),
            }
        }

        // Numeric columns: index arithmetic and slice copies.
        for (f, field) in fields.iter().enumerate() {
            if field.source != Source::Column {
                continue;
            }
            let column = self.dataset.table().column(&field.key).expect("every numeric feature has a column");
            let w = column.width;
            let rows = &scratch.rows[f];
            match (&column.values, &mut buffers.values[f]) {
                (ColumnValues::F32(src), Buffer::F32(dst)) => gather(src, dst, rows, w),
                (ColumnValues::I64(src), Buffer::I64(dst)) => gather(src, dst, rows, w),
                (ColumnValues::Bool(src), Buffer::Bool(dst)) => gather(src, dst, rows, w),
                _ => return Err(Error::Config(format!("feature `{}` changed type", field.key))),
            }
        }

        self.fill_frames(buffers, scratch)
    }

    /// Camera frames of every camera field.
    fn fill_frames(&self, buffers: &mut Buffers, scratch: &mut Scratch) -> Result<()> {
        let fields = &self.layout.fields;
        // Mutable frame slots of every camera field, taken out one by one as work is planned.
        let mut slots: Vec<Vec<Option<&mut [u8]>>> = buffers
            .values
            .iter_mut()
            .zip(fields)
            .zip(&scratch.rows)
            .map(|((buffer, field), rows)| match (buffer, field.frame) {
                (Buffer::U8(v), Some(frame)) => v.chunks_mut(frame.len()).take(rows.len()).map(Some).collect(),
                _ => Vec::new(),
            })
            .collect();

        // Frame cache and PNG frames: independent per slot.
        let mut copies: Vec<(usize, usize, &mut [u8])> = Vec::new();
        for (f, field) in fields.iter().enumerate() {
            if matches!(field.source, Source::FrameCache | Source::Image) {
                for (slot, out) in slots[f].iter_mut().enumerate() {
                    copies.push((f, scratch.rows[f][slot], out.take().expect("each slot once")));
                }
            }
        }
        let copy_one = |(f, row, out): (usize, usize, &mut [u8])| -> Result<()> { self.copy_frame(f, row, out) };
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

        // Video frames: every request of the batch, grouped by file and sorted by time.
        let requests = &mut scratch.requests;
        requests.clear();
        for (f, field) in fields.iter().enumerate() {
            let Source::Video { camera } = field.source else { continue };
            for (slot, &row) in scratch.rows[f].iter().enumerate() {
                let episode = self.dataset.episode_of(row).expect("rows are inside the dataset");
                let time_s = episode.videos[camera].from_timestamp + self.dataset.timestamp(row);
                requests.push(Request { file: self.episode_files[camera][episode.index], time_s, field: f, slot });
            }
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
            pieces.into_par_iter().try_for_each(|piece| self.decode_piece(piece))
        } else {
            pieces.into_iter().try_for_each(|piece| self.decode_piece(piece))
        }
    }

    /// Decodes a sorted run of requests with this thread's decoders.
    fn decode_piece(&self, mut piece: Vec<(Request, &mut [u8])>) -> Result<()> {
        let worker = rayon::current_thread_index().unwrap_or(0) % self.decoders.len();
        let mut decoders = self.decoders[worker].lock().unwrap_or_else(PoisonError::into_inner);
        let tolerance = self.dataset.options().tolerance_s;
        for i in 0..piece.len() {
            let (done, rest) = piece.split_at_mut(i);
            let (request, out) = &mut rest[0];
            // A repeated frame (a padded window) is copied, not decoded again.
            if let Some((previous, from)) = done.last()
                && previous.file == request.file
                && previous.time_s == request.time_s
            {
                out.copy_from_slice(from);
                continue;
            }
            let decoder = decoders.get(&self.files[request.file])?;
            let field = &self.layout.fields[request.field];
            let declared = field.frame.expect("cameras have a frame shape");
            if decoder.shape() != declared {
                return Err(DatasetError::field(
                    self.dataset.root().join(datasets::INFO_PATH),
                    format!("features.{}.shape", field.key),
                    format!(
                        "declares {declared} but {} decodes to {}",
                        self.files[request.file].display(),
                        decoder.shape()
                    ),
                )
                .into());
            }
            decoder.frame_at(request.time_s, tolerance, out)?;
        }
        Ok(())
    }

    /// One frame from the frame cache or a PNG in parquet.
    fn copy_frame(&self, field: usize, row: usize, out: &mut [u8]) -> Result<()> {
        let field = &self.layout.fields[field];
        match field.source {
            Source::FrameCache => {
                let cache = self.cache.as_ref().expect("a frame-cache field has a cache");
                out.copy_from_slice(cache.camera(&field.key).expect("checked at build").frame(row));
            }
            Source::Image => {
                let Some(ColumnValues::Image(images)) = self.dataset.table().column(&field.key).map(|c| &c.values)
                else {
                    return Err(Error::Config(format!("`{}` has no image column", field.key)));
                };
                let image_error = |message: String| DatasetError::Image {
                    path: self.dataset.table().file_of(row).to_path_buf(),
                    field: field.key.clone(),
                    row,
                    message,
                };
                let (shape, chw) = decode_chw(images.get(row)).map_err(image_error)?;
                let declared = field.frame.expect("cameras have a frame shape");
                if shape != declared {
                    return Err(image_error(format!("image is {shape}, meta/info.json declares {declared}")).into());
                }
                out.copy_from_slice(&chw);
            }
            _ => unreachable!("only cached and image frames are copied"),
        }
        Ok(())
    }
}

/// Copies `width` values per row of `rows` from `src` into the front of `dst`.
fn gather<T: Copy>(src: &[T], dst: &mut [T], rows: &[usize], width: usize) {
    for (k, &row) in rows.iter().enumerate() {
        dst[k * width..(k + 1) * width].copy_from_slice(&src[row * width..(row + 1) * width]);
    }
}
