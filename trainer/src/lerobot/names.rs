//! The model's tensors under PyTorch's names, walked in one place for both directions: [`walk`]
//! names every layer of a [`DiffusionModel`] as LeRobot 0.6.1's `DiffusionPolicy.state_dict()`
//! does, [`walk_resnet`] a ResNet-18 trunk as LeRobot or torchvision name it, and each layer goes
//! to a [`LayerVisitor`] that reads it (export) or writes it (import).

use burn::nn::conv::{Conv2d, ConvTranspose1d};
use burn::nn::{BatchNorm, GroupNorm, Linear};
use burn::prelude::*;

use crate::error::Result;
use crate::model::DiffusionModel;
use crate::model::conv1d::GemmConv1d;
use crate::model::encoder::{RgbEncoder, SpatialSoftmax};
use crate::model::resnet::{BasicBlock, Norm2d, ResNet18};
use crate::model::unet::{ConditionalUnet1d, Conv1dBlock, ResidualBlock};
use crate::policy_config::DiffusionConfig;

/// Reads or writes one layer at a time, given its PyTorch name (`diffusion.unet.final_conv.1`).
/// The layouts differ from PyTorch's in two places: burn's `Linear` keeps `[in, out]` where
/// PyTorch keeps `[out, in]`, and [`GemmConv1d`] keeps `[out, in · k]` for `[out, in, k]`.
pub(crate) trait LayerVisitor<B: Backend> {
    /// `nn.Linear`: `weight`, `bias`.
    fn linear(&mut self, name: &str, layer: &mut Linear<B>) -> Result<()>;
    /// `nn.Conv2d`: `weight`, and `bias` when it has one.
    fn conv2d(&mut self, name: &str, layer: &mut Conv2d<B>) -> Result<()>;
    /// `nn.Conv1d`: `weight`, `bias`.
    fn conv1d(&mut self, name: &str, layer: &mut GemmConv1d<B>) -> Result<()>;
    /// `nn.ConvTranspose1d`: `weight` (`[in, out, k]` on both sides), `bias`.
    fn conv_transpose1d(&mut self, name: &str, layer: &mut ConvTranspose1d<B>) -> Result<()>;
    /// `nn.GroupNorm`: `weight`, `bias`.
    fn group_norm(&mut self, name: &str, layer: &mut GroupNorm<B>) -> Result<()>;
    /// `nn.BatchNorm2d`: `weight`, `bias` and the buffers `running_mean`, `running_var`,
    /// `num_batches_tracked`.
    fn batch_norm(&mut self, name: &str, layer: &mut BatchNorm<B>) -> Result<()>;
    /// LeRobot's `SpatialSoftmax`: the buffer `pos_grid` (the 1×1 convolution `nets` is visited
    /// as a [`LayerVisitor::conv2d`]).
    fn pos_grid(&mut self, name: &str, pool: &SpatialSoftmax<B>) -> Result<()>;
}

/// How a ResNet-18 trunk's layers are named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResNetNames {
    /// LeRobot's `nn.Sequential(*list(resnet18.children())[:-2])`: conv1, bn1, relu, maxpool,
    /// layer1..layer4 as `0, 1, 2, 3, 4..7`.
    LeRobot,
    /// torchvision's `resnet18`: `conv1`, `bn1`, `layer1`..`layer4`.
    Torchvision,
}

/// Visits every layer of `model` under LeRobot's names.
pub(crate) fn walk<B: Backend>(
    model: &mut DiffusionModel<B>,
    config: &DiffusionConfig,
    visitor: &mut impl LayerVisitor<B>,
) -> Result<()> {
    if config.use_separate_rgb_encoder_per_camera {
        for (i, encoder) in model.rgb_encoder.iter_mut().enumerate() {
            encoder_layers(&format!("diffusion.rgb_encoder.{i}"), encoder, visitor)?;
        }
    } else if let Some(encoder) = model.rgb_encoder.first_mut() {
        encoder_layers("diffusion.rgb_encoder", encoder, visitor)?;
    }
    unet_layers("diffusion.unet", &mut model.unet, visitor)
}

/// Visits every layer of a ResNet-18 trunk, named after `names` under `prefix` (`""` for none).
pub(crate) fn walk_resnet<B: Backend>(
    prefix: &str,
    net: &mut ResNet18<B>,
    names: ResNetNames,
    visitor: &mut impl LayerVisitor<B>,
) -> Result<()> {
    let name = |part: &str| if prefix.is_empty() { part.to_string() } else { format!("{prefix}.{part}") };
    let (conv1, bn1) = match names {
        ResNetNames::LeRobot => ("0", "1"),
        ResNetNames::Torchvision => ("conv1", "bn1"),
    };
    visitor.conv2d(&name(conv1), &mut net.conv1)?;
    norm2d(&name(bn1), &mut net.bn1, visitor)?;
    for (i, layer) in net.layers.iter_mut().enumerate() {
        let stage = match names {
            ResNetNames::LeRobot => (4 + i).to_string(),
            ResNetNames::Torchvision => format!("layer{}", i + 1),
        };
        for (j, block) in layer.iter_mut().enumerate() {
            basic_block(&name(&format!("{stage}.{j}")), block, visitor)?;
        }
    }
    Ok(())
}

