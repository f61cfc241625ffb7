//! BT.601 limited-range YUV 4:2:0 → RGB as FFmpeg's swscale converts LeRobot's streams, to the
//! bit: its unscaled converter, told no other matrix, computes `R = ⌊k(Y − 16)⌋ + ⌊r_v(V − 128)⌋`,
//! `G = ⌊k(Y − 16)⌋ + ⌊−g_u(U − 128)⌋ + ⌊−g_v(V − 128)⌋`, `B = ⌊k(Y − 16)⌋ + ⌊b_u(U − 128)⌋`,
//! clamped to [0, 255], with `k = 255/219`: each term truncated, as its fixed-point arithmetic
//! truncates it; each chroma sample stands for its 2×2 block. The CPU's conversion
//! ([`planes_to_chw`], the decoder's for such frames) computes these terms in swscale's 16-bit
//! fixed point ([`Term`]); the device's (`transforms::yuv420_frames_to_float`) takes the same
//! fixed-point terms into its GPU kernel, or computes them in `f32` from the constants below
//! with burn's operations, which gives the same terms for every value. The tests check every
//! input against swscale.

/// `k`, the luma's scale from limited range (16..=235) to full.
pub const LUMA: f32 = 255.0 / 219.0;
/// `r_v`, V's weight in red.
pub const R_V: f32 = 1.402 * 255.0 / 224.0;
/// `g_u`, U's weight in green. BT.601's `0.344136 · 255/224` is 0.3917620; swscale's converter
/// takes `97 · g_u` to be just under 38 (where 0.3917620 gives 38.0007), so a value a hair under
/// 38/97 stands in for it. Every other product is the same either way.
pub const G_U: f32 = 0.391_75;
/// `g_v`, V's weight in green.
pub const G_V: f32 = 0.714_136 * 255.0 / 224.0;
/// `b_u`, U's weight in blue.
pub const B_U: f32 = 1.772 * 255.0 / 224.0;

/// One plane of a frame as a decoder holds it: its bytes, and the distance between the starts
/// of consecutive rows (at least the row's width).
#[derive(Debug, Clone, Copy)]
pub struct Plane<'a> {
    /// The plane's bytes, row after row.
    pub data: &'a [u8],
    /// Bytes from the start of one row to the start of the next.
    pub stride: usize,
}

impl Plane<'_> {
    /// The first `width` bytes of row `row`.
    fn row(&self, row: usize, width: usize) -> &[u8] {
        &self.data[row * self.stride..row * self.stride + width]
    }
}

/// A term `⌊c · (value − offset)⌋` in 16-bit fixed point, as swscale's vector converter computes
/// it: `((value − offset) · 2^shift · multiplier) >> 16`. Eight of them fit a 128-bit vector,
/// where the `f32` form (the device's without a kernel for it) takes four and a floor. The constants below give the `f32`
/// terms for every value (tested).
#[derive(Debug, Clone, Copy)]
pub struct Term {
    /// Subtracted from the value first.
    pub offset: i16,
    /// The left shift before the product.
    pub shift: u32,
    /// The multiplier, in units of 2⁻¹⁶ after the shift.
    pub multiplier: i16,
}

impl Term {
    #[inline(always)]
    fn of(self, value: u8) -> i16 {
        let scaled = (i16::from(value) - self.offset) << self.shift;
        ((i32::from(scaled) * i32::from(self.multiplier)) >> 16) as i16
    }
}

/// `⌊LUMA · (Y − 16)⌋`.
pub const LUMA_TERM: Term = Term { offset: 16, shift: 3, multiplier: 9539 };
/// `⌊R_V · (V − 128)⌋`.
pub const RED_V_TERM: Term = Term { offset: 128, shift: 3, multiplier: 13075 };
/// `⌊−G_U · (U − 128)⌋`.
pub const GREEN_U_TERM: Term = Term { offset: 128, shift: 1, multiplier: -12836 };
/// `⌊−G_V · (V − 128)⌋`.
pub const GREEN_V_TERM: Term = Term { offset: 128, shift: 1, multiplier: -26632 };
/// `⌊B_U · (U − 128)⌋`.
pub const BLUE_U_TERM: Term = Term { offset: 128, shift: 3, multiplier: 16525 };

