//! LeRobot's `image_transforms`: its configuration (names, ranges, defaults; disabled by
//! default), `RandomSubsetApply`'s sampling (a weighted draw of `max_num_transforms` distinct
//! transforms per sample, applied in list order unless `random_order`), parameters drawn per
//! sample and shared by its `T` frames, and the whole batch transformed at once on the device.
//!
//! Parameters come from our own seeded generator, not torch's: they follow LeRobot's
//! distributions, and a seed gives the same parameters on every backend.

use burn::prelude::*;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::color;
use crate::error::{Error, Result};
use crate::geometry::{self, AffineParams, Fill, Interpolation};

/// One transform LeRobot can sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "kwargs")]
pub enum TransformKind {
    /// torchvision's `ColorJitter`: factors drawn uniformly from the given ranges; the set
    /// attributes are applied in a random order, as torchvision does.
    ColorJitter {
        /// Brightness factor range.
        #[serde(default)]
        brightness: Option<(f64, f64)>,
        /// Contrast factor range.
        #[serde(default)]
        contrast: Option<(f64, f64)>,
        /// Saturation factor range.
        #[serde(default)]
        saturation: Option<(f64, f64)>,
        /// Hue shift range, within [-0.5, 0.5].
        #[serde(default)]
        hue: Option<(f64, f64)>,
    },
    /// LeRobot's `SharpnessJitter`: a sharpness factor drawn uniformly from the range.
    SharpnessJitter {
        /// Sharpness factor range.
        sharpness: (f64, f64),
    },
    /// torchvision's `RandomAffine` without scale or shear.
    RandomAffine {
        /// Rotation range in degrees.
        degrees: (f64, f64),
        /// Largest translation as a fraction of the width and height.
        #[serde(default)]
        translate: Option<(f64, f64)>,
        /// Sampling (torchvision's default: nearest).
        #[serde(default)]
        interpolation: Interpolation,
    },
}

/// A named, weighted transform.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransformConfig {
    /// Its name (`brightness`, `contrast`, ...).
    pub name: String,
    /// Its multinomial weight (normalised over the list); 0 or less disables it.
    pub weight: f64,
    /// What it does.
    #[serde(flatten)]
    pub kind: TransformKind,
}

/// LeRobot's `ImageTransformsConfig`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ImageTransformsConfig {
    /// Apply transforms during training. Default false, as LeRobot.
    pub enable: bool,
    /// How many distinct transforms each sample gets (capped at the number available).
    /// Default 3.
    pub max_num_transforms: usize,
    /// Apply the drawn transforms in a random order instead of list order. Default false.
    pub random_order: bool,
    /// The transforms, in application order. Default: LeRobot 0.6's six.
    pub tfs: Vec<TransformConfig>,
}

impl Default for ImageTransformsConfig {
    fn default() -> Self {
        let jitter = |name: &str, range: (f64, f64)| {
            let (mut b, mut c, mut s, mut h) = (None, None, None, None);
            match name {
                "brightness" => b = Some(range),
                "contrast" => c = Some(range),
                "saturation" => s = Some(range),
                _ => h = Some(range),
            }
            TransformConfig {
                name: name.into(),
                weight: 1.0,
                kind: TransformKind::ColorJitter { brightness: b, contrast: c, saturation: s, hue: h },
            }
        };
        Self {
            enable: false,
            max_num_transforms: 3,
            random_order: false,
            tfs: vec![
                jitter("brightness", (0.8, 1.2)),
                jitter("contrast", (0.8, 1.2)),
                jitter("saturation", (0.5, 1.5)),
                jitter("hue", (-0.05, 0.05)),
                TransformConfig {
                    name: "sharpness".into(),
                    weight: 1.0,
                    kind: TransformKind::SharpnessJitter { sharpness: (0.5, 1.5) },
                },
                TransformConfig {
                    name: "affine".into(),
                    weight: 1.0,
                    kind: TransformKind::RandomAffine {
                        degrees: (-5.0, 5.0),
                        translate: Some((0.05, 0.05)),
                        interpolation: Interpolation::Nearest,
                    },
                },
            ],
        }
    }
}

/// One elementary operation with its parameter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Op {
    /// Brightness factor.
    Brightness(f32),
    /// Contrast factor.
    Contrast(f32),
    /// Saturation factor.
    Saturation(f32),
    /// Hue shift.
    Hue(f32),
    /// Sharpness factor.
    Sharpness(f32),
    /// Affine warp.
    Affine(AffineParams, Interpolation),
}

