//! Each op against a plain-Rust, pixel-by-pixel reference on random inputs, with different
//! parameters per sample and several frames per sample: this checks the batched tensor code
//! (broadcasting, gathers, masks), not only the formulas the fixture checks.

use burn::backend::Flex;
use burn::prelude::*;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use transforms::geometry::{self, AffineParams, Fill, Interpolation};
use transforms::{AugmentationPlan, Op, apply_plan, color};

type B = Flex;

/// Images `[n, 3, h, w]` as plain nested data.
#[derive(Clone)]
struct Images {
    n: usize,
    h: usize,
    w: usize,
    v: Vec<f32>,
}

impl Images {
    fn random(n: usize, h: usize, w: usize, seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        Self { n, h, w, v: (0..n * 3 * h * w).map(|_| rng.random_range(0.0f32..1.0)).collect() }
    }
    fn at(&self, i: usize, c: usize, y: usize, x: usize) -> f32 {
        self.v[((i * 3 + c) * self.h + y) * self.w + x]
    }
    fn set(&mut self, i: usize, c: usize, y: usize, x: usize, value: f32) {
        let (h, w) = (self.h, self.w);
        self.v[((i * 3 + c) * h + y) * w + x] = value;
    }
    fn tensor(&self) -> Tensor<B, 4> {
        Tensor::from_data(TensorData::new(self.v.clone(), [self.n, 3, self.h, self.w]), &Default::default())
    }
    fn map(&self, f: impl Fn(usize, [f32; 3]) -> [f32; 3]) -> Self {
        let mut out = self.clone();
        for i in 0..self.n {
            for y in 0..self.h {
                for x in 0..self.w {
                    let px = f(i, [self.at(i, 0, y, x), self.at(i, 1, y, x), self.at(i, 2, y, x)]);
                    for (c, v) in px.into_iter().enumerate() {
                        out.set(i, c, y, x, v);
                    }
                }
            }
        }
        out
    }
}

fn max_diff(t: Tensor<B, 4>, reference: &Images) -> f32 {
    let got: Vec<f32> = t.into_data().convert::<f32>().to_vec().unwrap();
    assert_eq!(got.len(), reference.v.len());
    got.iter().zip(&reference.v).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max)
}

fn luma(p: [f32; 3]) -> f32 {
    0.2989 * p[0] + 0.587 * p[1] + 0.114 * p[2]
}

fn blend(a: f32, b: f32, r: f32) -> f32 {
    (a * r + b * (1.0 - r)).clamp(0.0, 1.0)
}

/// One factor per image: `frames` consecutive images share their sample's factor.
fn factors(samples: usize, frames: usize, lo: f32, hi: f32, seed: u64) -> (Vec<f32>, Vec<f32>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let per_sample: Vec<f32> = (0..samples).map(|_| rng.random_range(lo..hi)).collect();
    let per_image = per_sample.iter().flat_map(|&f| std::iter::repeat_n(f, frames)).collect();
    (per_sample, per_image)
}

#[test]
fn colour_ops_match_the_reference_per_image() {
    let x = Images::random(6, 9, 7, 1);
    let (_, f) = factors(3, 2, 0.3, 1.7, 2);
    let device = Default::default();
    let fx = color::per_image::<B>(&f, &device);
    let reference = x.map(|i, p| p.map(|v| (v * f[i]).clamp(0.0, 1.0)));
    assert!(max_diff(color::brightness(x.tensor(), fx.clone()), &reference) < 1e-6);
    let reference = x.map(|i, p| {
        let g = luma(p);
        p.map(|v| blend(v, g, f[i]))
    });
    assert!(max_diff(color::saturation(x.tensor(), fx.clone()), &reference) < 1e-6);
    let means: Vec<f32> = (0..x.n)
        .map(|i| {
            let mut sum = 0f64;
            for y in 0..x.h {
                for xx in 0..x.w {
                    sum += f64::from(luma([x.at(i, 0, y, xx), x.at(i, 1, y, xx), x.at(i, 2, y, xx)]));
                }
            }
            (sum / (x.h * x.w) as f64) as f32
        })
        .collect();
    let reference = x.map(|i, p| p.map(|v| blend(v, means[i], f[i])));
    assert!(max_diff(color::contrast(x.tensor(), fx.clone()), &reference) < 1e-5);

    // Sharpness: interior pixels blend with the 3×3 smoothing, borders stay.
    let mut reference = x.clone();
    for (i, &factor) in f.iter().enumerate().take(x.n) {
        for c in 0..3 {
            for y in 1..x.h - 1 {
                for xx in 1..x.w - 1 {
                    let mut blur = 0.0;
                    for dy in 0..3 {
                        for dx in 0..3 {
                            let k = if dy == 1 && dx == 1 { 5.0 / 13.0 } else { 1.0 / 13.0 };
                            blur += k * x.at(i, c, y + dy - 1, xx + dx - 1);
                        }
                    }
                    let v = x.at(i, c, y, xx);
                    reference.set(i, c, y, xx, (v + (blur - v) * (1.0 - factor)).clamp(0.0, 1.0));
                }
            }
        }
    }
    assert!(max_diff(color::sharpness(x.tensor(), fx), &reference) < 1e-5);
}

