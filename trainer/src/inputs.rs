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
    AugmentationPlan, ImageTransformsConfig, Normalizer, apply_plan, int_frames_to_float, yuv420_planes_to_rgb,
};

use crate::device_frames::DeviceFrames;
use crate::error::{Error, Result};
use crate::model::Observation;
use crate::policy_config::{DiffusionConfig, PolicyFeatures};
use crate::uploads::{Fresh, Uploads};

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

/// Floats of a batch on the host, with their shape.
#[derive(Debug, Clone, Copy)]
struct HostFloats<'a> {
    values: &'a [f32],
    shape: [usize; 3],
}

impl HostFloats<'_> {
    fn data(&self) -> TensorData {
        TensorData::new(self.values.to_vec(), self.shape)
    }
}

/// The float feature `key` of `batch`, checked to hold `shape`'s values.
fn host_floats<'a>(batch: &'a Batch, key: &str, shape: [usize; 3]) -> Result<HostFloats<'a>> {
    let values = batch.f32(key).ok_or_else(|| Error::Config(format!("the batch has no float `{key}`")))?;
    if values.len() != shape.iter().product::<usize>() {
        return Err(Error::Config(format!(
            "`{key}` holds {} values, expected {shape:?} (check the windows)",
            values.len()
        )));
    }
    Ok(HostFloats { values, shape })
}

/// A camera's crop, as drawn.
#[derive(Debug, Clone)]
enum CropDraw {
    /// The centre (evaluation, or a crop that is not random).
    Centre,
    /// Each sample's window (top, left).
    Random(Vec<(usize, usize)>),
}

/// A camera's frames and what was drawn for them.
#[derive(Debug, Clone)]
struct DrawnCamera<'a> {
    key: String,
    input: CameraInput<'a>,
    frame: datasets::FrameShape,
    plan: Option<AugmentationPlan>,
    crop: Option<CropDraw>,
}

/// Observations checked and their random draws made ([`InputPipeline::draw`]).
#[derive(Debug, Clone)]
struct DrawnObservation<'a> {
    batch: usize,
    state: HostFloats<'a>,
    env_state: Option<HostFloats<'a>>,
    cameras: Vec<DrawnCamera<'a>>,
    encoding: FrameEncoding,
}

/// A training batch as the host prepares it, borrowed from the loader's batch: checked, its
/// random crops and augmentation drawn, nothing on the device yet ([`InputPipeline::draw`]).
#[derive(Debug, Clone)]
pub(crate) struct DrawnInputs<'a> {
    obs: DrawnObservation<'a>,
    actions: HostFloats<'a>,
    action_is_pad: &'a [bool],
}

impl DrawnInputs<'_> {
    /// The actions' shape, `[B, horizon, A]`.
    pub(crate) fn action_shape(&self) -> [usize; 3] {
        self.actions.shape
    }
}

/// A camera's frames on the device: their levels, or their rows in the frames kept there.
#[derive(Clone)]
enum Levels<B: Backend> {
    Frames(Tensor<B, 4, Int>),
    Rows(Tensor<B, 1, Int>),
}

/// What went to the device for a camera.
#[derive(Clone)]
struct UploadedCamera<B: Backend> {
    levels: Levels<B>,
    /// The random crop's windows, where the crop's kernel reads them.
    windows: Option<Tensor<B, 2, Int>>,
}

/// What went to the device for the observations.
#[derive(Clone)]
struct UploadedObservation<B: Backend> {
    state: Tensor<B, 3>,
    env_state: Option<Tensor<B, 3>>,
    cameras: Vec<UploadedCamera<B>>,
}

