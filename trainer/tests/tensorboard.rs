//! The TensorBoard event file, read by TensorBoard's own Python reader (`EventAccumulator`), not
//! by our CRC: every scalar comes back with its tag, step and value.
//!
//! It needs Python with the `tensorboard` package: `scripts/test.sh` installs one into
//! `target/test-python` and runs this test with `TEST_PYTHON` pointing at it (`cargo test` alone
//! skips it: `-- --include-ignored` with `TEST_PYTHON=... ` runs it by hand).

use std::process::Command;

use trainer::metrics::EventWriter;

const READER: &str = r#"
import json, sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
events = EventAccumulator(sys.argv[1], size_guidance={"scalars": 0})
events.Reload()
print(json.dumps({tag: [[s.step, s.value] for s in events.Scalars(tag)] for tag in events.Tags()["scalars"]}))
"#;

#[test]
#[ignore = "needs TensorBoard's Python reader: scripts/test.sh provides it"]
fn tensorboard_reads_every_scalar_we_write() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = EventWriter::create(dir.path()).unwrap();
    let written: Vec<(&str, i64, f32)> = vec![
        ("train/loss", 1, 1.25),
        ("train/loss", 2, 0.875),
        ("train/loss", 300_000, 1e-7),
        ("train/grad_norm", 1, 12.5),
        ("train/lr", 1, -0.0),
        ("train/lr", 2, f32::MAX),
        ("train/épochs", 7, -3.5),
    ];
    for &(tag, step, value) in &written {
        writer.scalar(tag, value, step).unwrap();
    }
    writer.flush().unwrap();
    let path = writer.path().to_path_buf();
    drop(writer);

    let python = std::env::var("TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Command::new(&python)
        .args(["-c", READER])
        .arg(&path)
        .output()
        .unwrap_or_else(|e| panic!("{python}: {e} (set TEST_PYTHON to a Python with tensorboard installed)"));
    assert!(out.status.success(), "TensorBoard's reader failed: {}", String::from_utf8_lossy(&out.stderr));
    let read: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for tag in ["train/loss", "train/grad_norm", "train/lr", "train/épochs"] {
        let expected: Vec<(i64, f32)> =
            written.iter().filter(|(t, ..)| *t == tag).map(|&(_, step, value)| (step, value)).collect();
        let got: Vec<(i64, f32)> = read[tag]
            .as_array()
            .unwrap_or_else(|| panic!("TensorBoard found no `{tag}` in {read}"))
            .iter()
            .map(|pair| (pair[0].as_i64().unwrap(), pair[1].as_f64().unwrap() as f32))
            .collect();
        assert_eq!(got, expected, "{tag}");
    }
    assert_eq!(read.as_object().unwrap().len(), 4, "tags: {read}");
}
