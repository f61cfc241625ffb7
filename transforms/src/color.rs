//! Colour transforms on `[N, C, H, W]` float tensors in [0, 1], as torchvision's `v2`
//! functional ops compute them, with one factor per image (`[N]`): brightness, contrast,
//! saturation, hue (RGB ↔ HSV) and sharpness.

use burn::prelude::*;
use burn::tensor::module::conv2d;
use burn::tensor::ops::ConvOptions;

/// Per-image factors as a `[N, 1, 1, 1]` tensor.
pub fn per_image<B: Backend>(factors: &[f32], device: &B::Device) -> Tensor<B, 4> {
    Tensor::from_data(TensorData::new(factors.to_vec(), [factors.len(), 1, 1, 1]), device)
}

/// torchvision's `_blend`: `(a · ratio + b · (1 − ratio)).clamp(0, 1)`.
fn blend<B: Backend>(a: Tensor<B, 4>, b: Tensor<B, 4>, ratio: Tensor<B, 4>) -> Tensor<B, 4> {
    let one_minus = ratio.clone().neg().add_scalar(1.0);
    (a * ratio + b * one_minus).clamp(0.0, 1.0)
}

/// Luma with torchvision's weights (`0.2989 R + 0.587 G + 0.114 B`), `[N, 1, H, W]`.
pub fn grayscale<B: Backend>(x: Tensor<B, 4>) -> Tensor<B, 4> {
    let [n, _, h, w] = x.dims();
    let r = x.clone().slice(s![.., 0..1, .., ..]);
    let g = x.clone().slice(s![.., 1..2, .., ..]);
    let b = x.slice(s![.., 2..3, .., ..]);
    let y = r.mul_scalar(0.2989) + g.mul_scalar(0.587) + b.mul_scalar(0.114);
    y.reshape([n, 1, h, w])
}

/// `adjust_brightness`: `(x · f).clamp(0, 1)`.
pub fn brightness<B: Backend>(x: Tensor<B, 4>, factor: Tensor<B, 4>) -> Tensor<B, 4> {
    (x * factor).clamp(0.0, 1.0)
}

/// `adjust_contrast`: blend with the image's mean luma.
pub fn contrast<B: Backend>(x: Tensor<B, 4>, factor: Tensor<B, 4>) -> Tensor<B, 4> {
    let [n, _, _, _] = x.dims();
    let mean = grayscale(x.clone()).reshape([n as i32, -1]).mean_dim(1).reshape([n, 1, 1, 1]);
    blend(x, mean, factor)
}

/// `adjust_saturation`: blend with the image's luma.
pub fn saturation<B: Backend>(x: Tensor<B, 4>, factor: Tensor<B, 4>) -> Tensor<B, 4> {
    let gray = grayscale(x.clone());
    blend(x, gray, factor)
}

/// `adjust_sharpness`: blend the inner pixels with a 3×3 smoothing (`[[1,1,1],[1,5,1],[1,1,1]]
/// / 13`), keeping the border pixels, then clamp. Images of 2 pixels or less on a side are
/// returned unchanged, as torchvision does.
pub fn sharpness<B: Backend>(x: Tensor<B, 4>, factor: Tensor<B, 4>) -> Tensor<B, 4> {
    let [n, c, h, w] = x.dims();
    if h <= 2 || w <= 2 {
        return x;
    }
    let device = x.device();
    let (a, b) = ((1.0f64 / 13.0) as f32, (5.0f64 / 13.0) as f32);
    let kernel: Vec<f32> = (0..c).flat_map(|_| [a, a, a, a, b, a, a, a, a]).collect();
    let kernel = Tensor::<B, 4>::from_data(TensorData::new(kernel, [c, 1, 3, 3]), &device);
    let blurred = conv2d(x.clone(), kernel, None, ConvOptions::new([1, 1], [0, 0], [1, 1], c));
    let inner = x.clone().slice(s![.., .., 1..h - 1, 1..w - 1]);
    // torchvision: view + (blurred − view) · (1 − f)
    let alpha = factor.neg().add_scalar(1.0);
    let mixed = inner.clone() + (blurred - inner) * alpha;
    x.slice_assign(s![0..n, 0..c, 1..h - 1, 1..w - 1], mixed).clamp(0.0, 1.0)
}

