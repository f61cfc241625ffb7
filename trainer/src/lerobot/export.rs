//! `trainer export`: a checkpoint written as LeRobot 0.6.1's `save_pretrained` writes a
//! Diffusion Policy, so that `DiffusionPolicy.from_pretrained(DIR)` and
//! `make_pre_post_processors(cfg, pretrained_path=DIR)` load it:
//!
//! - `model.safetensors`: the weights under LeRobot's names (`diffusion.rgb_encoder...`,
//!   `diffusion.unet...`) in PyTorch's layouts (Linear `[out, in]`, Conv1d `[out, in, k]`), with
//!   the `pos_grid` buffer and BatchNorm's running statistics;
//! - `config.json`: the policy's `DiffusionConfig` with every key LeRobot writes;
//! - `policy_preprocessor.json` / `policy_postprocessor.json` and their normaliser state files,
//!   holding the statistics the policy was trained with.

use std::collections::HashMap;
use std::path::Path;

use burn::module::Param;
use burn::nn::conv::{Conv2d, ConvTranspose1d};
use burn::nn::{BatchNorm, GroupNorm, Linear};
use burn::prelude::*;
use safetensors::{Dtype, View};
use serde_json::{Value, json};
use transforms::{NormalizationMode, Normalizer};

use super::names::{LayerVisitor, walk};
use crate::error::{Error, Result};
use crate::model::DiffusionModel;
use crate::model::conv1d::GemmConv1d;
use crate::model::encoder::SpatialSoftmax;
use crate::policy_config::{DiffusionConfig, PolicyFeatures};

/// One named tensor of a state dict, in PyTorch's layout.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// LeRobot's parameter name.
    pub name: String,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Its values.
    pub values: EntryValues,
}

/// The values of an [`Entry`].
#[derive(Debug, Clone, PartialEq)]
pub enum EntryValues {
    /// float32.
    F32(Vec<f32>),
    /// int64 (BatchNorm's `num_batches_tracked`).
    I64(Vec<i64>),
}

impl View for &Entry {
    fn dtype(&self) -> Dtype {
        match self.values {
            EntryValues::F32(_) => Dtype::F32,
            EntryValues::I64(_) => Dtype::I64,
        }
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> std::borrow::Cow<'_, [u8]> {
        match &self.values {
            EntryValues::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>().into(),
            EntryValues::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>().into(),
        }
    }
    fn data_len(&self) -> usize {
        let width = match self.values {
            EntryValues::F32(_) => 4,
            EntryValues::I64(_) => 8,
        };
        self.shape.iter().product::<usize>() * width
    }
}

/// Collects a model's tensors under LeRobot's names, in PyTorch's layouts; with `values` false,
/// only names and shapes (without initialising lazy parameters or copying data).
struct Exporter {
    entries: Vec<Entry>,
    values: bool,
}

impl Exporter {
    fn push<B: Backend, const D: usize>(
        &mut self,
        name: String,
        shape: Vec<usize>,
        value: impl FnOnce() -> Tensor<B, D>,
    ) {
        let values = if self.values {
            EntryValues::F32(value().into_data().convert::<f32>().to_vec::<f32>().expect("float data"))
        } else {
            EntryValues::F32(Vec::new())
        };
        self.entries.push(Entry { name, shape, values });
    }

    fn param<B: Backend, const D: usize>(&mut self, name: String, param: &Param<Tensor<B, D>>) {
        self.push(name, param.shape().to_vec(), || param.val());
    }
}

impl<B: Backend> LayerVisitor<B> for Exporter {
    fn linear(&mut self, name: &str, layer: &mut Linear<B>) -> Result<()> {
        // burn keeps `[in, out]`; PyTorch `[out, in]`.
        let [d_in, d_out] = layer.weight.shape().dims();
        self.push(format!("{name}.weight"), vec![d_out, d_in], || layer.weight.val().transpose());
        if let Some(bias) = &layer.bias {
            self.param(format!("{name}.bias"), bias);
        }
        Ok(())
    }

    fn conv2d(&mut self, name: &str, layer: &mut Conv2d<B>) -> Result<()> {
        self.param(format!("{name}.weight"), &layer.weight);
        if let Some(bias) = &layer.bias {
            self.param(format!("{name}.bias"), bias);
        }
        Ok(())
    }

    fn conv1d(&mut self, name: &str, layer: &mut GemmConv1d<B>) -> Result<()> {
        // `[out, in · k]`, row-major: PyTorch's `[out, in, k]` flattened.
        let [out, _] = layer.weight.shape().dims();
        let shape = [out, layer.channels_in, layer.kernel];
        self.push(format!("{name}.weight"), shape.to_vec(), || layer.weight.val().reshape(shape));
        self.param(format!("{name}.bias"), &layer.bias);
        Ok(())
    }

    fn conv_transpose1d(&mut self, name: &str, layer: &mut ConvTranspose1d<B>) -> Result<()> {
        self.param(format!("{name}.weight"), &layer.weight);
        if let Some(bias) = &layer.bias {
            self.param(format!("{name}.bias"), bias);
        }
        Ok(())
    }

