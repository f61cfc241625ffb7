//! Decoded frame (YUV, any layout) → RGB, channel-first uint8; or its YUV 4:2:0 planes as they
//! are, for the transport that converts them on the training device.
//!
//! The conversion gives FFmpeg's swscale's pixels, converting to packed RGB24 with the flags
//! video-rs uses, which are those of PyAV's `to_ndarray("rgb24")` and torchcodec on LeRobot's
//! files. 8-bit limited-range YUV 4:2:0 of even height (LeRobot's encodings) is converted by
//! [`bt601`](super::bt601), straight into channel-first planes, in a fifth of the time of
//! swscale's converter followed by the split into planes; anything else goes through swscale. A
//! swscale context is not `Send`, so each thread keeps its own, keyed by the source geometry;
//! that keeps [`VideoDecoder`](super::VideoDecoder) movable between threads.

use std::cell::RefCell;

use video_rs::ffmpeg;
use video_rs::ffmpeg::format::Pixel;
use video_rs::ffmpeg::software::scaling;

use super::bt601::{self, Plane};
use crate::meta::features::{FrameEncoding, FrameShape};

/// One scaler and its RGB24 output frame.
struct Scaler {
    key: (Pixel, u32, u32),
    context: scaling::Context,
    rgb: ffmpeg::frame::Video,
}

thread_local! {
    /// The scalers of this thread, most recently used last; a handful of geometries at most.
    static SCALERS: RefCell<Vec<Scaler>> = const { RefCell::new(Vec::new()) };
}

/// How many scalers a thread keeps.
const MAX_SCALERS: usize = 8;

/// Converts `frame` to RGB and writes it channel-first (`C, H, W`) into `out`, which must hold
/// exactly `3 * H * W` bytes.
pub(crate) fn write_chw(frame: &ffmpeg::frame::Video, out: &mut [u8]) -> Result<(), String> {
    let (w, h) = (frame.width() as usize, frame.height() as usize);
    if out.len() != 3 * w * h {
        return Err(format!("frame is {w}x{h} but the output holds {} bytes", out.len()));
    }
    // swscale's unscaled converter, whose arithmetic `bt601` is, takes frames of even height.
    if frame.format() == Pixel::YUV420P && h % 2 == 0 {
        let plane = |i| Plane { data: frame.data(i), stride: frame.stride(i) };
        bt601::planes_to_chw([plane(0), plane(1), plane(2)], h, w, out);
        return Ok(());
    }
    swscale_chw(frame, out)
}

/// [`write_chw`] through swscale, whatever the frame's format.
fn swscale_chw(frame: &ffmpeg::frame::Video, out: &mut [u8]) -> Result<(), String> {
    let (w, h) = (frame.width(), frame.height());
    let key = (frame.format(), w, h);
    let (wu, hu) = (w as usize, h as usize);
    SCALERS.with(|cell| {
        let mut scalers = cell.borrow_mut();
        let index = match scalers.iter().position(|s| s.key == key) {
            Some(i) => i,
            None => {
                let context = scaling::Context::get(key.0, w, h, Pixel::RGB24, w, h, scaling::Flags::AREA)
                    .map_err(|e| format!("cannot convert {:?} {w}x{h} to RGB: {e}", key.0))?;
                if scalers.len() == MAX_SCALERS {
                    scalers.remove(0);
                }
                scalers.push(Scaler { key, context, rgb: ffmpeg::frame::Video::empty() });
                scalers.len() - 1
            }
        };
        let scaler = &mut scalers[index];
        scaler.context.run(frame, &mut scaler.rgb).map_err(|e| format!("colour conversion failed: {e}"))?;
        hwc_to_chw(scaler.rgb.data(0), scaler.rgb.stride(0), hu, wu, out);
        Ok(())
    })
}