impl Op {
    /// A small integer naming the operation (for grouping).
    fn kind(&self) -> usize {
        match self {
            Op::Brightness(_) => 0,
            Op::Contrast(_) => 1,
            Op::Saturation(_) => 2,
            Op::Hue(_) => 3,
            Op::Sharpness(_) => 4,
            Op::Affine(_, Interpolation::Nearest) => 5,
            Op::Affine(_, Interpolation::Bilinear) => 6,
        }
    }
}

/// The operations drawn for each sample of a batch, in the order they apply.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AugmentationPlan {
    /// Per sample, its operations.
    pub samples: Vec<Vec<Op>>,
}

impl ImageTransformsConfig {
    /// Checks the configuration as LeRobot's constructors would.
    pub fn validate(&self) -> Result<()> {
        let active = self.tfs.iter().filter(|t| t.weight > 0.0).count();
        if self.enable && active > 0 && self.max_num_transforms == 0 {
            return Err(Error::Config("max_num_transforms must be at least 1".into()));
        }
        for t in &self.tfs {
            let bad = |m: String| Err(Error::Config(format!("`{}`: {m}", t.name)));
            let ordered = |r: (f64, f64)| r.0 <= r.1 && r.0.is_finite() && r.1.is_finite();
            match &t.kind {
                TransformKind::ColorJitter { brightness, contrast, saturation, hue } => {
                    for (what, r) in [("brightness", brightness), ("contrast", contrast), ("saturation", saturation)] {
                        if let Some(r) = r
                            && (!ordered(*r) || r.0 < 0.0)
                        {
                            return bad(format!("{what} range {r:?} must be non-negative and ordered"));
                        }
                    }
                    if let Some(r) = hue
                        && (!ordered(*r) || r.0 < -0.5 || r.1 > 0.5)
                    {
                        return bad(format!("hue range {r:?} must lie within [-0.5, 0.5]"));
                    }
                }
                TransformKind::SharpnessJitter { sharpness } => {
                    if !ordered(*sharpness) || sharpness.0 < 0.0 {
                        return bad(format!("sharpness range {sharpness:?} must be non-negative and ordered"));
                    }
                }
                TransformKind::RandomAffine { degrees, translate, .. } => {
                    if !ordered(*degrees) {
                        return bad(format!("degrees {degrees:?} must be ordered"));
                    }
                    if let Some(t) = translate
                        && (!(0.0..=1.0).contains(&t.0) || !(0.0..=1.0).contains(&t.1))
                    {
                        return bad(format!("translate {t:?} must lie within [0, 1]"));
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether any transform will be applied.
    pub fn is_active(&self) -> bool {
        self.enable && self.max_num_transforms > 0 && self.tfs.iter().any(|t| t.weight > 0.0)
    }

    /// Draws the operations of `samples` samples of images of `(height, width)` from `seed`
    /// (e.g. derived from the run seed and the training step).
    pub fn sample_plan(&self, samples: usize, size: (usize, usize), seed: u64) -> AugmentationPlan {
        if !self.is_active() {
            return AugmentationPlan { samples: vec![Vec::new(); samples] };
        }
        let active: Vec<&TransformConfig> = self.tfs.iter().filter(|t| t.weight > 0.0).collect();
        let n_subset = self.max_num_transforms.min(active.len());
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let plan = (0..samples)
            .map(|_| {
                let mut chosen = weighted_without_replacement(
                    &mut rng,
                    &active.iter().map(|t| t.weight).collect::<Vec<_>>(),
                    n_subset,
                );
                if self.random_order {
                    rand::seq::SliceRandom::shuffle(chosen.as_mut_slice(), &mut rng);
                } else {
                    chosen.sort_unstable();
                }
                chosen.into_iter().flat_map(|i| draw_ops(&active[i].kind, size, &mut rng)).collect()
            })
            .collect();
        AugmentationPlan { samples: plan }
    }
}

/// `torch.multinomial(p, n)` without replacement: `n` distinct indices, each drawn with
/// probability proportional to its weight among those not yet drawn.
fn weighted_without_replacement(rng: &mut ChaCha8Rng, weights: &[f64], n: usize) -> Vec<usize> {
    let mut left: Vec<usize> = (0..weights.len()).collect();
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let total: f64 = left.iter().map(|&i| weights[i]).sum();
        let mut u = rng.random_range(0.0..total);
        let mut pick = left.len() - 1;
        for (k, &i) in left.iter().enumerate() {
            if u < weights[i] {
                pick = k;
                break;
            }
            u -= weights[i];
        }
        out.push(left.remove(pick));
    }
    out
}

fn uniform(rng: &mut ChaCha8Rng, (lo, hi): (f64, f64)) -> f64 {
    if lo == hi { lo } else { rng.random_range(lo..hi) }
}

/// The elementary operations of one transform with freshly drawn parameters.
fn draw_ops(kind: &TransformKind, (height, width): (usize, usize), rng: &mut ChaCha8Rng) -> Vec<Op> {
    match kind {
        TransformKind::ColorJitter { brightness, contrast, saturation, hue } => {
            // torchvision draws the order of the four adjustments, then their factors.
            let mut order = [0usize, 1, 2, 3];
            rand::seq::SliceRandom::shuffle(order.as_mut_slice(), rng);
            let factors = [brightness, contrast, saturation, hue].map(|r| r.map(|r| uniform(rng, r) as f32));
            order
                .iter()
                .filter_map(|&k| {
                    factors[k].map(|f| match k {
                        0 => Op::Brightness(f),
                        1 => Op::Contrast(f),
                        2 => Op::Saturation(f),
                        _ => Op::Hue(f),
                    })
                })
                .collect()
        }
        TransformKind::SharpnessJitter { sharpness } => vec![Op::Sharpness(uniform(rng, *sharpness) as f32)],
        TransformKind::RandomAffine { degrees, translate, interpolation } => {
            let angle = uniform(rng, *degrees);
            let translate = translate.map_or((0, 0), |(fx, fy)| {
                let (dx, dy) = (fx * width as f64, fy * height as f64);
                (uniform(rng, (-dx, dx)).round() as i64, uniform(rng, (-dy, dy)).round() as i64)
            });
            vec![Op::Affine(AffineParams { angle, translate }, *interpolation)]
        }
    }
}

/// Applies `plan` to `x` (`[samples · frames_per_sample, C, H, W]`, float in [0, 1]): each
/// sample's operations in its order, the same parameters on all of its frames. Each pass
/// transforms only the images of the samples that need it (gathered, transformed, written
/// back); the others are left exactly as they are. When every sample's operations come in
/// increasing kind order (list order, one operation per transform: LeRobot's default), one
/// pass per kind suffices.
pub fn apply_plan<B: Backend>(x: Tensor<B, 4>, plan: &AugmentationPlan, frames_per_sample: usize) -> Tensor<B, 4> {
    let [n, _, _, _] = x.dims();
    assert_eq!(plan.samples.len() * frames_per_sample, n, "one plan entry per sample");
    let in_kind_order = plan.samples.iter().all(|ops| ops.windows(2).all(|w| w[0].kind() < w[1].kind()));
    let passes: Vec<Vec<Option<Op>>> = if in_kind_order {
        (0..KINDS)
            .map(|kind| plan.samples.iter().map(|ops| ops.iter().find(|o| o.kind() == kind).copied()).collect())
            .collect()
    } else {
        let steps = plan.samples.iter().map(Vec::len).max().unwrap_or(0);
        (0..steps)
            .flat_map(|step| (0..KINDS).map(move |kind| (step, kind)))
            .map(|(step, kind)| {
                plan.samples.iter().map(|ops| ops.get(step).copied().filter(|o| o.kind() == kind)).collect()
            })
            .collect()
    };
    passes.iter().filter(|ops| ops.iter().any(Option::is_some)).fold(x, |x, ops| apply_pass(x, ops, frames_per_sample))
}

/// The number of operation kinds ([`Op::kind`]).
const KINDS: usize = 7;

/// Applies one kind of operation to the samples that have it (`Some`).
fn apply_pass<B: Backend>(x: Tensor<B, 4>, ops: &[Option<Op>], frames_per_sample: usize) -> Tensor<B, 4> {
    let chosen: Vec<Op> = ops.iter().flatten().copied().collect();
    if chosen.len() == ops.len() {
        return transform(x, &chosen, frames_per_sample);
    }
    let frames: Vec<i32> = ops
        .iter()
        .enumerate()
        .filter(|(_, o)| o.is_some())
        .flat_map(|(s, _)| (0..frames_per_sample).map(move |f| (s * frames_per_sample + f) as i32))
        .collect();
    let device = x.device();
    let index = Tensor::<B, 1, Int>::from_data(TensorData::new(frames, [chosen.len() * frames_per_sample]), &device);
    let subset = transform(x.clone().select(0, index.clone()), &chosen, frames_per_sample);
    // Backends only add into selected rows: zero them first (exact), then add the new values.
    let [n, c, h, w] = x.dims();
    let selected: Vec<bool> = ops.iter().flat_map(|o| std::iter::repeat_n(o.is_some(), frames_per_sample)).collect();
    let mask = Tensor::<B, 4, Bool>::from_data(TensorData::new(selected, [n, 1, 1, 1]), &device).expand([n, c, h, w]);
    x.mask_fill(mask, 0.0).select_assign(0, index, subset, burn::tensor::IndexingUpdateOp::Add)
}

/// Applies `ops` (one per sample, all of one kind) to `x`, whose images are those samples'.
fn transform<B: Backend>(x: Tensor<B, 4>, ops: &[Op], frames_per_sample: usize) -> Tensor<B, 4> {
    let device = x.device();
    let factors = || -> Tensor<B, 4> {
        let per_frame: Vec<f32> = ops.iter().flat_map(|o| std::iter::repeat_n(factor(o), frames_per_sample)).collect();
        color::per_image(&per_frame, &device)
    };
    match ops[0] {
        Op::Brightness(_) => color::brightness(x, factors()),
        Op::Contrast(_) => color::contrast(x, factors()),
        Op::Saturation(_) => color::saturation(x, factors()),
        Op::Hue(_) => color::hue(x, factors()),
        Op::Sharpness(_) => color::sharpness(x, factors()),
        Op::Affine(_, interpolation) => {
            let params: Vec<AffineParams> = ops
                .iter()
                .map(|o| match o {
                    Op::Affine(p, _) => *p,
                    _ => unreachable!("a pass holds one kind"),
                })
                .collect();
            geometry::affine(x, &params, frames_per_sample, interpolation, Fill::ZeroMasked)
        }
    }
}

fn factor(op: &Op) -> f32 {
    match *op {
        Op::Brightness(f) | Op::Contrast(f) | Op::Saturation(f) | Op::Hue(f) | Op::Sharpness(f) => f,
        Op::Affine(..) => unreachable!("affine ops have no factor"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_lerobots() {
        let cfg = ImageTransformsConfig::default();
        assert!(!cfg.enable);
        assert_eq!(cfg.max_num_transforms, 3);
        let names: Vec<&str> = cfg.tfs.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["brightness", "contrast", "saturation", "hue", "sharpness", "affine"]);
        assert!(cfg.tfs.iter().all(|t| t.weight == 1.0));
        cfg.validate().unwrap();
        // Disabled: no operation for anyone.
        assert!(cfg.sample_plan(4, (96, 96), 0).samples.iter().all(Vec::is_empty));
    }

    #[test]
    fn plans_are_seeded_and_respect_ranges_and_subset_size() {
        let cfg = ImageTransformsConfig { enable: true, ..ImageTransformsConfig::default() };
        let a = cfg.sample_plan(200, (96, 96), 42);
        assert_eq!(a, cfg.sample_plan(200, (96, 96), 42));
        assert_ne!(a, cfg.sample_plan(200, (96, 96), 43));
        let mut counts = [0usize; 7];
        for ops in &a.samples {
            assert_eq!(ops.len(), 3, "three distinct single-attribute transforms");
            let kinds: Vec<usize> = ops.iter().map(Op::kind).collect();
            let mut sorted = kinds.clone();
            sorted.sort_unstable();
            assert_eq!(kinds, sorted, "list order without random_order");
            sorted.dedup();
            assert_eq!(sorted.len(), 3);
            for op in ops {
                counts[op.kind()] += 1;
                match *op {
                    Op::Brightness(f) | Op::Contrast(f) => assert!((0.8..=1.2).contains(&f)),
                    Op::Saturation(f) | Op::Sharpness(f) => assert!((0.5..=1.5).contains(&f)),
                    Op::Hue(f) => assert!((-0.05..=0.05).contains(&f)),
                    Op::Affine(p, i) => {
                        assert!((-5.0..=5.0).contains(&p.angle) && i == Interpolation::Nearest);
                        assert!(p.translate.0.abs() <= 5 && p.translate.1.abs() <= 5);
                    }
                }
            }
        }
        // Equal weights: each of the six is picked for about half of the samples.
        for (k, count) in counts.iter().enumerate().take(6) {
            assert!((60..=140).contains(count), "transform {k} picked {count} times");
        }
    }

    #[test]
    fn weights_bias_the_draw() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut first = [0usize; 3];
        for _ in 0..3000 {
            first[weighted_without_replacement(&mut rng, &[8.0, 1.0, 1.0], 2)[0]] += 1;
        }
        assert!(first[0] > 2200, "{first:?}");
    }
}
