//! Writing a frame cache: every camera's frames decoded into a temporary file beside its final
//! name, space reserved first, renamed into place when complete; the folder's record
//! ([`super::RECORD`]) written last, which marks the cache complete. The writer holds the
//! folder's writer lock ([`super::locks`]) throughout, so temporary files it finds on starting
//! were left by a writer that died, and are removed.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;

use super::format::{
    CacheFormat, CacheHeader, CacheRecord, FORMAT_VERSION, HEADER_LEN, RECORD, TEMPORARY, cache_file, cache_fingerprint,
};
use super::locks::{FolderLock, LockMode, WRITER_LOCK};
use super::reader::FrameCache;
use super::resize::Resampler;
use crate::dataset::{Dataset, check_video_shape};
use crate::error::{Error, Result};
use crate::table::ColumnValues;
use crate::table::image::decode_chw;
use crate::video::DecoderCache;

/// Decodes every frame of every camera of `dataset` into `dir` (one file per camera), stored as
/// `format` says. `progress` is called with the number of frames done so far. Files are written
/// beside their final name and renamed into place when complete.
///
/// Another process building a cache in `dir` is waited for; if the cache it leaves is this
/// dataset's in this format, it is kept and nothing is decoded.
pub fn write_frame_cache(
    dataset: &Dataset,
    dir: &Path,
    format: &CacheFormat,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<PathBuf>> {
    dataset.require_every_episode("a frame cache")?;
    format.check(dataset)?;
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let _writing = match FolderLock::try_acquire(dir, WRITER_LOCK, LockMode::Exclusive)? {
        Some(lock) => lock,
        None => {
            tracing::info!("frame cache: another process is writing {}; waiting for it", dir.display());
            FolderLock::acquire(dir, WRITER_LOCK, LockMode::Exclusive)?
        }
    };
    remove_temporary_files(dir)?;
    if let Ok(existing) = FrameCache::open(dir, dataset)
        && existing.holds(format)
    {
        return Ok(existing.cameras.iter().map(|c| c.path.clone()).collect());
    }
    // Not complete until every camera is rewritten.
    super::locks::remove_path(&dir.join(RECORD))?;
    let fingerprint = cache_fingerprint(dataset)?;
    let done = AtomicU64::new(0);
    let mut written = Vec::new();
    for key in dataset.info().camera_keys() {
        let feature = dataset.info().feature(key.as_str()).expect("a camera");
        let source = feature.frame_shape().expect("a camera has a frame shape");
        let shape = format.shape(source);
        let encoding = format.encoding;
        let header = CacheHeader {
            version: FORMAT_VERSION,
            fingerprint,
            frames: dataset.len() as u64,
            shape,
            source,
            encoding,
            key: key.to_string(),
        };
        let path = cache_file(dir, key.as_str());
        // One temporary file per writer (process and call): runs that build the same cache at
        // once each write a whole file and publish it by renaming; none writes into another's.
        static WRITERS: AtomicU64 = AtomicU64::new(0);
        let writer = WRITERS.fetch_add(1, Ordering::Relaxed);
        let tmp = path.with_extension(format!("frames{TEMPORARY}{}.{writer}", std::process::id()));
        let removed_on_error = RemoveOnDrop(Some(tmp.clone()));
        let file = File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
        let total = HEADER_LEN as u64 + dataset.len() as u64 * header.frame_len() as u64;
        reserve(&file, &tmp, total)?;
        let camera = dataset.info().video_keys().iter().position(|k| *k == key);
        let resampler = (shape != source).then(|| Resampler::new(source, shape));
        dataset.episodes().par_iter().try_for_each_init(
            || (DecoderCache::default(), Vec::new(), Vec::new(), resampler.clone()),
            |(decoders, pixels, resized, resampler), episode| -> Result<()> {
                pixels.resize(episode.len() * source.encoded_len(encoding), 0);
                match camera {
                    Some(c) => {
                        let path = dataset.video_file(episode, c)?;
                        let from = episode.videos[c].from_timestamp;
                        let times: Vec<f64> = episode.frames.clone().map(|r| from + dataset.timestamp(r)).collect();
                        let decoder = decoders.get_with(&path, |p| dataset.open_video(p))?;
                        check_video_shape(dataset.root(), feature, source, decoder.shape(), &path)?;
                        decoder.encoded_frames_at(&times, dataset.options().tolerance_s, encoding, pixels)?;
                    }
                    None => {
                        let Some(ColumnValues::Image(images)) = dataset.table().column(key.as_str()).map(|c| &c.values)
                        else {
                            return Err(Error::request(format!("camera `{key}` has no image column")));
                        };
                        for (i, row) in episode.frames.clone().enumerate() {
                            let (s, chw) = decode_chw(images.get(row)).map_err(|message| Error::Image {
                                path: dataset.table().file_of(row).to_path_buf(),
                                field: key.to_string(),
                                row,
                                message,
                            })?;
                            if s != source {
                                return Err(Error::Image {
                                    path: dataset.table().file_of(row).to_path_buf(),
                                    field: key.to_string(),
                                    row,
                                    message: format!("image is {s}, meta/info.json declares {source}"),
                                });
                            }
                            pixels[i * source.len()..(i + 1) * source.len()].copy_from_slice(&chw);
                        }
                    }
                }
                let out: &[u8] = match resampler {
                    None => pixels,
                    Some(resampler) => {
                        resized.clear();
                        for frame in pixels.chunks_exact(source.len()) {
                            resampler.resize(frame, resized);
                        }
                        resized
                    }
                };
                let offset = HEADER_LEN as u64 + episode.frames.start as u64 * header.frame_len() as u64;
                file.write_all_at(out, offset).map_err(|e| Error::io(&tmp, e))?;
                progress(done.fetch_add(episode.len() as u64, Ordering::Relaxed) + episode.len() as u64);
                Ok(())
            },
        )?;
        file.write_all_at(&header.encode(), 0).map_err(|e| Error::io(&tmp, e))?;
        file.sync_all().map_err(|e| Error::io(&tmp, e))?;
        drop(file);
        std::fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
        removed_on_error.keep();
        written.push(path);
    }
    let note = dir.join("README.txt");
    let mut f = File::create(&note).map_err(|e| Error::io(&note, e))?;
    writeln!(
        f,
        "Decoded-frame cache of {} (format {FORMAT_VERSION}), written by lerobot-rs (`datasets cache`).",
        dataset.root().display()
    )
    .map_err(|e| Error::io(&note, e))?;
    let record = CacheRecord {
        format: FORMAT_VERSION,
        dataset: dataset.root().to_path_buf(),
        fingerprint: format!("{fingerprint:016x}"),
        cameras: dataset.info().camera_keys().iter().map(ToString::to_string).collect(),
    };
    record.write(dir)?;
    Ok(written)
}

/// Removes the temporary files in `dir`: with its writer lock held, they are a dead writer's.
fn remove_temporary_files(dir: &Path) -> Result<()> {
    for path in super::store::temporary_files(dir)? {
        tracing::info!("frame cache: removing {}, left by a writer that ended", path.display());
        super::locks::remove_path(&path)?;
    }
    Ok(())
}

/// Reserves `len` bytes for the file at `path`, so that a filesystem too full for the cache (a
/// /dev/shm another process fills) fails here, naming the file, rather than part-way through;
/// where the filesystem cannot reserve, sets the length only.
fn reserve(file: &File, path: &Path, len: u64) -> Result<()> {
    match rustix::fs::fallocate(file, rustix::fs::FallocateFlags::empty(), 0, len) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::OPNOTSUPP) => file.set_len(len).map_err(|e| Error::io(path, e)),
        Err(e) => Err(Error::field(
            path,
            "size",
            format!("could not reserve {:.2} GB for the frame cache: {}", len as f64 / 1e9, std::io::Error::from(e)),
        )),
    }
}

/// Removes a half-written file when the writer returns early (an error, a full disk).
struct RemoveOnDrop(Option<PathBuf>);

impl RemoveOnDrop {
    /// The file was published: leave it.
    fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}
