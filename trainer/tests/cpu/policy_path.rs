//! Fine-tuning a LeRobot pretrained policy (`--policy.path`, as `lerobot-train` takes it): the
//! hyper-parameters from its `config.json` (LeRobot's own, from `save_pretrained`), the run's
//! options over them, the weights from its `model.safetensors`, loaded strictly; what this trainer
//! cannot honour refused by file and key.

use crate::common;

use std::path::{Path, PathBuf};

use burn::backend::Flex;
use serde_json::{Value, json};
use trainer::{DiffusionConfig, PolicyRunner, Preset, TrainConfig, TrainData};

use crate::common::{scratch, tiny_config};

const DATASET: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/lerobot-0.6.1/pusht_images");

/// LeRobot 0.6.1's `config.json` for PushT with the classic settings (`save_pretrained`).
fn lerobots_config() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/lerobot_export/pusht_classic_config.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A pretrained-policy folder at `dir` holding `config` and a `model.safetensors` (not read by
/// the configuration: any bytes).
fn policy_folder(dir: &Path, config: &Value) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("config.json"), serde_json::to_string_pretty(config).unwrap()).unwrap();
    std::fs::write(dir.join("model.safetensors"), b"weights").unwrap();
    dir.to_path_buf()
}

fn resolve(overrides: Value) -> trainer::Result<TrainConfig> {
    TrainConfig::resolve(None, overrides)
}

#[test]
fn lerobots_config_json_gives_the_hyper_parameters_and_the_runs_options_win() {
    let work = scratch("policy-path-config");
    let dir = policy_folder(&work.join("pretrained_model"), &lerobots_config());
    // LeRobot's PushT settings are our classic preset's, whichever preset the run names.
    let config = resolve(json!({"policy": {"path": &dir, "preset": "lerobot-0.6"}})).unwrap();
    let expected = DiffusionConfig { pretrained_backbone_weights: None, ..DiffusionConfig::preset(Preset::Classic) };
    assert_eq!(config.policy.config, expected);
    assert_eq!(config.policy.path.as_deref(), Some(dir.as_path()));
    // A checkpoint folder holding the policy is taken too; an option given beside it wins.
    let config = resolve(json!({"policy": {"path": &*work, "horizon": 32}})).unwrap();
    assert_eq!((config.policy.config.horizon, config.policy.config.down_dims), (32, vec![512, 1024, 2048]));
    assert_eq!(config.policy.path.as_deref(), Some(dir.as_path()));
}

#[test]
fn what_this_trainer_cannot_honour_is_refused_by_file_and_key() {
    let work = scratch("policy-path-refusals");
    let cases: [(&str, Value, &str); 5] = [
        ("type", json!("act"), "`type` is \"act\""),
        ("vision_backbone", json!("resnet34"), "`vision_backbone` is \"resnet34\""),
        (
            "normalization_mapping",
            json!({"VISUAL": "IDENTITY", "STATE": "MIN_MAX", "ACTION": "MIN_MAX"}),
            "`normalization_mapping`",
        ),
        ("use_peft", json!(true), "`use_peft` is true"),
        ("a_key_of_a_newer_lerobot", json!(1), "`a_key_of_a_newer_lerobot` is not a key"),
    ];
    for (key, value, expected) in cases {
        let mut config = lerobots_config();
        config[key] = value;
        let dir = policy_folder(&work.join(key), &config);
        let err = resolve(json!({"policy": {"path": &dir}})).unwrap_err().to_string();
        assert!(err.contains(&dir.join("config.json").display().to_string()) && err.contains(expected), "{err}");
    }
    // LeRobot's informational keys change nothing.
    let mut config = lerobots_config();
    config["push_to_hub"] = json!(false);
    config["device"] = json!("cuda");
    resolve(json!({"policy": {"path": policy_folder(&work.join("informational"), &config)}})).unwrap();

    let no_weights = policy_folder(&work.join("no-weights"), &lerobots_config());
    std::fs::remove_file(no_weights.join("model.safetensors")).unwrap();
    let err = resolve(json!({"policy": {"path": &no_weights}})).unwrap_err().to_string();
    assert!(err.contains(&no_weights.join("model.safetensors").display().to_string()), "{err}");
    let err = resolve(json!({"policy": {"path": work.join("nothing-here")}})).unwrap_err().to_string();
    assert!(err.contains("no config.json"), "{err}");
}

#[test]
fn a_policy_trained_on_other_features_is_refused_naming_them() {
    let work = scratch("policy-path-features");
    let mut config = lerobots_config();
    config["input_features"]["observation.state"]["shape"] = json!([3]);
    let dir = policy_folder(&work.join("pretrained_model"), &config);
    let run = resolve(json!({"dataset": {"root": DATASET, "frame_cache": "off"}})).unwrap();
    let features = TrainData::open(&run).unwrap().features;
    trainer::lerobot::check_features(&dir, &features).expect_err("state of 3 against the dataset's 2");
    let err = trainer::lerobot::check_features(&dir, &features).unwrap_err().to_string();
    assert!(err.contains("input_features") && err.contains("config.json"), "{err}");
    config["input_features"]["observation.state"]["shape"] = json!([2]);
    policy_folder(&dir, &config);
    trainer::lerobot::check_features(&dir, &features).unwrap();
}

