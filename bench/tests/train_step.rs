//! `bench train-step` as RESULTS.md runs it: the tiny policy's step on the CPU, on a fixture
//! LeRobot wrote, reported as a table row and as JSON. (CI's regression check then runs the
//! bench binary this test build makes.)

use std::process::{Command, Output};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/lerobot-0.6.1/pusht_images");

fn train_step(extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(["train-step", "--root", FIXTURE, "--tiny", "--batch", "2", "--warmup", "0", "--steps", "1"])
        .args(["--num-workers", "1"])
        .args(extra)
        .output()
        .expect("bench runs")
}

#[test]
fn a_tiny_step_on_the_cpu_is_reported_phase_by_phase() {
    let output = train_step(&[]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "bench train-step failed:\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.lines().any(|line| line.starts_with("| cpu | classic tiny, GroupNorm | f32 | 2 |")), "{stdout}");
    let json = &stdout[stdout.find("\n[").expect("the JSON report")..];
    let reports: serde_json::Value = serde_json::from_str(json).expect("the JSON report parses");
    let report = &reports[0];
    assert_eq!((report["batch"].as_u64(), report["steps"].as_u64()), (Some(2), Some(1)), "{report}");
    for phase in ["forward", "backward", "optim", "total"] {
        let ms = report["phases"][phase].as_f64().expect(phase);
        assert!(ms > 0.0, "{phase} took no time: {report}");
    }
    let loss = report["losses"][0].as_f64().expect("the step's loss");
    assert!(loss.is_finite() && loss > 0.0, "{report}");
    assert!(report["launches"].is_null(), "launches are counted only when asked: {report}");
}

#[test]
fn launches_are_counted_only_on_a_gpu_backend() {
    let output = train_step(&["--count-launches"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--count-launches counts cubecl's kernels: use --device wgpu or cuda"), "{stderr}");
}
