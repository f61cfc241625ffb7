//! From a loader batch to the model's inputs on the device: frames uploaded as uint8, augmented
//! (LeRobot's `image_transforms`, when enabled), normalised, resized and cropped (random in
//! training, centre in eval); state and actions normalised; pads as a mask.

use burn::prelude::*;
use datasets::{CollatedBatch, FrameEncoding, Values};
use kernels::Kernels;
use loader::Batch;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use transforms::geometry;
use transforms::{
    ImageTransformsConfig, Normalizer, apply_plan, frames_to_int, int_frames_to_float, yuv420_planes_to_rgb,
};

use crate::device_frames::DeviceFrames;
use crate::error::{Error, Result};
use crate::model::Observation;
use crate::policy_config::{DiffusionConfig, PolicyFeatures};

/// Whether inputs are prepared for training (random crop, augmentation) or evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Random crops and augmentation, drawn from the step's seed.
    Train {
        /// The seed of this batch's random draws.
        seed: u64,
    },
    /// Centre crops, no augmentation.
    Eval,
}

/// What a training step needs on the device.
#[derive(Debug, Clone)]
pub struct TrainInputs<B: Backend> {
    /// The observations.
    pub obs: Observation<B>,
    /// Normalised actions, `[B, horizon, A]`.
    pub actions: Tensor<B, 3>,
    /// `action_is_pad`, `[B, horizon]`.
    pub action_is_pad: Tensor<B, 2, Bool>,
}

/// Turns batches into model inputs.
#[derive(Debug, Clone)]
pub struct InputPipeline {
    config: DiffusionConfig,
    features: PolicyFeatures,
    normalizer: Normalizer,
    augment: ImageTransformsConfig,
}

impl InputPipeline {
    /// A pipeline for `features`, normalising with `normalizer`.
    pub fn new(
        config: DiffusionConfig,
        features: PolicyFeatures,
        normalizer: Normalizer,
        augment: ImageTransformsConfig,
    ) -> Self {
        Self { config, features, normalizer, augment }
    }

    /// The normaliser.
    pub fn normalizer(&self) -> &Normalizer {
        &self.normalizer
    }

    /// The observations of `batch`, its frames gathered from `frames` where it gives their rows
    /// in the frame caches.
    pub fn observation<B: Kernels>(
        &self,
        batch: &Batch,
        mode: Mode,
        frames: Option<&DeviceFrames<B>>,
        device: &B::Device,
    ) -> Result<Observation<B>> {
        let host = HostObservation::from_loader(batch, &self.features)?;
        self.observation_from_host(&host, mode, frames, device)
    }

