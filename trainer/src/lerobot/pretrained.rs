//! Loading torchvision's ResNet-18 weights (`resnet18-*.pth`, or the same state dict as
//! `.safetensors`) from a local file into an encoder's backbone: LeRobot 0.6's
//! `pretrained_backbone_weights` (`torch_hub` finds the file for a name).

use std::path::Path;

use burn::prelude::*;

use super::import::{Importer, read_state_dict};
use super::names::{ResNetNames, walk_resnet};
use crate::error::{Error, Result};
use crate::model::encoder::RgbEncoder;
use crate::model::resnet::Norm2d;

/// Puts the weights of `path` (torchvision's names) into `encoder`'s backbone, which must use
/// BatchNorm, as torchvision's does. The classifier (`fc`), which LeRobot drops, is ignored; the
/// keypoint layer and the output layer keep their initialisation. The loaded weights train.
pub fn load_resnet18<B: Backend>(mut encoder: RgbEncoder<B>, path: &Path, device: &B::Device) -> Result<RgbEncoder<B>> {
    if matches!(encoder.backbone.bn1, Norm2d::Group(_)) {
        return Err(Error::Config(
            "pretrained backbone weights need BatchNorm (policy.use_group_norm = false), as LeRobot requires".into(),
        ));
    }
    let dict = read_state_dict(path)?;
    let mut importer = Importer::new(&dict, path, device.clone());
    walk_resnet("", &mut encoder.backbone, ResNetNames::Torchvision, &mut importer)?;
    Ok(encoder)
}