/// torchvision's `_rgb_to_hsv`: `[N, 3, H, W]` RGB → HSV.
pub fn rgb_to_hsv<B: Backend>(x: Tensor<B, 4>) -> Tensor<B, 4> {
    let r = x.clone().slice(s![.., 0..1, .., ..]);
    let g = x.clone().slice(s![.., 1..2, .., ..]);
    let b = x.slice(s![.., 2..3, .., ..]);
    let maxc = r.clone().max_pair(g.clone()).max_pair(b.clone());
    let minc = r.clone().min_pair(g.clone()).min_pair(b.clone());
    let eqc = maxc.clone().equal(minc.clone());
    let range = maxc.clone() - minc;
    let ones = maxc.ones_like();
    let s = range.clone() / maxc.clone().mask_where(eqc.clone(), ones.clone());
    let divisor = range.mask_where(eqc, ones);
    let rc = (maxc.clone() - r.clone()) / divisor.clone();
    let gc = (maxc.clone() - g.clone()) / divisor.clone();
    let bc = (maxc.clone() - b) / divisor;
    let max_is_r = maxc.clone().equal(r);
    let max_is_g = maxc.clone().equal(g);
    let hg = (rc.clone().add_scalar(2.0) - bc.clone()) * max_is_g.clone().bool_and(max_is_r.clone().bool_not()).float();
    let hr = (bc - gc.clone()) * max_is_r.clone().float();
    let hb = (gc.add_scalar(4.0) - rc) * max_is_r.bool_not().bool_and(max_is_g.bool_not()).float();
    let h = (hr + hg + hb).mul_scalar(1.0f64 / 6.0).add_scalar(1.0).fmod_scalar(1.0);
    Tensor::cat(vec![h, s, maxc], 1)
}

/// torchvision's `_hsv_to_rgb`: `[N, 3, H, W]` HSV → RGB.
pub fn hsv_to_rgb<B: Backend>(x: Tensor<B, 4>) -> Tensor<B, 4> {
    let h = x.clone().slice(s![.., 0..1, .., ..]);
    let s = x.clone().slice(s![.., 1..2, .., ..]);
    let v = x.slice(s![.., 2..3, .., ..]);
    let h6 = h.mul_scalar(6.0);
    let i = h6.clone().floor();
    let f = h6 - i.clone();
    let sxf = s.clone() * f;
    let one_minus_s = s.neg().add_scalar(1.0);
    let q = (sxf.clone().neg().add_scalar(1.0) * v.clone()).clamp(0.0, 1.0);
    let t = ((sxf + one_minus_s.clone()) * v.clone()).clamp(0.0, 1.0);
    let p = (one_minus_s * v.clone()).clamp(0.0, 1.0);
    let i = i.remainder_scalar(6.0);
    let sector = |k: f32| i.clone().equal_elem(k).float();
    // Per sector, (r, g, b) from (v, p, q, t):
    // 0: v t p   1: q v p   2: p v t   3: p q v   4: t p v   5: v p q
    let r = v.clone() * (sector(0.0) + sector(5.0))
        + q.clone() * sector(1.0)
        + p.clone() * (sector(2.0) + sector(3.0))
        + t.clone() * sector(4.0);
    let g = t.clone() * sector(0.0)
        + v.clone() * (sector(1.0) + sector(2.0))
        + q.clone() * sector(3.0)
        + p.clone() * (sector(4.0) + sector(5.0));
    let b = p * (sector(0.0) + sector(1.0)) + t * sector(2.0) + v * (sector(3.0) + sector(4.0)) + q * sector(5.0);
    Tensor::cat(vec![r, g, b], 1)
}

/// `adjust_hue`: rotate the hue by `shift` (in turns, [-0.5, 0.5]) per image.
pub fn hue<B: Backend>(x: Tensor<B, 4>, shift: Tensor<B, 4>) -> Tensor<B, 4> {
    let hsv = rgb_to_hsv(x);
    let h = hsv.clone().slice(s![.., 0..1, .., ..]);
    let rest = hsv.slice(s![.., 1..3, .., ..]);
    let h = (h + shift).remainder_scalar(1.0);
    hsv_to_rgb(Tensor::cat(vec![h, rest], 1))
}
