//! LeRobot's own `train_config.json` (what `lerobot-train` saves beside each checkpoint's policy:
//! draccus's dump of LeRobot 0.6.1's `TrainPipelineConfig`) read as our configuration, for
//! `--config_path`. Each key is ours under another name, one whose value we must implement
//! (else refused by name), or one that changes nothing here (listed, so that the tool can say
//! so in one line). As `lerobot-train`, with `use_policy_training_preset` (the default) the
//! optimiser and scheduler come from the policy's own settings and the `optimizer` and
//! `scheduler` blocks are not read.

use std::path::Path;

use serde_json::{Map, Value, json};

use super::policy_path::{policy_section, same_json};
use crate::error::{Error, Result};
use crate::json_patch::set_key;

/// LeRobot's configuration read as ours.
#[derive(Debug, Clone, PartialEq)]
pub struct FromLerobot {
    /// Our configuration's keys (a JSON patch of the defaults).
    pub config: Value,
    /// LeRobot's keys that change nothing here, by dotted path.
    pub ignored: Vec<String>,
}

/// What becomes of one of LeRobot's keys.
enum Rule {
    /// Our key (a dotted path); `null` leaves our default.
    To(&'static str),
    /// Only this value is implemented; the text says what the key asks for.
    Must(Value, &'static str),
    /// Changes nothing here.
    Ignore,
}

/// The keys of `TrainPipelineConfig` but `dataset`, `policy`, `optimizer` and `scheduler`.
fn top_level_rule(key: &str) -> Option<Rule> {
    use Rule::{Ignore, Must, To};
    Some(match key {
        "env" => Must(Value::Null, "simulation rollouts (--env.type) are not implemented"),
        "reward_model" => Must(Value::Null, "reward-model training is not implemented"),
        "output_dir" => To("output_dir"),
        "resume" => Must(json!(false), "resume with `--resume OUTPUT_DIR`"),
        "seed" => To("seed"),
        "num_workers" => To("num_workers"),
        "batch_size" => To("batch_size"),
        "prefetch_factor" => To("prefetch"),
        "steps" => To("steps"),
        "log_freq" => To("log_freq"),
        "eval_steps" => To("eval_steps"),
        "max_eval_samples" => To("max_eval_samples"),
        "tolerance_s" => To("dataset.tolerance_s"),
        "save_checkpoint" => To("save_checkpoint"),
        "save_freq" => To("save_freq"),
        "peft" => Must(Value::Null, "PEFT (LoRA) fine-tuning is not implemented"),
        "save_checkpoint_to_hub" => Must(json!(false), "pushing checkpoints to the Hub is not implemented yet"),
        "sample_weighting" => Must(Value::Null, "weighted sampling (RA-BC) is not implemented"),
        "rename_map" => Must(json!({}), "renaming observations is not implemented"),
        "job_name"
        | "cudnn_deterministic"
        | "persistent_workers"
        | "dataloader_multiprocessing_context"
        | "env_eval_freq"
        | "eval"
        | "wandb"
        | "job"
        | "checkpoint_path"
        | "use_policy_training_preset" => Ignore,
        _ => return None,
    })
}

/// The keys of LeRobot's `DatasetConfig` but `image_transforms`.
fn dataset_rule(key: &str) -> Option<Rule> {
    use Rule::{Ignore, Must, To};
    Some(match key {
        "repo_id" => To("dataset.repo_id"),
        "root" => To("dataset.root"),
        "episodes" => To("dataset.episodes"),
        "revision" => To("dataset.revision"),
        "use_imagenet_stats" => To("dataset.use_imagenet_stats"),
        "eval_split" => To("dataset.eval_split"),
        "repo_type" => Must(json!("dataset"), "datasets in Hub buckets are not implemented"),
        "streaming" => Must(json!(false), "streaming from the Hub is not implemented"),
        "video_backend" | "return_uint8" | "depth_output_unit" => Ignore,
        _ => return None,
    })
}

/// Whether `value` is LeRobot's `train_config.json` rather than one of ours (its policy names
/// its type, ours never does).
pub fn is_lerobot_train_config(value: &Value) -> bool {
    value.pointer("/policy/type").is_some()
}

/// Our configuration for LeRobot's `train_config.json` `value`, read from `file` (named in
/// errors).
pub fn from_lerobot_train_config(value: &Value, file: &Path) -> Result<FromLerobot> {
    let refuse = |key: &str, why: String| Error::Config(format!("{}: `{key}` {why}", file.display()));
    let top = value.as_object().ok_or_else(|| refuse("", "is not a JSON object".into()))?;
    let mut ours = json!({"policy": {"preset": "lerobot-0.6"}});
    let mut ignored = Vec::new();
    for (key, value) in top {
        match key.as_str() {
            "dataset" => {
                let dataset = value.as_object().ok_or_else(|| refuse("dataset", "is not an object".into()))?;
                for (key, value) in dataset {
                    let path = format!("dataset.{key}");
                    if key == "image_transforms" {
                        set_key(&mut ours, "dataset.image_transforms", image_transforms(value, file)?);
                        continue;
                    }
                    let rule =
                        dataset_rule(key).ok_or_else(|| refuse(&path, "is not a key this trainer knows".into()))?;
                    apply(rule, path, value, &mut ours, &mut ignored, file)?;
                }
            }
            "policy" => {
                let policy = value.as_object().ok_or_else(|| refuse("policy", "is not an object".into()))?;
                for (key, value) in policy_section(policy, file, "policy.")? {
                    set_key(&mut ours, &format!("policy.{key}"), value);
                }
                if let Some(path) = policy.get("pretrained_path").filter(|p| !p.is_null()) {
                    set_key(&mut ours, "policy.path", path.clone());
                }
                // Where the trained policy goes: this run's, unlike a pretrained policy's own.
                for key in ["push_to_hub", "repo_id", "private"] {
                    if let Some(value) = policy.get(key).filter(|v| !v.is_null()) {
                        set_key(&mut ours, &format!("policy.{key}"), value.clone());
                    }
                }
            }
            "optimizer" | "scheduler" if uses_policy_preset(top) => ignored.push(key.clone()),
            "optimizer" => optimizer(value, file, &mut ours)?,
            "scheduler" => scheduler(value, file, &mut ours)?,
            _ => {
                let rule = top_level_rule(key).ok_or_else(|| refuse(key, "is not a key this trainer knows".into()))?;
                apply(rule, key.clone(), value, &mut ours, &mut ignored, file)?;
            }
        }
    }
    Ok(FromLerobot { config: ours, ignored })
}

/// Applies `rule` to LeRobot's key `path` of value `value`: into `ours`, onto `ignored`, or
/// refused.
fn apply(
    rule: Rule,
    path: String,
    value: &Value,
    ours: &mut Value,
    ignored: &mut Vec<String>,
    file: &Path,
) -> Result<()> {
    match rule {
        Rule::To(_) if value.is_null() => {}
        Rule::To(key) => set_key(ours, key, value.clone()),
        Rule::Must(expected, why) if !same_json(value, &expected) => {
            return Err(Error::Config(format!("{}: `{path}` is {value}: {why}", file.display())));
        }
        Rule::Must(..) => {}
        Rule::Ignore => ignored.push(path),
    }
    Ok(())
}

/// Whether the optimiser and scheduler are the policy's presets (`use_policy_training_preset`,
/// default true), as `TrainPipelineConfig.validate` decides.
fn uses_policy_preset(top: &Map<String, Value>) -> bool {
    top.get("use_policy_training_preset").and_then(Value::as_bool).unwrap_or(true)
}

/// Adam's settings from LeRobot's `optimizer` block (`"type": "adam"` only).
fn optimizer(value: &Value, file: &Path, ours: &mut Value) -> Result<()> {
    let refuse = |why: String| Error::Config(format!("{}: `optimizer` {why}", file.display()));
    if value.get("type") != Some(&json!("adam")) {
        return Err(refuse(format!("is {value}: only Adam (\"type\": \"adam\") is implemented")));
    }
    for (theirs, key) in [
        ("lr", "policy.optimizer_lr"),
        ("betas", "policy.optimizer_betas"),
        ("eps", "policy.optimizer_eps"),
        ("weight_decay", "policy.optimizer_weight_decay"),
        ("grad_clip_norm", "policy.grad_clip_norm"),
    ] {
        if let Some(v) = value.get(theirs).filter(|v| !v.is_null()) {
            set_key(ours, key, v.clone());
        }
    }
    Ok(())
}

/// The warm-up of LeRobot's `scheduler` block (diffusers' cosine schedule only).
fn scheduler(value: &Value, file: &Path, ours: &mut Value) -> Result<()> {
    let cosine = value.get("type") == Some(&json!("diffuser")) && value.get("name") == Some(&json!("cosine"));
    if !cosine {
        return Err(Error::Config(format!(
            "{}: `scheduler` is {value}: only diffusers' cosine schedule (\"type\": \"diffuser\", \"name\": \"cosine\") \
             is implemented",
            file.display()
        )));
    }
    if let Some(v) = value.get("num_warmup_steps").filter(|v| !v.is_null()) {
        set_key(ours, "policy.scheduler_warmup_steps", v.clone());
    }
    Ok(())
}

/// LeRobot's `image_transforms` (its `tfs` a map from name to transform) as ours (a list of
/// named transforms, in the map's order).
fn image_transforms(value: &Value, file: &Path) -> Result<Value> {
    let mut ours = value.clone();
    if let Some(tfs) = value.get("tfs") {
        let map = tfs.as_object().ok_or_else(|| {
            Error::Config(format!("{}: `dataset.image_transforms.tfs` is not an object", file.display()))
        })?;
        let list: Vec<Value> = map
            .iter()
            .map(|(name, tf)| {
                let mut tf = tf.clone();
                tf["name"] = Value::from(name.as_str());
                tf
            })
            .collect();
        ours["tfs"] = Value::Array(list);
    }
    Ok(ours)
}