/// Hue shift through HSV, as Pillow/torchvision define it, in f64.
fn shift_hue(p: [f32; 3], shift: f32) -> [f32; 3] {
    let [r, g, b] = p.map(f64::from);
    let (maxc, minc) = (r.max(g).max(b), r.min(g).min(b));
    let v = maxc;
    if maxc == minc {
        return p;
    }
    let s = (maxc - minc) / maxc;
    let (rc, gc, bc) = ((maxc - r) / (maxc - minc), (maxc - g) / (maxc - minc), (maxc - b) / (maxc - minc));
    let h = if r == maxc {
        bc - gc
    } else if g == maxc {
        2.0 + rc - bc
    } else {
        4.0 + gc - rc
    };
    let h = ((h / 6.0 + 1.0) % 1.0 + f64::from(shift)).rem_euclid(1.0);
    let i = (h * 6.0).floor();
    let f = h * 6.0 - i;
    let (pp, q, t) = (v * (1.0 - s), v * (1.0 - s * f), v * (1.0 - s * (1.0 - f)));
    let rgb = match i as i64 % 6 {
        0 => [v, t, pp],
        1 => [q, v, pp],
        2 => [pp, v, t],
        3 => [pp, q, v],
        4 => [t, pp, v],
        _ => [v, pp, q],
    };
    rgb.map(|c| c.clamp(0.0, 1.0) as f32)
}

#[test]
fn hue_matches_the_reference() {
    let x = Images::random(4, 6, 5, 3);
    let (_, f) = factors(2, 2, -0.5, 0.5, 4);
    let reference = x.map(|i, p| shift_hue(p, f[i]));
    let got = color::hue(x.tensor(), color::per_image::<B>(&f, &Default::default()));
    assert!(max_diff(got, &reference) < 2e-5);
}

#[test]
fn per_sample_crops_match_slices() {
    let x = Images::random(6, 10, 12, 5);
    let offsets = [(0, 0), (3, 5), (2, 1)];
    let got = geometry::crop_per_sample(x.tensor(), &offsets, 2, (7, 6));
    let mut reference = Images { n: 6, h: 7, w: 6, v: vec![0.0; 6 * 3 * 7 * 6] };
    for i in 0..6 {
        let (top, left) = offsets[i / 2];
        for c in 0..3 {
            for y in 0..7 {
                for xx in 0..6 {
                    reference.set(i, c, y, xx, x.at(i, c, top + y, left + xx));
                }
            }
        }
    }
    assert_eq!(max_diff(got, &reference), 0.0);
}

/// Output pixel (x, y) of an affine warp samples this input position (pixel units).
fn source(p: &AffineParams, x: usize, y: usize, w: usize, h: usize) -> (f64, f64) {
    let m = p.inverse_matrix();
    let (xc, yc) = (x as f64 - (w as f64 - 1.0) / 2.0, y as f64 - (h as f64 - 1.0) / 2.0);
    (m[0] * xc + m[1] * yc + m[2] + (w as f64 - 1.0) / 2.0, m[3] * xc + m[4] * yc + m[5] + (h as f64 - 1.0) / 2.0)
}

