//! Reading PyTorch state dicts (`.safetensors`, or `.pth` as `torch.save` writes them) and
//! putting their tensors into our layers: a LeRobot Diffusion Policy's `model.safetensors` into a
//! [`DiffusionModel`] ([`load_lerobot_weights`]), and torchvision's ResNet-18 into an encoder's
//! trunk (`load_resnet18`).

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use burn::module::{Param, RunningState};
use burn::nn::conv::{Conv2d, ConvTranspose1d};
use burn::nn::{BatchNorm, GroupNorm, Linear};
use burn::prelude::*;

use super::names::{LayerVisitor, walk};
use crate::error::{Error, Result};
use crate::model::DiffusionModel;
use crate::model::conv1d::GemmConv1d;
use crate::model::encoder::SpatialSoftmax;
use crate::policy_config::DiffusionConfig;

/// A state dict: name → (shape, float values, row-major). Only float tensors are kept (the
/// integer ones of a model's state dict are buffers such as BatchNorm's `num_batches_tracked`).
pub type StateDict = HashMap<String, (Vec<usize>, Vec<f32>)>;

/// Reads a state dict from safetensors (by its extension or its first bytes) or else a PyTorch
/// `.pth` zip. Float tensors of any width become f32; integer and boolean tensors are left out.
///
/// A `.pth` must hold contiguous tensors, as torchvision's weight files and `torch.save` of a
/// standard module's `state_dict()` do: burn-store 0.21 reads each tensor's storage in order and
/// ignores its strides (tracel-ai/burn#5383, fixed after 0.21), so a saved view such as a
/// transpose would load scrambled. Convert such a file first (`{k: v.contiguous() ...}`, or to
/// safetensors, which holds only contiguous tensors).
pub fn read_state_dict(path: &Path) -> Result<StateDict> {
    let bad = |m: String| Error::checkpoint(path, m);
    let is_safetensors = path.extension().is_some_and(|e| e == "safetensors") || begins_as_safetensors(path);
    let mut dict = StateDict::new();
    if is_safetensors {
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        let file = safetensors::SafeTensors::deserialize(&bytes).map_err(|e| bad(e.to_string()))?;
        for (name, view) in file.tensors() {
            let chunks = |width: usize| view.data().chunks_exact(width);
            let values: Vec<f32> = match view.dtype() {
                safetensors::Dtype::F32 => chunks(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
                safetensors::Dtype::F16 => chunks(2).map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32()).collect(),
                safetensors::Dtype::BF16 => {
                    chunks(2).map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32()).collect()
                }
                safetensors::Dtype::F64 => {
                    chunks(8).map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")) as f32).collect()
                }
                _ => continue, // integer and boolean buffers (num_batches_tracked)
            };
            dict.insert(name, (view.shape().to_vec(), values));
        }
    } else {
        let reader = burn_store::pytorch::PytorchReader::new(path).map_err(|e| bad(e.to_string()))?;
        for (name, snapshot) in reader.into_tensors() {
            if !snapshot.dtype.is_float() {
                continue; // integer and boolean buffers (num_batches_tracked)
            }
            let data = snapshot.to_data().map_err(|e| bad(format!("`{name}`: {e:?}")))?;
            let shape = data.shape.to_vec();
            let values = data.convert::<f32>().to_vec::<f32>().map_err(|e| bad(format!("`{name}`: {e:?}")))?;
            dict.insert(name, (shape, values));
        }
    }
    Ok(dict)
}

/// Whether the file starts as safetensors do (an 8-byte little-endian header length, then the
/// header's `{`), where a `.pth` starts as a zip (`PK`) or a pickle.
fn begins_as_safetensors(path: &Path) -> bool {
    use std::io::Read;
    let mut start = [0u8; 9];
    std::fs::File::open(path).and_then(|mut file| file.read_exact(&mut start)).is_ok() && start[8] == b'{'
}

/// Puts the weights of a LeRobot Diffusion Policy state dict (its `model.safetensors`: names as
/// `DiffusionPolicy.state_dict()`, PyTorch layouts) into `model`, built for the same
/// configuration. Every tensor of the model must be there with its shape, and every tensor there
/// must belong to the model (`num_batches_tracked` aside), as PyTorch's strict loading requires.
/// `source` names the file in errors.
pub fn load_lerobot_weights<B: Backend>(
    mut model: DiffusionModel<B>,
    config: &DiffusionConfig,
    dict: &StateDict,
    source: &Path,
) -> Result<DiffusionModel<B>> {
    let device = model.unet.final_conv.bias.lazy_device();
    let mut importer = Importer::new(dict, source, device);
    walk(&mut model, config, &mut importer)?;
    importer.all_used()?;
    Ok(model)
}

/// Writes layers from a [`StateDict`], converting PyTorch's layouts to ours, and remembers which
/// tensors it used.
pub(crate) struct Importer<'a, B: Backend> {
    dict: &'a StateDict,
    source: PathBuf,
    device: B::Device,
    used: BTreeSet<String>,
}

impl<'a, B: Backend> Importer<'a, B> {
    /// An importer from `dict`, read from `source`, making tensors on `device`.
    pub(crate) fn new(dict: &'a StateDict, source: &Path, device: B::Device) -> Self {
        Self { dict, source: source.to_path_buf(), device, used: BTreeSet::new() }
    }

