//! Frame-exact access to one MP4: the frame nearest a timestamp, as LeRobot's decoders pick it.
//!
//! video-rs's own `seek` lands on the keyframe *after* a target and its `seek_to_frame` reads
//! frame numbers as microseconds, so this decoder drives FFmpeg (ffmpeg-next, which video-rs
//! re-exports) directly: a backward seek to the keyframe at or before the target, then decoding
//! forward with timestamps in the *stream* time base. The last two decoded frames are kept, so
//! that a window of timestamps (and the repeated edge frames of a padded window) decodes each
//! frame once, and short forward jumps decode forward instead of seeking.

use std::path::{Path, PathBuf};
use std::sync::Once;

use video_rs::ffmpeg;
use video_rs::ffmpeg::util::error::EAGAIN;

use super::counters::DecodeCounters;
use super::rgb;
use crate::error::{Error, Result};
use crate::meta::features::{FrameEncoding, FrameShape};

/// One decoded frame held in a slot.
#[derive(Debug, Clone, Copy)]
struct Held {
    slot: usize,
    pts_s: f64,
}

/// An open MP4 and its video decoder, positioned somewhere in the stream.
pub struct VideoDecoder {
    path: PathBuf,
    input: ffmpeg::format::context::Input,
    decoder: ffmpeg::decoder::Video,
    packet: ffmpeg::Packet,
    stream: usize,
    /// Seconds per tick of the stream time base.
    tick_s: f64,
    start_s: f64,
    fps: f64,
    shape: FrameShape,
    slots: [ffmpeg::frame::Video; 3],
    prev: Option<Held>,
    cur: Option<Held>,
    /// Whether the decoder has returned its last frame.
    drained: bool,
    /// The longest distance between keyframes seen so far, in frames.
    gop_frames: usize,
    since_key: usize,
    counters: DecodeCounters,
    /// Where a streamed file's reader leaves the failure FFmpeg reduces to an error code.
    read_failure: Option<ReadFailure>,
}

/// Where a reader leaves the full error of a failed read, which FFmpeg reduces to a code.
pub type ReadFailure = std::sync::Arc<std::sync::Mutex<Option<Error>>>;

/// Calls `video_rs::init` (FFmpeg set-up, and its log routed to `tracing` under target
/// `video`) once per process.
pub fn init_ffmpeg() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        if let Err(e) = video_rs::init() {
            tracing::warn!("FFmpeg initialisation reported: {e}");
        }
    });
}

impl VideoDecoder {
    /// Opens `path` and prepares its best video stream for decoding on one thread.
    pub fn open(path: &Path) -> Result<Self> {
        Self::open_with_threads(path, 1)
    }

    /// Opens `path`, decoding with `threads` FFmpeg threads (1 suits a loader worker, which
    /// parallelises across files instead).
    pub fn open_with_threads(path: &Path, threads: usize) -> Result<Self> {
        init_ffmpeg();
        if let Err(e) = std::fs::metadata(path) {
            return Err(Error::io(path, e));
        }
        let input = ffmpeg::format::input(path).map_err(|e| Error::video_failed(path, "cannot open", e))?;
        Self::from_input(path, input, threads, None)
    }

    /// Opens a file read through `reader` (a streamed one), on one thread; `path` names it in
    /// messages (its URL), `failure` is where the reader leaves the full error of a failed read.
    pub fn open_reader(
        reader: impl std::io::Read + std::io::Seek + Send + 'static,
        failure: ReadFailure,
        path: &Path,
    ) -> Result<Self> {
        init_ffmpeg();
        let io = ffmpeg::format::context::StreamIo::from_read_seek(reader)
            .map_err(|e| Error::video_failed(path, "cannot set up reading", e))?;
        let opened = ffmpeg::format::input_from_stream(io, path.file_name().and_then(|n| n.to_str()), None);
        let input = opened.map_err(|e| failure_or(&failure, Error::video_failed(path, "cannot open", e)))?;
        Self::from_input(path, input, 1, Some(failure))
    }

