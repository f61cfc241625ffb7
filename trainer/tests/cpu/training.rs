//! Training on a real (synthetic, AV1-encoded) LeRobot dataset: the loss falls, a resumed run
//! ends bit-identical to an uninterrupted one, checkpoints are atomic, and a trained checkpoint
//! predicts actions through LeRobot's queues and through `trainer sample`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use burn::backend::{Autodiff, Flex};
use serde_json::json;
use trainer::checkpoint::{self, CheckpointContents, TrainingState};
use trainer::{PolicyRunner, StepObservation, TrainConfig, train};

type Backend = Autodiff<Flex>;

use crate::common;

use crate::common::{one_sample, scratch, scratch_path, tiny_config, write_synth};

/// A small PushT-like dataset (3 episodes of 20 frames, 96×96 AV1), written once per test run.
fn dataset() -> &'static Path {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| write_synth(&scratch_path("trainer-training-synth")))
}

/// The tiny policy on [`dataset`].
fn tiny(output: &Path, steps: usize, extra: serde_json::Value) -> TrainConfig {
    tiny_config(dataset(), output, steps, extra)
}

#[test]
fn the_loss_falls_on_a_synthetic_dataset() {
    let out = scratch("loss-falls");
    let policy = json!({"down_dims": [64, 128, 256], "diffusion_step_embed_dim": 64});
    let config = tiny(&out, 60, json!({"policy": policy, "batch_size": 8, "log_freq": 10, "save_checkpoint": false}));
    let outcome = train::<Backend>(&config, None, Default::default(), |_| {}).unwrap();
    let (first, last) = (outcome.losses[0].1, outcome.losses.last().unwrap().1);
    assert!(last < 0.6 * first, "loss {first} → {last}: {:?}", outcome.losses);
    // Metrics went to the CSV file and the TensorBoard event file.
    let csv = std::fs::read_to_string(out.join("metrics.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 6, "{csv}");
    let events: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("events.out.tfevents"))
        .collect();
    assert_eq!(events.len(), 1);
}

fn file_bytes(dir: &Path, name: &str) -> Vec<u8> {
    std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{}: {e}", dir.join(name).display()))
}

#[test]
fn a_resumed_run_ends_bit_identical_to_an_uninterrupted_one() {
    // 39 sampleable frames at batch 4: an epoch is 10 steps, so the 12 steps cross into the
    // second epoch after the resume point.
    let whole = scratch("resume-whole");
    let config = tiny(&whole, 12, json!({"save_freq": 6, "ema": {"enable": true}}));
    train::<Backend>(&config, None, Default::default(), |_| {}).unwrap();

    let resumed = scratch("resume-second-half");
    let second = TrainConfig { output_dir: resumed.to_path_buf(), ..config.clone() };
    let mut lines = Vec::new();
    let outcome = train::<Backend>(&second, Some(&whole.join("checkpoints/000006")), Default::default(), |p| {
        if let trainer::Progress::Line(l) = p {
            lines.push(l.to_string());
        }
    })
    .unwrap();
    assert_eq!(outcome.steps, 12);
    assert!(lines.iter().any(|l| l.contains("resuming from") && l.contains("at step 6")), "{lines:?}");

    let (a, b) = (whole.join("checkpoints/000012"), resumed.join("checkpoints/000012"));
    assert!(file_bytes(&a, "model.mpk") == file_bytes(&b, "model.mpk"), "model weights differ after resume");
    assert!(file_bytes(&a, "ema.mpk") == file_bytes(&b, "ema.mpk"), "EMA weights differ after resume");
    // The optimiser record is a hash map (its bytes depend on iteration order): compare what
    // it does instead. Two more steps from each must give identical weights again.
    let (continue_whole, continue_resumed) = (scratch("continue-whole"), scratch("continue-resumed"));
    for (from, out) in [(&a, &continue_whole), (&b, &continue_resumed)] {
        let more = TrainConfig { steps: 14, output_dir: out.to_path_buf(), ..config.clone() };
        train::<Backend>(&more, Some(from), Default::default(), |_| {}).unwrap();
    }
    let (ca, cb) = (continue_whole.join("checkpoints/000014"), continue_resumed.join("checkpoints/000014"));
    assert!(file_bytes(&ca, "model.mpk") == file_bytes(&cb, "model.mpk"), "optimiser states differ after resume");
    let (sa, sb): (TrainingState, TrainingState) = (
        checkpoint::read_json(&a, "training_state.json").unwrap(),
        checkpoint::read_json(&b, "training_state.json").unwrap(),
    );
    assert_eq!(sa, sb);
    // And the run did change the weights: the step-6 model differs from the step-12 one.
    assert!(file_bytes(&whole.join("checkpoints/000006"), "model.mpk") != file_bytes(&a, "model.mpk"));
    // Resuming with another seed is refused rather than silently diverging.
    let other_out = scratch("resume-other-seed");
    let other = TrainConfig { seed: 8, output_dir: other_out.to_path_buf(), ..config };
    let err = train::<Backend>(&other, Some(&whole), Default::default(), |_| {}).unwrap_err();
    assert!(err.to_string().contains("seed 7"), "{err}");
}

#[test]
fn a_failed_checkpoint_write_leaves_the_previous_one_intact() {
    let out = scratch("atomic");
    let config = tiny(&out, 2, json!({"save_freq": 1}));
    train::<Backend>(&config, None, Default::default(), |_| {}).unwrap();
    let root = out.join("checkpoints");
    assert_eq!(std::fs::read_to_string(root.join("last")).unwrap().trim(), "000002");
    let mut files: Vec<String> = std::fs::read_dir(root.join("000002"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "config.json",
            "features.json",
            "model.mpk",
            "normalizer.json",
            "optimizer.mpk",
            "pretrained_model",
            "training_state.json"
        ]
    );

    // A write that fails half-way (here: the optimiser record, as on a full disk).
    let runner = PolicyRunner::<Flex>::load(&out, 0, false, Default::default()).unwrap();
    let model = runner.into_model();
    let state =
        TrainingState { step: 3, ..checkpoint::read_json(&root.join("000002"), "training_state.json").unwrap() };
    let contents = CheckpointContents {
        state: &state,
        config: &json!({}),
        normalizer: &checkpoint::read_json(&root.join("000002"), "normalizer.json").unwrap(),
        features: &checkpoint::read_json(&root.join("000002"), "features.json").unwrap(),
    };
    let err = checkpoint::save::<Flex, _>(&out, &model, &contents, |_| {
        Err(trainer::Error::checkpoint("optimizer.mpk", "No space left on device"))
    })
    .unwrap_err();
    assert!(err.to_string().contains("No space left"), "{err}");
    let left: Vec<String> =
        std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(!left.iter().any(|n| n.starts_with(".tmp") || n == "000003"), "{left:?}");
    assert_eq!(std::fs::read_to_string(root.join("last")).unwrap().trim(), "000002");
    assert_eq!(checkpoint::resolve(&out).unwrap(), root.join("000002"));
}

fn trained_checkpoint() -> &'static Path {
    static OUT: OnceLock<PathBuf> = OnceLock::new();
    OUT.get_or_init(|| {
        // Shared by several tests, so kept (a static is never dropped).
        let out = scratch("trained").to_path_buf();
        train::<Backend>(&tiny(&out, 3, json!({})), None, Default::default(), |_| {}).unwrap();
        out
    })
}

