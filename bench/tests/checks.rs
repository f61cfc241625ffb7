//! The GPU checks with the CPU on both sides, where nothing may differ, and the regression
//! check's verdicts, through the library (`bench::gpu_check`, `bench::regress`): the crate has no
//! unit tests, whose harness would compile every benchmark a second time.

use std::path::PathBuf;

use bench::gpu_check::{
    GpuCheckArgs, check_pipeline, check_resume, check_step, check_yuv_frames, inputs, run, small_dataset,
};
use bench::regress::{Baseline, Ratio, regressions, render};
use kernels::DeviceKind;

/// An emptied scratch folder of this test's own.
fn work(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bench-gpu-check-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn the_checks_find_the_cpu_equal_to_itself() {
    let dir = work("cpu");
    let root = small_dataset(&dir).unwrap();
    for line in [
        check_step(DeviceKind::Cpu, &inputs(&root, false).unwrap(), true).unwrap(),
        check_pipeline(DeviceKind::Cpu, &inputs(&root, true).unwrap(), true).unwrap(),
        check_resume(DeviceKind::Cpu, DeviceKind::Cpu, &root, true).unwrap(),
        check_yuv_frames(DeviceKind::Cpu).unwrap(),
    ] {
        eprintln!("{line}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
#[ignore = "needs a GPU and a bench built with --features cuda: scripts/gpu-run.sh runs `bench gpu-check`"]
fn a_gpu_matches_the_cpu() {
    let dir = work("gpu");
    let devices = std::env::var("GPU_CHECK_DEVICES").unwrap_or_else(|_| "cuda".into());
    let devices = devices.split(',').map(|d| d.parse().unwrap()).collect();
    let only =
        std::env::var("GPU_CHECK_ONLY").map(|only| only.split(',').map(str::to_owned).collect()).unwrap_or_default();
    let args = GpuCheckArgs { devices, work: dir, only };
    run(&args).unwrap();
}

#[test]
fn a_ratio_fails_only_beyond_the_tolerance() {
    let ratio =
        |name: &str, median: f64| Ratio { name: name.into(), meaning: String::new(), median, repeats: vec![median] };
    let baseline = Baseline {
        cpu: String::new(),
        machine: String::new(),
        revision: String::new(),
        ratios: vec![ratio("loader", 1.0), ratio("train", 2.0)],
    };
    assert!(regressions(&[ratio("loader", 0.71), ratio("train", 5.0)], &baseline, 0.3).is_empty());
    assert_eq!(regressions(&[ratio("loader", 0.69), ratio("train", 1.3)], &baseline, 0.3), ["loader", "train"]);
    // A ratio without a baseline (a new measurement) does not fail.
    assert!(regressions(&[ratio("new", 0.0)], &baseline, 0.3).is_empty());
    assert!(render(&[ratio("loader", 0.5)], Some(&baseline), 0.3).contains("REGRESSED"));
}