    fn group_norm(&mut self, name: &str, layer: &mut GroupNorm<B>) -> Result<()> {
        if let (Some(gamma), Some(beta)) = (&layer.gamma, &layer.beta) {
            self.param(format!("{name}.weight"), gamma);
            self.param(format!("{name}.bias"), beta);
        }
        Ok(())
    }

    fn batch_norm(&mut self, name: &str, layer: &mut BatchNorm<B>) -> Result<()> {
        self.param(format!("{name}.weight"), &layer.gamma);
        self.param(format!("{name}.bias"), &layer.beta);
        let channels = layer.gamma.shape()[0];
        self.push(format!("{name}.running_mean"), vec![channels], || layer.running_mean.value());
        self.push(format!("{name}.running_var"), vec![channels], || layer.running_var.value());
        // Only read by PyTorch when `momentum` is None (it is 0.1): the count is not kept here.
        self.entries.push(Entry {
            name: format!("{name}.num_batches_tracked"),
            shape: Vec::new(),
            values: EntryValues::I64(vec![0]),
        });
        Ok(())
    }

    fn pos_grid(&mut self, name: &str, pool: &SpatialSoftmax<B>) -> Result<()> {
        let grid = if self.values { SpatialSoftmax::<B>::pos_grid(pool.height, pool.width) } else { Vec::new() };
        self.entries.push(Entry {
            name: name.to_string(),
            shape: vec![pool.height * pool.width, 2],
            values: EntryValues::F32(grid),
        });
        Ok(())
    }
}

/// The model's tensors under LeRobot 0.6.1's names and layouts (`DiffusionPolicy.state_dict()`);
/// with `values` false, names and shapes only (the values left empty).
pub fn lerobot_state_dict<B: Backend>(model: &DiffusionModel<B>, config: &DiffusionConfig, values: bool) -> Vec<Entry> {
    let mut exporter = Exporter { entries: Vec::new(), values };
    if values {
        // Draw lazily initialised parameters in the model itself, not only in the copy below.
        crate::model::materialize(model);
    }
    // The walk takes the layers mutably (import writes them); a clone shares the tensors.
    walk(&mut model.clone(), config, &mut exporter).expect("reading a layer cannot fail");
    exporter.entries
}

/// LeRobot's feature description of the policy's inputs and outputs.
pub(super) fn features_json(features: &PolicyFeatures) -> (Value, Value) {
    let mut inputs = serde_json::Map::new();
    for (key, shape) in &features.cameras {
        inputs.insert(key.clone(), json!({"type": "VISUAL", "shape": [shape.channels, shape.height, shape.width]}));
    }
    inputs.insert("observation.state".into(), json!({"type": "STATE", "shape": [features.state_dim]}));
    if let Some(e) = features.env_state_dim {
        inputs.insert("observation.environment_state".into(), json!({"type": "ENV", "shape": [e]}));
    }
    let outputs = json!({"action": {"type": "ACTION", "shape": [features.action_dim]}});
    (Value::Object(inputs), outputs)
}

/// LeRobot's normalisation of each feature type, the only one this trainer implements.
pub(super) const NORM_MAP: &str = r#"{"VISUAL": "MEAN_STD", "STATE": "MIN_MAX", "ACTION": "MIN_MAX"}"#;

/// LeRobot 0.6.1's `config.json` for a `DiffusionConfig` (every key its `save_pretrained`
/// writes; draccus refuses unknown ones).
pub fn lerobot_config(config: &DiffusionConfig, features: &PolicyFeatures) -> Value {
    let (inputs, outputs) = features_json(features);
    let norm_map: Value = serde_json::from_str(NORM_MAP).expect("valid JSON");
    let mut head = json!({
        "type": "diffusion",
        "n_obs_steps": config.n_obs_steps,
        "input_features": inputs,
        "output_features": outputs,
        "device": "cpu",
        "use_amp": false,
        "use_peft": false,
        "push_to_hub": false,
        "repo_id": null,
        "private": null,
        "tags": null,
        "license": null,
        "pretrained_path": null,
        "pretrained_revision": null,
        "horizon": config.horizon,
        "n_action_steps": config.n_action_steps,
        "normalization_mapping": norm_map,
        "drop_n_last_frames": config.drop_n_last_frames,
        "vision_backbone": "resnet18",
        "resize_shape": config.resize_shape,
        "crop_ratio": 1.0,
        "crop_shape": config.crop_shape,
        "crop_is_random": config.crop_is_random,
    });
    let tail = json!({
        // The weights are in model.safetensors: nothing to fetch.
        "pretrained_backbone_weights": null,
        "use_group_norm": config.use_group_norm,
        "spatial_softmax_num_keypoints": config.spatial_softmax_num_keypoints,
        "use_separate_rgb_encoder_per_camera": config.use_separate_rgb_encoder_per_camera,
        "down_dims": config.down_dims,
        "kernel_size": config.kernel_size,
        "n_groups": config.n_groups,
        "diffusion_step_embed_dim": config.diffusion_step_embed_dim,
        "use_film_scale_modulation": config.use_film_scale_modulation,
        "gradient_checkpointing": false,
        "noise_scheduler_type": config.noise_scheduler_type,
        "num_train_timesteps": config.num_train_timesteps,
        "beta_schedule": config.beta_schedule,
        "beta_start": config.beta_start,
        "beta_end": config.beta_end,
        "prediction_type": config.prediction_type,
        "clip_sample": config.clip_sample,
        "clip_sample_range": config.clip_sample_range,
        "num_inference_steps": config.num_inference_steps,
        "compile_model": false,
        "compile_mode": "reduce-overhead",
        "do_mask_loss_for_padding": config.do_mask_loss_for_padding,
        "optimizer_lr": config.optimizer_lr,
        "optimizer_betas": [config.optimizer_betas.0, config.optimizer_betas.1],
        "optimizer_eps": config.optimizer_eps,
        "optimizer_weight_decay": config.optimizer_weight_decay,
        "scheduler_name": "cosine",
        "scheduler_warmup_steps": config.scheduler_warmup_steps,
    });
    let map = head.as_object_mut().expect("an object");
    map.extend(tail.as_object().expect("an object").clone());
    head
}