/// What went to the device for a training batch ([`InputPipeline::upload`]), before the
/// device's work on it ([`InputPipeline::transform`]).
#[derive(Clone)]
pub(crate) struct UploadedInputs<B: Backend> {
    obs: UploadedObservation<B>,
    actions: Tensor<B, 3>,
    action_is_pad: Tensor<B, 2, Bool>,
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
        let drawn = self.draw_observation(host, mode, frames)?;
        let uploaded = self.upload_observation(&drawn, &mut Fresh::new(device))?;
        Ok(self.transform_observation(&drawn, uploaded, frames))
    }

    /// Whether a training step's inputs are prepared by the same device work whatever the batch
    /// holds, reading only values uploaded for it ([`InputPipeline::upload`]): not where
    /// augmentation draws its operations step by step, nor where random crops are taken by the
    /// host's windows (a backend without the crop's kernel). `Err` says why not.
    pub(crate) fn same_work_each_step<B: Kernels>(&self) -> std::result::Result<(), String> {
        if self.augment.is_active() {
            return Err("image augmentation draws other operations for each step".into());
        }
        if self.config.crop_shape.is_some() && self.config.crop_is_random && !B::has_crop_kernel() {
            return Err("random crops are taken by the host's windows on this backend".into());
        }
        Ok(())
    }

    /// The observations of `host` checked, and their random crops and augmentation drawn: what
    /// the host does for them before anything goes to the device.
    fn draw_observation<'a, B: Kernels>(
        &self,
        host: &HostObservation<'a>,
        mode: Mode,
        frames: Option<&DeviceFrames<B>>,
    ) -> Result<DrawnObservation<'a>> {
        let b = host.batch;
        let s = self.config.n_obs_steps;
        let mut rng = match mode {
            Mode::Train { seed } => Some(ChaCha8Rng::seed_from_u64(seed)),
            Mode::Eval => None,
        };
        let floats = |key: &str, values: &'a [f32], dim: usize| -> Result<HostFloats<'a>> {
            if values.len() != b * s * dim {
                return Err(Error::Config(format!(
                    "`{key}` holds {} values, expected {b} samples × {s} steps × {dim}",
                    values.len()
                )));
            }
            Ok(HostFloats { values, shape: [b, s, dim] })
        };
        let state = floats("observation.state", host.state, self.features.state_dim)?;
        let env_state = match (self.features.env_state_dim, host.env_state) {
            (Some(e), Some(values)) => Some(floats("observation.environment_state", values, e)?),
            (Some(_), None) => {
                return Err(Error::Config("the observation lacks `observation.environment_state`".into()));
            }
            _ => None,
        };
        // One crop window per encoder call, as LeRobot's RandomCrop draws it (or one per sample).
        let shared_encoder = !self.config.use_separate_rgb_encoder_per_camera;
        let mut shared_window: Option<Vec<(usize, usize)>> = None;
        let mut cameras = Vec::with_capacity(host.cameras.len());
        for (key, input, frame) in &host.cameras {
            let (h, w) = (frame.height, frame.width);
            let (n, len) = (b * s, frame.encoded_len(host.encoding));
            match *input {
                CameraInput::Frames(bytes) => {
                    if bytes.len() != n * len {
                        return Err(Error::Config(format!(
                            "camera `{key}`: {} bytes, expected {b} samples × {s} steps × {h}×{w} frames in {}",
                            bytes.len(),
                            host.encoding
                        )));
                    }
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
                    frames.check_rows(key, rows, (*frame, host.encoding))?;
                }
            }
            let plan = match rng.as_mut() {
                Some(rng) if self.augment.is_active() => Some(self.augment.sample_plan(b, (h, w), rng.random())),
                _ => None,
            };
            let (hh, ww) = match self.config.resize_shape {
                Some([rh, rw]) => (rh, rw),
                None => (h, w),
            };
            let crop =
                self.config.crop_shape.map(|[ch, cw]| match rng.as_mut().filter(|_| self.config.crop_is_random) {
                    None => CropDraw::Centre,
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
                        CropDraw::Random(windows)
                    }
                });
            cameras.push(DrawnCamera { key: key.clone(), input: *input, frame: *frame, plan, crop });
        }
        Ok(DrawnObservation { batch: b, state, env_state, cameras, encoding: host.encoding })
    }

    /// What `drawn` puts on the device, through `uploads`, in a fixed order: the state, the
    /// environment's state, then each camera's frames (or their rows in the frame caches) and
    /// crop windows.
    fn upload_observation<B: Kernels>(
        &self,
        drawn: &DrawnObservation<'_>,
        uploads: &mut impl Uploads<B>,
    ) -> Result<UploadedObservation<B>> {
        let state = uploads.float(drawn.state.data())?;
        let env_state = drawn.env_state.as_ref().map(|e| uploads.float(e.data())).transpose()?;
        let s = self.config.n_obs_steps;
        let mut cameras = Vec::with_capacity(drawn.cameras.len());
        for camera in &drawn.cameras {
            let n = drawn.batch * s;
            let levels = match camera.input {
                CameraInput::Frames(bytes) => {
                    let len = camera.frame.encoded_len(drawn.encoding);
                    Levels::Frames(uploads.frames(bytes, [n, 1, 1, len])?)
                }
                CameraInput::CacheRows(rows) => Levels::Rows(uploads.int(TensorData::new(rows.to_vec(), [n]))?),
            };
            let windows = match &camera.crop {
                Some(CropDraw::Random(offsets)) if B::has_crop_kernel() => {
                    Some(uploads.int(geometry::crop_windows_data(offsets, s))?)
                }
                _ => None,
            };
            cameras.push(UploadedCamera { levels, windows });
        }
        Ok(UploadedObservation { state, env_state, cameras })
    }

    /// The observations from what was drawn and uploaded for them: the device's work, the same
    /// each step where [`InputPipeline::same_work_each_step`].
    fn transform_observation<B: Kernels>(
        &self,
        drawn: &DrawnObservation<'_>,
        uploaded: UploadedObservation<B>,
        frames: Option<&DeviceFrames<B>>,
    ) -> Observation<B> {
        let s = self.config.n_obs_steps;
        let state = self.normalizer.normalize("observation.state", uploaded.state);
        let env_state = uploaded.env_state.map(|e| self.normalizer.normalize("observation.environment_state", e));
        let mut images = Vec::with_capacity(drawn.cameras.len());
        for (camera, on_device) in drawn.cameras.iter().zip(uploaded.cameras) {
            let (h, w) = (camera.frame.height, camera.frame.width);
            let (n, len) = (drawn.batch * s, camera.frame.encoded_len(drawn.encoding));
            // Each camera's frames as the device's integers, `[B·S, 1, 1, frame length]`:
            // uploaded, or gathered from the frames kept there; then converted alike.
            let levels = match on_device.levels {
                Levels::Frames(levels) => levels,
                Levels::Rows(rows) => frames
                    .expect("rows are drawn only where frames are on the device")
                    .gather_rows(&camera.key, rows)
                    .reshape([n, 1, 1, len]),
            };
            let mut x = match drawn.encoding {
                FrameEncoding::Rgb => int_frames_to_float(levels.reshape([n, 3, h, w])),
                FrameEncoding::Yuv420 => yuv420_planes_to_rgb(levels, (h, w)),
            };
            if let Some(plan) = &camera.plan {
                x = apply_plan(x, plan, s);
            }
            x = self.normalizer.normalize(&camera.key, x);
            if let Some([rh, rw]) = self.config.resize_shape
                && (rh, rw) != (h, w)
            {
                x = geometry::resize(x, (rh, rw), true);
            }
            if let Some([ch, cw]) = self.config.crop_shape {
                x = match &camera.crop {
                    Some(CropDraw::Random(offsets)) => {
                        geometry::random_crop_from(x, on_device.windows, offsets, s, (ch, cw))
                    }
                    _ => geometry::center_crop(x, (ch, cw)),
                };
            }
            images.push(x);
        }
        Observation { state, images, env_state }
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
        let drawn = self.draw(batch, mode, frames)?;
        let uploaded = self.upload(&drawn, &mut Fresh::new(device))?;
        Ok(self.transform(&drawn, uploaded, frames))
    }

    /// `batch` checked, and its random crops and augmentation drawn: a training step's inputs
    /// as the host prepares them, nothing on the device yet.
    pub(crate) fn draw<'a, B: Kernels>(
        &self,
        batch: &'a Batch,
        mode: Mode,
        frames: Option<&DeviceFrames<B>>,
    ) -> Result<DrawnInputs<'a>> {
        let b = batch.len();
        let h = self.config.horizon;
        let host = HostObservation::from_loader(batch, &self.features)?;
        let obs = self.draw_observation(&host, mode, frames)?;
        let actions = host_floats(batch, "action", [b, h, self.features.action_dim])?;
        let pads = batch.pad("action").ok_or_else(|| Error::Config("the batch has no `action` window".into()))?;
        Ok(DrawnInputs { obs, actions, action_is_pad: pads })
    }

    /// What `drawn` puts on the device, through `uploads`: the observations', then the actions
    /// and their padding mask.
    pub(crate) fn upload<B: Kernels>(
        &self,
        drawn: &DrawnInputs<'_>,
        uploads: &mut impl Uploads<B>,
    ) -> Result<UploadedInputs<B>> {
        let obs = self.upload_observation(&drawn.obs, uploads)?;
        let actions = uploads.float(drawn.actions.data())?;
        let [b, h, _] = drawn.actions.shape;
        let action_is_pad = uploads.bool(TensorData::new(drawn.action_is_pad.to_vec(), [b, h]))?;
        Ok(UploadedInputs { obs, actions, action_is_pad })
    }

    /// A training step's inputs from what was drawn and uploaded for them: the device's work.
    pub(crate) fn transform<B: Kernels>(
        &self,
        drawn: &DrawnInputs<'_>,
        uploaded: UploadedInputs<B>,
        frames: Option<&DeviceFrames<B>>,
    ) -> TrainInputs<B> {
        let obs = self.transform_observation(&drawn.obs, uploaded.obs, frames);
        let actions = self.normalizer.normalize("action", uploaded.actions);
        TrainInputs { obs, actions, action_is_pad: uploaded.action_is_pad }
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