/// The weights of `dir/model.safetensors`, by name.
fn tensors(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut tensors: Vec<(String, Vec<u8>)> =
        file.tensors().into_iter().map(|(name, view)| (name, view.data().to_vec())).collect();
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    tensors
}

/// Exports the checkpoint in `output` as LeRobot's pretrained-policy folder `out`.
fn export(output: &Path, out: &Path) {
    let runner = PolicyRunner::<Flex>::load(output, 0, false, Default::default()).unwrap();
    let (config, features, normalizer) =
        (runner.config().clone(), runner.features().clone(), runner.normalizer().clone());
    trainer::lerobot::export(&runner.into_model(), &config, &features, &normalizer, out).unwrap();
}

#[test]
fn the_trainer_fine_tunes_from_the_pretrained_policys_weights() {
    let work = scratch("policy-path-fine-tune");
    // A pretrained policy: the tiny policy trained two steps on PushT's images. Its checkpoint
    // holds LeRobot's pretrained_model/, as `trainer export` writes it.
    let pretrained = work.join("pretrained");
    let config = tiny_config(Path::new(DATASET), &pretrained, 2, json!({"num_workers": 1}));
    trainer::train::<burn::backend::Autodiff<Flex>>(&config, None, Default::default(), |_| {}).unwrap();
    let exported = work.join("exported");
    export(&pretrained, &exported);
    let policy = trainer::checkpoint::resolve(&pretrained).unwrap().join("pretrained_model");
    assert_eq!(tensors(&policy), tensors(&exported));
    for file in ["config.json", "policy_preprocessor.json", "policy_postprocessor.json"] {
        let read = |dir: &Path| std::fs::read_to_string(dir.join(file)).unwrap();
        assert_eq!(read(&policy), read(&exported), "{file}");
    }

    // One step from the run's output folder at learning rate 0: no other policy option given,
    // so the U-Net's widths and the crop must come from its config.json for its weights to load,
    // and they come back unchanged.
    let fine_tuned = work.join("fine-tuned");
    let output = common::trainer_command()
        .args(["--dataset.root", DATASET, "--dataset.frame_cache", "off", "--policy.path"])
        .arg(&pretrained)
        .args(["--policy.optimizer_lr", "0", "--batch_size", "2", "--steps", "1", "--num_workers", "1"])
        .arg("--output_dir")
        .arg(&fine_tuned)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains(&format!("fine-tuning the pretrained policy in {}", policy.display())), "{stdout}");
    let after = trainer::checkpoint::resolve(&fine_tuned).unwrap().join("pretrained_model");
    let (before, after) = (tensors(&policy), tensors(&after));
    assert_eq!(before.len(), after.len());
    for ((name, a), (other, b)) in before.iter().zip(&after) {
        assert_eq!(name, other);
        assert!(a == b, "{name} changed");
    }
    // Without it, the checkpoint is ours alone.
    let bare = work.join("bare");
    let config = TrainConfig {
        save_lerobot_policy: false,
        ..tiny_config(Path::new(DATASET), &bare, 1, json!({"num_workers": 1}))
    };
    trainer::train::<burn::backend::Autodiff<Flex>>(&config, None, Default::default(), |_| {}).unwrap();
    assert!(!trainer::checkpoint::resolve(&bare).unwrap().join("pretrained_model").exists());
}

#[test]
fn a_hub_id_is_found_in_huggingface_hubs_cache_as_lerobot_train_finds_it() {
    // `lerobot-train --policy.path me/tiny-policy` downloads into huggingface_hub's cache; a
    // policy there already is taken without asking the Hub (offline here; downloads themselves
    // are tested against a local Hub in datasets/tests/hub.rs).
    let work = scratch("policy-path-hub-id");
    let commit = "0123456789abcdef0123456789abcdef01234567";
    let repo = work.join("hf-hub/models--me--tiny-policy");
    let mut config = lerobots_config();
    config["down_dims"] = json!([64, 128, 256]);
    let snapshot = policy_folder(&repo.join("snapshots").join(commit), &config);
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), commit).unwrap();
    let run = |cache: &Path| {
        common::trainer_command()
            .args(["--policy.path", "me/tiny-policy", "--dataset.root", DATASET, "--dry-run", "--output_dir"])
            .arg(work.join("run"))
            .env("HF_HUB_CACHE", cache)
            .env("HF_HUB_OFFLINE", "1")
            .output()
            .unwrap()
    };
    let output = run(&work.join("hf-hub"));
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("policy me/tiny-policy: ") && stderr.contains("revision main, downloaded before"),
        "{stderr}"
    );
    let resolved: Value = serde_json::from_str(&stdout[stdout.find('{').unwrap()..]).unwrap();
    assert_eq!(resolved["policy"]["path"], json!(snapshot));
    assert_eq!(resolved["policy"]["down_dims"], json!([64, 128, 256]));

    // Nothing cached and the Hub out of reach: the error says so.
    let output = run(&work.join("empty"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && stderr.contains("model me/tiny-policy: HF_HUB_OFFLINE is set"), "{stderr}");
}