/// Writes a YUV 4:2:0 frame's three planes, without their row padding, into `out`: `H·W` bytes
/// of Y, then `⌈H/2⌉·⌈W/2⌉` of U and of V.
pub(crate) fn write_yuv420(frame: &ffmpeg::frame::Video, out: &mut [u8]) -> Result<(), String> {
    let format = frame.format();
    if format != Pixel::YUV420P {
        return Err(format!(
            "frames are {format:?}; the yuv420 encoding reads 8-bit limited-range YUV 4:2:0 (yuv420p) only"
        ));
    }
    let shape = shape_of(frame);
    if out.len() != shape.encoded_len(FrameEncoding::Yuv420) {
        return Err(format!("frame is {}x{} but the output holds {} bytes", shape.width, shape.height, out.len()));
    }
    let mut rest = out;
    for (plane, (rows, cols)) in shape.yuv420_planes().into_iter().enumerate() {
        let (out, after) = std::mem::take(&mut rest).split_at_mut(rows * cols);
        rest = after;
        let (data, stride) = (frame.data(plane), frame.stride(plane));
        for (row, dst) in out.chunks_exact_mut(cols).enumerate() {
            dst.copy_from_slice(&data[row * stride..row * stride + cols]);
        }
    }
    Ok(())
}

/// Converts YUV 4:2:0 planes laid out as [`FrameEncoding::Yuv420`](crate::FrameEncoding::Yuv420)
/// lays them out (`height × width`) to channel-first RGB in `out` (`3·H·W` bytes) with the
/// conversion the decoder applies to its own frames: the RGB frames a video would have given, to
/// check a conversion made elsewhere.
pub fn yuv420_to_chw(planes: &[u8], height: usize, width: usize, out: &mut [u8]) -> Result<(), String> {
    let shape = FrameShape { channels: 3, height, width };
    if height == 0 || width == 0 || planes.len() != shape.encoded_len(FrameEncoding::Yuv420) {
        return Err(format!("{} bytes are not the YUV 4:2:0 planes of {width}x{height}", planes.len()));
    }
    write_chw(&yuv420_frame(planes, shape), out)
}

/// A decoder's frame holding YUV 4:2:0 planes laid out as [`FrameEncoding::Yuv420`] lays them
/// out; `planes` must be their size.
fn yuv420_frame(planes: &[u8], shape: FrameShape) -> ffmpeg::frame::Video {
    let mut frame = ffmpeg::frame::Video::new(Pixel::YUV420P, shape.width as u32, shape.height as u32);
    let mut rest = planes;
    for (plane, (rows, cols)) in shape.yuv420_planes().into_iter().enumerate() {
        let (src, after) = rest.split_at(rows * cols);
        rest = after;
        let stride = frame.stride(plane);
        for (row, line) in src.chunks_exact(cols).enumerate() {
            frame.data_mut(plane)[row * stride..row * stride + cols].copy_from_slice(line);
        }
    }
    frame
}

/// Splits packed RGB rows (with a row stride) into three planes.
fn hwc_to_chw(src: &[u8], stride: usize, h: usize, w: usize, out: &mut [u8]) {
    let plane = h * w;
    let (r, rest) = out.split_at_mut(plane);
    let (g, b) = rest.split_at_mut(plane);
    let planes = r.chunks_exact_mut(w).zip(g.chunks_exact_mut(w)).zip(b.chunks_exact_mut(w));
    for (y, ((r, g), b)) in planes.enumerate() {
        let row = &src[y * stride..y * stride + 3 * w];
        // Eight pixels at a time as three 64-bit words (see `deinterleave8`), the rest one by one.
        let (groups, tail) = row.as_chunks::<24>();
        let (r8, r_tail) = r.as_chunks_mut::<8>();
        let (g8, g_tail) = g.as_chunks_mut::<8>();
        let (b8, b_tail) = b.as_chunks_mut::<8>();
        for (((px, r), g), b) in groups.iter().zip(r8).zip(g8).zip(b8) {
            let [pr, pg, pb] = deinterleave8(px);
            *r = pr.to_le_bytes();
            *g = pg.to_le_bytes();
            *b = pb.to_le_bytes();
        }
        let (tail, _) = tail.as_chunks::<3>();
        for (((&[pr, pg, pb], r), g), b) in tail.iter().zip(r_tail).zip(g_tail).zip(b_tail) {
            *r = pr;
            *g = pg;
            *b = pb;
        }
    }
}

