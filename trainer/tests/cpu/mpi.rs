//! Training across processes, started by Open MPI's `mpirun` as a user starts them on several
//! machines: two processes train as two replicas of one process do, a resumed run equals an
//! uninterrupted one, and a process that fails (or was started with other arguments) ends the
//! run with its error instead of leaving the other waiting.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use burn::backend::{Autodiff, Flex};
use serde_json::json;
use trainer::{TrainConfig, train_on};

type Backend = Autodiff<Flex>;

use crate::common::{
    checkpoint_weights as weights, compare, cut_second_episode_video, data_parallel_config, scratch, scratch_path,
    write_forty_frames,
};

/// The data-parallel tests' 40-frame dataset, written once for this module.
fn dataset() -> &'static Path {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| write_forty_frames(&scratch_path("mpi-synth")))
}

/// `config` as a file for `--config_path`, in `dir`.
fn config_file(dir: &Path, name: &str, config: &TrainConfig) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string_pretty(config).unwrap()).unwrap();
    path
}

/// Runs `mpirun` with `programs` (one `-np 1 trainer ARGS` each, as MPMD), its output in files
/// of `dir`; kills it after five minutes, so that a hang fails the test instead of stalling it.
fn mpirun(dir: &Path, programs: &[Vec<String>]) -> Output {
    // One job at a time: two mpirun jobs started at the same instant by this binary's test
    // threads have hung in MPI's start-up on the 2-core machines here (not understood yet; two
    // started from a shell at once did not).
    static ONE_JOB: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_job = ONE_JOB.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut command = Command::new("mpirun");
    // Root in CI containers; both cores for each process (not one each, mpirun's default).
    command.env("OMPI_ALLOW_RUN_AS_ROOT", "1").env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    // Oversubscribed cores: MPI's waits yield instead of spinning.
    command.env("OMPI_MCA_mpi_yield_when_idle", "1");
    // The ranks' automatic frame caches under the scratch folder, not in the user's /dev/shm.
    command.env(datasets::auto_cache::FRAME_CACHE_VAR, scratch_path("frame-caches"));
    command.args(["--oversubscribe", "--bind-to", "none"]);
    for (i, args) in programs.iter().enumerate() {
        if i > 0 {
            command.arg(":");
        }
        command.args(["-np", "1", env!("CARGO_BIN_EXE_trainer")]).args(args);
    }
    std::fs::create_dir_all(dir).unwrap();
    let (out, err) = (dir.join("mpirun.stdout"), dir.join("mpirun.stderr"));
    let mut child = command
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .stdin(Stdio::null())
        .spawn()
        .expect("mpirun (Open MPI: apt-get install openmpi-bin, as scripts/install-debian-packages.sh does)");
    let Some(status) = ended_by(&mut child, Instant::now() + Duration::from_secs(300)) else {
        panic!("mpirun did not end within five minutes: {}", std::fs::read_to_string(&err).unwrap());
    };
    Output { status, stdout: std::fs::read(out).unwrap(), stderr: std::fs::read(err).unwrap() }
}