    /// An error unless every tensor of the dict was used.
    pub(crate) fn all_used(&self) -> Result<()> {
        let mut unused: Vec<&str> =
            self.dict.keys().map(String::as_str).filter(|name| !self.used.contains(*name)).collect();
        if unused.is_empty() {
            return Ok(());
        }
        unused.sort_unstable();
        Err(Error::checkpoint(
            &self.source,
            format!(
                "{} tensor(s) belong to no layer of this model (another configuration?): {}",
                unused.len(),
                unused.iter().take(5).map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
            ),
        ))
    }

    /// The values of tensor `name`, which must have PyTorch shape `shape`, marked as used.
    fn host(&mut self, name: &str, shape: &[usize]) -> Result<&'a [f32]> {
        let dict: &'a StateDict = self.dict;
        let (found, values) =
            dict.get(name).ok_or_else(|| Error::checkpoint(&self.source, format!("`{name}` is missing")))?;
        if found.as_slice() != shape {
            return Err(Error::checkpoint(
                &self.source,
                format!("`{name}` has shape {found:?}; this model's is {shape:?}"),
            ));
        }
        self.used.insert(name.to_string());
        Ok(values)
    }

    /// The tensor `name`, which must have PyTorch shape `shape`, on the device.
    fn take<const D: usize>(&mut self, name: &str, shape: [usize; D]) -> Result<Tensor<B, D>> {
        let values = self.host(name, &shape)?;
        Ok(Tensor::from_data(TensorData::new(values.to_vec(), shape), &self.device))
    }

    /// Replaces `param` (same id, trainable) with the tensor `name` of the same shape.
    fn set<const D: usize>(&mut self, param: &mut Param<Tensor<B, D>>, name: String) -> Result<()> {
        let value = self.take(&name, param.shape().dims())?;
        *param = Param::initialized(param.id, value.require_grad());
        Ok(())
    }
}

impl<B: Backend> LayerVisitor<B> for Importer<'_, B> {
    fn linear(&mut self, name: &str, layer: &mut Linear<B>) -> Result<()> {
        // PyTorch `[out, in]`; burn keeps `[in, out]`.
        let [d_in, d_out] = layer.weight.shape().dims();
        let weight = self.take(&format!("{name}.weight"), [d_out, d_in])?.transpose();
        layer.weight = Param::initialized(layer.weight.id, weight.require_grad());
        if let Some(bias) = &mut layer.bias {
            self.set(bias, format!("{name}.bias"))?;
        }
        Ok(())
    }

    fn conv2d(&mut self, name: &str, layer: &mut Conv2d<B>) -> Result<()> {
        self.set(&mut layer.weight, format!("{name}.weight"))?;
        if let Some(bias) = &mut layer.bias {
            self.set(bias, format!("{name}.bias"))?;
        }
        Ok(())
    }

    fn conv1d(&mut self, name: &str, layer: &mut GemmConv1d<B>) -> Result<()> {
        // PyTorch `[out, in, k]`; ours `[out, in · k]`, the same values row-major.
        let [out, flat] = layer.weight.shape().dims();
        let weight = self.take(&format!("{name}.weight"), [out, layer.channels_in, layer.kernel])?.reshape([out, flat]);
        layer.weight = Param::initialized(layer.weight.id, weight.require_grad());
        self.set(&mut layer.bias, format!("{name}.bias"))
    }

    fn conv_transpose1d(&mut self, name: &str, layer: &mut ConvTranspose1d<B>) -> Result<()> {
        self.set(&mut layer.weight, format!("{name}.weight"))?;
        if let Some(bias) = &mut layer.bias {
            self.set(bias, format!("{name}.bias"))?;
        }
        Ok(())
    }

    fn group_norm(&mut self, name: &str, layer: &mut GroupNorm<B>) -> Result<()> {
        if let Some(gamma) = &mut layer.gamma {
            self.set(gamma, format!("{name}.weight"))?;
        }
        if let Some(beta) = &mut layer.beta {
            self.set(beta, format!("{name}.bias"))?;
        }
        Ok(())
    }

    fn batch_norm(&mut self, name: &str, layer: &mut BatchNorm<B>) -> Result<()> {
        self.set(&mut layer.gamma, format!("{name}.weight"))?;
        self.set(&mut layer.beta, format!("{name}.bias"))?;
        let channels = [layer.gamma.shape()[0]];
        layer.running_mean = RunningState::new(self.take(&format!("{name}.running_mean"), channels)?);
        layer.running_var = RunningState::new(self.take(&format!("{name}.running_var"), channels)?);
        Ok(())
    }

    fn pos_grid(&mut self, name: &str, pool: &SpatialSoftmax<B>) -> Result<()> {
        // A buffer that LeRobot derives from the feature map's size, as we do: it is not loaded,
        // only checked (on the host), so that a policy made for other image sizes is refused.
        let (height, width) = (pool.height, pool.width);
        let theirs = self.host(name, &[height * width, 2])?;
        let ours = SpatialSoftmax::<B>::pos_grid(height, width);
        let close = |a: &f32, b: &f32| a.is_finite() && (a - b).abs() <= 1e-6;
        if !theirs.iter().zip(&ours).all(|(a, b)| close(a, b)) {
            return Err(Error::checkpoint(
                &self.source,
                format!("`{name}` is not the {height}x{width} keypoint grid this model computes"),
            ));
        }
        Ok(())
    }
}
