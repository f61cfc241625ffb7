//! Loading torchvision's ResNet-18 weights (`resnet18-*.pth`, or the same state dict as
//! `.safetensors`) from a local file into an encoder's backbone — LeRobot 0.6's
//! `pretrained_backbone_weights`, never downloaded.

use std::collections::HashMap;
use std::path::Path;

use burn::module::{Param, RunningState};
use burn::nn::BatchNorm;
use burn::nn::conv::Conv2d;
use burn::prelude::*;

use crate::error::{Error, Result};
use crate::model::encoder::RgbEncoder;
use crate::model::resnet::{BasicBlock, Norm2d};

/// A state dict: name → (shape, f32 values).
pub type StateDict = HashMap<String, (Vec<usize>, Vec<f32>)>;

/// Reads a torchvision state dict from `.pth` (PyTorch zip) or `.safetensors`.
pub fn read_state_dict(path: &Path) -> Result<StateDict> {
    let bad = |m: String| Error::checkpoint(path, m);
    let is_safetensors = path.extension().is_some_and(|e| e == "safetensors");
    let mut dict = StateDict::new();
    if is_safetensors {
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        let file = safetensors::SafeTensors::deserialize(&bytes).map_err(|e| bad(e.to_string()))?;
        for (name, view) in file.tensors() {
            let values: Vec<f32> = match view.dtype() {
                safetensors::Dtype::F32 => {
                    view.data().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes"))).collect()
                }
                safetensors::Dtype::I64 => continue, // num_batches_tracked
                other => return Err(bad(format!("`{name}` is {other:?}; expected float32"))),
            };
            dict.insert(name, (view.shape().to_vec(), values));
        }
    } else {
        let reader = burn_store::pytorch::PytorchReader::new(path).map_err(|e| bad(e.to_string()))?;
        for (name, snapshot) in reader.into_tensors() {
            if name.ends_with("num_batches_tracked") {
                continue;
            }
            let data = snapshot.to_data().map_err(|e| bad(format!("`{name}`: {e:?}")))?;
            let shape = data.shape.to_vec();
            let values = data.convert::<f32>().to_vec::<f32>().map_err(|e| bad(format!("`{name}`: {e:?}")))?;
            dict.insert(name, (shape, values));
        }
    }
    Ok(dict)
}

/// Puts the weights of `path` into `encoder`'s backbone (which must use BatchNorm, as
/// torchvision's does). The keypoint layer and the output layer keep their initialisation.
pub fn load_resnet18<B: Backend>(mut encoder: RgbEncoder<B>, path: &Path, device: &B::Device) -> Result<RgbEncoder<B>> {
    let dict = read_state_dict(path)?;
    let mut loader = Loader { dict: &dict, path, device };
    let backbone = &mut encoder.backbone;
    loader.conv(&mut backbone.conv1, "conv1")?;
    loader.norm(&mut backbone.bn1, "bn1")?;
    for (stage, blocks) in backbone.layers.iter_mut().enumerate() {
        for (i, block) in blocks.iter_mut().enumerate() {
            loader.block(block, &format!("layer{}.{i}", stage + 1))?;
        }
    }
    Ok(encoder)
}

struct Loader<'a, B: Backend> {
    dict: &'a StateDict,
    path: &'a Path,
    device: &'a B::Device,
}

impl<B: Backend> Loader<'_, B> {
    fn tensor<const D: usize>(&self, name: &str, expected: [usize; D]) -> Result<Tensor<B, D>> {
        let (shape, values) = self.dict.get(name).ok_or_else(|| {
            Error::checkpoint(self.path, format!("`{name}` missing: not a torchvision ResNet-18 state dict"))
        })?;
        if shape.as_slice() != expected {
            return Err(Error::checkpoint(self.path, format!("`{name}` has shape {shape:?}, expected {expected:?}")));
        }
        Ok(Tensor::from_data(TensorData::new(values.clone(), expected), self.device))
    }

    fn conv(&mut self, conv: &mut Conv2d<B>, name: &str) -> Result<()> {
        let dims = conv.weight.dims();
        let value = self.tensor(&format!("{name}.weight"), dims)?;
        conv.weight = Param::initialized(conv.weight.id, value);
        Ok(())
    }

    fn norm(&mut self, norm: &mut Norm2d<B>, name: &str) -> Result<()> {
        let Norm2d::Batch(bn) = norm else {
            return Err(Error::Config("pretrained weights need BatchNorm (use_group_norm = false)".into()));
        };
        self.batch_norm(bn, name)
    }

    fn batch_norm(&mut self, bn: &mut BatchNorm<B>, name: &str) -> Result<()> {
        let c = bn.gamma.dims();
        bn.gamma = Param::initialized(bn.gamma.id, self.tensor(&format!("{name}.weight"), c)?);
        bn.beta = Param::initialized(bn.beta.id, self.tensor(&format!("{name}.bias"), c)?);
        bn.running_mean = RunningState::new(self.tensor(&format!("{name}.running_mean"), c)?);
        bn.running_var = RunningState::new(self.tensor(&format!("{name}.running_var"), c)?);
        Ok(())
    }

    fn block(&mut self, block: &mut BasicBlock<B>, name: &str) -> Result<()> {
        self.conv(&mut block.conv1, &format!("{name}.conv1"))?;
        self.norm(&mut block.bn1, &format!("{name}.bn1"))?;
        self.conv(&mut block.conv2, &format!("{name}.conv2"))?;
        self.norm(&mut block.bn2, &format!("{name}.bn2"))?;
        if let Some(d) = &mut block.downsample {
            self.conv(&mut d.conv, &format!("{name}.downsample.0"))?;
            self.norm(&mut d.norm, &format!("{name}.downsample.1"))?;
        }
        Ok(())
    }
}