/// Converts a YUV 4:2:0 frame's planes (Y of `height × width`, U and V of `⌈height/2⌉ ×
/// ⌈width/2⌉`) to channel-first RGB in `out` (`3 · height · width` bytes), as swscale's
/// unscaled converter does (module documentation).
///
/// # Panics
/// If a plane holds fewer rows than the frame needs, or `out` is not `3 · height · width` bytes.
pub fn planes_to_chw([y, u, v]: [Plane<'_>; 3], height: usize, width: usize, out: &mut [u8]) {
    assert_eq!(out.len(), 3 * height * width, "the output of a {width}x{height} RGB frame");
    let (red, rest) = out.split_at_mut(height * width);
    let (green, blue) = rest.split_at_mut(height * width);
    let mut terms = ChromaTerms::new(width);
    let rows = red.chunks_exact_mut(width).zip(green.chunks_exact_mut(width)).zip(blue.chunks_exact_mut(width));
    for (row, ((red, green), blue)) in rows.enumerate() {
        if row % 2 == 0 {
            terms.fill(u.row(row / 2, width.div_ceil(2)), v.row(row / 2, width.div_ceil(2)));
        }
        terms.convert_row(y.row(row, width), red, green, blue);
    }
}

/// One chroma row's terms, a chroma sample's for the two pixels of the row it covers.
struct ChromaTerms {
    red: Vec<i16>,
    green: Vec<i16>,
    blue: Vec<i16>,
}

/// Pixels converted together: sixteen bytes, a 128-bit vector.
const BLOCK: usize = 16;

impl ChromaTerms {
    fn new(width: usize) -> Self {
        let row = vec![0; width.div_ceil(2)];
        Self { red: row.clone(), green: row.clone(), blue: row }
    }

    fn fill(&mut self, u: &[u8], v: &[u8]) {
        let terms = self.red.iter_mut().zip(&mut self.green).zip(&mut self.blue);
        for (((red, green), blue), (&u, &v)) in terms.zip(u.iter().zip(v)) {
            (*red, *green, *blue) = (RED_V_TERM.of(v), GREEN_U_TERM.of(u) + GREEN_V_TERM.of(v), BLUE_U_TERM.of(u));
        }
    }

    /// One row of pixels: the luma term added to each chroma term, clamped; in blocks of
    /// [`BLOCK`] pixels of fixed size, which the compiler turns into vector instructions, then
    /// the rest one by one.
    fn convert_row(&self, luma: &[u8], red: &mut [u8], green: &mut [u8], blue: &mut [u8]) {
        let blocks = luma.len() / BLOCK;
        let (lumas, _) = luma.as_chunks::<BLOCK>();
        let (reds, _) = red.as_chunks_mut::<BLOCK>();
        let (greens, _) = green.as_chunks_mut::<BLOCK>();
        let (blues, _) = blue.as_chunks_mut::<BLOCK>();
        let outputs = reds.iter_mut().zip(greens.iter_mut()).zip(blues.iter_mut());
        let terms = halves(&self.red).iter().zip(halves(&self.green)).zip(halves(&self.blue));
        for ((luma, ((red, green), blue)), ((r, g), b)) in lumas.iter().zip(outputs).zip(terms) {
            let y = luma.map(|y| LUMA_TERM.of(y));
            let pixel = |terms: &[i16; BLOCK / 2], x: usize| (y[x] + terms[x / 2]).clamp(0, 255) as u8;
            *red = std::array::from_fn(|x| pixel(r, x));
            *green = std::array::from_fn(|x| pixel(g, x));
            *blue = std::array::from_fn(|x| pixel(b, x));
        }
        for x in blocks * BLOCK..luma.len() {
            let y = LUMA_TERM.of(luma[x]);
            red[x] = (y + self.red[x / 2]).clamp(0, 255) as u8;
            green[x] = (y + self.green[x / 2]).clamp(0, 255) as u8;
            blue[x] = (y + self.blue[x / 2]).clamp(0, 255) as u8;
        }
    }
}

/// A chroma row's terms in blocks covering [`BLOCK`] pixels.
fn halves(terms: &[i16]) -> &[[i16; BLOCK / 2]] {
    terms.as_chunks().0
}

/// Two YUV 4:2:0 frames of `height × width`, laid end to end as the loader lays them (each frame's
/// luma, then its U and V planes of `⌈H/2⌉ × ⌈W/2⌉`), and their RGB bytes (`[2, 3, H, W]`) from
/// [`planes_to_chw`]: a check pattern for another converter (the device's). In the first frame
/// luma runs through every value under chroma samples that hold every (U, V) pair (at 512x512;
/// most of them at other sizes); the second is another pattern.
pub fn check_frames(height: usize, width: usize) -> (Vec<u8>, Vec<u8>) {
    let (chroma_height, chroma_width) = (height.div_ceil(2), width.div_ceil(2));
    let (luma, chroma) = (height * width, chroma_height * chroma_width);
    let frame_len = luma + 2 * chroma;
    let mut planes = vec![0u8; 2 * frame_len];
    let (first, second) = planes.split_at_mut(frame_len);
    for (k, y) in first[..luma].iter_mut().enumerate() {
        *y = ((k % width + 3 * (k / width)) % 256) as u8;
    }
    for k in 0..chroma {
        first[luma + k] = (k % chroma_width) as u8;
        first[luma + chroma + k] = (k / chroma_width) as u8;
    }
    for (k, value) in second.iter_mut().enumerate() {
        *value = ((k * 7919) % 251) as u8;
    }
    let mut rgb = vec![0u8; 2 * 3 * luma];
    for (frame, out) in planes.chunks_exact(frame_len).zip(rgb.chunks_exact_mut(3 * luma)) {
        let (y, rest) = frame.split_at(luma);
        let (u, v) = rest.split_at(chroma);
        let plane = |data, stride| Plane { data, stride };
        planes_to_chw([plane(y, width), plane(u, chroma_width), plane(v, chroma_width)], height, width, out);
    }
    (planes, rgb)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fixed_point_terms_are_the_f32_terms_for_every_value() {
        let terms =
            [(LUMA_TERM, LUMA), (RED_V_TERM, R_V), (GREEN_U_TERM, -G_U), (GREEN_V_TERM, -G_V), (BLUE_U_TERM, B_U)];
        for (term, scale) in terms {
            for value in 0..=255u8 {
                let exact = ((f32::from(value) - f32::from(term.offset)) * scale).floor();
                assert_eq!(f32::from(term.of(value)), exact, "{term:?} of {value}");
            }
        }
    }

    #[test]
    fn grey_black_and_white_are_their_levels_and_chroma_covers_two_by_two() {
        // 3×3 luma (chroma 2×2): grey, but the top-left chroma sample is blue.
        let (y, u, v) = ([126u8; 9], [240u8, 128, 128, 128], [128u8; 4]);
        let planes = [Plane { data: &y, stride: 3 }, Plane { data: &u, stride: 2 }, Plane { data: &v, stride: 2 }];
        let mut out = [0u8; 27];
        planes_to_chw(planes, 3, 3, &mut out);
        assert_eq!(out[..9], [128; 9], "red");
        let blue: Vec<bool> = out[18..].iter().map(|&b| b > 200).collect();
        assert_eq!(blue, [true, true, false, true, true, false, false, false, false]);
    }
}