/// Frame `index` of the dataset as one environment step's observation.
fn step_observation(index: usize) -> StepObservation {
    let dataset = datasets::Dataset::open(dataset()).unwrap();
    let mut decoders = datasets::DecoderCache::default();
    let sample =
        dataset.get(index, &datasets::WindowSpec::default(), &mut decoders, datasets::FrameFormat::Uint8).unwrap();
    let state = match &sample.tensors["observation.state"].values {
        datasets::Values::F32(v) => v.clone(),
        other => panic!("{other:?}"),
    };
    let image = match &sample.tensors["observation.image"].values {
        datasets::Values::U8(v) => v.clone(),
        other => panic!("{other:?}"),
    };
    StepObservation { state, images: vec![image], env_state: None }
}

#[test]
fn select_action_runs_lerobots_queues() {
    let device = Default::default();
    let mut runner = PolicyRunner::<Flex>::load(trained_checkpoint(), 11, false, device).unwrap();
    let n_action_steps = runner.config().n_action_steps;
    assert_eq!(n_action_steps, 8);
    let first = runner.select_action(step_observation(0)).unwrap();
    assert_eq!(first.len(), 2);
    // One chunk of 8 actions was generated; the other 7 are queued.
    assert_eq!(runner.queued_actions(), 7);
    for i in 1..8 {
        runner.select_action(step_observation(i)).unwrap();
        assert_eq!(runner.queued_actions(), 7 - i);
    }
    runner.select_action(step_observation(8)).unwrap();
    assert_eq!(runner.queued_actions(), 7, "an empty queue triggers a new chunk");

    // The first action is the first of the chunk predicted from the first observation repeated
    // n_obs_steps times, with the same noise.
    let mut fresh = PolicyRunner::<Flex>::load(trained_checkpoint(), 11, false, device).unwrap();
    let obs = step_observation(0);
    let state: Vec<f32> = obs.state.repeat(2);
    let frames: Vec<u8> = obs.images[0].repeat(2);
    let shape = fresh.features().cameras[0].1;
    let chunk: Vec<f32> =
        fresh.predict_chunk(&one_sample(&state, &frames, shape)).unwrap().into_data().to_vec().unwrap();
    assert_eq!(chunk.len(), 8 * 2);
    assert_eq!(&chunk[..2], first.as_slice());
    runner.reset();
    assert_eq!(runner.queued_actions(), 0);
}

#[test]
fn trainer_sample_writes_unnormalised_action_chunks() {
    let dir = scratch("sample-cli");
    let out = dir.join("actions.safetensors");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let status = common::trainer_command()
        .args(["sample", "--checkpoint"])
        .arg(trained_checkpoint())
        .arg("--root")
        .arg(dataset())
        .args(["--indices", "0,5,17,41", "--out"])
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    let bytes = std::fs::read(&out).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let action = file.tensor("action").unwrap();
    assert_eq!(action.shape(), [4, 8, 2]);
    let values: Vec<f32> = action.data().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
    // Clipped to [-1, 1] in normalised space, then unnormalised: inside the dataset's range.
    let dataset = datasets::Dataset::open(dataset()).unwrap();
    let stats = &dataset.stats()["action"];
    let (min, max) = (&stats.get("min").unwrap().values, &stats.get("max").unwrap().values);
    for (i, v) in values.iter().enumerate() {
        let d = i % 2;
        assert!(
            v.is_finite() && f64::from(*v) >= min[d] - 1e-3 && f64::from(*v) <= max[d] + 1e-3,
            "action {i} = {v} outside [{}, {}]",
            min[d],
            max[d]
        );
    }
    assert_eq!(file.tensor("index").unwrap().shape(), [4]);
}