    /// The observations of `host` (`batch` samples of `n_obs_steps` steps each), the frames of
    /// cameras given as cache rows gathered from `frames`.
    pub fn observation_from_host<B: Kernels>(
        &self,
        host: &HostObservation<'_>,
        mode: Mode,
        frames: Option<&DeviceFrames<B>>,
        device: &B::Device,
    ) -> Result<Observation<B>> {
        let b = host.batch;
        let s = self.config.n_obs_steps;
        let mut rng = match mode {
            Mode::Train { seed } => Some(ChaCha8Rng::seed_from_u64(seed)),
            Mode::Eval => None,
        };
        let tensor3 = |key: &str, values: &[f32], dim: usize| -> Result<Tensor<B, 3>> {
            if values.len() != b * s * dim {
                return Err(Error::Config(format!(
                    "`{key}` holds {} values, expected {b} samples × {s} steps × {dim}",
                    values.len()
                )));
            }
            Ok(self
                .normalizer
                .normalize(key, Tensor::<B, 3>::from_data(TensorData::new(values.to_vec(), [b, s, dim]), device)))
        };
        let state = tensor3("observation.state", host.state, self.features.state_dim)?;
        let env_state = match (self.features.env_state_dim, host.env_state) {
            (Some(e), Some(values)) => Some(tensor3("observation.environment_state", values, e)?),
            (Some(_), None) => {
                return Err(Error::Config("the observation lacks `observation.environment_state`".into()));
            }
            _ => None,
        };
        // One crop window per encoder call, as LeRobot's RandomCrop draws it (or one per sample).
        let shared_encoder = !self.config.use_separate_rgb_encoder_per_camera;
        let mut shared_window: Option<Vec<(usize, usize)>> = None;
        let mut images = Vec::with_capacity(self.features.cameras.len());
        for (key, input, frame) in &host.cameras {
            let (h, w) = (frame.height, frame.width);
            // Each camera's frames as the device's integers, `[B·S, 1, 1, frame length]`:
            // uploaded, or gathered from the frames kept there; then converted alike.
            let (n, len) = (b * s, frame.encoded_len(host.encoding));
            let levels = match *input {
                CameraInput::Frames(bytes) => {
                    if bytes.len() != n * len {
                        return Err(Error::Config(format!(
                            "camera `{key}`: {} bytes, expected {b} samples × {s} steps × {h}×{w} frames in {}",
                            bytes.len(),
                            host.encoding
                        )));
                    }
                    frames_to_int::<B>(bytes, [n, 1, 1, len], device)
                }
                CameraInput::CacheRows(rows) => {
                    if rows.len() != n {
                        return Err(Error::Config(format!(
                            "camera `{key}`: {} frame rows, expected {b} samples × {s} steps",
                            rows.len()
                        )));
                    }
                    let frames = frames.ok_or_else(|| {
                        Error::Config(format!(
                            "camera `{key}` comes as frame cache rows, but no frames are on the device"
                        ))
                    })?;
                    frames.gather(key, rows, (*frame, host.encoding))?.reshape([n, 1, 1, len])
                }
            };
            let mut x = match host.encoding {
                FrameEncoding::Rgb => int_frames_to_float(levels.reshape([n, 3, h, w])),
                FrameEncoding::Yuv420 => yuv420_planes_to_rgb(levels, (h, w)),
            };
            if let Some(rng) = rng.as_mut()
                && self.augment.is_active()
            {
                let plan = self.augment.sample_plan(b, (h, w), rng.random());
                x = apply_plan(x, &plan, s);
            }
            x = self.normalizer.normalize(key, x);
            if let Some([rh, rw]) = self.config.resize_shape
                && (rh, rw) != (h, w)
            {
                x = geometry::resize(x, (rh, rw), true);
            }
            if let Some([ch, cw]) = self.config.crop_shape {
                let [_, _, hh, ww] = x.dims();
                x = match rng.as_mut().filter(|_| self.config.crop_is_random) {
                    None => geometry::center_crop(x, (ch, cw)),
                    Some(rng) => {
                        let mut draw = || (rng.random_range(0..=hh - ch), rng.random_range(0..=ww - cw));
                        let windows: Vec<(usize, usize)> = if self.config.crop_per_sample {
                            (0..b).map(|_| draw()).collect()
                        } else if let Some(shared) = shared_window.clone().filter(|_| shared_encoder) {
                            shared
                        } else {
                            vec![draw(); b]
                        };
                        if shared_encoder && !self.config.crop_per_sample {
                            shared_window = Some(windows.clone());
                        }
                        geometry::random_crop(x, &windows, s, (ch, cw))
                    }
                };
            }
            images.push(x);
        }
        Ok(Observation { state, images, env_state })
    }

    /// Observations, normalised actions and the padding mask of `batch`, its frames gathered
    /// from `frames` where it gives their rows in the frame caches.
    pub fn train_inputs<B: Kernels>(
        &self,
        batch: &Batch,
        mode: Mode,
        frames: Option<&DeviceFrames<B>>,
        device: &B::Device,
    ) -> Result<TrainInputs<B>> {
        let b = batch.len();
        let h = self.config.horizon;
        let obs = self.observation(batch, mode, frames, device)?;
        let actions = self.vector::<B>(batch, "action", [b, h, self.features.action_dim], device)?;
        let pads = batch.pad("action").ok_or_else(|| Error::Config("the batch has no `action` window".into()))?;
        let action_is_pad = Tensor::<B, 2, Bool>::from_data(TensorData::new(pads.to_vec(), [b, h]), device);
        Ok(TrainInputs { obs, actions, action_is_pad })
    }