    /// The decoder of `input`'s best video stream.
    fn from_input(
        path: &Path,
        input: ffmpeg::format::context::Input,
        threads: usize,
        read_failure: Option<ReadFailure>,
    ) -> Result<Self> {
        let stream = input
            .streams()
            .best(ffmpeg::media::Type::Video)
            .ok_or_else(|| Error::video(path, "the file has no video stream"))?;
        let tb = stream.time_base();
        if tb.numerator() <= 0 || tb.denominator() <= 0 {
            return Err(Error::video(path, format!("invalid stream time base {tb}")));
        }
        let tick_s = f64::from(tb.numerator()) / f64::from(tb.denominator());
        let start_s = match stream.start_time() {
            i64::MIN => 0.0,
            t => t as f64 * tick_s,
        };
        let rate = [stream.avg_frame_rate(), stream.rate()]
            .into_iter()
            .find(|r| r.numerator() > 0 && r.denominator() > 0)
            .map_or(30.0, |r| f64::from(r.numerator()) / f64::from(r.denominator()));
        let index = stream.index();
        let mut context = ffmpeg::codec::context::Context::from_parameters(stream.parameters())
            .map_err(|e| Error::video_failed(path, "unsupported codec parameters", e))?;
        if threads > 1 {
            context.set_threading(ffmpeg::codec::threading::Config {
                kind: ffmpeg::codec::threading::Type::Frame,
                count: threads,
                ..Default::default()
            });
        }
        let decoder = context
            .decoder()
            .video()
            .map_err(|e| Error::video_failed(path, "no decoder for this stream's codec", e))?;
        let shape = FrameShape { channels: 3, height: decoder.height() as usize, width: decoder.width() as usize };
        if shape.is_empty() {
            return Err(Error::video(path, "the video stream declares no frame size"));
        }
        Ok(VideoDecoder {
            path: path.to_path_buf(),
            input,
            decoder,
            packet: ffmpeg::Packet::empty(),
            stream: index,
            tick_s,
            start_s,
            fps: rate,
            shape,
            slots: [ffmpeg::frame::Video::empty(), ffmpeg::frame::Video::empty(), ffmpeg::frame::Video::empty()],
            prev: None,
            cur: None,
            drained: false,
            gop_frames: 2,
            since_key: 0,
            counters: DecodeCounters::default(),
            read_failure,
        })
    }