#[test]
fn trainer_export_writes_lerobots_pretrained_policy_files() {
    let out = scratch("export-cli");
    let (ok, _, stderr) = run_trainer(&[
        "export",
        "--checkpoint",
        trained_checkpoint().to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{stderr}");
    let bytes = std::fs::read(out.join("model.safetensors")).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    // The trained weights, in PyTorch's layout: Linear transposed, Conv1d `[out, in, k]`.
    let runner = PolicyRunner::<Flex>::load(trained_checkpoint(), 0, true, Default::default()).unwrap();
    let config = runner.config().clone();
    let model = runner.into_model();
    let floats = |name: &str| -> (Vec<usize>, Vec<f32>) {
        let t = file.tensor(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        (t.shape().to_vec(), t.data().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect())
    };
    let values = |t: burn::tensor::Tensor<Flex, 2>| t.into_data().to_vec::<f32>().unwrap();
    let (shape, out_weight) = floats("diffusion.rgb_encoder.out.weight");
    assert_eq!(shape, [64, 64]);
    assert_eq!(out_weight, values(model.rgb_encoder[0].out.weight.val().transpose()));
    let (shape, final_conv) = floats("diffusion.unet.final_conv.1.weight");
    assert_eq!(shape, [2, 16, 1]);
    assert_eq!(final_conv, values(model.unet.final_conv.weight.val()));
    assert_eq!(file.names().len(), trainer::lerobot::lerobot_state_dict(&model, &config, false).len());
    for name in ["config.json", "policy_preprocessor.json", "policy_postprocessor.json"] {
        let text = std::fs::read_to_string(out.join(name)).unwrap();
        serde_json::from_str::<serde_json::Value>(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    // The processors' statistics: min and max of the state and the action (MIN_MAX), ImageNet
    // mean and std for the camera (MEAN_STD with use_imagenet_stats).
    let bytes = std::fs::read(out.join("policy_preprocessor_step_3_normalizer_processor.safetensors")).unwrap();
    let stats = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut names: Vec<&str> = stats.names();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "action.max",
            "action.min",
            "observation.image.mean",
            "observation.image.std",
            "observation.state.max",
            "observation.state.min"
        ]
    );
}

fn run_trainer(args: &[&str]) -> (bool, String, String) {
    let output = common::trainer_command().args(args).output().unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn dry_run_prints_lerobots_parameter_count_and_the_resolved_config() {
    let out = scratch("dry-run");
    let config_file = out.join("config.toml");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(&config_file, "batch_size = 16\n[policy]\nhorizon = 32\n").unwrap();
    let root = dataset().to_str().unwrap();
    let (ok, stdout, stderr) = run_trainer(&[
        "--dataset.root",
        root,
        "--dry-run",
        "--config_path",
        config_file.to_str().unwrap(),
        "--policy.n_action_steps",
        "4",
        "--output_dir",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{stderr}");
    assert_eq!(stdout.lines().next(), Some("num_learnable_params=262709026 (263M)"));
    let resolved: serde_json::Value = serde_json::from_str(stdout.split_once('\n').unwrap().1).unwrap();
    assert_eq!(
        (
            resolved["batch_size"].as_u64(),
            resolved["policy"]["horizon"].as_u64(),
            resolved["policy"]["n_action_steps"].as_u64()
        ),
        (Some(16), Some(32), Some(4))
    );
    assert!(out.join("train_config.json").exists());

    // A misspelt key and a bad preset are errors, not silent defaults.
    std::fs::write(&config_file, "[policy]\nhorizn = 32\n").unwrap();
    let (ok, _, stderr) = run_trainer(&[
        "--dataset.root",
        root,
        "--dry-run",
        "--config_path",
        config_file.to_str().unwrap(),
        "--output_dir",
        out.to_str().unwrap(),
    ]);
    assert!(!ok && stderr.contains("policy.horizn"), "{stderr}");
    let (ok, _, stderr) = run_trainer(&["--dataset.root", root, "--dry-run", "--policy.preset", "lerobot-9"]);
    assert!(!ok && stderr.contains("lerobot-9"), "{stderr}");
    // A horizon the U-Net cannot halve three times is refused with the reason.
    let (ok, _, stderr) = run_trainer(&[
        "--dataset.root",
        root,
        "--dry-run",
        "--policy.horizon",
        "12",
        "--output_dir",
        out.to_str().unwrap(),
    ]);
    assert!(!ok && stderr.contains("horizon 12"), "{stderr}");
}

#[test]
fn dry_run_finds_a_repo_id_where_lerobot_keeps_it_and_never_asks_the_hub_offline() {
    let home = scratch("lerobot-home");
    let root = write_synth(&home.join("lerobot/pusht_fake"));
    let out = scratch("dry-run-repo-id");
    let run = |repo_id: &str| {
        common::trainer_command()
            .args(["--dataset.repo_id", repo_id, "--dataset.episodes", "0,2..3", "--dry-run", "--output_dir"])
            .arg(&out)
            .env("HF_LEROBOT_HOME", &home)
            .env("HF_HUB_OFFLINE", "1")
            .output()
            .unwrap()
    };
    let output = run("lerobot/pusht_fake");
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("in HF_LEROBOT_HOME"), "{stderr}");
    assert_eq!(stdout.lines().next(), Some("num_learnable_params=262709026 (263M)"));
    let resolved: serde_json::Value = serde_json::from_str(stdout.split_once('\n').unwrap().1).unwrap();
    assert_eq!(resolved["dataset"]["root"].as_str(), root.to_str());
    assert_eq!(resolved["dataset"]["repo_id"].as_str(), Some("lerobot/pusht_fake"));
    assert_eq!(resolved["dataset"]["episodes"], serde_json::json!([0, 2]));

    let output = run("lerobot/not_here");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("lerobot/not_here") && stderr.contains("HF_HUB_OFFLINE"), "{stderr}");
}

#[test]
fn only_the_episodes_asked_for_are_sampled() {
    let out = scratch("episodes");
    let config = tiny(&out, 1, json!({"dataset": {"episodes": [0, 2]}}));
    let data = trainer::TrainData::open(&config).unwrap();
    let mut seen = std::collections::BTreeSet::new();
    // Two epochs' worth of batches: 2 episodes of 20 frames, less the 7 last of each, by 8.
    for batch in data.loader(&config, Default::default()).unwrap().take(8) {
        let batch = batch.unwrap();
        seen.extend(batch.indices().iter().map(|&i| data.datasets.parts()[0].episode_of(i).unwrap().index));
    }
    assert_eq!(seen.into_iter().collect::<Vec<_>>(), vec![0, 2]);

    let config = tiny(&out, 1, json!({"dataset": {"episodes": [7]}}));
    let data = trainer::TrainData::open(&config).unwrap();
    let error = data.loader(&config, Default::default()).err().expect("episode 7 of 3 refused").to_string();
    assert!(error.contains("episode 7"), "{error}");
}

#[test]
fn a_run_on_some_episodes_needs_only_their_files() {
    // As `--dataset.repo_id ... --dataset.episodes 0,2` downloads it: the metadata and the files
    // of episodes 0 and 2, each in files of its own; episode 1's are not there.
    let root = scratch_path("some-episodes-dataset");
    let _ = std::fs::remove_dir_all(&root);
    let synth = datasets::synth::SynthConfig {
        episodes: 3,
        min_length: 20,
        max_length: 20,
        episodes_per_file: Some(1),
        ..Default::default()
    };
    datasets::synth::write_dataset(&root, &synth).unwrap();
    let whole = datasets::Dataset::open(&root).unwrap();
    let episode = &whole.episodes()[1];
    for file in std::iter::once(&episode.data_file).chain(episode.videos.iter().map(|v| &v.file)) {
        std::fs::remove_file(root.join(file)).unwrap();
    }
    let out = scratch("some-episodes");
    let config = |episodes: serde_json::Value| {
        let extra = json!({"dataset": {"episodes": episodes, "frame_cache": "auto"}, "save_checkpoint": false});
        tiny_config(&root, &out, 2, extra)
    };
    let mut lines = Vec::new();
    let outcome = train::<Backend>(&config(json!([0, 2])), None, Default::default(), |p| {
        if let trainer::Progress::Line(l) = p {
            lines.push(l.to_string());
        }
    })
    .unwrap();
    assert_eq!(outcome.losses.last().map(|l| l.0), Some(2));
    assert!(
        lines.iter().any(|l| l.contains("frame cache: off, the dataset was opened with some episodes only")),
        "{lines:#?}"
    );
    let error =
        trainer::TrainData::open(&config(json!([0, 1]))).err().expect("episode 1's files are missing").to_string();
    assert!(error.contains("file-001"), "{error}");
}

#[test]
fn the_blocks_order_reaches_the_loader_and_a_run_resumes_only_in_it() {
    let out = scratch("blocks-order");
    let blocks = json!({"sampler": {"order": "blocks", "block_episodes": 1}, "save_freq": 2});
    let config = tiny(&out, 2, blocks);
    let data = trainer::TrainData::open(&config).unwrap();
    // Windows of one episode (13 anchors) in batches of 4: the first three batches of an epoch
    // come from one episode, and no batch from more than two.
    let episodes: Vec<std::collections::BTreeSet<usize>> = data
        .loader(&config, Default::default())
        .unwrap()
        .take(10)
        .map(|batch| {
            batch.unwrap().indices().iter().map(|&i| data.datasets.parts()[0].episode_of(i).unwrap().index).collect()
        })
        .collect();
    assert!(episodes[..3].iter().all(|e| e.len() == 1 && *e == episodes[0]), "{episodes:?}");
    assert!(episodes.iter().all(|e| e.len() <= 2), "{episodes:?}");

    train::<Backend>(&config, None, Default::default(), |_| {}).unwrap();
    let state: TrainingState = checkpoint::read_json(&out.join("checkpoints/000002"), "training_state.json").unwrap();
    assert_eq!(state.sampler_order, config.sampler);
    let resumed_out = scratch("blocks-order-resumed");
    let lerobot_order = tiny(&resumed_out, 4, json!({}));
    let error = train::<Backend>(&lerobot_order, Some(&out), Default::default(), |_| {}).unwrap_err().to_string();
    assert!(error.contains("sampler order"), "{error}");
}

#[test]
fn a_streamed_run_trains_as_the_same_run_on_the_folder() {
    // The dataset's folder served as a store (object_store's file://), read through a video
    // buffer far smaller than its videos: the same samples, so the same losses to the bit.
    let blocks = json!({"sampler": {"order": "blocks", "block_episodes": 2}, "save_checkpoint": false});
    let local_out = scratch("streamed-local");
    let local = train::<Backend>(&tiny(&local_out, 4, blocks.clone()), None, Default::default(), |_| {}).unwrap();
    let url = PathBuf::from(format!("file://{}", dataset().display()));
    let mut streaming = blocks;
    streaming["dataset"] = json!({"streaming": true, "streaming_buffer_gb": 20e-6});
    let streamed_out = scratch("streamed");
    let config = tiny_config(&url, &streamed_out, 4, streaming);
    let streamed = train::<Backend>(&config, None, Default::default(), |_| {}).unwrap();
    assert_eq!(streamed.losses, local.losses);

    let with_cache =
        tiny_config(&url, &streamed_out, 4, json!({"dataset": {"streaming": true, "frame_cache": "/tmp/x"}}));
    let error = trainer::TrainData::open(&with_cache).err().expect("a frame cache folder is refused").to_string();
    assert!(error.contains("dataset.streaming"), "{error}");
}

/// Every camera frame of a loader's first epoch over `root` (batches of 16, Diffusion
/// Policy's windows), as RGB levels: those it hands over, or its YUV planes converted on the
/// device (Flex).
fn epoch_frames(root: &Path, encoding: datasets::FrameEncoding) -> Vec<f32> {
    use transforms::{frames_to_float, yuv420_frames_to_float};
    let dataset = std::sync::Arc::new(datasets::Dataset::open(root).unwrap());
    let deltas = datasets::diffusion_delta_timestamps(dataset.info(), 2, 16);
    let windows = datasets::WindowSpec::from_delta_timestamps(&deltas, dataset.info(), 1e-4).unwrap();
    let loader = loader::Loader::builder(dataset.clone())
        .batch_size(16)
        .windows(windows)
        .shuffle(false)
        .max_epochs(1)
        .frame_encoding(encoding)
        .build()
        .unwrap();
    let key = dataset.info().video_keys()[0].as_str().to_string();
    let key = key.as_str();
    let mut levels = Vec::new();
    for batch in loader {
        let batch = batch.unwrap();
        let field = batch.layout().field(key).unwrap();
        let (frame, n) = (field.frame.unwrap(), batch.len() * field.steps());
        let (h, w) = (frame.height, frame.width);
        let bytes = batch.u8(key).unwrap();
        let rgb = match encoding {
            datasets::FrameEncoding::Rgb => frames_to_float::<Flex>(bytes, [n, 3, h, w], &Default::default()),
            datasets::FrameEncoding::Yuv420 => yuv420_frames_to_float::<Flex>(bytes, n, (h, w), &Default::default()),
        };
        levels.extend(rgb.mul_scalar(255.0).round().into_data().to_vec::<f32>().unwrap());
    }
    levels
}

#[test]
fn the_devices_yuv_conversion_is_the_decoders_for_every_value() {
    // Luma running through every value, under 256 rows of chroma samples holding every (U, V)
    // pair: each term of the conversion meets all its inputs. A width that is a multiple of 8
    // (FFmpeg's vector converter) and one that is not.
    for (h, w) in [(512, 512), (512, 508)] {
        let (ch, cw) = (h / 2, w / 2);
        let mut planes = vec![0u8; h * w + 2 * ch * cw];
        for (k, y) in planes[..h * w].iter_mut().enumerate() {
            *y = ((k % w + 3 * (k / w)) % 256) as u8;
        }
        for k in 0..ch * cw {
            planes[h * w + k] = (k % cw) as u8;
            planes[h * w + ch * cw + k] = (k / cw) as u8;
        }
        let mut decoders = vec![0u8; 3 * h * w];
        datasets::video::yuv420_to_chw(&planes, h, w, &mut decoders).unwrap();
        let device = transforms::yuv420_frames_to_float::<Flex>(&planes, 1, (h, w), &Default::default());
        let device: Vec<f32> = device.mul_scalar(255.0).round().into_data().to_vec().unwrap();
        let differing = device.iter().zip(&decoders).filter(|(d, s)| **d != f32::from(**s)).count();
        assert_eq!(differing, 0, "{h}x{w}: of {} values", device.len());
    }
}

#[test]
fn yuv_frames_converted_on_the_device_are_lerobots_to_the_bit() {
    // A dataset LeRobot 0.6.1 wrote (PushT renders, AV1): our RGB frames are LeRobot's to the
    // bit (datasets/tests/conformance.rs), and so are the YUV planes converted on the device.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/lerobot-0.6.1/pusht_mini");
    let (rgb, yuv) =
        (epoch_frames(&root, datasets::FrameEncoding::Rgb), epoch_frames(&root, datasets::FrameEncoding::Yuv420));
    assert_eq!(rgb.len(), yuv.len());
    let differences: Vec<f32> = rgb.iter().zip(&yuv).map(|(a, b)| (a - b).abs()).collect();
    let largest = differences.iter().copied().fold(0.0, f32::max);
    let differing = differences.iter().filter(|&&d| d > 0.0).count();
    let share = differing as f64 / differences.len() as f64;
    println!(
        "yuv420 against LeRobot's frames: {differing} of {} values differ ({:.2}%), by at most {largest}",
        differences.len(),
        100.0 * share
    );
    assert_eq!(differing, 0, "{:.2}% of the values differ, by at most {largest}", 100.0 * share);
}

/// Training on YUV frames converted on the device gives the run of RGB frames, step for step,
/// whether the planes come from the videos or from a frame cache that stores them.
#[test]
fn a_run_trains_on_yuv_frames_as_on_rgb_ones_from_the_videos_or_a_yuv_frame_cache() {
    // Crops of 64x64, so that the loss depends on the frames (see the next test).
    let losses = |name: &str, dataset: serde_json::Value| {
        let out = scratch(name);
        let policy = json!({"crop_shape": [64, 64]});
        let config =
            tiny(&out, 2, json!({"dataset": dataset, "policy": policy, "save_checkpoint": false, "log_freq": 1}));
        train::<Backend>(&config, None, Default::default(), |_| {}).unwrap().losses
    };
    let rgb = losses("yuv-rgb", json!({"frame_encoding": "rgb"}));
    let yuv = losses("yuv-yuv", json!({"frame_encoding": "yuv420"}));
    assert_eq!(rgb.len(), 2);
    // The same samples, noise and crops, and the same frames once on the device.
    assert_eq!(rgb, yuv);

    let dataset = datasets::Dataset::open(dataset()).unwrap();
    let yuv_cache = scratch("yuv-cache");
    let format = datasets::frame_cache::CacheFormat::encoded(datasets::FrameEncoding::Yuv420);
    datasets::frame_cache::write_frame_cache(&dataset, &yuv_cache, &format, &|_| {}).unwrap();
    let cached = losses("yuv-cached", json!({"frame_encoding": "yuv420", "frame_cache": &*yuv_cache}));
    assert_eq!(cached, yuv);

    // `auto` (the default) reads the encoding the cache stores, even on the CPU.
    let auto = losses("yuv-cached-auto", json!({"frame_cache": &*yuv_cache}));
    assert_eq!(auto, rgb);

    let rgb_cache = scratch("rgb-cache");
    datasets::frame_cache::write_frame_cache(&dataset, &rgb_cache, &Default::default(), &|_| {}).unwrap();
    let out = scratch("yuv-refused");
    let config = tiny(&out, 1, json!({"dataset": {"frame_encoding": "yuv420", "frame_cache": &*rgb_cache}}));
    let error = train::<Backend>(&config, None, Default::default(), |_| {}).unwrap_err().to_string();
    assert!(error.contains("holds rgb frames, not the yuv420 asked for"), "{error}");
}

/// With the frame caches' frames kept on the device (`frames_on_device on`; `auto` leaves them
/// on the host on the CPU), the loader hands over each frame's row, and a run trains step for
/// step as one whose loader copies the frames, from an RGB cache and from a YUV one; `on`
/// without a frame cache is refused, saying why.
#[test]
fn a_run_with_its_frames_on_the_device_trains_as_one_that_copies_them() {
    let dataset = datasets::Dataset::open(dataset()).unwrap();
    let rgb = scratch("device-frames-rgb-cache");
    datasets::frame_cache::write_frame_cache(&dataset, &rgb, &Default::default(), &|_| {}).unwrap();
    let yuv = scratch("device-frames-yuv-cache");
    let planes = datasets::frame_cache::CacheFormat::encoded(datasets::FrameEncoding::Yuv420);
    datasets::frame_cache::write_frame_cache(&dataset, &yuv, &planes, &|_| {}).unwrap();
    // Crops of 64x64 leave the encoder a 2x2 feature map, whose keypoints depend on the frames
    // (the tiny policy's 32x32 crops leave one position, the same keypoint whatever the frame).
    let config = |name: &str, dataset: serde_json::Value| {
        let policy = json!({"crop_shape": [64, 64]});
        tiny(&scratch(name), 3, json!({"dataset": dataset, "policy": policy, "save_checkpoint": false, "log_freq": 1}))
    };
    let run = |config: &TrainConfig| {
        let mut lines = Vec::new();
        let outcome = train::<Backend>(config, None, Default::default(), |p| {
            if let trainer::Progress::Line(l) = p {
                lines.push(l.to_string());
            }
        });
        (outcome.unwrap().losses, lines)
    };
    for cache in [&*rgb, &*yuv] {
        let (copied, lines) = run(&config("device-frames-copied", json!({"frame_cache": cache})));
        assert!(!lines.iter().any(|l| l.starts_with("frames on the device")), "auto on the CPU: {lines:#?}");
        let on = config("device-frames-gathered", json!({"frame_cache": cache, "frames_on_device": "on"}));
        let (gathered, lines) = run(&on);
        assert_eq!(copied.len(), 3);
        assert_eq!(gathered, copied, "from {}", cache.display());
        assert!(lines.iter().any(|l| l.starts_with("frames on the device: the camera's")), "{lines:#?}");
        assert!(lines.iter().any(|l| l.contains("GB uploaded in")), "{lines:#?}");

        let mut data = trainer::TrainData::open(&on).unwrap();
        data.settle_frames_on_device::<Flex>(&on, &Default::default(), &mut |_| {}).unwrap();
        let batch = data.loader(&on, Default::default()).unwrap().next().unwrap().unwrap();
        let rows = batch.frame_rows("observation.image").expect("the frames come as their rows");
        assert_eq!(rows.len(), 2 * batch.len(), "two observation steps a sample");
        assert!(batch.u8("observation.image").is_none());
    }

    let off = config("device-frames-no-cache", json!({"frames_on_device": "on"}));
    let error = train::<Backend>(&off, None, Default::default(), |_| {}).unwrap_err().to_string();
    assert!(error.contains("not every dataset is read from a frame cache"), "{error}");
}

/// With two datasets, each with its automatic frame cache, the frames gathered on the device by
/// their rows (the datasets' cached frames end to end) give every batch the training inputs of
/// the frames the loader copies, bit for bit, samples of both datasets among them.
#[test]
fn frames_of_two_datasets_gathered_on_the_device_are_the_frames_the_loader_copies() {
    use trainer::{InputPipeline, Mode};
    let second = scratch("device-frames-second");
    let synth =
        datasets::synth::SynthConfig { episodes: 2, min_length: 20, max_length: 20, seed: 11, ..Default::default() };
    datasets::synth::write_dataset(&second, &synth).unwrap();
    let roots = json!([dataset(), &*second]);
    let dataset_config = json!({"root": roots, "frame_cache": "auto", "frames_on_device": "on"});
    let config =
        tiny(&scratch("device-frames-two"), 1, json!({"dataset": dataset_config, "policy": {"crop_shape": [64, 64]}}));
    let caches = scratch("device-frames-two-caches");
    let (mut data, _) = settled(&config, &caches);
    data.settle_frames_on_device::<Flex>(&config, &Default::default(), &mut |_| {}).unwrap();
    let frames = data.device_frames::<Flex>(&Default::default()).unwrap().expect("frames on the device");
    let rows = data.loader(&config, Default::default()).unwrap();
    data.frames_on_device = false;
    let copied = data.loader(&config, Default::default()).unwrap();
    let pipeline = InputPipeline::new(
        config.policy.config.clone(),
        data.features.clone(),
        data.normalizer(&config).unwrap(),
        config.dataset.image_transforms.clone(),
    );
    let mut seen = [0; 2];
    for (rows, copied) in rows.zip(copied).take(8) {
        let (rows, copied) = (rows.unwrap(), copied.unwrap());
        assert!(rows.frame_rows("observation.image").is_some());
        rows.dataset_index().iter().for_each(|&d| seen[d as usize] += 1);
        let mode = Mode::Train { seed: rows.index_in_epoch() as u64 };
        let gathered = pipeline.train_inputs::<Flex>(&rows, mode, Some(&frames), &Default::default()).unwrap();
        let uploaded = pipeline.train_inputs::<Flex>(&copied, mode, None, &Default::default()).unwrap();
        let read = |t: burn::prelude::Tensor<Flex, 4>| t.into_data().to_vec::<f32>().unwrap();
        assert!(read(gathered.obs.images[0].clone()) == read(uploaded.obs.images[0].clone()), "{:?}", rows.indices());
    }
    assert!(seen[0] > 0 && seen[1] > 0, "samples of both datasets: {seen:?}");
}

/// The run's data for `config` with every choice settled, automatic caches in `caches`; and
/// the lines it logged.
fn settled(config: &TrainConfig, caches: &Path) -> (trainer::TrainData, Vec<String>) {
    let mut data = trainer::TrainData::open(config).unwrap();
    let mut lines = Vec::new();
    data.settle_frame_cache_in(config, caches, &mut |p| {
        if let trainer::Progress::Line(l) = p {
            lines.push(l.to_string());
        }
    })
    .unwrap();
    (data, lines)
}

/// `--frame-encoding auto` (the default) hands a GPU the decoder's planes and the CPU RGB, reads
/// RGB where a camera cannot give planes, and caches the policy's resized images in RGB where
/// even the planes do not fit; each choice in one line. No device is opened: the choice is the
/// configuration's and the data's.
#[test]
fn auto_frame_encoding_reads_planes_on_a_gpu_rgb_on_the_cpu_and_says_why() {
    use datasets::FrameEncoding::{Rgb, Yuv420};
    let out = scratch("auto-encoding");
    let caches = scratch("auto-encoding-caches");
    let encoding = |data: &trainer::TrainData| {
        let batch = data.loader(&tiny(&out, 1, json!({})), Default::default()).unwrap().next().unwrap().unwrap();
        batch.layout().field("observation.image").unwrap().encoding
    };
    let line = |lines: &[String]| lines.iter().find(|l| l.starts_with("frame encoding:")).cloned().unwrap();

    let (data, lines) = settled(&tiny(&out, 1, json!({})), &caches);
    assert_eq!((data.frame_encoding, encoding(&data)), (Rgb, Rgb));
    assert!(line(&lines).contains("rgb (training on the CPU"), "{lines:#?}");
    let (data, lines) = settled(&tiny(&out, 1, json!({"device": "wgpu"})), &caches);
    assert_eq!((data.frame_encoding, encoding(&data)), (Yuv420, Yuv420));
    assert!(line(&lines).contains("yuv420, the decoder's YUV 4:2:0 planes"), "{lines:#?}");
    let (data, lines) =
        settled(&tiny(&out, 1, json!({"device": "wgpu", "dataset": {"frame_encoding": "rgb"}})), &caches);
    assert_eq!(data.frame_encoding, Rgb);
    assert!(!lines.iter().any(|l| l.starts_with("frame encoding:")), "a fixed encoding needs no reason: {lines:#?}");

    // Images in parquet hold RGB: the line names the camera.
    let images = scratch("auto-encoding-images");
    let synth = datasets::synth::SynthConfig {
        episodes: 2,
        min_length: 20,
        max_length: 20,
        storage: datasets::synth::CameraStorage::Images,
        ..Default::default()
    };
    datasets::synth::write_dataset(&images, &synth).unwrap();
    let config = tiny_config(&images, &out, 1, json!({"device": "cuda"}));
    let (data, lines) = settled(&config, &caches);
    assert_eq!(data.frame_encoding, Rgb);
    let said = line(&lines);
    assert!(said.contains("rgb, converted on the CPU") && said.contains("`observation.image`"), "{said}");
    assert!(said.contains("stored as images in parquet"), "{said}");

    // The automatic cache on a GPU: the planes (60 frames of 96x96: 0.83 MB) when they fit;
    // where only the policy's images resized to 48x48 in RGB fit (0.41 MB), those, read as RGB.
    let cached = |budget_gb: f64| {
        let dataset = json!({"frame_cache": "auto", "frame_cache_budget_gb": budget_gb});
        let extra = json!({"device": "wgpu", "dataset": dataset, "policy": {"resize_shape": [48, 48]}});
        settled(&tiny(&out, 1, extra), &caches)
    };
    let (data, lines) = cached(0.001);
    let dir = data.frame_caches[0].clone().unwrap();
    assert!(dir.to_string_lossy().ends_with("-yuv420"), "{lines:#?}");
    assert_eq!((data.frame_encoding, encoding(&data)), (Yuv420, Yuv420));
    std::fs::remove_dir_all(&dir).unwrap();
    let (data, lines) = cached(0.0006);
    let dir = data.frame_caches[0].clone().unwrap();
    assert!(dir.to_string_lossy().ends_with("-48x48"), "{lines:#?}");
    assert_eq!((data.frame_encoding, encoding(&data)), (Rgb, Rgb));
    assert!(line(&lines).contains("rgb, as the frame cache in"), "{lines:#?}");
}

/// A second small dataset beside [`dataset`]: 2 episodes of 25 frames, other trajectories.
fn second_dataset(root: &Path) -> PathBuf {
    if root.exists() {
        std::fs::remove_dir_all(root).unwrap();
    }
    let config =
        datasets::synth::SynthConfig { episodes: 2, min_length: 25, max_length: 25, seed: 5, ..Default::default() };
    datasets::synth::write_dataset(root, &config).unwrap();
    root.to_path_buf()
}

#[test]
fn two_datasets_train_together_and_a_run_resumes_only_on_the_same_ones() {
    let second = second_dataset(&scratch_path("trainer-training-second"));
    let out = scratch("two-datasets");
    let both = json!({"dataset": {"root": [dataset(), &second], "weights": [1.0, 3.0]}, "save_freq": 2});
    let config = tiny(&out, 4, both);
    let outcome = train::<Backend>(&config, None, Default::default(), |_| {}).unwrap();
    assert_eq!(outcome.steps, 4);
    let state: TrainingState = checkpoint::read_json(&out.join("checkpoints/000002"), "training_state.json").unwrap();
    let fingerprint =
        |root: &Path| datasets::frame_cache::fingerprint(&datasets::Dataset::open(root).unwrap()).unwrap();
    assert_eq!(state.datasets, vec![fingerprint(dataset()), fingerprint(&second)]);
    assert_eq!(state.weights, Some(vec![1.0, 3.0]));
    // The statistics the policy normalises with are the two datasets' pooled ones.
    let data = trainer::TrainData::open(&config).unwrap();
    let count = data.datasets.stats()["action"].count().unwrap();
    assert_eq!(count, 110.0);

    let resumed_out = scratch("two-datasets-resumed");
    let refused = |config: TrainConfig| {
        let resumed = TrainConfig { output_dir: resumed_out.to_path_buf(), steps: 6, ..config };
        train::<Backend>(&resumed, Some(&out.join("checkpoints/000002")), Default::default(), |_| {})
            .expect_err("refused")
            .to_string()
    };
    let reweighted = tiny(&out, 4, json!({"dataset": {"root": [dataset(), &second], "weights": [1.0, 1.0]}}));
    assert!(refused(reweighted).contains("dataset weights Some([1.0, 3.0])"));
    let error = refused(tiny(&out, 4, json!({})));
    assert!(error.contains("trained on 2 dataset(s) other than this run's"), "{error}");
}

#[test]
fn dry_run_takes_several_repo_ids_and_weights() {
    let home = scratch("lerobot-home-two");
    write_synth(&home.join("lerobot/first"));
    second_dataset(&home.join("lerobot/second"));
    let output = common::trainer_command()
        .args(["--dataset.repo_id", "lerobot/first,lerobot/second", "--dataset.weights", "0.7,0.3"])
        .args(["--policy.preset", "lerobot-0.6", "--dry-run", "--output_dir"])
        .arg(&*scratch("dry-run-two"))
        .env("HF_LEROBOT_HOME", &home)
        .env("HF_HUB_OFFLINE", "1")
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{stderr}");
    let resolved: serde_json::Value = serde_json::from_str(stdout.split_once('\n').unwrap().1).unwrap();
    let roots: Vec<&str> =
        resolved["dataset"]["root"].as_array().unwrap().iter().map(|r| r.as_str().unwrap()).collect();
    assert_eq!(roots, [home.join("lerobot/first").to_str().unwrap(), home.join("lerobot/second").to_str().unwrap()]);
    assert_eq!(resolved["dataset"]["weights"], json!([0.7, 0.3]));

    // A dataset whose state has another size cannot be trained with the first.
    let odd = home.join("lerobot/odd");
    let config = datasets::synth::SynthConfig {
        episodes: 2,
        min_length: 20,
        max_length: 20,
        state_dim: 5,
        ..Default::default()
    };
    datasets::synth::write_dataset(&odd, &config).unwrap();
    let output = common::trainer_command()
        .args(["--dataset.root"])
        .arg(home.join("lerobot/first"))
        .args(["--dataset.root"])
        .arg(&odd)
        .args(["--dry-run", "--output_dir"])
        .arg(&*scratch("dry-run-odd"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("odd/meta/info.json") && stderr.contains("features.observation.state"), "{stderr}");
}
