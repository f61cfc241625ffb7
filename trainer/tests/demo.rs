//! The README's first command, `trainer --demo`: it synthesises its dataset, trains and writes a
//! checkpoint, with FFmpeg (AV1 videos) and without it (images in parquet).

mod common;

#[test]
fn the_demo_synthesises_a_dataset_trains_and_writes_a_checkpoint() {
    let output = common::scratch("trainer-demo");
    // The demo's own choices, but 6 steps and a checkpoint at the end (flags win over the demo's).
    let status = common::trainer_command()
        .env("LEROBOT_RS_FRAME_CACHE", output.join("frame-caches"))
        .args(["--demo", "--steps", "6", "--save_freq", "6", "--output_dir"])
        .arg(&output)
        .status()
        .unwrap();
    assert!(status.success(), "trainer --demo failed");

    let info = std::fs::read_to_string(output.join("demo-dataset/meta/info.json")).unwrap();
    let stored_as = if cfg!(feature = "video") { "\"dtype\": \"video\"" } else { "\"dtype\": \"image\"" };
    assert!(info.contains(stored_as), "this build's demo dataset stores its frames as {stored_as}");

    let metrics = std::fs::read_to_string(output.join("metrics.csv")).unwrap();
    let losses: Vec<f64> = metrics.lines().skip(1).map(|row| row.split(',').nth(4).unwrap().parse().unwrap()).collect();
    assert!(!losses.is_empty() && losses.iter().all(|l| l.is_finite() && *l > 0.0), "losses {losses:?}");
    let checkpoint = trainer::checkpoint::checkpoints_dir(&output).join("000006");
    assert!(checkpoint.is_dir(), "no checkpoint at {}", checkpoint.display());
}
