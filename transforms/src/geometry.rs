//! Geometric transforms on `[N, C, H, W]` float tensors, as torchvision computes them: resize
//! (bilinear, with or without antialiasing), crops (center, at offsets, one window per sample
//! in one gather, or one window shared by the batch as LeRobot's encoder does; a training step's
//! random crop in one launch where the backend has it), and affine
//! warps (rotation and translation; nearest or bilinear; zero fill).

use burn::prelude::*;
use burn::tensor::TensorPrimitive;
use kernels::Kernels;

/// How an affine warp samples the source image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Interpolation {
    /// Nearest pixel (torchvision's default for `RandomAffine`).
    #[default]
    Nearest,
    /// Bilinear.
    Bilinear,
}

/// Resizes to `(height, width)` with torchvision's bilinear `Resize`: with `antialias` (its
/// default), a triangle filter widened by the scale when shrinking; without, plain bilinear
/// (`align_corners=False`). Done as two matrix products with precomputed weights, which runs
/// well on every backend.
pub fn resize<B: Backend>(x: Tensor<B, 4>, size: (usize, usize), antialias: bool) -> Tensor<B, 4> {
    let [_, _, h, w] = x.dims();
    let device = x.device();
    let rows = Tensor::<B, 2>::from_data(TensorData::new(resize_weights(h, size.0, antialias), [size.0, h]), &device);
    let cols = Tensor::<B, 2>::from_data(TensorData::new(resize_weights(w, size.1, antialias), [size.1, w]), &device);
    let x = rows.unsqueeze::<4>().matmul(x);
    x.matmul(cols.transpose().unsqueeze::<4>())
}

/// The `out × in` weight matrix of a 1-D bilinear resize, as PyTorch's `interpolate` computes
/// it (`_upsample_bilinear2d_aa` with `antialias`, `upsample_bilinear2d` without).
pub fn resize_weights(input: usize, output: usize, antialias: bool) -> Vec<f32> {
    let scale = input as f64 / output as f64;
    let mut weights = vec![0f32; output * input];
    for i in 0..output {
        let row = &mut weights[i * input..(i + 1) * input];
        if antialias {
            let support = if scale >= 1.0 { scale } else { 1.0 };
            let invscale = if scale >= 1.0 { 1.0 / scale } else { 1.0 };
            let center = scale * (i as f64 + 0.5);
            let xmin = ((center - support + 0.5) as i64).max(0) as usize;
            let xmax = ((center + support + 0.5) as i64).min(input as i64) as usize;
            let mut total = 0.0;
            let mut taps = Vec::with_capacity(xmax.saturating_sub(xmin));
            for j in xmin..xmax {
                let x = (j as f64 - center + 0.5) * invscale;
                let w = (1.0 - x.abs()).max(0.0);
                taps.push((j, w));
                total += w;
            }
            for (j, w) in taps {
                row[j] = (if total != 0.0 { w / total } else { 0.0 }) as f32;
            }
        } else {
            let src = (scale * (i as f64 + 0.5) - 0.5).max(0.0);
            let i0 = (src as usize).min(input - 1);
            let i1 = (i0 + 1).min(input - 1);
            let l1 = src - i0 as f64;
            row[i0] += (1.0 - l1) as f32;
            row[i1] += l1 as f32;
        }
    }
    weights
}

/// torchvision's `CenterCrop` offsets: `round((size − crop) / 2)` on each axis.
pub fn center_offsets(size: (usize, usize), crop: (usize, usize)) -> (usize, usize) {
    let centre = |s: usize, c: usize| ((s as f64 - c as f64) / 2.0).round() as usize;
    (centre(size.0, crop.0), centre(size.1, crop.1))
}

/// The window `top..top+height, left..left+width` of every image (one window for all).
pub fn crop<B: Backend>(x: Tensor<B, 4>, top: usize, left: usize, size: (usize, usize)) -> Tensor<B, 4> {
    x.slice(s![.., .., top..top + size.0, left..left + size.1])
}

