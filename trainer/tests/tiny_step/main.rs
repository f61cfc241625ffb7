//! One training step of the tiny policy on burn's wgpu backend without fusion, over Mesa's
//! lavapipe (Vulkan on the CPU, which `scripts/install-debian-packages.sh` installs): the kernels
//! it launches, against budgets ([`launch_budget`]), what a warmed step asks of the device
//! from the host ([`host_traffic`]), and the step fed from kept buffers against the eager one
//! ([`fed_step`]).
//!
//! One test binary for all three: instantiating the whole step for a backend is most of a test
//! binary's build, and lavapipe compiling its kernels most of a run, so they share them. Each
//! counts what the whole process does (its launches, its uploads), so they run one at a time
//! ([`counted_device`]). `scripts/test.sh` runs them in its lavapipe build; alone: `cargo test
//! --release -p trainer --no-default-features --features wgpu-untuned --test tiny_step --
//! --nocapture`, and with `wgpu` (burn's fusion, and its autotuning) in place of `wgpu-untuned`
//! the host's traffic is counted under fusion too.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use burn::backend::wgpu::{CubeBackend, WgpuDevice, WgpuRuntime};
use kernels::LaunchLog;

mod fed_step;
mod host_traffic;
mod launch_budget;
mod tiny_run;

/// burn's wgpu backend without fusion (also where the build has fusion, as `scripts/test.sh`'s
/// has for the kernels' tests).
type Direct = CubeBackend<WgpuRuntime, f32, i32, u32>;

/// This process's launch log, started before its first device (cubecl reads its configuration
/// once), in the tests' folder of cargo's target directory (emptied as it starts).
fn launch_log() -> &'static LaunchLog {
    static LOG: OnceLock<LaunchLog> = OnceLock::new();
    LOG.get_or_init(|| {
        let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("tiny_step-launches.log");
        LaunchLog::start(&path).expect("the launch log starts")
    })
}

/// The default wgpu device, its launches logged, held by one test at a time until the guard
/// drops (a test that failed holding it leaves it to the next).
fn counted_device() -> (MutexGuard<'static, ()>, &'static LaunchLog, WgpuDevice) {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let log = launch_log();
    let guard = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    (guard, log, WgpuDevice::default())
}
