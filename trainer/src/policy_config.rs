//! LeRobot's `DiffusionConfig`, with its two sets of defaults, and the features of a dataset
//! the policy is built for.

use burn::config::Config;
use datasets::{DatasetInfo, FrameShape};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::noise::{BetaSchedule, NoiseSchedule, PredictionType, SchedulerKind};

/// Which LeRobot defaults to start from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Preset {
    /// LeRobot 0.3–0.5 and the original Diffusion Policy PushT recipe: horizon 16, 8 action
    /// steps, 84×84 crop (random in training, centre in eval), GroupNorm, one shared encoder.
    #[default]
    #[serde(rename = "classic")]
    Classic,
    /// LeRobot 0.6: horizon 64, 32 action steps, no crop, BatchNorm, one encoder per camera
    /// (optionally ImageNet weights from a local file).
    #[serde(rename = "lerobot-0.6")]
    Lerobot06,
}

impl std::str::FromStr for Preset {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "classic" => Ok(Self::Classic),
            "lerobot-0.6" => Ok(Self::Lerobot06),
            other => Err(Error::Config(format!("unknown policy preset {other:?} (classic or lerobot-0.6)"))),
        }
    }
}

/// The Diffusion Policy's hyper-parameters (LeRobot's `DiffusionConfig`; defaults: classic).
#[derive(Config, Debug, PartialEq)]
pub struct DiffusionConfig {
    /// Observation steps fed to the policy. Default 2.
    #[config(default = 2)]
    pub n_obs_steps: usize,
    /// Length of the predicted action sequence. Default 16 (lerobot-0.6: 64).
    #[config(default = 16)]
    pub horizon: usize,
    /// Actions executed per prediction. Default 8 (lerobot-0.6: 32).
    #[config(default = 8)]
    pub n_action_steps: usize,
    /// Frames at the end of each episode that are never sampled. Default 7.
    #[config(default = 7)]
    pub drop_n_last_frames: usize,
    /// Resize camera frames to (height, width) first. Default none.
    #[config(default = "None")]
    pub resize_shape: Option<[usize; 2]>,
    /// Crop to (height, width): random in training, centre in eval. Default 84×84 (lerobot-0.6:
    /// none).
    #[config(default = "Some([84, 84])")]
    pub crop_shape: Option<[usize; 2]>,
    /// Random crop in training (else centre). Default true.
    #[config(default = true)]
    pub crop_is_random: bool,
    /// One random window per sample instead of LeRobot's one window per encoder call (for
    /// parity, off by default).
    #[config(default = false)]
    pub crop_per_sample: bool,
    /// torchvision ResNet-18 weights to start the backbone from: a weights name as LeRobot gives
    /// it (`ResNet18_Weights.IMAGENET1K_V1`, found in or downloaded to torch's hub cache) or a
    /// file (`.pth` or `.safetensors`). Default none (lerobot-0.6: ImageNet's, as LeRobot's).
    #[config(default = "None")]
    pub pretrained_backbone_weights: Option<String>,
    /// Replace BatchNorm by GroupNorm(c/16). Default true (lerobot-0.6: false).
    #[config(default = true)]
    pub use_group_norm: bool,
    /// SpatialSoftmax keypoints. Default 32.
    #[config(default = 32)]
    pub spatial_softmax_num_keypoints: usize,
    /// One encoder per camera instead of a shared one. Default false (lerobot-0.6: true).
    #[config(default = false)]
    pub use_separate_rgb_encoder_per_camera: bool,
    /// U-Net widths. Default [512, 1024, 2048].
    #[config(default = "vec![512, 1024, 2048]")]
    pub down_dims: Vec<usize>,
    /// U-Net convolution kernel. Default 5.
    #[config(default = 5)]
    pub kernel_size: usize,
    /// U-Net GroupNorm groups. Default 8.
    #[config(default = 8)]
    pub n_groups: usize,
    /// Diffusion step embedding size. Default 128.
    #[config(default = 128)]
    pub diffusion_step_embed_dim: usize,
    /// FiLM scale (γ·h + β) rather than bias only. Default true.
    #[config(default = true)]
    pub use_film_scale_modulation: bool,
    /// Inference sampler. Default DDPM.
    #[config(default = "SchedulerKind::Ddpm")]
    pub noise_scheduler_type: SchedulerKind,
    /// Training timesteps. Default 100.
    #[config(default = 100)]
    pub num_train_timesteps: usize,
    /// Beta schedule. Default squaredcos_cap_v2.
    #[config(default = "BetaSchedule::SquaredcosCapV2")]
    pub beta_schedule: BetaSchedule,
    /// First beta of a linear schedule. Default 1e-4.
    #[config(default = 1e-4)]
    pub beta_start: f64,
    /// Last beta of a linear schedule. Default 0.02.
    #[config(default = 0.02)]
    pub beta_end: f64,
    /// What the network predicts. Default epsilon.
    #[config(default = "PredictionType::Epsilon")]
    pub prediction_type: PredictionType,
    /// Clip the predicted clean actions. Default true.
    #[config(default = true)]
    pub clip_sample: bool,
    /// Clipping range. Default 1.0.
    #[config(default = 1.0)]
    pub clip_sample_range: f64,
    /// Inference steps (default: the training timesteps).
    #[config(default = "None")]
    pub num_inference_steps: Option<usize>,
    /// Leave padded actions out of the loss. Default false.
    #[config(default = false)]
    pub do_mask_loss_for_padding: bool,
    /// Adam learning rate. Default 1e-4.
    #[config(default = 1e-4)]
    pub optimizer_lr: f64,
    /// Adam betas. Default (0.95, 0.999).
    #[config(default = "(0.95, 0.999)")]
    pub optimizer_betas: (f64, f64),
    /// Adam epsilon. Default 1e-8.
    #[config(default = 1e-8)]
    pub optimizer_eps: f64,
    /// Adam's L2 weight decay. Default 1e-6.
    #[config(default = 1e-6)]
    pub optimizer_weight_decay: f64,
    /// Clip gradients to this global norm (0: no clipping). Default 10.
    #[config(default = 10.0)]
    pub grad_clip_norm: f64,
    /// Linear warm-up steps of the cosine schedule. Default 500.
    #[config(default = 500)]
    pub scheduler_warmup_steps: usize,
}

