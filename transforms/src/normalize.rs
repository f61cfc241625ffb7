//! LeRobot's normalisation (0.6's `NormalizerProcessorStep`): a mode per feature type
//! (VISUAL, STATE, ENV, ACTION), statistics from the dataset with the ImageNet override for
//! cameras (`use_imagenet_stats`), computed in float32 with its epsilon rules, and the inverse
//! for actions.

use std::collections::BTreeMap;

use burn::prelude::*;
use datasets::{DatasetInfo, Stats};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// LeRobot's epsilon: added to `std`, and substituted for a zero range.
pub const EPS: f32 = 1e-8;

/// ImageNet's per-channel mean, LeRobot's camera override.
pub const IMAGENET_MEAN: [f32; 3] = [0.485, 0.456, 0.406];
/// ImageNet's per-channel standard deviation.
pub const IMAGENET_STD: [f32; 3] = [0.229, 0.224, 0.225];

/// How a feature is normalised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum NormalizationMode {
    /// `(x − mean) / (std + eps)`.
    MeanStd,
    /// `2 (x − min) / (max − min) − 1`, eps replacing a zero range.
    MinMax,
    /// Unchanged.
    Identity,
    /// As MIN_MAX with the 1st and 99th percentiles.
    Quantiles,
    /// As MIN_MAX with the 10th and 90th percentiles.
    Quantile10,
}

/// LeRobot's feature types, which select the mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FeatureType {
    /// Cameras (image and video features).
    Visual,
    /// `observation.*` features other than cameras and the environment state.
    State,
    /// `observation.environment_state`.
    Env,
    /// `action*` features.
    Action,
}

impl FeatureType {
    /// The type of feature `key` of `info`, as LeRobot classifies it; `None` for features
    /// that are not policy inputs or outputs (they stay unnormalised).
    pub fn of(info: &DatasetInfo, key: &str) -> Option<Self> {
        let feature = info.feature(key)?;
        if feature.is_camera() {
            Some(Self::Visual)
        } else if key == "observation.environment_state" {
            Some(Self::Env)
        } else if key.starts_with("observation.") {
            Some(Self::State)
        } else if key.starts_with("action") {
            Some(Self::Action)
        } else {
            None
        }
    }
}

/// Diffusion Policy's mapping: VISUAL MEAN_STD, STATE MIN_MAX, ACTION MIN_MAX (ENV absent, so
/// unnormalised).
pub fn diffusion_mapping() -> BTreeMap<FeatureType, NormalizationMode> {
    BTreeMap::from([
        (FeatureType::Visual, NormalizationMode::MeanStd),
        (FeatureType::State, NormalizationMode::MinMax),
        (FeatureType::Action, NormalizationMode::MinMax),
    ])
}

/// One feature's normalisation, reduced to `y = (x − shift) · scale + offset` parameters kept
/// as LeRobot's formula needs them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeatureNorm {
    /// The mode.
    pub mode: NormalizationMode,
    /// Shape of the statistics (`[C, 1, 1]` for cameras, `[D]` for vectors).
    pub shape: Vec<usize>,
    /// MEAN_STD: mean; MIN_MAX/QUANTILES: the low bound.
    pub low: Vec<f32>,
    /// MEAN_STD: std (eps is added when normalising); the others: `high − low`, or eps where it
    /// is 0.
    pub spread: Vec<f32>,
}

/// The normalisation of every feature of a dataset.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Normalizer {
    /// By feature key.
    pub features: BTreeMap<String, FeatureNorm>,
}

