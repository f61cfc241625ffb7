//! What a warmed training step asks of the device from the host, counted by our cubecl-runtime
//! (`kernels::HostTraffic`), and the device memory it holds: without fusion, and in a build with
//! the trainer's `wgpu` feature under fusion too. A step captured as a CUDA graph may neither
//! upload nor wait on the device inside its body, nor grow the memory pool
//! (docs/plans/cuda-graph.md), so what this counts is what is left to move.

use burn::backend::Autodiff;
use burn::backend::wgpu::{WgpuDevice, WgpuRuntime};
use burn::prelude::*;
use kernels::HostTraffic;
use trainer::TrainingBackend;

use super::{Direct, counted_device, tiny_run};

/// What the tiny policy's batch uploads: the state, the actions, their padding mask and the one
/// camera's frames.
const BATCH_UPLOADS: u64 = 4;
/// What a step's diffusion noise uploads, drawn on the host as LeRobot draws it: ε, the
/// timesteps and their two coefficients.
const NOISE_UPLOADS: u64 = 4;

/// What the random crop uploads: each image's window, read by the crop's kernel.
const CROP_UPLOADS: u64 = 1;
/// What the optimiser's update uploads: its scalars (Adam's step size and bias correction, the
/// average's weight), read by the kernel from a buffer rather than fixed in its launch.
const OPTIMISER_UPLOADS: u64 = 1;

/// Steps run before the one counted: the first initialises the lazy parameters, binds the
/// weights' views and uploads the constants; every step after it does what the next does, and
/// the second settles the pool.
const WARM_STEPS: usize = 2;

/// The device memory wgpu's pool holds on `device` for the buffers alive, once what was asked
/// of it has run: the bytes reserved and the buffers in use, after the pool has released every
/// page no buffer is in (so that its periodic cleanup, timed by the process's count of
/// reservations, which the other tests beside this one move, does not decide the reading).
fn held_memory(device: &WgpuDevice) -> (u64, u64) {
    use burn::cubecl::Runtime;
    let client = WgpuRuntime::client(device);
    client.memory_cleanup();
    let usage = client.memory_usage().expect("the pool's usage");
    (usage.bytes_reserved, usage.number_allocs)
}

/// What step `WARM_STEPS` of the tiny policy asks of `device` from the host, its loss, and the
/// memory held before and after it.
fn warm_step<B: TrainingBackend<Device = WgpuDevice>>(device: &WgpuDevice) -> (HostTraffic, f32, [(u64, u64); 2]) {
    let (mut runner, batch) = tiny_run::tiny_runner::<B>(device);
    for step in 0..WARM_STEPS {
        runner.step(&batch, step).expect("a warm-up step");
        B::sync(device).expect("the device synchronises");
    }
    let held_before = held_memory(device);
    let before = HostTraffic::now().expect("a cubecl backend counts");
    let output = runner.step(&batch, WARM_STEPS).expect("the counted step");
    let traffic = HostTraffic::now().expect("a cubecl backend counts").since(&before);
    // Read, then gone with the rest of the step's output, as the warm-up steps' went.
    let loss = output.loss.clone().into_scalar().elem();
    drop(output);
    B::sync(device).expect("the device synchronises");
    (traffic, loss, [held_before, held_memory(device)])
}

#[test]
fn a_warm_step_on_wgpu_uploads_only_what_changes_holds_no_new_memory_and_never_waits_on_the_device() {
    let (_alone, _, device) = counted_device();
    // One backend after the other: the counts are the process's. Fusion's step is built only
    // with the trainer's `wgpu` feature: instantiated for it, the whole step would double this
    // binary's build in CI (about 5 minutes on two cores), and what the trainer uploads is the
    // same on both.
    let direct = ("direct", warm_step::<Autodiff<Direct>>(&device));
    #[cfg(not(feature = "wgpu"))]
    let steps = [direct];
    #[cfg(feature = "wgpu")]
    let steps = [direct, ("fused", warm_step::<Autodiff<burn::backend::Wgpu>>(&device))];
    let seen = format!("a warm step (traffic, loss, [(bytes reserved, buffers held) before, after]): {steps:?}");
    eprintln!("{seen}");
    for (_, (traffic, loss, [held_before, held_after])) in steps {
        assert!(loss.is_finite(), "the step's loss is a number: {seen}");
        // The constants the forward reads (the statistics, the embedding's frequencies, the
        // keypoints' grid) were uploaded once, by the first step; wgpu has no library calls, and
        // nothing in the step reads the device.
        assert_eq!(traffic.uploads, BATCH_UPLOADS + NOISE_UPLOADS + CROP_UPLOADS + OPTIMISER_UPLOADS, "{seen}");
        assert_eq!(traffic.blocking_calls, 0, "{seen}");
        // The step ends holding the buffers it began with, in the pages they were in: nothing
        // it keeps grows from step to step.
        assert_eq!(held_after, held_before, "{seen}");
    }
}
