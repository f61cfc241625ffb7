//! NCCL looked for as the trainer looks for it, without a GPU: where it is missing (as on CI's
//! machines), switched off, or a file by its name that is not a library, every call of a device
//! group fails with one clear line saying why and what to do, rather than panicking (cudarc's
//! own bindings panic where their names miss the library).
//!
//! NCCL is looked for once per process, so each case runs this test binary again, in a process
//! of its own, with its environment: `report` prints what the calls say.

use std::path::Path;
use std::process::Command;

use kernels::{DeviceGroup, GroupId};

/// What `report` prints in a fresh process with `vars` set (no Python environment named).
fn report_with(vars: &[(&str, &Path)], switch: Option<&str>) -> String {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command.args(["--exact", "report", "--ignored", "--nocapture"]).env_remove("LEROBOT_RS_NCCL_DIR");
    command.env_remove("LEROBOT_RS_NCCL").env_remove("VIRTUAL_ENV").env_remove("CONDA_PREFIX");
    for (name, value) in vars {
        command.env(name, value);
    }
    if let Some(switch) = switch {
        command.env("LEROBOT_RS_NCCL", switch);
    }
    let output = command.output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

#[test]
#[ignore = "run by the tests below, each in a process of its own"]
fn report() {
    println!("library: {}", DeviceGroup::library().map_or_else(|e| format!("error: {e}"), |l| format!("found {l}")));
    // Where NCCL (and a GPU) exist, the calls may succeed: said, not unwrapped.
    println!("new_id: {}", DeviceGroup::new_id().map_or_else(|e| e, |_| "made".into()));
    let join = DeviceGroup::join(&GroupId([0; 128]), 0, 1, 0);
    println!("join: {}", join.map_or_else(|e| e, |_| "joined".into()));
}

/// The three lines of `report`, each the error `expected`.
fn assert_every_call_says(report: &str, expected: &str) {
    for call in ["library: error: ", "new_id: ", "join: "] {
        let line = format!("{call}{expected}");
        assert!(report.lines().any(|l| l == line), "no line {line:?} in:\n{report}");
    }
}

#[test]
fn a_directory_named_without_nccl_is_said() {
    let dir = tempfile::tempdir().unwrap();
    let report = report_with(&[("LEROBOT_RS_NCCL_DIR", dir.path())], None);
    let expected = format!("NCCL not found: LEROBOT_RS_NCCL_DIR={} holds no libnccl.so.2", dir.path().display());
    assert_every_call_says(&report, &expected);
}

#[test]
fn a_file_that_is_not_nccl_is_said_by_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("libnccl.so.2");
    std::fs::write(&fake, b"not a shared library").unwrap();
    let report = report_with(&[("LEROBOT_RS_NCCL_DIR", dir.path())], None);
    let prefix = format!("library: error: could not load {}: ", fake.display());
    assert!(report.lines().any(|l| l.starts_with(&prefix)), "no line starting {prefix:?} in:\n{report}");
}

#[test]
fn nccl_switched_off_is_said() {
    let report = report_with(&[], Some("off"));
    assert_every_call_says(&report, "NCCL is off (LEROBOT_RS_NCCL)");
}

#[test]
fn nccl_missing_says_how_to_install_it() {
    // No Python environment to look in, and no library path: the system's own library cache
    // only (which has no NCCL on CI's machines; where it has one, it is found).
    let empty = tempfile::tempdir().unwrap();
    let report = report_with(&[("PATH", empty.path()), ("LD_LIBRARY_PATH", empty.path())], None);
    let library = report.lines().find(|l| l.starts_with("library: ")).unwrap();
    if library.starts_with("library: found NCCL 2.") {
        return;
    }
    assert_every_call_says(
        &report,
        "NCCL 2 not found (libnccl.so.2 by name, nor in any Python environment): install it with `pip install \
         nvidia-nccl-cu13` (PyTorch's CUDA wheels bring it), or put its lib directory in LD_LIBRARY_PATH or \
         LEROBOT_RS_NCCL_DIR",
    );
}
