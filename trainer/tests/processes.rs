//! The processes of a run agreeing on what they train and handing out process 0's device group
//! id, as each launcher starts them: torchrun's variables (a meeting over TCP) and, with the
//! `mpi` feature, Open MPI's `mpirun -np 2` (a broadcast). No GPU is needed: the id is one
//! process 0 offers, as it offers NCCL's.
//!
//! Each process is this test binary again, running `agree_as_launched` alone.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use kernels::GroupId;

/// The id process 0 offers: every byte different.
fn offered() -> GroupId {
    GroupId(std::array::from_fn(|i| (i * 7 + 3) as u8))
}

fn hex(id: &GroupId) -> String {
    id.0.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
#[ignore = "one of the processes the tests below start"]
fn agree_as_launched() {
    let launch = trainer::parallel::launch().unwrap();
    let processes = launch.processes();
    // Process `AGREE_ODD_ONE_OUT` (if any) shows another fingerprint.
    let odd = std::env::var("AGREE_ODD_ONE_OUT").ok().and_then(|v| v.parse::<usize>().ok());
    let fingerprint = if odd == Some(processes.rank()) { 2 } else { 1 };
    let offer = processes.is_main().then(offered);
    match processes.agree(fingerprint, offer) {
        Ok(Some(id)) => println!("process {} of {}: agreed on {}", processes.rank(), processes.count(), hex(&id)),
        Ok(None) => println!("process {} of {}: agreed on none", processes.rank(), processes.count()),
        Err(e) => println!("process {} of {}: error: {e}", processes.rank(), processes.count()),
    }
}

/// The arguments that run this binary's `agree_as_launched` alone.
fn agree_args() -> Vec<String> {
    let this = std::env::current_exe().unwrap().display().to_string();
    [this.as_str(), "--exact", "agree_as_launched", "--ignored", "--nocapture", "--test-threads", "1"]
        .map(String::from)
        .to_vec()
}

fn odd_one_out(odd: Option<usize>) -> String {
    odd.map_or(String::new(), |o| o.to_string())
}

/// `child`'s output, killed after two minutes so that a hang fails the test.
fn finished(mut child: std::process::Child) -> Output {
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("a process did not end within two minutes");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

fn said(outputs: &[Output]) -> String {
    outputs.iter().map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).collect()
}

/// Runs `processes` of `agree_as_launched` with torchrun's variables, `odd` showing another
/// fingerprint; what they printed.
fn torchrun(processes: usize, odd: Option<usize>) -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port() - 1;
    let children: Vec<_> = (0..processes)
        .map(|rank| {
            let args = agree_args();
            let mut command = Command::new(&args[0]);
            command
                .args(&args[1..])
                .env("WORLD_SIZE", processes.to_string())
                .env("RANK", rank.to_string())
                .env("LOCAL_RANK", rank.to_string())
                .env("MASTER_ADDR", "127.0.0.1")
                .env("MASTER_PORT", port.to_string())
                .env("AGREE_ODD_ONE_OUT", odd_one_out(odd))
                .env_remove("OMPI_COMM_WORLD_SIZE")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            command.spawn().unwrap()
        })
        .collect();
    said(&children.into_iter().map(finished).collect::<Vec<_>>())
}

#[test]
fn torchrun_processes_receive_process_0s_id() {
    let said = torchrun(3, None);
    for rank in 0..3 {
        let line = format!("process {rank} of 3: agreed on {}", hex(&offered()));
        assert!(said.contains(&line), "no {line:?} in:\n{said}");
    }
}

#[test]
fn a_torchrun_process_started_otherwise_fails_the_run_on_both_sides() {
    let said = torchrun(2, Some(1));
    assert!(
        said.contains(
            "process 0 of 2: error: data-parallel training: process(es) 1 of 2 were started with another configuration"
        ),
        "{said}"
    );
    assert!(
        said.contains(
            "process 1 of 2: error: data-parallel training: process 1 of 2 was started with another configuration"
        ),
        "{said}"
    );
}

#[cfg(feature = "mpi")]
fn mpirun(odd: Option<usize>) -> String {
    let mut command = Command::new("mpirun");
    // As trainer/tests/cpu/mpi.rs: root in CI containers, two processes whatever the cores.
    command.env("OMPI_ALLOW_RUN_AS_ROOT", "1").env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    command.env("OMPI_MCA_mpi_yield_when_idle", "1").env("AGREE_ODD_ONE_OUT", odd_one_out(odd));
    command.args(["--oversubscribe", "--bind-to", "none", "-np", "2"]).args(agree_args());
    let output = finished(command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap());
    said(&[output])
}

#[cfg(feature = "mpi")]
#[test]
fn mpi_processes_receive_process_0s_id() {
    let said = mpirun(None);
    for rank in 0..2 {
        let line = format!("process {rank} of 2: agreed on {}", hex(&offered()));
        assert!(said.contains(&line), "no {line:?} in:\n{said}");
    }
    let said = mpirun(Some(1));
    assert!(
        said.contains("process 1 of 2: error: data-parallel training: process 1 of 2 was started with another"),
        "{said}"
    );
    assert!(
        said.contains("process 0 of 2: error: data-parallel training: another process was started with another"),
        "{said}"
    );
}