/// The normaliser's statistics as LeRobot's processor state file names them
/// (`<feature>.mean/std` or `<feature>.min/max`), for `keys`.
fn stats_entries(normalizer: &Normalizer, keys: &[String]) -> Result<Vec<Entry>> {
    let mut entries = Vec::new();
    for key in keys {
        let Some(norm) = normalizer.features.get(key) else { continue };
        let (low, high, values_high): (&str, &str, Vec<f32>) = match norm.mode {
            NormalizationMode::MeanStd => ("mean", "std", norm.spread.clone()),
            NormalizationMode::MinMax => {
                ("min", "max", norm.low.iter().zip(&norm.spread).map(|(l, s)| l + s).collect())
            }
            NormalizationMode::Identity => continue,
            mode => {
                return Err(Error::Config(format!("export of {key}: {mode:?} normalisation is not exported yet")));
            }
        };
        for (stat, values) in [(low, norm.low.clone()), (high, values_high)] {
            entries.push(Entry {
                name: format!("{key}.{stat}"),
                shape: norm.shape.clone(),
                values: EntryValues::F32(values),
            });
        }
    }
    Ok(entries)
}

fn write_safetensors(path: &Path, entries: &[Entry]) -> Result<()> {
    let tmp = path.with_extension("safetensors.tmp");
    safetensors::serialize_to_file(entries.iter().map(|e| (e.name.clone(), e)), None::<HashMap<String, String>>, &tmp)
        .map_err(|e| Error::checkpoint(path, e))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
}

fn write_json(path: &Path, value: &Value) -> Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(|e| Error::checkpoint(path, e))?;
    std::fs::write(path, text).map_err(|e| Error::io(path, e))
}

/// Writes `model` as LeRobot's pretrained-policy folder `out` (see the module docs).
pub fn export<B: Backend>(
    model: &DiffusionModel<B>,
    config: &DiffusionConfig,
    features: &PolicyFeatures,
    normalizer: &Normalizer,
    out: &Path,
) -> Result<()> {
    std::fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;
    write_safetensors(&out.join("model.safetensors"), &lerobot_state_dict(model, config, true))?;
    write_json(&out.join("config.json"), &lerobot_config(config, features))?;

    let (inputs, outputs) = features_json(features);
    let norm_map: Value = serde_json::from_str(NORM_MAP).expect("valid JSON");
    let mut all = inputs.as_object().cloned().unwrap_or_default();
    all.extend(outputs.as_object().cloned().unwrap_or_default());
    let input_keys: Vec<String> = all.keys().cloned().collect();
    let pre_state = "policy_preprocessor_step_3_normalizer_processor.safetensors";
    write_safetensors(&out.join(pre_state), &stats_entries(normalizer, &input_keys)?)?;
    write_json(
        &out.join("policy_preprocessor.json"),
        &json!({"name": "policy_preprocessor", "steps": [
            {"registry_name": "rename_observations_processor", "config": {"rename_map": {}}},
            {"registry_name": "to_batch_processor", "config": {}},
            {"registry_name": "device_processor", "config": {"device": "cpu", "float_dtype": null}},
            {"registry_name": "normalizer_processor",
             "config": {"eps": 1e-8, "features": all, "norm_map": norm_map},
             "state_file": pre_state},
        ]}),
    )?;
    let post_state = "policy_postprocessor_step_0_unnormalizer_processor.safetensors";
    write_safetensors(&out.join(post_state), &stats_entries(normalizer, &["action".to_string()])?)?;
    write_json(
        &out.join("policy_postprocessor.json"),
        &json!({"name": "policy_postprocessor", "steps": [
            {"registry_name": "unnormalizer_processor",
             "config": {"eps": 1e-8, "features": outputs, "norm_map": norm_map},
             "state_file": post_state},
            {"registry_name": "device_processor", "config": {"device": "cpu", "float_dtype": null}},
        ]}),
    )
}
