//! `delta_timestamps` → frame offsets, and the rows a window reads: LeRobot's clamping to the
//! episode (the edge frame repeats) and its `{key}_is_pad` masks.

use std::collections::BTreeMap;
use std::ops::Range;

use crate::error::{Error, Result};
use crate::meta::info::DatasetInfo;

/// Time offsets in seconds, relative to the sampled frame, per feature key (LeRobot's
/// `delta_timestamps`).
pub type DeltaTimestamps = BTreeMap<String, Vec<f64>>;

/// The frame offsets of one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// The feature key.
    pub key: String,
    /// Offsets in frames (`round(delta · fps)`).
    pub offsets: Vec<i64>,
}

/// Which keys are read as windows, and with which offsets; keys without a window are read at
/// the sampled frame only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WindowSpec {
    windows: Vec<Window>,
}

impl WindowSpec {
    /// No windows: every key at the sampled frame.
    pub fn none() -> Self {
        Self::default()
    }

    /// Checks `delta_timestamps` against the dataset as LeRobot's `check_delta_timestamps`
    /// does (every delta a multiple of `1/fps` within `tolerance_s`) and converts them to frame
    /// offsets with Python's rounding (half to even). Every key must be a feature.
    pub fn from_delta_timestamps(deltas: &DeltaTimestamps, info: &DatasetInfo, tolerance_s: f64) -> Result<Self> {
        let fps = info.fps;
        let mut windows = Vec::with_capacity(deltas.len());
        for (key, values) in deltas {
            if info.feature(key).is_none() {
                let known: Vec<&str> = info.features.iter().map(|f| f.key.as_str()).collect();
                return Err(Error::request(format!(
                    "delta_timestamps: `{key}` is not a feature of this dataset (features: {})",
                    known.join(", ")
                )));
            }
            if values.is_empty() {
                return Err(Error::request(format!("delta_timestamps: `{key}` has no deltas")));
            }
            let mut offsets = Vec::with_capacity(values.len());
            for &d in values {
                let frames = d * fps;
                let rounded = frames.round_ties_even();
                if !d.is_finite() || (frames - rounded).abs() / fps > tolerance_s {
                    return Err(Error::request(format!(
                        "delta_timestamps: `{key}` has {d} s, which is not a multiple of 1/{fps} s within tolerance_s={tolerance_s}"
                    )));
                }
                offsets.push(rounded as i64);
            }
            windows.push(Window { key: key.clone(), offsets });
        }
        Ok(Self { windows })
    }

    /// The windows.
    pub fn windows(&self) -> &[Window] {
        &self.windows
    }

    /// The offsets of `key`, if it is read as a window.
    pub fn offsets(&self, key: &str) -> Option<&[i64]> {
        self.windows.iter().find(|w| w.key == key).map(|w| w.offsets.as_slice())
    }

    /// Whether no key is read as a window.
    pub fn is_empty(&self) -> bool {
        self.windows.is_empty()
    }
}

/// Diffusion Policy's `delta_timestamps` as LeRobot resolves them: every `observation.*` key at
/// `range(1 − n_obs_steps, 1) / fps` and `action` at
/// `range(1 − n_obs_steps, 1 − n_obs_steps + horizon) / fps`.
pub fn diffusion_delta_timestamps(info: &DatasetInfo, n_obs_steps: usize, horizon: usize) -> DeltaTimestamps {
    let fps = info.fps;
    let first = 1 - n_obs_steps as i64;
    let obs: Vec<f64> = (first..1).map(|i| i as f64 / fps).collect();
    let action: Vec<f64> = (first..first + horizon as i64).map(|i| i as f64 / fps).collect();
    let mut deltas = DeltaTimestamps::new();
    for feature in &info.features {
        let key = feature.key.as_str();
        if key.starts_with("observation.") {
            deltas.insert(key.to_string(), obs.clone());
        } else if key == "action" {
            deltas.insert(key.to_string(), action.clone());
        }
    }
    deltas
}

/// The rows read for a window of `offsets` around `anchor` in an episode covering `episode`:
/// `clamp(anchor + d, start, end − 1)`, and whether `anchor + d` fell outside (`_is_pad`).
/// Appends to `rows` and `pads`.
pub fn window_rows(
    anchor: usize,
    offsets: &[i64],
    episode: &Range<usize>,
    rows: &mut Vec<usize>,
    pads: &mut Vec<bool>,
) {
    let (start, end) = (episode.start as i64, episode.end as i64);
    for &d in offsets {
        let q = anchor as i64 + d;
        rows.push(q.clamp(start, end - 1) as usize);
        pads.push(q < start || q >= end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_clamp_to_the_episode_and_mark_pads() {
        let (mut rows, mut pads) = (Vec::new(), Vec::new());
        window_rows(10, &[-1, 0, 1, 2], &(10..12), &mut rows, &mut pads);
        assert_eq!(rows, vec![10, 10, 11, 11]);
        assert_eq!(pads, vec![true, false, false, true]);
    }
}