/// `child`'s exit status once it ends, or `None` (it killed) where it has not by `deadline`, so
/// that a hang fails a test instead of stalling it.
fn ended_by(child: &mut std::process::Child, deadline: Instant) -> Option<std::process::ExitStatus> {
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Every process trains from the same `--config_path` with `extra` arguments.
fn same(processes: usize, config: &Path, extra: &[&str]) -> Vec<Vec<String>> {
    let mut args = vec!["--config_path".to_string(), config.display().to_string()];
    args.extend(extra.iter().map(ToString::to_string));
    vec![args; processes]
}

fn succeeded(output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    stdout
}

#[test]
fn two_processes_train_as_two_replicas_of_one_and_resume_exactly() {
    let (dir, threads) = (scratch("mpi-two"), scratch("mpi-threads"));
    let config = data_parallel_config(dataset(), &dir.join("run"), 10, 2, json!({}));
    let stdout = succeeded(&mpirun(&dir, &same(2, &config_file(&dir, "config.json", &config), &[])));
    assert!(stdout.contains("data-parallel: 2 replicas (2 processes x 1 devices)"), "{stdout}");
    // Rank 0 alone logs (the others' lines would repeat it) and writes the checkpoints, after
    // checking that the other process's weights are its own to the bit.
    assert_eq!(stdout.lines().filter(|l| l.starts_with("checkpoint ")).count(), 2, "{stdout}");
    assert_eq!(stdout.lines().filter(|l| l.starts_with("loss ")).count(), 1, "{stdout}");

    // Two replicas in one process: the same samples, noise and sums (a + b, then halved).
    let in_one = TrainConfig { output_dir: threads.join("run"), ..config.clone() };
    train_on::<Backend>(&in_one, None, trainer::parallel::devices_from(&Default::default(), 2), |_| {}).unwrap();
    let last = "checkpoints/000010";
    assert!(weights(&dir.join("run").join(last)) == weights(&threads.join("run").join(last)), "other weights");

    // Resumed from step 5, by two processes again: the uninterrupted run's weights.
    let resumed = dir.join("resumed");
    let again = TrainConfig { output_dir: resumed.clone(), ..config };
    let step_5 = dir.join("run/checkpoints/000005").display().to_string();
    succeeded(&mpirun(&resumed, &same(2, &config_file(&resumed, "config.json", &again), &["--resume", &step_5])));
    assert!(weights(&dir.join("run").join(last)) == weights(&resumed.join(last)), "the resumed run drifted");
}

#[test]
fn two_processes_of_two_devices_train_as_four_replicas_of_one() {
    // Within a process burn-collective sums two replicas' gradients, between processes MPI sums
    // the two sums; one process sums four. Both divide by 4 in the clipping factor. With ε = lr = 1 Adam's update is about the
    // gradient (as in data_parallel.rs), so the runs stay within the sums' rounding.
    let (dir, threads) = (scratch("mpi-two-by-two"), scratch("mpi-four"));
    let extra = json!({"num_devices": 2, "save_freq": 4, "policy": {"optimizer_eps": 1.0, "optimizer_lr": 1.0}});
    let config = data_parallel_config(dataset(), &dir.join("run"), 4, 1, extra);
    let stdout = succeeded(&mpirun(&dir, &same(2, &config_file(&dir, "config.json", &config), &[])));
    assert!(stdout.contains("4 replicas (2 processes x 2 devices); effective batch size 4"), "{stdout}");

    let in_one = TrainConfig { output_dir: threads.join("run"), num_devices: 4, ..config };
    train_on::<Backend>(&in_one, None, trainer::parallel::devices_from(&Default::default(), 4), |_| {}).unwrap();
    let (w1, w2) = (weights(&threads.join("run/checkpoints/000004")), weights(&dir.join("run/checkpoints/000004")));
    let (_, _, relative) = compare(&w1, &w2);
    assert!(relative < 1e-6, "weights differ by {relative:e} of their norm");
}

#[test]
fn a_process_that_fails_ends_the_run_with_its_error() {
    let dir = scratch("mpi-failure");
    // Process 1 reads a copy of the dataset whose second episode's video is cut short: it
    // fails at the first sample from there, while process 0 waits for it in an all-reduce.
    let broken = write_forty_frames(&dir.join("broken"));
    let video = cut_second_episode_video(&broken);
    let good = config_file(&dir, "good.json", &data_parallel_config(dataset(), &dir.join("run"), 20, 2, json!({})));
    let bad = config_file(&dir, "bad.json", &data_parallel_config(&broken, &dir.join("run"), 20, 2, json!({})));
    let args = |config: &Path| vec!["--config_path".to_string(), config.display().to_string()];
    let output = mpirun(&dir, &[args(&good), args(&bad)]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("process 1 of 2") && stderr.contains(&*video.file_name().unwrap().to_string_lossy()),
        "{stderr}"
    );

    // Started with another seed: every process refuses before training, saying which differs.
    let second = |seed| data_parallel_config(dataset(), &dir.join("second"), 20, 2, json!({ "seed": seed }));
    let (first, other) = (config_file(&dir, "7.json", &second(7)), config_file(&dir, "8.json", &second(8)));
    let output = mpirun(&dir, &[args(&first), args(&other)]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && stderr.contains("process 1 of 2 was started with another configuration"),
        "{stderr}"
    );
}

#[test]
fn processes_that_diverge_each_name_the_checkpoint_process_0_wrote() {
    let dir = scratch("mpi-diverged");
    let config = data_parallel_config(
        dataset(),
        &dir.join("run"),
        8,
        2,
        json!({"save_freq": 1, "policy": {"optimizer_lr": 1e30}}),
    );
    let output = mpirun(&dir, &same(2, &config_file(&dir, "config.json", &config), &[]));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    // Each process that says so (the first to fail ends the others) names step 1's checkpoint,
    // which only process 0 wrote.
    let said: Vec<&str> = stderr.lines().filter(|line| line.contains("training diverged")).collect();
    assert!(!said.is_empty(), "{stderr}");
    let checkpoint = dir.join("run/checkpoints/000001").display().to_string();
    for line in said {
        assert!(line.contains("of step 2") && line.contains(&checkpoint), "{line}");
    }
}

#[test]
fn a_torchrun_launch_on_the_cpu_says_it_sums_through_nccl_only() {
    // torchrun's variables, as torchrun sets them, for two trainers on this machine: process 0
    // has no device group (Flex has none), so neither process trains, each saying why.
    let dir = scratch("torchrun-cpu");
    let config = data_parallel_config(dataset(), &dir.join("run"), 2, 1, json!({}));
    let config = config_file(&dir, "config.json", &config);
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port() - 1;
    let children: Vec<_> = (0..2)
        .map(|rank| {
            Command::new(env!("CARGO_BIN_EXE_trainer"))
                .args(["--config_path", config.to_str().unwrap()])
                .env("WORLD_SIZE", "2")
                .env("RANK", rank.to_string())
                .env("LOCAL_RANK", rank.to_string())
                .env("MASTER_ADDR", "127.0.0.1")
                .env("MASTER_PORT", port.to_string())
                .env(datasets::auto_cache::FRAME_CACHE_VAR, scratch_path("frame-caches"))
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    let outputs: Vec<Output> = children
        .into_iter()
        .map(|mut child| {
            assert!(ended_by(&mut child, deadline).is_some(), "a trainer process did not end within two minutes");
            child.wait_with_output().unwrap()
        })
        .collect();
    let said = |rank: usize| String::from_utf8_lossy(&outputs[rank].stderr).into_owned();
    assert!(outputs.iter().all(|o| !o.status.success()), "{}\n{}", said(0), said(1));
    let needs_nccl = "a torchrun-style launch sums gradients through NCCL only, and process 0 has no NCCL group";
    assert!(
        said(0).contains(&format!(
            "{needs_nccl}: process 0 trains on 1 device(s) of a backend without device groups (NCCL needs burn's \
             cuda backend, one GPU a process)"
        )),
        "{}",
        said(0)
    );
    assert!(said(1).contains(&format!("{needs_nccl}: process 0's error says why")), "{}", said(1));
}
