//! Starting from a LeRobot pretrained policy (`--policy.path DIR`, as `lerobot-train` takes it):
//! `DIR/config.json` (LeRobot 0.6.1's `DiffusionConfig`, as `save_pretrained` writes it) gives
//! the policy's hyper-parameters, which the run's own `--policy.*` options may still override,
//! and `DIR/model.safetensors` its weights, loaded strictly. The normalisation statistics are the
//! dataset's, as `lerobot-train` takes them. A Hub id (`--policy.path lerobot/diffusion_pusht`)
//! is downloaded as `lerobot-train` downloads it.

use std::path::{Path, PathBuf};

use burn::prelude::*;
use datasets::hub::RepoId;
use serde_json::{Map, Value};

use super::export::{NORM_MAP, features_json};
use super::import::{load_lerobot_weights, read_state_dict};
use crate::error::{Error, Result};
use crate::model::DiffusionModel;
use crate::policy_config::{DiffusionConfig, PolicyFeatures};

/// `config.json`'s keys that are ours under the same name and meaning.
const SAME_KEYS: &[&str] = &[
    "n_obs_steps",
    "horizon",
    "n_action_steps",
    "drop_n_last_frames",
    "resize_shape",
    "crop_shape",
    "crop_is_random",
    "pretrained_backbone_weights",
    "use_group_norm",
    "spatial_softmax_num_keypoints",
    "use_separate_rgb_encoder_per_camera",
    "down_dims",
    "kernel_size",
    "n_groups",
    "diffusion_step_embed_dim",
    "use_film_scale_modulation",
    "noise_scheduler_type",
    "num_train_timesteps",
    "beta_schedule",
    "beta_start",
    "beta_end",
    "prediction_type",
    "clip_sample",
    "clip_sample_range",
    "num_inference_steps",
    "do_mask_loss_for_padding",
    "optimizer_lr",
    "optimizer_betas",
    "optimizer_eps",
    "optimizer_weight_decay",
    "scheduler_warmup_steps",
];

/// Keys that change nothing here: where the policy ran or was shared, how torch compiled or
/// checkpointed it. The features are checked against the dataset when the run starts
/// ([`check_features`]); `pretrained_path` is the caller's.
const IGNORED_KEYS: &[&str] = &[
    "device",
    "use_amp",
    "push_to_hub",
    "repo_id",
    "private",
    "tags",
    "license",
    "pretrained_path",
    "pretrained_revision",
    "gradient_checkpointing",
    "compile_model",
    "compile_mode",
    "input_features",
    "output_features",
];

/// The folder of LeRobot's pretrained policy in a checkpoint (LeRobot's name).
pub const LEROBOT_POLICY_DIR: &str = "pretrained_model";

/// The pretrained policy in `path`: the folder itself (`pretrained_model/`), a checkpoint
/// holding one, a run's output folder (its newest checkpoint's), or, where no such folder is
/// and `path` is a Hub id (`OWNER/NAME`), the policy's model repository, found in or downloaded
/// into `huggingface_hub`'s cache as `lerobot-train` finds it ([`datasets::hub::resolve_model`]).
pub fn pretrained_policy_dir(path: &Path) -> Result<PathBuf> {
    if path.join("config.json").is_file() && path.join("model.safetensors").exists() {
        return Ok(path.to_path_buf());
    }
    let checkpoint = crate::checkpoint::resolve(path).unwrap_or_else(|_| path.to_path_buf());
    let nested = checkpoint.join(LEROBOT_POLICY_DIR);
    if nested.join("config.json").is_file() {
        return Ok(nested);
    }
    if path.join("config.json").is_file() {
        return Ok(path.to_path_buf());
    }
    let text = path.to_string_lossy();
    if !path.exists()
        && let Ok(repo_id) = text.parse::<RepoId>()
    {
        return Ok(download_policy(&repo_id)?.root);
    }
    Err(Error::Config(format!(
        "--policy.path {text}: no config.json there (a LeRobot pretrained_model folder holds one)"
    )))
}

/// The policy `repo_id` from the Hub (or the Hub's cache), with a progress bar in the tool.
fn download_policy(repo_id: &RepoId) -> datasets::Result<datasets::hub::Resolved> {
    #[cfg(feature = "cli")]
    return datasets::hub::resolve_model_on_terminal(repo_id, None);
    #[cfg(not(feature = "cli"))]
    return datasets::hub::resolve_model(repo_id, None, &datasets::hub::HubEnv::from_env(), &mut |_| {});
}