impl DiffusionConfig {
    /// The defaults of `preset`.
    pub fn preset(preset: Preset) -> Self {
        let classic = Self::new();
        match preset {
            Preset::Classic => classic,
            Preset::Lerobot06 => Self {
                horizon: 64,
                n_action_steps: 32,
                crop_shape: None,
                pretrained_backbone_weights: Some("ResNet18_Weights.IMAGENET1K_V1".into()),
                use_group_norm: false,
                use_separate_rgb_encoder_per_camera: true,
                ..classic
            },
        }
    }

    /// The noise schedule of training and inference (LeRobot's `noise_scheduler`).
    pub fn noise_schedule(&self) -> NoiseSchedule {
        NoiseSchedule::new(
            self.beta_schedule,
            self.num_train_timesteps,
            self.beta_start,
            self.beta_end,
            self.prediction_type,
            self.clip_sample,
            self.clip_sample_range,
        )
    }

    /// The inference steps (defaulting to the training timesteps).
    pub fn inference_steps(&self) -> usize {
        self.num_inference_steps.unwrap_or(self.num_train_timesteps)
    }

    /// LeRobot's `validate_features` and config checks, for `features`.
    pub fn validate(&self, features: &PolicyFeatures) -> Result<()> {
        let bad = |m: String| Err(Error::Config(m));
        if self.down_dims.is_empty() {
            return bad("down_dims must not be empty".into());
        }
        let downsampling = 1usize << self.down_dims.len();
        if !self.horizon.is_multiple_of(downsampling) {
            return bad(format!("horizon {} must be a multiple of 2^len(down_dims) = {downsampling}", self.horizon));
        }
        if self.n_obs_steps == 0
            || self.n_action_steps == 0
            || self.n_action_steps > self.horizon + 1 - self.n_obs_steps
        {
            return bad(format!(
                "need 1 <= n_action_steps ({}) <= horizon - n_obs_steps + 1 ({})",
                self.n_action_steps,
                (self.horizon + 1).saturating_sub(self.n_obs_steps)
            ));
        }
        if let Some(d) = self.down_dims.iter().find(|d| *d % self.n_groups != 0 || *d % 8 != 0) {
            return bad(format!("down_dims entry {d} must be divisible by n_groups ({}) and by 8", self.n_groups));
        }
        if self.use_group_norm && self.pretrained_backbone_weights.is_some() {
            return bad("GroupNorm cannot replace BatchNorm in a pretrained backbone: set use_group_norm false, or \
                 pretrained_backbone_weights none"
                .into());
        }
        if features.cameras.is_empty() && features.env_state_dim.is_none() {
            return bad("the policy needs at least one camera or observation.environment_state".into());
        }
        let first = features.cameras.first().map(|c| c.1);
        if features.cameras.iter().any(|c| Some(c.1) != first) {
            return bad("all cameras must have the same shape".into());
        }
        if let Some(shape) = first {
            if shape.channels != 3 {
                return bad(format!("cameras must be RGB, not {shape}"));
            }
            let (h, w) = self.resize_shape.map_or((shape.height, shape.width), |r| (r[0], r[1]));
            if let Some([ch, cw]) = self.crop_shape
                && (ch > h || cw > w)
            {
                return bad(format!("crop {ch}x{cw} does not fit the {h}x{w} images"));
            }
        }
        if self.num_train_timesteps == 0
            || self.inference_steps() == 0
            || self.inference_steps() > self.num_train_timesteps
        {
            return bad("need 1 <= num_inference_steps <= num_train_timesteps".into());
        }
        Ok(())
    }