/// torchvision's `CenterCrop`.
pub fn center_crop<B: Backend>(x: Tensor<B, 4>, size: (usize, usize)) -> Tensor<B, 4> {
    let [_, _, h, w] = x.dims();
    let (top, left) = center_offsets((h, w), size);
    crop(x, top, left, size)
}

/// A different window per sample, in two gathers: `offsets[s]` is the (top, left) of sample
/// `s`, whose `frames_per_sample` consecutive images share it.
pub fn crop_per_sample<B: Backend>(
    x: Tensor<B, 4>,
    offsets: &[(usize, usize)],
    frames_per_sample: usize,
    size: (usize, usize),
) -> Tensor<B, 4> {
    let [n, c, _, w] = x.dims();
    assert_eq!(offsets.len() * frames_per_sample, n, "one offset per sample");
    let device = x.device();
    let per_image = |pick: fn(&(usize, usize)) -> usize| -> Vec<i32> {
        offsets.iter().flat_map(|o| std::iter::repeat_n(pick(o) as i32, frames_per_sample)).collect()
    };
    let tops = Tensor::<B, 1, Int>::from_data(TensorData::new(per_image(|o| o.0), [n]), &device);
    let lefts = Tensor::<B, 1, Int>::from_data(TensorData::new(per_image(|o| o.1), [n]), &device);
    let rows =
        tops.reshape([n, 1, 1, 1]) + Tensor::<B, 1, Int>::arange(0..size.0 as i64, &device).reshape([1, 1, size.0, 1]);
    let x = x.gather(2, rows.expand([n, c, size.0, w]));
    let cols =
        lefts.reshape([n, 1, 1, 1]) + Tensor::<B, 1, Int>::arange(0..size.1 as i64, &device).reshape([1, 1, 1, size.1]);
    x.gather(3, cols.expand([n, c, size.0, size.1]))
}

/// The random crop of a training step: a window per sample (`offsets[s]` the (top, left) of
/// sample `s`, shared by its `frames_per_sample` consecutive images). Where the backend crops on
/// the device ([`FrameKernels::crop_windows`](kernels::FrameKernels::crop_windows)), one launch
/// reading the offsets from one upload ([`crop_windows_data`]), so that a step captured as a CUDA
/// graph crops each replay's windows; elsewhere a view where every sample has the same window,
/// else [`crop_per_sample`]'s gathers. The same values either way.
pub fn random_crop<B: Kernels>(
    x: Tensor<B, 4>,
    offsets: &[(usize, usize)],
    frames_per_sample: usize,
    size: (usize, usize),
) -> Tensor<B, 4> {
    let windows = B::has_crop_kernel()
        .then(|| Tensor::<B, 2, Int>::from_data(crop_windows_data(offsets, frames_per_sample), &x.device()));
    random_crop_from(x, windows, offsets, frames_per_sample, size)
}

/// The windows of a random crop as the device reads them ([`random_crop_from`]): `[n, 2]`
/// int32, the (top, left) of each image, each sample's repeated for its `frames_per_sample`
/// images.
pub fn crop_windows_data(offsets: &[(usize, usize)], frames_per_sample: usize) -> TensorData {
    let windows: Vec<i32> = offsets
        .iter()
        .flat_map(|&(top, left)| std::iter::repeat_n([top as i32, left as i32], frames_per_sample))
        .flatten()
        .collect();
    TensorData::new(windows, [offsets.len() * frames_per_sample, 2])
}

/// [`random_crop`] with its windows already on the device: `windows`, [`crop_windows_data`] of
/// `offsets`, where the backend crops from them; else (or without `windows`) by the host's
/// `offsets`.
pub fn random_crop_from<B: Kernels>(
    x: Tensor<B, 4>,
    windows: Option<Tensor<B, 2, Int>>,
    offsets: &[(usize, usize)],
    frames_per_sample: usize,
    size: (usize, usize),
) -> Tensor<B, 4> {
    let [n, ..] = x.dims();
    assert_eq!(offsets.len() * frames_per_sample, n, "one offset per sample");
    if let Some(windows) = windows.filter(|_| B::has_crop_kernel()) {
        assert_eq!(windows.dims(), [n, 2], "one window per image");
        if let Some(crops) = B::crop_windows(x.clone().into_primitive().tensor(), windows.into_primitive(), size) {
            return Tensor::from_primitive(TensorPrimitive::Float(crops));
        }
    }
    match offsets {
        [(top, left), rest @ ..] if rest.iter().all(|o| o == &(*top, *left)) => crop(x, *top, *left, size),
        _ => crop_per_sample(x, offsets, frames_per_sample, size),
    }
}

