//! Image transforms on the training device, as burn tensor ops that match torchvision and
//! LeRobot: the same code runs on the CPU backend in tests and on wgpu or CUDA for training.
//!
//! The user's guide to the image transforms' settings is `docs/training.md` in the repository.
//!
//! The loader's uint8 frames go to the device once ([`frames_to_float`]); there they are
//! resized or cropped ([`geometry`]: torchvision's bilinear resize with and without
//! antialiasing, center crop, crops at offsets, a window per sample in one gather, affine
//! warps), colour-jittered ([`color`]), augmented by LeRobot's `image_transforms`
//! ([`ImageTransformsConfig`]: `RandomSubsetApply` over brightness, contrast, saturation, hue,
//! sharpness and affine, parameters drawn per sample from a seed and shared by its frames), and
//! normalised ([`Normalizer`]: LeRobot's modes and epsilon rules, ImageNet statistics for
//! cameras, the inverse for actions).
//!
//! ```
//! use burn::backend::Flex;
//! use transforms::{ImageTransformsConfig, apply_plan, frames_to_float};
//!
//! let device = Default::default();
//! let frames = vec![128u8; 2 * 2 * 3 * 8 * 8]; // 2 samples × 2 frames, 3×8×8
//! let x = frames_to_float::<Flex>(&frames, [4, 3, 8, 8], &device);
//! let cfg = ImageTransformsConfig { enable: true, ..Default::default() };
//! let plan = cfg.sample_plan(2, (8, 8), 7);
//! let y = apply_plan(x, &plan, 2);
//! assert_eq!(y.dims(), [4, 3, 8, 8]);
//! ```

pub mod color;
pub mod geometry;

mod augment;
mod error;
mod normalize;
mod upload;

pub use augment::{AugmentationPlan, ImageTransformsConfig, Op, TransformConfig, TransformKind, apply_plan};
pub use error::{Error, Result};
pub use geometry::{AffineParams, Fill, Interpolation};
pub use normalize::{
    EPS, FeatureNorm, FeatureType, IMAGENET_MEAN, IMAGENET_STD, NormalizationMode, Normalizer, diffusion_mapping,
    normalize_channels,
};
pub use upload::{
    decoder_terms, frames_to_float, frames_to_int, int_frames_to_float, yuv420_frames_to_float, yuv420_planes_to_rgb,
    yuv420_to_rgb_by_operations,
};