    /// The image size the encoder sees: after resize and crop.
    pub fn encoder_input(&self, camera: FrameShape) -> (usize, usize) {
        if let Some([h, w]) = self.crop_shape {
            return (h, w);
        }
        self.resize_shape.map_or((camera.height, camera.width), |r| (r[0], r[1]))
    }
}

/// What the policy reads and writes, from the dataset's features.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyFeatures {
    /// `observation.state` size.
    pub state_dim: usize,
    /// `action` size.
    pub action_dim: usize,
    /// `observation.environment_state` size, if present.
    pub env_state_dim: Option<usize>,
    /// Camera keys and shapes, in `info.json` order.
    pub cameras: Vec<(String, FrameShape)>,
}

impl PolicyFeatures {
    /// The features of a dataset; `observation.state` and `action` are required.
    pub fn from_info(info: &DatasetInfo) -> Result<Self> {
        let vector = |key: &str| -> Option<usize> {
            info.feature(key).filter(|f| !f.is_camera() && f.dtype.is_float()).map(datasets::Feature::width)
        };
        let state_dim = vector("observation.state")
            .ok_or_else(|| Error::Config("the dataset has no float `observation.state` feature".into()))?;
        let action_dim =
            vector("action").ok_or_else(|| Error::Config("the dataset has no float `action` feature".into()))?;
        let cameras = info
            .features
            .iter()
            .filter(|f| f.is_camera() && !f.is_depth_map())
            .map(|f| (f.key.to_string(), f.frame_shape().expect("cameras have a frame shape")))
            .collect();
        Ok(Self { state_dim, action_dim, env_state_dim: vector("observation.environment_state"), cameras })
    }

    /// The size of one observation step's conditioning: state, 2·K per camera, env state.
    pub fn cond_per_step(&self, keypoints: usize) -> usize {
        self.state_dim + 2 * keypoints * self.cameras.len() + self.env_state_dim.unwrap_or(0)
    }
}
