//! The `datasets` command line, run as a user runs it.

#[cfg(feature = "video")]
use std::path::Path;
use std::process::{Command, Output};

fn datasets(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_datasets")).args(args).env("SVT_LOG", "1").output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
#[cfg(feature = "video")] // synthesises AV1
fn synth_info_validate_stats_and_sample() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ds");
    let root_s = root.to_str().unwrap();
    let out = datasets(&[
        "synth",
        "--out",
        root_s,
        "--version",
        "v2.1",
        "--episodes",
        "3",
        "--length",
        "12..16",
        "--cameras",
        "observation.images.top=64x96",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let out = datasets(&["info", "--root", root_s]);
    assert!(out.status.success());
    let text = stdout(&out);
    for expected in ["v2.1", "episodes  3", "observation.images.top: 64x96 av1", "Push the T-shaped block"] {
        assert!(text.contains(expected), "info lacks {expected:?}:\n{text}");
    }

    let out = datasets(&["validate", "--root", root_s]);
    assert!(out.status.success(), "{}", stdout(&out));
    assert!(stdout(&out).contains("no problems"));

    let out = datasets(&["stats", "--root", root_s]);
    assert!(out.status.success());
    assert!(stdout(&out).contains("observation.state.mean"));

    let file = dir.path().join("batch.safetensors");
    let out = datasets(&[
        "sample",
        "--root",
        root_s,
        "--indices",
        "0,20,5",
        "--preset",
        "diffusion",
        "--uint8",
        "--out",
        file.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let bytes = std::fs::read(&file).unwrap();
    let tensors = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut names = tensors.names();
    names.sort();
    assert_eq!(
        names,
        [
            "action",
            "action_is_pad",
            "episode_index",
            "frame_index",
            "index",
            "next.done",
            "next.reward",
            "observation.images.top",
            "observation.images.top_is_pad",
            "observation.state",
            "observation.state_is_pad",
            "task_index",
            "timestamp"
        ]
    );
    let image = tensors.tensor("observation.images.top").unwrap();
    assert_eq!((image.dtype(), image.shape()), (safetensors::Dtype::U8, &[3, 2, 3, 64, 96][..]));
    let index = tensors.tensor("index").unwrap();
    let index: Vec<i64> = index.data().chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap())).collect();
    assert_eq!(index, vec![0, 20, 5], "samples are written in the order given");
    let (_, meta) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    let tasks: Vec<String> = serde_json::from_str(&meta.metadata().as_ref().unwrap()["task"]).unwrap();
    assert_eq!(tasks.len(), 3);
    assert_eq!(tasks[0], "Push the T-shaped block onto the T-shaped target.");
}

#[test]
#[cfg(feature = "video")] // synthesises AV1
fn validate_exits_1_and_names_each_problem() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ds");
    let out = datasets(&["synth", "--out", root.to_str().unwrap(), "--episodes", "2"]);
    assert!(out.status.success());
    let info = root.join("meta/info.json");
    let text = std::fs::read_to_string(&info).unwrap().replace("\"total_tasks\": 2", "\"total_tasks\": 5");
    std::fs::write(&info, text).unwrap();
    std::fs::remove_file(root.join("meta/stats.json")).unwrap();
    let out = datasets(&["validate", "--root", root.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains("meta/info.json: `total_tasks`: 5 but the task table lists 2"), "{text}");
    assert!(text.contains(&format!("{}: `(file)`: missing", Path::new("meta/stats.json").display())), "{text}");
    assert!(text.contains("2 problem(s)"), "{text}");
}

#[test]
fn errors_are_one_line_and_exit_1() {
    let out = datasets(&["info", "--root", "/nonexistent/dataset"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("error: /nonexistent/dataset/meta/info.json:"), "{err}");
}

#[test]
#[cfg(feature = "video")] // synthesises AV1
fn cache_writes_frames_equal_to_the_decoded_ones() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ds");
    let cache = dir.path().join("frames");
    let out = datasets(&["synth", "--out", root.to_str().unwrap(), "--episodes", "3", "--episodes-per-file", "2"]);
    assert!(out.status.success());
    let out = datasets(&["cache", "--root", root.to_str().unwrap(), "--out", cache.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout(&out).contains("cached"));
    let dataset = datasets::Dataset::open(&root).unwrap();
    let frames = datasets::frame_cache::FrameCache::open(&cache, &dataset).unwrap();
    let camera = frames.camera("observation.image").unwrap();
    let mut decoders = datasets::DecoderCache::default();
    for index in [0, 1, dataset.len() / 2, dataset.len() - 1] {
        let sample =
            dataset.get(index, &datasets::WindowSpec::none(), &mut decoders, datasets::FrameFormat::Uint8).unwrap();
        let datasets::Values::U8(pixels) = &sample.tensors["observation.image"].values else { panic!("uint8 frames") };
        assert_eq!(camera.frame(index), &pixels[..], "frame {index}");
    }
    let out = datasets(&[
        "cache",
        "--root",
        root.to_str().unwrap(),
        "--out",
        dir.path().join("small").to_str().unwrap(),
        "--resize",
        "48x64",
    ]);
    assert!(out.status.success());
    let small = datasets::frame_cache::FrameCache::open(&dir.path().join("small"), &dataset).unwrap();
    assert_eq!(
        small.camera("observation.image").unwrap().header().shape,
        datasets::FrameShape { channels: 3, height: 48, width: 64 }
    );

    // Stored as the decoder's YUV 4:2:0 planes: half the bytes, the same frames once converted,
    // the planes the video gives.
    let planes = dir.path().join("yuv420");
    let out = datasets(&[
        "cache",
        "--root",
        root.to_str().unwrap(),
        "--out",
        planes.to_str().unwrap(),
        "--frame-encoding",
        "yuv420",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout(&out).contains("as yuv420"), "{}", stdout(&out));
    let yuv = datasets::frame_cache::FrameCache::open(&planes, &dataset).unwrap();
    let yuv_camera = yuv.camera("observation.image").unwrap();
    assert_eq!(yuv_camera.header().encoding, datasets::FrameEncoding::Yuv420);
    let shape = camera.header().shape;
    let episode = &dataset.episodes()[1];
    let mut decoder = datasets::VideoDecoder::open(&dataset.video_file(episode, 0).unwrap()).unwrap();
    let mut decoded = vec![0; shape.encoded_len(datasets::FrameEncoding::Yuv420)];
    let mut rgb = vec![0; shape.len()];
    for index in episode.frames.clone() {
        let planes = yuv_camera.frame(index);
        assert_eq!(planes.len() * 2, camera.frame(index).len(), "frame {index}");
        let time = episode.videos[0].from_timestamp + dataset.timestamp(index);
        decoder.encoded_frame_at(time, 1e-4, datasets::FrameEncoding::Yuv420, &mut decoded).unwrap();
        assert_eq!(planes, &decoded[..], "frame {index}");
        datasets::video::yuv420_to_chw(planes, shape.height, shape.width, &mut rgb).unwrap();
        assert_eq!(rgb, camera.frame(index), "frame {index}");
    }
    // The cache keeps the format it was asked for: an RGB request rewrites it.
    let reopened = datasets::frame_cache::write_frame_cache(&dataset, &planes, &Default::default(), &|_| {});
    assert!(reopened.is_ok());
    let rewritten = datasets::frame_cache::FrameCache::open(&planes, &dataset).unwrap();
    assert_eq!(rewritten.camera("observation.image").unwrap().header().encoding, datasets::FrameEncoding::Rgb);
}

#[test]
fn a_yuv420_cache_of_images_is_refused_naming_the_camera() {
    let dir = tempfile::tempdir().unwrap();
    let synth = datasets::synth::SynthConfig {
        episodes: 1,
        storage: datasets::synth::CameraStorage::Images,
        ..Default::default()
    };
    datasets::synth::write_dataset(dir.path(), &synth).unwrap();
    let cache = dir.path().join("frames");
    let root = dir.path().to_str().unwrap();
    let out = datasets(&["cache", "--root", root, "--out", cache.to_str().unwrap(), "--frame-encoding", "yuv420"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("camera `observation.image`") && err.contains("images in parquet"), "{err}");
    let resized = ["--frame-encoding", "yuv420", "--resize", "48x64"];
    let out = datasets(&[&["cache", "--root", root, "--out", cache.to_str().unwrap()][..], &resized[..]].concat());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not implemented"), "{err}");
}

#[test]
fn info_takes_a_repo_id_found_in_hf_lerobot_home() {
    let home = tempfile::tempdir().unwrap();
    let root = home.path().join("lerobot/pusht_fake");
    let synth = datasets::synth::SynthConfig {
        episodes: 2,
        storage: datasets::synth::CameraStorage::Images,
        ..Default::default()
    };
    datasets::synth::write_dataset(&root, &synth).unwrap();
    let info = |repo_id: &str| {
        Command::new(env!("CARGO_BIN_EXE_datasets"))
            .args(["info", "--dataset.repo_id", repo_id])
            .env("HF_LEROBOT_HOME", home.path())
            .env("HF_HUB_OFFLINE", "1")
            .output()
            .unwrap()
    };
    let out = info("lerobot/pusht_fake");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout(&out).starts_with(&format!("dataset   {}\n", root.display())), "{}", stdout(&out));
    let out = info("lerobot/elsewhere");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("error: dataset lerobot/elsewhere: ") && err.contains("HF_HUB_OFFLINE"), "{err}");
}