    /// A normalised float feature of the batch as `shape`.
    pub fn vector<B: Backend>(
        &self,
        batch: &Batch,
        key: &str,
        shape: [usize; 3],
        device: &B::Device,
    ) -> Result<Tensor<B, 3>> {
        let values = batch.f32(key).ok_or_else(|| Error::Config(format!("the batch has no float `{key}`")))?;
        if values.len() != shape.iter().product::<usize>() {
            return Err(Error::Config(format!(
                "`{key}` holds {} values, expected {shape:?} (check the windows)",
                values.len()
            )));
        }
        let x = Tensor::<B, 3>::from_data(TensorData::new(values.to_vec(), shape), device);
        Ok(self.normalizer.normalize(key, x))
    }
}

/// Observations on the host, borrowed from wherever they come from (a loader batch, a collated
/// `datasets sample` batch, the queues of `select_action`).
#[derive(Debug, Clone)]
pub struct HostObservation<'a> {
    /// Samples.
    pub batch: usize,
    /// `observation.state`, `[B, S, D]` row-major.
    pub state: &'a [f32],
    /// `observation.environment_state`, `[B, S, E]`.
    pub env_state: Option<&'a [f32]>,
    /// Per camera (in the policy's order): key, its frames, frame shape.
    pub cameras: Vec<(String, CameraInput<'a>, datasets::FrameShape)>,
    /// How the cameras' frames are laid out.
    pub encoding: FrameEncoding,
}

/// A camera's frames as a batch gives them.
#[derive(Debug, Clone, Copy)]
pub enum CameraInput<'a> {
    /// uint8 frames, `[B, S, 3, H, W]` (or `[B, S]` of YUV planes).
    Frames(&'a [u8]),
    /// Their rows in the frame caches, `[B, S]`, whose frames are on the device
    /// ([`DeviceFrames`]).
    CacheRows(&'a [i64]),
}

impl<'a> HostObservation<'a> {
    /// The observations of a loader batch.
    pub fn from_loader(batch: &'a Batch, features: &PolicyFeatures) -> Result<Self> {
        let missing = |k: &str| Error::Config(format!("the batch has no `{k}`"));
        let cameras = features
            .cameras
            .iter()
            .map(|(key, shape)| {
                let input = match batch.frame_rows(key) {
                    Some(rows) => CameraInput::CacheRows(rows),
                    None => CameraInput::Frames(batch.u8(key).ok_or_else(|| missing(key))?),
                };
                let frame = batch.layout().field(key).and_then(|f| f.frame).unwrap_or(*shape);
                Ok((key.clone(), input, frame))
            })
            .collect::<Result<_>>()?;
        // One encoding for every camera: the loader's.
        let encoding = features
            .cameras
            .first()
            .and_then(|(key, _)| batch.layout().field(key))
            .map_or(FrameEncoding::Rgb, |f| f.encoding);
        Ok(Self {
            batch: batch.len(),
            state: batch.f32("observation.state").ok_or_else(|| missing("observation.state"))?,
            env_state: if features.env_state_dim.is_some() {
                Some(
                    batch
                        .f32("observation.environment_state")
                        .ok_or_else(|| missing("observation.environment_state"))?,
                )
            } else {
                None
            },
            cameras,
            encoding,
        })
    }

    /// The observations of samples collated from [`datasets::Dataset::get`] (uint8 RGB frames,
    /// as `datasets sample` and `trainer sample` read them).
    pub fn from_collated(batch: &'a CollatedBatch, features: &PolicyFeatures) -> Result<Self> {
        let tensor =
            |key: &str| batch.tensors.get(key).ok_or_else(|| Error::Config(format!("the samples have no `{key}`")));
        let floats = |key: &str| match &tensor(key)?.values {
            Values::F32(values) => Ok(values.as_slice()),
            _ => Err(Error::Config(format!("`{key}` is not float"))),
        };
        let cameras = features
            .cameras
            .iter()
            .map(|(key, shape)| match &tensor(key)?.values {
                Values::U8(frames) => Ok((key.clone(), CameraInput::Frames(frames.as_slice()), *shape)),
                _ => Err(Error::Config(format!("camera `{key}` is not uint8"))),
            })
            .collect::<Result<_>>()?;
        Ok(Self {
            batch: batch.tasks.len(),
            state: floats("observation.state")?,
            env_state: features.env_state_dim.map(|_| floats("observation.environment_state")).transpose()?,
            cameras,
            encoding: FrameEncoding::Rgb,
        })
    }
}