/// Eight packed RGB pixels (24 bytes) → eight R, eight G and eight B bytes, each as a
/// little-endian word: byte `i` of channel `c` is input byte `3i + c`.
#[inline(always)]
fn deinterleave8(px: &[u8; 24]) -> [u64; 3] {
    let word = |i: usize| u64::from_le_bytes(px[8 * i..8 * i + 8].try_into().expect("8 bytes"));
    let (a, b, c) = (word(0), word(1), word(2));
    let pick = |c0: u64| -> u64 {
        // Input byte k lies in word k / 8 at byte k % 8; gather bytes 3i + c0 into byte i.
        let mut out = 0u64;
        for i in 0..8u64 {
            let k = 3 * i + c0;
            let source = [a, b, c][(k / 8) as usize];
            out |= ((source >> (8 * (k % 8))) & 0xff) << (8 * i);
        }
        out
    };
    [pick(0), pick(1), pick(2)]
}

/// The RGB shape of a decoded frame.
pub(crate) fn shape_of(frame: &ffmpeg::frame::Video) -> FrameShape {
    FrameShape { channels: 3, height: frame.height() as usize, width: frame.width() as usize }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wide_rows_become_planes_in_groups_of_eight_and_one_by_one() {
        let (h, w, stride) = (3, 11, 40);
        let src: Vec<u8> = (0..h * stride).map(|i| (i * 7 % 251) as u8).collect();
        let mut fast = vec![0u8; 3 * h * w];
        hwc_to_chw(&src, stride, h, w, &mut fast);
        for c in 0..3 {
            for y in 0..h {
                for x in 0..w {
                    assert_eq!(fast[c * h * w + y * w + x], src[y * stride + 3 * x + c], "c {c} y {y} x {x}");
                }
            }
        }
    }

    #[test]
    fn yuv420_frames_are_converted_as_swscale_converts_them_for_every_value() {
        // Luma running through every value, under chroma samples holding every (U, V) pair:
        // each term of the conversion meets all its inputs. Widths that are a multiple of 8
        // (swscale's vector converter), even, and odd; and a frame of two rows.
        for (h, w) in [(512, 512), (512, 508), (512, 509), (2, 6)] {
            let shape = FrameShape { channels: 3, height: h, width: w };
            let [_, (ch, cw), _] = shape.yuv420_planes();
            let mut planes = vec![0u8; shape.encoded_len(FrameEncoding::Yuv420)];
            let (luma, chroma) = planes.split_at_mut(h * w);
            for (k, y) in luma.iter_mut().enumerate() {
                *y = ((k % w + 3 * (k / w)) % 256) as u8;
            }
            let (u, v) = chroma.split_at_mut(ch * cw);
            for k in 0..ch * cw {
                (u[k], v[k]) = ((k % cw) as u8, (k / cw) as u8);
            }
            let frame = yuv420_frame(&planes, shape);
            let (mut ours, mut swscale) = (vec![0u8; 3 * h * w], vec![0u8; 3 * h * w]);
            write_chw(&frame, &mut ours).unwrap();
            swscale_chw(&frame, &mut swscale).unwrap();
            let differing = ours.iter().zip(&swscale).filter(|(a, b)| a != b).count();
            assert_eq!(differing, 0, "{h}x{w}: of {} values", ours.len());
        }
    }

    #[test]
    fn packed_rows_become_planes() {
        // 2x2 image, stride 8 (2 bytes of padding per row).
        let src = [1, 2, 3, 4, 5, 6, 0, 0, 7, 8, 9, 10, 11, 12, 0, 0];
        let mut out = [0u8; 12];
        hwc_to_chw(&src, 8, 2, 2, &mut out);
        assert_eq!(out, [1, 4, 7, 10, 2, 5, 8, 11, 3, 6, 9, 12]);
    }
}