    /// The error of doing `what`, which failed with FFmpeg's `e`: a streamed file's read
    /// failure when that is what FFmpeg reports.
    fn failed(&self, what: impl std::fmt::Display, e: ffmpeg::Error) -> Error {
        let error = Error::video_failed(&self.path, what, e);
        match &self.read_failure {
            Some(failure) => failure_or(failure, error),
            None => error,
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The RGB frame shape (3 × height × width).
    pub fn shape(&self) -> FrameShape {
        self.shape
    }

    /// The stream's average frame rate.
    pub fn fps(&self) -> f64 {
        self.fps
    }

    /// FFmpeg's name of the pixel format the stream declares (`yuv420p` for LeRobot's videos).
    pub fn pixel_format(&self) -> &'static str {
        self.decoder.format().descriptor().map_or("unknown", |d| d.name())
    }

    /// Work done so far.
    pub fn counters(&self) -> DecodeCounters {
        self.counters
    }

    /// Writes the frame nearest `timestamp_s` (seconds from the start of the file) into `out`
    /// as channel-first RGB, and returns that frame's timestamp. Fails with
    /// [`Error::FrameTimestamp`] unless `|frame − query| < tolerance_s`, as LeRobot does.
    pub fn frame_at(&mut self, timestamp_s: f64, tolerance_s: f64, out: &mut [u8]) -> Result<f64> {
        self.encoded_frame_at(timestamp_s, tolerance_s, FrameEncoding::Rgb, out)
    }

    /// [`Self::frame_at`] in `encoding`: RGB, or the decoder's YUV 4:2:0 planes as they are
    /// ([`FrameEncoding::Yuv420`]: no colour conversion; a stream stored in another pixel
    /// format fails).
    pub fn encoded_frame_at(
        &mut self,
        timestamp_s: f64,
        tolerance_s: f64,
        encoding: FrameEncoding,
        out: &mut [u8],
    ) -> Result<f64> {
        let held = self.locate(timestamp_s, tolerance_s)?;
        self.write_encoded(held, encoding, out)?;
        Ok(held.pts_s)
    }

    /// Writes the frames nearest each of `timestamps_s` into consecutive `3·H·W` chunks of
    /// `out`, in the order given. Timestamps are visited in increasing order so that each frame
    /// is decoded once; a repeated timestamp copies the frame already written.
    pub fn frames_at(&mut self, timestamps_s: &[f64], tolerance_s: f64, out: &mut [u8]) -> Result<()> {
        self.encoded_frames_at(timestamps_s, tolerance_s, FrameEncoding::Rgb, out)
    }

    /// [`Self::frames_at`] in `encoding`: consecutive chunks of the encoding's frame length.
    pub fn encoded_frames_at(
        &mut self,
        timestamps_s: &[f64],
        tolerance_s: f64,
        encoding: FrameEncoding,
        out: &mut [u8],
    ) -> Result<()> {
        let len = self.shape.encoded_len(encoding);
        if out.len() != len * timestamps_s.len() {
            return Err(Error::video(
                &self.path,
                format!(
                    "output holds {} bytes, {} frames need {}",
                    out.len(),
                    timestamps_s.len(),
                    len * timestamps_s.len()
                ),
            ));
        }
        let mut order: Vec<usize> = (0..timestamps_s.len()).collect();
        order.sort_by(|&a, &b| timestamps_s[a].total_cmp(&timestamps_s[b]));
        let mut last_written: Option<usize> = None;
        for i in order {
            let t = timestamps_s[i];
            if let Some(from) = last_written.filter(|&from| timestamps_s[from] == t) {
                out.copy_within(from * len..(from + 1) * len, i * len);
                continue;
            }
            let held = self.locate(t, tolerance_s)?;
            self.write_encoded(held, encoding, &mut out[i * len..(i + 1) * len])?;
            last_written = Some(i);
        }
        Ok(())
    }

    /// Decodes the whole stream from the start and calls `each` with every frame's timestamp
    /// and, when `with_pixels`, its channel-first RGB pixels (converted into `buffer`).
    pub fn for_each_frame(
        &mut self,
        with_pixels: bool,
        mut each: impl FnMut(f64, Option<&[u8]>) -> Result<()>,
    ) -> Result<()> {
        self.seek_to(self.start_s)?;
        let mut buffer = vec![0u8; if with_pixels { self.shape.len() } else { 0 }];
        while self.decode_next()? {
            let held = self.cur.expect("decode_next holds the new frame");
            if with_pixels {
                self.convert(held, &mut buffer)?;
                each(held.pts_s, Some(&buffer))?;
            } else {
                each(held.pts_s, None)?;
            }
        }
        Ok(())
    }

    /// Writes the held frame into `out` in `encoding`.
    fn write_encoded(&mut self, held: Held, encoding: FrameEncoding, out: &mut [u8]) -> Result<()> {
        match encoding {
            FrameEncoding::Rgb => self.convert(held, out),
            FrameEncoding::Yuv420 => {
                rgb::write_yuv420(&self.slots[held.slot], out).map_err(|m| Error::video(&self.path, m))?;
                self.counters.frames_converted += 1;
                Ok(())
            }
        }
    }

    fn convert(&mut self, held: Held, out: &mut [u8]) -> Result<()> {
        let frame = &self.slots[held.slot];
        let shape = rgb::shape_of(frame);
        if shape != self.shape {
            return Err(Error::video(
                &self.path,
                format!("frame at {:.6}s is {shape}, the stream declares {}", held.pts_s, self.shape),
            ));
        }
        rgb::write_chw(frame, out).map_err(|m| Error::video(&self.path, m))?;
        self.counters.frames_converted += 1;
        Ok(())
    }

    /// Finds the decoded frame nearest `t`, decoding forward or seeking as needed.
    fn locate(&mut self, t: f64, tolerance_s: f64) -> Result<Held> {
        // A frame closer to `t` than a quarter period (and within tolerance) is the only frame
        // within tolerance, hence the nearest, without decoding its successor to compare.
        let sure = tolerance_s.min(0.25 / self.fps);
        let accepts = |h: &Held| (h.pts_s - t).abs() < sure;
        if let Some(held) = self.cur.filter(accepts).or(self.prev.filter(accepts)) {
            return Ok(held);
        }
        if let Some(held) = self.bracketing(t) {
            return self.within_tolerance(held, t, tolerance_s);
        }
        let forward = match self.cur {
            Some(cur) => cur.pts_s < t && (t - cur.pts_s) * self.fps <= self.gop_frames as f64 + 0.5 && !self.drained,
            None => false,
        };
        if !forward {
            // Aim a hair past `t`: a keyframe exactly at `t` whose time rounds to just above the
            // query (float32 timestamps) must not send us a whole GOP back.
            self.seek_to(t + sure)?;
        }
        let mut margin = 0.0;
        loop {
            while !self.cur.is_some_and(|c| c.pts_s >= t || accepts(&c)) && self.decode_next()? {}
            // Right after a seek, a first frame later than `t` means the keyframe we landed on
            // is past the target (open GOP, or rounding in the container's index): go back
            // further, doubling the margin, until we reach the start of the stream.
            let overshoot = match (self.prev, self.cur) {
                (None, Some(cur)) => cur.pts_s - t >= tolerance_s.min(0.5 / self.fps),
                _ => false,
            };
            if !(overshoot && t - margin > self.start_s) {
                break;
            }
            margin = if margin == 0.0 { (2.0 / self.fps).max(0.1) } else { margin * 2.0 };
            self.seek_to(t - margin)?;
        }
        if let Some(held) = self.cur.filter(accepts) {
            return Ok(held);
        }
        let held = self.bracketing(t).or(self.nearest_held(t)).ok_or_else(|| Error::FrameTimestamp {
            path: self.path.clone(),
            query_s: t,
            nearest_s: None,
            tolerance_s,
        })?;
        self.within_tolerance(held, t, tolerance_s)
    }

    /// The nearer of the two held frames when they bracket `t` (ties go to the earlier one, as
    /// LeRobot's `argmin` over frames in decode order does).
    fn bracketing(&self, t: f64) -> Option<Held> {
        let (prev, cur) = (self.prev?, self.cur?);
        (prev.pts_s <= t && t <= cur.pts_s).then_some(if t - prev.pts_s <= cur.pts_s - t { prev } else { cur })
    }

    fn nearest_held(&self, t: f64) -> Option<Held> {
        [self.prev, self.cur].into_iter().flatten().min_by(|a, b| (a.pts_s - t).abs().total_cmp(&(b.pts_s - t).abs()))
    }

    fn within_tolerance(&self, held: Held, t: f64, tolerance_s: f64) -> Result<Held> {
        if (held.pts_s - t).abs() < tolerance_s {
            Ok(held)
        } else {
            Err(Error::FrameTimestamp { path: self.path.clone(), query_s: t, nearest_s: Some(held.pts_s), tolerance_s })
        }
    }

    /// Seeks to the keyframe at or before `t` (or the stream start) and resets the decoder.
    fn seek_to(&mut self, t: f64) -> Result<()> {
        let target_us = (t.max(self.start_s) * 1e6).floor() as i64;
        if self.input.seek(target_us, ..target_us).is_err() {
            let start_us = (self.start_s * 1e6).floor() as i64;
            self.input.seek(start_us, ..).map_err(|e| self.failed(format!("cannot seek to {t:.6}s"), e))?;
        }
        self.decoder.flush();
        self.prev = None;
        self.cur = None;
        self.drained = false;
        self.counters.seeks += 1;
        Ok(())
    }

    /// Decodes the next frame into a free slot and makes it `cur`; false at the end. A read of
    /// a streamed file that failed underneath fails it, even where FFmpeg carried on (a short
    /// packet, an early end), so that no frame decoded past a failed read is handed out.
    fn decode_next(&mut self) -> Result<bool> {
        let decoded = self.decode_next_unchecked();
        if let Some(failure) = &self.read_failure
            && let Some(error) = failure.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take()
        {
            return Err(error);
        }
        decoded
    }

    /// [`Self::decode_next`] without the check of the streamed reads.
    fn decode_next_unchecked(&mut self) -> Result<bool> {
        if self.drained {
            return Ok(false);
        }
        let slot = (0..3)
            .find(|s| Some(*s) != self.prev.map(|h| h.slot) && Some(*s) != self.cur.map(|h| h.slot))
            .expect("three slots, two held");
        loop {
            match self.decoder.receive_frame(&mut self.slots[slot]) {
                Ok(()) => {
                    let frame = &self.slots[slot];
                    let Some(pts) = frame.pts().or_else(|| frame.timestamp()) else { continue };
                    self.counters.frames_decoded += 1;
                    if frame.is_key() {
                        self.gop_frames = self.gop_frames.max(self.since_key);
                        self.since_key = 1;
                    } else {
                        self.since_key += 1;
                    }
                    self.prev = self.cur;
                    self.cur = Some(Held { slot, pts_s: pts as f64 * self.tick_s });
                    return Ok(true);
                }
                Err(ffmpeg::Error::Eof) => {
                    self.drained = true;
                    return Ok(false);
                }
                Err(ffmpeg::Error::Other { errno }) if errno == EAGAIN => self.feed()?,
                Err(e) => return Err(self.failed("decoding failed", e)),
            }
        }
    }

    /// Sends the next packet of our stream (or end-of-stream) to the decoder.
    fn feed(&mut self) -> Result<()> {
        loop {
            // `av_read_frame` does not release the packet it overwrites: start from an empty
            // one (dropping the previous packet unreferences its buffer).
            self.packet = ffmpeg::Packet::empty();
            match self.packet.read(&mut self.input) {
                Ok(()) if self.packet.stream() == self.stream => {
                    return self.decoder.send_packet(&self.packet).map_err(|e| self.failed("corrupt packet", e));
                }
                Ok(()) => {}
                Err(ffmpeg::Error::Eof) => {
                    return self.decoder.send_eof().map_err(|e| self.failed("cannot flush the decoder", e));
                }
                Err(e) => return Err(self.failed("reading packets failed", e)),
            }
        }
    }
}

impl std::fmt::Debug for VideoDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VideoDecoder")
            .field("path", &self.path)
            .field("shape", &self.shape)
            .field("fps", &self.fps)
            .finish_non_exhaustive()
    }
}

/// The read failure left in `failure`, taken, or `otherwise`.
fn failure_or(failure: &ReadFailure, otherwise: Error) -> Error {
    failure.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take().unwrap_or(otherwise)
}