fn norm2d<B: Backend>(name: &str, norm: &mut Norm2d<B>, visitor: &mut impl LayerVisitor<B>) -> Result<()> {
    match norm {
        Norm2d::Batch(n) => visitor.batch_norm(name, n),
        Norm2d::Group(n) => visitor.group_norm(name, n),
    }
}

fn basic_block<B: Backend>(name: &str, block: &mut BasicBlock<B>, visitor: &mut impl LayerVisitor<B>) -> Result<()> {
    visitor.conv2d(&format!("{name}.conv1"), &mut block.conv1)?;
    norm2d(&format!("{name}.bn1"), &mut block.bn1, visitor)?;
    visitor.conv2d(&format!("{name}.conv2"), &mut block.conv2)?;
    norm2d(&format!("{name}.bn2"), &mut block.bn2, visitor)?;
    if let Some(down) = &mut block.downsample {
        visitor.conv2d(&format!("{name}.downsample.0"), &mut down.conv)?;
        norm2d(&format!("{name}.downsample.1"), &mut down.norm, visitor)?;
    }
    Ok(())
}

fn encoder_layers<B: Backend>(
    name: &str,
    encoder: &mut RgbEncoder<B>,
    visitor: &mut impl LayerVisitor<B>,
) -> Result<()> {
    walk_resnet(&format!("{name}.backbone"), &mut encoder.backbone, ResNetNames::LeRobot, visitor)?;
    visitor.conv2d(&format!("{name}.pool.nets"), &mut encoder.pool.nets)?;
    visitor.pos_grid(&format!("{name}.pool.pos_grid"), &encoder.pool)?;
    visitor.linear(&format!("{name}.out"), &mut encoder.out)
}

fn conv_block<B: Backend>(name: &str, block: &mut Conv1dBlock<B>, visitor: &mut impl LayerVisitor<B>) -> Result<()> {
    visitor.conv1d(&format!("{name}.block.0"), &mut block.conv)?;
    visitor.group_norm(&format!("{name}.block.1"), &mut block.norm)
}

fn residual<B: Backend>(name: &str, block: &mut ResidualBlock<B>, visitor: &mut impl LayerVisitor<B>) -> Result<()> {
    conv_block(&format!("{name}.conv1"), &mut block.conv1, visitor)?;
    visitor.linear(&format!("{name}.cond_encoder.1"), &mut block.cond_encoder)?;
    conv_block(&format!("{name}.conv2"), &mut block.conv2, visitor)?;
    if let Some(conv) = &mut block.residual_conv {
        visitor.conv1d(&format!("{name}.residual_conv"), conv)?;
    }
    Ok(())
}

fn unet_layers<B: Backend>(
    name: &str,
    unet: &mut ConditionalUnet1d<B>,
    visitor: &mut impl LayerVisitor<B>,
) -> Result<()> {
    visitor.linear(&format!("{name}.diffusion_step_encoder.1"), &mut unet.step_linear1)?;
    visitor.linear(&format!("{name}.diffusion_step_encoder.3"), &mut unet.step_linear2)?;
    for (i, stage) in unet.down.iter_mut().enumerate() {
        residual(&format!("{name}.down_modules.{i}.0"), &mut stage.res1, visitor)?;
        residual(&format!("{name}.down_modules.{i}.1"), &mut stage.res2, visitor)?;
        if let Some(down) = &mut stage.down {
            visitor.conv1d(&format!("{name}.down_modules.{i}.2"), down)?;
        }
    }
    for (i, block) in unet.mid.iter_mut().enumerate() {
        residual(&format!("{name}.mid_modules.{i}"), block, visitor)?;
    }
    for (i, stage) in unet.up.iter_mut().enumerate() {
        residual(&format!("{name}.up_modules.{i}.0"), &mut stage.res1, visitor)?;
        residual(&format!("{name}.up_modules.{i}.1"), &mut stage.res2, visitor)?;
        if let Some(up) = &mut stage.up {
            visitor.conv_transpose1d(&format!("{name}.up_modules.{i}.2"), up)?;
        }
    }
    conv_block(&format!("{name}.final_conv.0"), &mut unet.final_block, visitor)?;
    visitor.conv1d(&format!("{name}.final_conv.1"), &mut unet.final_conv)
}