impl Normalizer {
    /// Builds the normalisation of every feature that `mapping` covers, from `stats`, with the
    /// ImageNet mean and std replacing the cameras' (except depth maps) when
    /// `use_imagenet_stats`. Missing or non-finite statistics are errors naming the feature.
    pub fn new(
        info: &DatasetInfo,
        stats: &Stats,
        mapping: &BTreeMap<FeatureType, NormalizationMode>,
        use_imagenet_stats: bool,
    ) -> Result<Self> {
        let mut features = BTreeMap::new();
        for feature in &info.features {
            let key = feature.key.as_str();
            let Some(kind) = FeatureType::of(info, key) else { continue };
            let mode = mapping.get(&kind).copied().unwrap_or(NormalizationMode::Identity);
            if mode == NormalizationMode::Identity {
                continue;
            }
            let entry = stats.get(key).ok_or_else(|| Error::Stats {
                feature: key.into(),
                message: format!("missing (needed for {mode:?}); run `datasets stats --write`"),
            })?;
            let stat = |name: &str| -> Result<(Vec<usize>, Vec<f32>)> {
                let imagenet = use_imagenet_stats && kind == FeatureType::Visual && !feature.is_depth_map();
                if imagenet && (name == "mean" || name == "std") {
                    let values = if name == "mean" { IMAGENET_MEAN } else { IMAGENET_STD };
                    return Ok((vec![3, 1, 1], values.to_vec()));
                }
                let array = entry.get(name).ok_or_else(|| Error::Stats {
                    feature: key.into(),
                    message: format!("`{name}` missing (needed for {mode:?})"),
                })?;
                if let Some(bad) = array.values.iter().find(|v| !v.is_finite()) {
                    return Err(Error::Stats { feature: key.into(), message: format!("`{name}` holds {bad}") });
                }
                Ok((array.shape.clone(), array.values.iter().map(|&v| v as f32).collect()))
            };
            let (low_name, high_name) = match mode {
                NormalizationMode::MeanStd => ("mean", "std"),
                NormalizationMode::MinMax => ("min", "max"),
                NormalizationMode::Quantiles => ("q01", "q99"),
                NormalizationMode::Quantile10 => ("q10", "q90"),
                NormalizationMode::Identity => unreachable!("skipped above"),
            };
            let (shape, low) = stat(low_name)?;
            let (_, high) = stat(high_name)?;
            if high.len() != low.len() {
                return Err(Error::Stats {
                    feature: key.into(),
                    message: format!("`{low_name}` and `{high_name}` differ in size"),
                });
            }
            let spread = if mode == NormalizationMode::MeanStd {
                high
            } else {
                low.iter().zip(&high).map(|(l, h)| if h - l == 0.0 { EPS } else { h - l }).collect()
            };
            let expected = feature.frame_shape().map_or(feature.width(), |f| f.channels);
            if low.len() != expected {
                return Err(Error::Stats {
                    feature: key.into(),
                    message: format!("{} values, the feature has {expected}", low.len()),
                });
            }
            features.insert(key.to_string(), FeatureNorm { mode, shape, low, spread });
        }
        Ok(Self { features })
    }

    /// The statistics as tensors broadcastable over `x`'s last dimensions, in its dtype.
    fn params<B: Backend, const D: usize>(
        &self,
        key: &str,
        x: &Tensor<B, D>,
    ) -> Option<(NormalizationMode, Tensor<B, D>, Tensor<B, D>)> {
        let norm = self.features.get(key)?;
        let device = x.device();
        // Vectors broadcast over the last dimension; cameras over the channel dimension.
        let mut shape = [1usize; D];
        if norm.shape.len() == 3 {
            shape[D - 3] = norm.low.len();
        } else {
            shape[D - 1] = norm.low.len();
        }
        // Kept on the device: a step would otherwise upload each feature's two every time.
        let low = kernels::device_constant::<B, D>(&norm.low, shape, x.dtype(), &device);
        let spread = kernels::device_constant::<B, D>(&norm.spread, shape, x.dtype(), &device);
        Some((norm.mode, low, spread))
    }

    /// Normalises feature `key` (unchanged if it has no normalisation).
    pub fn normalize<B: Backend, const D: usize>(&self, key: &str, x: Tensor<B, D>) -> Tensor<B, D> {
        let Some((mode, low, spread)) = self.params(key, &x) else { return x };
        match mode {
            NormalizationMode::MeanStd => (x - low) / spread.add_scalar(EPS),
            NormalizationMode::Identity => x,
            _ => ((x - low) * 2.0) / spread - 1.0,
        }
    }

    /// The inverse of [`normalize`](Self::normalize), as LeRobot's unnormaliser computes it.
    pub fn unnormalize<B: Backend, const D: usize>(&self, key: &str, x: Tensor<B, D>) -> Tensor<B, D> {
        let Some((mode, low, spread)) = self.params(key, &x) else { return x };
        match mode {
            NormalizationMode::MeanStd => x * spread + low,
            NormalizationMode::MinMax => (x + 1.0) / 2.0 * spread + low,
            NormalizationMode::Quantiles | NormalizationMode::Quantile10 => (x + 1.0) * spread / 2.0 + low,
            NormalizationMode::Identity => x,
        }
    }
}

/// torchvision's `Normalize`: `(x − mean) / std` per channel of `[N, C, H, W]`.
pub fn normalize_channels<B: Backend>(x: Tensor<B, 4>, mean: &[f32], std: &[f32]) -> Tensor<B, 4> {
    let device = x.device();
    let c = mean.len();
    let mean = Tensor::<B, 4>::from_data(TensorData::new(mean.to_vec(), [1, c, 1, 1]), &device);
    let std = Tensor::<B, 4>::from_data(TensorData::new(std.to_vec(), [1, c, 1, 1]), &device);
    (x - mean) / std
}