#[test]
fn affine_warps_match_the_reference() {
    let x = Images::random(4, 11, 13, 6);
    let params = [AffineParams { angle: 4.3, translate: (2, -1) }, AffineParams { angle: -2.7, translate: (-3, 2) }];
    let pixel = |i: usize, c: usize, xi: i64, yi: i64| -> f32 {
        if xi < 0 || yi < 0 || xi >= x.w as i64 || yi >= x.h as i64 {
            0.0
        } else {
            x.at(i, c, yi as usize, xi as usize)
        }
    };
    let (mut nearest, mut bilinear) = (x.clone(), x.clone());
    for i in 0..4 {
        let p = &params[i / 2];
        for y in 0..x.h {
            for xx in 0..x.w {
                let (sx, sy) = source(p, xx, y, x.w, x.h);
                let (x0, y0) = (sx.floor(), sy.floor());
                let (fx, fy) = (sx - x0, sy - y0);
                let corners = [
                    (0, 0, (1.0 - fx) * (1.0 - fy)),
                    (1, 0, fx * (1.0 - fy)),
                    (0, 1, (1.0 - fx) * fy),
                    (1, 1, fx * fy),
                ];
                let in_bounds = |cx: i64, cy: i64| cx >= 0 && cy >= 0 && cx < x.w as i64 && cy < x.h as i64;
                let inside: f64 =
                    corners.iter().filter(|(dx, dy, _)| in_bounds(x0 as i64 + dx, y0 as i64 + dy)).map(|c| c.2).sum();
                for c in 0..3 {
                    let v: f64 = corners
                        .iter()
                        .map(|(dx, dy, wgt)| wgt * f64::from(pixel(i, c, x0 as i64 + dx, y0 as i64 + dy)))
                        .sum();
                    bilinear.set(i, c, y, xx, (v * inside) as f32);
                    nearest.set(i, c, y, xx, pixel(i, c, sx.round_ties_even() as i64, sy.round_ties_even() as i64));
                }
            }
        }
    }
    assert!(
        max_diff(geometry::affine(x.tensor(), &params, 2, Interpolation::Bilinear, Fill::ZeroMasked), &bilinear) < 1e-4
    );
    // Nearest may round a coordinate that lies within float error of .5 the other way.
    let got: Vec<f32> =
        geometry::affine(x.tensor(), &params, 2, Interpolation::Nearest, Fill::Zeros).into_data().to_vec().unwrap();
    let differing = got.iter().zip(&nearest.v).filter(|(a, b)| a != b).count();
    assert!(differing * 1000 <= got.len(), "{differing} of {} pixels differ", got.len());
}

#[test]
fn resize_matches_a_direct_bilinear_reference() {
    let x = Images::random(2, 9, 10, 7);
    let (oh, ow) = (13, 6);
    let axis = |out: usize, input: usize, i: usize| -> (usize, usize, f64) {
        let src = ((input as f64 / out as f64) * (i as f64 + 0.5) - 0.5).max(0.0);
        let i0 = (src.floor() as usize).min(input - 1);
        (i0, (i0 + 1).min(input - 1), src - i0 as f64)
    };
    let mut reference = Images { n: 2, h: oh, w: ow, v: vec![0.0; 2 * 3 * oh * ow] };
    for i in 0..2 {
        for c in 0..3 {
            for y in 0..oh {
                let (y0, y1, ly) = axis(oh, x.h, y);
                for xx in 0..ow {
                    let (x0, x1, lx) = axis(ow, x.w, xx);
                    let v = |yy: usize, xv: usize| f64::from(x.at(i, c, yy, xv));
                    let value = (1.0 - ly) * ((1.0 - lx) * v(y0, x0) + lx * v(y0, x1))
                        + ly * ((1.0 - lx) * v(y1, x0) + lx * v(y1, x1));
                    reference.set(i, c, y, xx, value as f32);
                }
            }
        }
    }
    assert!(max_diff(geometry::resize(x.tensor(), (oh, ow), false), &reference) < 1e-5);
}

#[test]
fn a_plan_applies_each_samples_ops_to_all_its_frames_and_nothing_else() {
    let x = Images::random(6, 8, 8, 9);
    let plan = AugmentationPlan {
        samples: vec![
            vec![Op::Brightness(1.1), Op::Saturation(0.7)],
            vec![],
            vec![Op::Contrast(0.9), Op::Affine(AffineParams { angle: 3.0, translate: (1, 0) }, Interpolation::Nearest)],
        ],
    };
    let got: Vec<f32> = apply_plan(x.tensor(), &plan, 2).into_data().to_vec().unwrap();
    let frame = 3 * 8 * 8;
    // Sample 1 has no op: its two frames are untouched, bit for bit.
    assert_eq!(&got[2 * frame..4 * frame], &x.v[2 * frame..4 * frame]);
    // Sample 0: brightness then saturation, on both frames.
    let device = Default::default();
    let first = Images { n: 2, h: 8, w: 8, v: x.v[..2 * frame].to_vec() };
    let expected = color::saturation(
        color::brightness(first.tensor(), color::per_image::<B>(&[1.1; 2], &device)),
        color::per_image::<B>(&[0.7; 2], &device),
    );
    let expected: Vec<f32> = expected.into_data().to_vec().unwrap();
    assert_eq!(&got[..2 * frame], &expected[..]);
    // Sample 2: contrast then the warp.
    let last = Images { n: 2, h: 8, w: 8, v: x.v[4 * frame..].to_vec() };
    let warped = geometry::affine(
        color::contrast(last.tensor(), color::per_image::<B>(&[0.9; 2], &device)),
        &[AffineParams { angle: 3.0, translate: (1, 0) }],
        2,
        Interpolation::Nearest,
        Fill::ZeroMasked,
    );
    let warped: Vec<f32> = warped.into_data().to_vec().unwrap();
    assert_eq!(&got[4 * frame..], &warped[..]);
}