/// What fills the pixels an affine warp brings in from outside the image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fill {
    /// torchvision's `F.affine(..., fill=None)`: plain zero padding.
    #[default]
    Zeros,
    /// torchvision's `RandomAffine` (`fill=0`): zero padding, and the bilinear result is also
    /// multiplied by the warped in-bounds mask (torchvision's fill handling), which darkens
    /// the border pixels a second time.
    ZeroMasked,
}

/// The parameters of one affine warp, as torchvision's `RandomAffine` draws them (no scale,
/// no shear, rotation about the image centre).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AffineParams {
    /// Rotation in degrees (counter-clockwise).
    pub angle: f64,
    /// Translation in whole pixels (x, y).
    pub translate: (i64, i64),
}

impl AffineParams {
    /// The identity warp.
    pub const IDENTITY: Self = Self { angle: 0.0, translate: (0, 0) };

    /// torchvision's `_get_inverse_affine_matrix` (centre at the image centre, scale 1, no
    /// shear): the output → input map `[a, b, c, d, e, f]`.
    pub fn inverse_matrix(&self) -> [f64; 6] {
        let rot = self.angle.to_radians();
        let (tx, ty) = (self.translate.0 as f64, self.translate.1 as f64);
        let (a, b, c, d) = (rot.cos(), -rot.sin(), rot.sin(), rot.cos());
        let mut m = [d, -b, 0.0, -c, a, 0.0];
        m[2] -= m[0] * tx + m[1] * ty;
        m[5] -= m[3] * tx + m[4] * ty;
        m
    }
}

/// Warps each image by its sample's [`AffineParams`] (`params[s]` for the `frames_per_sample`
/// images of sample `s`), sampling as torchvision's `affine` does (`grid_sample` with
/// `align_corners=False`), outside pixels filled as `fill` says.
pub fn affine<B: Backend>(
    x: Tensor<B, 4>,
    params: &[AffineParams],
    frames_per_sample: usize,
    interpolation: Interpolation,
    fill: Fill,
) -> Tensor<B, 4> {
    let [n, c, h, w] = x.dims();
    assert_eq!(params.len() * frames_per_sample, n, "one warp per sample");
    let device = x.device();
    // The matrix rescaled to the normalised grid, in float32 as torchvision's `_affine_grid`.
    let column = |k: usize, half: f64| -> Tensor<B, 4> {
        let values: Vec<f32> = params
            .iter()
            .flat_map(|p| std::iter::repeat_n((p.inverse_matrix()[k] as f32) / (half as f32), frames_per_sample))
            .collect();
        Tensor::from_data(TensorData::new(values, [n, 1, 1, 1]), &device)
    };
    let (hw, hh) = (0.5 * w as f64, 0.5 * h as f64);
    let base = |len: usize| -> Vec<f32> {
        // torch.linspace((1 - len) / 2, (len - 1) / 2, len)
        let (start, end) = ((1.0 - len as f32) * 0.5, (len as f32 - 1.0) * 0.5);
        let step = if len > 1 { (end - start) / (len as f32 - 1.0) } else { 0.0 };
        (0..len).map(|i| start + step * i as f32).collect()
    };
    let xs = Tensor::<B, 4>::from_data(TensorData::new(base(w), [1, 1, 1, w]), &device);
    let ys = Tensor::<B, 4>::from_data(TensorData::new(base(h), [1, 1, h, 1]), &device);
    let gx = xs.clone() * column(0, hw) + ys.clone() * column(1, hw) + column(2, hw);
    let gy = xs * column(3, hh) + ys * column(4, hh) + column(5, hh);
    // grid_sample's unnormalisation with align_corners=False.
    let ix = ((gx + 1.0) * w as f32 - 1.0) / 2.0;
    let iy = ((gy + 1.0) * h as f32 - 1.0) / 2.0;
    let flat = x.reshape([n, c, h * w]);
    match interpolation {
        Interpolation::Nearest => {
            let (sampled, _) = sample_at(&flat, ix.round(), iy.round(), (h, w), c);
            sampled
        }
        Interpolation::Bilinear => {
            let (x0, y0) = (ix.clone().floor(), iy.clone().floor());
            let (x1, y1) = (x0.clone() + 1.0, y0.clone() + 1.0);
            let mut out: Option<Tensor<B, 4>> = None;
            let mut mask: Option<Tensor<B, 4>> = None;
            // torch's weights: (x1 − ix)(y1 − iy), (ix − x0)(y1 − iy), (x1 − ix)(iy − y0), (ix − x0)(iy − y0).
            let (west, east) = (x1.clone() - ix.clone(), ix - x0.clone());
            let (north, south) = (y1.clone() - iy.clone(), iy - y0.clone());
            let corners = [
                (x0.clone(), y0.clone(), west.clone() * north.clone()),
                (x1.clone(), y0, east.clone() * north),
                (x0, y1.clone(), west * south.clone()),
                (x1, y1, east * south),
            ];
            for (cx, cy, weight) in corners {
                let (value, inside) = sample_at(&flat, cx, cy, (h, w), c);
                let weight_inside = weight * inside;
                let term = value * weight_inside.clone();
                out = Some(match out {
                    Some(o) => o + term,
                    None => term,
                });
                mask = Some(match mask {
                    Some(m) => m + weight_inside,
                    None => weight_inside,
                });
            }
            let out = out.expect("four corners");
            match fill {
                Fill::Zeros => out,
                Fill::ZeroMasked => out * mask.expect("four corners"),
            }
        }
    }
}

