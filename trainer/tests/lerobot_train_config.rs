//! LeRobot 0.6.1's own `train_config.json` given to `--config_path`: the keys we implement
//! applied, those that would change training and that we lack refused by name, those that change
//! nothing here ignored with one line saying so.

mod common;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use trainer::lerobot::from_lerobot_train_config;
use trainer::{DiffusionConfig, Preset, TrainConfig};

use common::scratch;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/lerobot_export/train_config.json");
const DATASET: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/lerobot-0.6.1/pusht_images");

/// What `lerobot-train --dataset.repo_id=lerobot/pusht --policy.type=diffusion` saves.
fn lerobots() -> Value {
    serde_json::from_str(&std::fs::read_to_string(FIXTURE).unwrap()).unwrap()
}

fn read(value: &Value) -> trainer::Result<TrainConfig> {
    let ours = from_lerobot_train_config(value, Path::new("train_config.json"))?;
    TrainConfig::resolve(Some(ours.config), json!({}))
}

#[test]
fn lerobots_defaults_are_our_lerobot_preset() {
    let ours = from_lerobot_train_config(&lerobots(), Path::new(FIXTURE)).unwrap();
    for key in ["job_name", "wandb", "job", "eval", "dataset.video_backend", "optimizer", "scheduler"] {
        assert!(ours.ignored.iter().any(|k| k == key), "{key} not among the ignored: {:?}", ours.ignored);
    }
    let config = TrainConfig::resolve(Some(ours.config), json!({})).unwrap();
    assert_eq!(config.policy.config, DiffusionConfig::preset(Preset::Lerobot06));
    assert_eq!(config.dataset.repo_id.as_deref(), Some("lerobot/pusht"));
    assert_eq!(config.dataset.image_transforms, transforms::ImageTransformsConfig::default());
    let defaults = TrainConfig::defaults(Preset::Lerobot06);
    assert_eq!(
        (config.batch_size, config.steps, config.seed, config.num_workers, config.prefetch),
        (defaults.batch_size, defaults.steps, defaults.seed, defaults.num_workers, defaults.prefetch)
    );
    assert_eq!((config.log_freq, config.save_freq, config.eval_steps), (200, 20_000, 0));
    assert_eq!(config.output_dir, PathBuf::from("outputs/train/2026-01-01/12-00-00_diffusion"));
}

#[test]
fn what_it_sets_reaches_our_configuration() {
    let mut lerobots = lerobots();
    lerobots["batch_size"] = json!(64);
    lerobots["prefetch_factor"] = json!(2);
    lerobots["tolerance_s"] = json!(0.001);
    lerobots["dataset"]["episodes"] = json!([0, 2, 4]);
    lerobots["dataset"]["eval_split"] = json!(0.1);
    lerobots["eval_steps"] = json!(500);
    lerobots["dataset"]["image_transforms"]["enable"] = json!(true);
    lerobots["dataset"]["image_transforms"]["tfs"]["brightness"]["weight"] = json!(2.0);
    lerobots["policy"]["horizon"] = json!(16);
    lerobots["policy"]["crop_shape"] = json!([84, 84]);
    let config = read(&lerobots).unwrap();
    assert_eq!((config.batch_size, config.prefetch, config.dataset.tolerance_s), (64, 2, 0.001));
    assert_eq!(
        (config.dataset.episodes, config.dataset.eval_split, config.eval_steps),
        (Some(vec![0, 2, 4]), 0.1, 500)
    );
    let tfs = &config.dataset.image_transforms;
    assert!(tfs.enable);
    assert_eq!((tfs.tfs[0].name.as_str(), tfs.tfs[0].weight), ("brightness", 2.0));
    assert_eq!((config.policy.config.horizon, config.policy.config.crop_shape), (16, Some([84, 84])));

    // Without the policy's presets, LeRobot's optimizer and scheduler blocks are read.
    lerobots["use_policy_training_preset"] = json!(false);
    lerobots["optimizer"]["lr"] = json!(3e-4);
    lerobots["optimizer"]["grad_clip_norm"] = json!(1.0);
    lerobots["scheduler"]["num_warmup_steps"] = json!(100);
    let policy = read(&lerobots).unwrap().policy.config;
    assert_eq!((policy.optimizer_lr, policy.grad_clip_norm, policy.scheduler_warmup_steps), (3e-4, 1.0, 100));
}

#[test]
fn what_would_change_training_and_we_lack_is_refused_by_name() {
    let cases: [(&[&str], Value, &str); 8] = [
        (&["env"], json!({"type": "pusht"}), "`env` is"),
        (&["peft"], json!({"r": 16}), "`peft` is"),
        (&["save_checkpoint_to_hub"], json!(true), "`save_checkpoint_to_hub` is true"),
        (&["resume"], json!(true), "--resume"),
        (&["policy", "type"], json!("act"), "`policy.type` is \"act\""),
        (&["policy", "use_peft"], json!(true), "`policy.use_peft` is true"),
        (&["dataset", "streaming"], json!(true), "`dataset.streaming` is true"),
        (&["a_key_of_a_newer_lerobot"], json!(1), "`a_key_of_a_newer_lerobot` is not a key"),
    ];
    for (path, value, expected) in cases {
        let mut lerobots = lerobots();
        let mut at = &mut lerobots;
        for part in path {
            at = &mut at[*part];
        }
        *at = value;
        let err = read(&lerobots).unwrap_err().to_string();
        assert!(err.contains("train_config.json") && err.contains(expected), "{path:?}: {err}");
    }
    let mut lerobots = lerobots();
    lerobots["use_policy_training_preset"] = json!(false);
    lerobots["optimizer"] = json!({"type": "sgd", "lr": 0.01});
    assert!(read(&lerobots).unwrap_err().to_string().contains("only Adam"));
}

#[test]
fn the_trainer_takes_it_by_config_path_and_says_what_it_ignores() {
    let work = scratch("lerobot-train-config");
    std::fs::create_dir_all(&*work).unwrap();
    std::fs::write(work.join("train_config.json"), std::fs::read(FIXTURE).unwrap()).unwrap();
    // The folder holding it, as LeRobot's `--config_path` takes a pretrained_model/ folder.
    let output = common::trainer_command()
        .arg("--config_path")
        .arg(&*work)
        .args(["--dataset.root", DATASET, "--policy.down_dims", "64,128,256"])
        .args(["--policy.pretrained_backbone_weights", "none", "--dry-run", "--output_dir"])
        .arg(work.join("run"))
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{stderr}");
    let ignored = stderr.lines().find(|l| l.ends_with("change nothing here: ignored")).expect(&stderr);
    assert!(ignored.contains("wandb") && ignored.contains("job_name"), "{ignored}");
    let resolved: Value = serde_json::from_str(&stdout[stdout.find('{').expect("the configuration")..]).unwrap();
    assert_eq!(resolved["dataset"]["repo_id"], json!("lerobot/pusht"));
    assert_eq!(resolved["policy"]["horizon"], json!(64));
    assert_eq!(resolved["policy"]["down_dims"], json!([64, 128, 256]));
}