/// The `policy` section of our configuration that `dir/config.json` (a LeRobot Diffusion Policy's)
/// describes (read as `policy_section` reads it), checked to come with its `model.safetensors`.
pub fn policy_from_pretrained(dir: &Path) -> Result<Value> {
    let file = dir.join("config.json");
    let text = std::fs::read_to_string(&file).map_err(|e| Error::io(&file, e))?;
    let config: Map<String, Value> =
        serde_json::from_str(&text).map_err(|e| Error::Config(format!("{}: {e}", file.display())))?;
    let mut policy = policy_section(&config, &file, "")?;
    let weights_file = dir.join("model.safetensors");
    if !weights_file.is_file() {
        return Err(Error::Config(format!("{}: missing (the pretrained policy's weights)", weights_file.display())));
    }
    // The weights come from the policy, not from torchvision.
    policy.insert("pretrained_backbone_weights".into(), Value::Null);
    Ok(Value::Object(policy))
}

/// Our `policy` keys for LeRobot's `DiffusionConfig` as JSON (`config.json`, or the `policy` of
/// `train_config.json`, whose keys errors name under `prefix`): hyper-parameters we do not
/// implement, or values of them we do not, are refused by name; keys that change nothing here
/// are left out, and so is `pretrained_path` (the caller decides what it means).
pub(crate) fn policy_section(config: &Map<String, Value>, file: &Path, prefix: &str) -> Result<Map<String, Value>> {
    let refuse = |key: &str, why: String| Error::Config(format!("{}: `{prefix}{key}` {why}", file.display()));
    let mut policy = Map::new();
    for (key, value) in config {
        let key = key.as_str();
        if SAME_KEYS.contains(&key) {
            policy.insert(key.to_string(), value.clone());
            continue;
        }
        let expected = match key {
            "type" => Value::from("diffusion"),
            "vision_backbone" => Value::from("resnet18"),
            "crop_ratio" => Value::from(1.0),
            "use_peft" => Value::from(false),
            "scheduler_name" => Value::from("cosine"),
            "normalization_mapping" => serde_json::from_str(NORM_MAP).expect("valid JSON"),
            _ if IGNORED_KEYS.contains(&key) => continue,
            _ => {
                return Err(refuse(
                    key,
                    "is not a key of LeRobot 0.6.1's DiffusionConfig that this trainer knows".into(),
                ));
            }
        };
        if !same_json(value, &expected) {
            return Err(refuse(key, format!("is {value}: this trainer implements only {expected}")));
        }
    }
    Ok(policy)
}

/// Whether two JSON values are equal, numbers compared as numbers (`1` and `1.0`).
pub(crate) fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (Value::Array(a), Value::Array(b)) => a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same_json(a, b)),
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len() && a.iter().all(|(k, v)| b.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

/// An error unless the dataset's features are those the policy in `dir` was trained on (its
/// `config.json`'s `input_features` and `output_features`, as LeRobot's policy would read them).
pub fn check_features(dir: &Path, features: &PolicyFeatures) -> Result<()> {
    let file = dir.join("config.json");
    let text = std::fs::read_to_string(&file).map_err(|e| Error::io(&file, e))?;
    let config: Value = serde_json::from_str(&text).map_err(|e| Error::Config(format!("{}: {e}", file.display())))?;
    let (inputs, outputs) = features_json(features);
    for (key, ours) in [("input_features", inputs), ("output_features", outputs)] {
        let theirs = config.get(key).cloned().unwrap_or(Value::Null);
        if !same_json(&theirs, &ours) {
            return Err(Error::Config(format!(
                "{}: the policy's `{key}` are {theirs}, this dataset's {ours}: the policy was trained on other \
                 features",
                file.display()
            )));
        }
    }
    Ok(())
}

/// `model` (built for `config`) with the weights of the pretrained policy in `dir`, loaded
/// strictly ([`load_lerobot_weights`]).
pub fn load_pretrained_policy<B: Backend>(
    model: DiffusionModel<B>,
    config: &DiffusionConfig,
    dir: &Path,
) -> Result<DiffusionModel<B>> {
    let file = dir.join("model.safetensors");
    let dict = read_state_dict(&file)?;
    load_lerobot_weights(model, config, &dict, &file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_compare_as_numbers() {
        assert!(same_json(&serde_json::json!({"a": [1.0, 2]}), &serde_json::json!({"a": [1, 2.0]})));
        assert!(!same_json(&serde_json::json!({"a": 1}), &serde_json::json!({"a": 1, "b": 2})));
        assert!(!same_json(&serde_json::json!("1"), &serde_json::json!(1)));
    }
}
