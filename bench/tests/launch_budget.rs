//! The kernels one training step launches on burn's wgpu backend without fusion, counted by
//! `bench train-step --count-launches` on Mesa's lavapipe (Vulkan on the CPU, which
//! `scripts/install-debian-packages.sh` installs) against a budget: a change that launches more
//! fails here (bench/RESULTS.md, "Kernel launches per step").
#![cfg(feature = "wgpu-untuned")]

use std::process::Command;

/// The whole step of the tiny policy at batch 8: 4,700 launches when the budget was set.
const STEP_BUDGET: usize = 4_750;
/// The gradients' gather with their norm, and the optimiser's update: 20 launches each on
/// lavapipe (its ~30 bindings a kernel allow about twenty parameters a launch), from 245 and 212
/// when each parameter had launches of its own.
const CLIP_BUDGET: usize = 24;
const OPTIM_BUDGET: usize = 24;

/// The counts of `launches per step: N (prepare N, forward N, backward N, clip N, optim N); ...`.
fn counts(line: &str) -> Vec<(String, usize)> {
    let (total, phases) = line.trim_start_matches("launches per step: ").split_once(" (").expect("phases");
    let mut counts = vec![("step".to_string(), total.parse().expect("a count"))];
    for phase in phases.split(')').next().expect("phases").split(", ") {
        let (name, count) = phase.split_once(' ').expect("a phase and its count");
        counts.push((name.to_string(), count.parse().expect("a count")));
    }
    counts
}

#[test]
fn a_tiny_step_on_wgpu_launches_no_more_kernels_than_its_budget() {
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/lerobot-0.6.1/pusht_mini");
    let kernel_cache = tempfile::tempdir().expect("a temporary folder");
    let output = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(["train-step", "--root", fixture, "--tiny", "--device", "wgpu", "--batch", "8"])
        .args(["--warmup", "0", "--steps", "1", "--num-workers", "1", "--count-launches"])
        .env("LEROBOT_RS_KERNEL_CACHE", kernel_cache.path())
        .output()
        .expect("bench runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "bench train-step failed:\n{stderr}");
    let line = stderr.lines().find(|line| line.starts_with("launches per step: ")).expect("a launch count");
    let counts = counts(line);
    let count = |name: &str| counts.iter().find(|(phase, _)| phase == name).map(|&(_, n)| n).expect(name);
    // Counted, not estimated: every phase of a real step launches kernels.
    for phase in ["forward", "backward", "clip", "optim"] {
        assert!(count(phase) > 0, "no launches counted for {phase}: {line}");
    }
    assert!(count("step") <= STEP_BUDGET, "over the budget of {STEP_BUDGET}: {line}");
    assert!(count("clip") <= CLIP_BUDGET, "clipping over its budget of {CLIP_BUDGET}: {line}");
    assert!(count("optim") <= OPTIM_BUDGET, "the update over its budget of {OPTIM_BUDGET}: {line}");
}