/// Values of `flat` (`[N, C, H·W]`) at integer coordinates `(xs, ys)` (`[N, 1, h, w]`, as
/// floats), zero outside the image, and the in-bounds mask (1 inside, 0 outside).
fn sample_at<B: Backend>(
    flat: &Tensor<B, 3>,
    xs: Tensor<B, 4>,
    ys: Tensor<B, 4>,
    (h, w): (usize, usize),
    c: usize,
) -> (Tensor<B, 4>, Tensor<B, 4>) {
    let [n, _, oh, ow] = xs.dims();
    let inside = xs
        .clone()
        .greater_equal_elem(0.0)
        .bool_and(xs.clone().lower_elem(w as f32))
        .bool_and(ys.clone().greater_equal_elem(0.0))
        .bool_and(ys.clone().lower_elem(h as f32))
        .float();
    let index = (ys.clamp(0.0, (h - 1) as f32) * w as f32 + xs.clamp(0.0, (w - 1) as f32)).int();
    let index = index.reshape([n, 1, oh * ow]).expand([n, c, oh * ow]);
    let values = flat.clone().gather(2, index).reshape([n, c, oh, ow]);
    (values * inside.clone(), inside)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resize_weights_rows_sum_to_one() {
        for (i, o, aa) in [(96, 84, true), (96, 112, false), (96, 48, true), (10, 3, false)] {
            let w = resize_weights(i, o, aa);
            for r in 0..o {
                let s: f32 = w[r * i..(r + 1) * i].iter().sum();
                assert!((s - 1.0).abs() < 1e-5, "{i}->{o} aa {aa} row {r}: {s}");
            }
        }
        // Same size without antialiasing is the identity.
        let w = resize_weights(5, 5, false);
        for r in 0..5 {
            assert_eq!(w[r * 5 + r], 1.0);
        }
    }

    #[test]
    fn identity_affine_matrix() {
        assert_eq!(AffineParams::IDENTITY.inverse_matrix(), [1.0, 0.0, 0.0, -0.0, 1.0, 0.0]);
        let m = AffineParams { angle: 0.0, translate: (3, -2) }.inverse_matrix();
        assert_eq!((m[2], m[5]), (-3.0, 2.0));
    }
}
