//! The training step fed from buffers kept between steps (`StepMode::DeviceFed`, what a step
//! captured as a CUDA graph replays): on lavapipe it gives the eager step's numbers to the bit,
//! step after step, across a batch of another size and with its frames gathered from those
//! kept on the device, and its work asks nothing of the device from the host once its values
//! are written. A capture asked for on wgpu is refused, saying
//! why, and the steps run fed. (The capture itself needs burn's cuda backend: `bench gpu-check
//! --only cuda-graph-step`.)

use burn::backend::Autodiff;
use burn::backend::wgpu::WgpuDevice;
use burn::module::AutodiffModule;
use burn::prelude::*;
use trainer::{Ema, EmaConfig, StepMode, StepRunner, TrainingBackend};

use super::{Direct, counted_device, tiny_run};

/// The batch sizes of the steps run: the kept buffers hold two samples, the one-sample batch
/// (an epoch's last) runs eagerly between fed steps, and the step after it writes the kept
/// buffers in place.
const BATCHES: [usize; 3] = [2, 1, 2];

/// Bits of a float tensor.
fn bits<B: Backend>(tensor: Tensor<B, 1>) -> Vec<u32> {
    tensor.into_data().to_vec::<f32>().expect("floats").iter().map(|v| v.to_bits()).collect()
}

/// What a run leaves: each step's loss and norm, then the weights, the two
/// moments and the average, flat, as bits.
type Trace = (Vec<(u32, u32)>, [Vec<u32>; 4]);

/// Where a run's frames come from.
enum Frames<'a> {
    /// Copied by the loader and uploaded with each batch.
    Uploaded,
    /// Kept on the device, from a frame cache written into this folder, and gathered there by
    /// the rows the loader gives.
    OnDevice(&'a std::path::Path),
}

/// Runs the tiny policy, with an EMA, through `batches` (sizes) in `mode` on `device`.
fn run<B: TrainingBackend<Device = WgpuDevice>>(
    device: &WgpuDevice,
    mode: StepMode,
    frames: Frames<'_>,
    batches: &[usize],
) -> (Trace, StepRunner<B>) {
    let (runner, two, one) = match frames {
        Frames::Uploaded => {
            let (runner, two) = tiny_run::tiny_runner::<B>(device);
            (runner, two, tiny_run::tiny_batch_of(1))
        }
        Frames::OnDevice(cache) => tiny_run::tiny_rows_runner::<B>(device, cache),
    };
    let ema = Ema::new(&runner.model().valid(), EmaConfig::default());
    let mut runner = runner.with_ema(ema).expect("the EMA").with_step_mode(mode);
    let mut steps = Vec::new();
    for (step, &samples) in batches.iter().enumerate() {
        let batch = if samples == 2 { &two } else { &one };
        let output = runner.step(batch, step).expect("a step");
        steps.push((bits(output.loss)[0], bits(output.grad_norm)[0]));
    }
    let weights = runner.optimizer().layout().gather_weights(&runner.model().valid());
    let record = runner.optimizer().to_record();
    let average = runner.ema().expect("kept").average().clone();
    let state = [bits(weights), bits(record.moment_1), bits(record.moment_2), bits(average)];
    ((steps, state), runner)
}

/// The first place two traces differ, for the failure's message.
fn first_difference(a: &Trace, b: &Trace) -> String {
    if let Some(step) = (0..a.0.len()).find(|&i| a.0[i] != b.0[i]) {
        return format!("step {step}: (loss, norm) bits {:?} against {:?}", a.0[step], b.0[step]);
    }
    let names = ["weights", "moment 1", "moment 2", "average"];
    for (name, (x, y)) in names.iter().zip(a.1.iter().zip(&b.1)) {
        if let Some(i) = (0..x.len()).find(|&i| x[i] != y[i]) {
            return format!("{name}[{i}]: {} against {}", f32::from_bits(x[i]), f32::from_bits(y[i]));
        }
    }
    "none".into()
}

/// Fed, and asked to capture, against eager, on `B`.
fn fed_steps_equal_eager<B: TrainingBackend<Device = WgpuDevice>>(device: &WgpuDevice, name: &str) {
    let (eager, _) = run::<B>(device, StepMode::Eager, Frames::Uploaded, &BATCHES);
    // Fed with the frames kept on the device: the rows are written where the frames were, and
    // the frames gathered there are the ones the loader copies (`device_frames`' test).
    let cache = tempfile::tempdir().expect("a temporary folder");
    let (fed, runner) = run::<B>(device, StepMode::DeviceFed, Frames::OnDevice(cache.path()), &BATCHES);
    let status = runner.graph_status().clone();
    assert!(eager == fed, "{name}: fed differs from eager at {}", first_difference(&eager, &fed));
    assert_eq!(status.refused, None, "{name}: {status:?}");
    assert_eq!((status.fed_steps, status.odd_batches, status.replays), (2, 1, 0), "{name}: {status:?}");
    // The state, the frames' rows, the crop's windows, the actions, their padding mask, ε, the
    // timesteps, their two coefficients and the update's scalars.
    assert_eq!(status.slots, 10, "{name}: {status:?}");
    let traffic = status.work_traffic.expect("a cubecl backend counts");
    assert_eq!((traffic.uploads, traffic.blocking_calls), (0, 0), "{name}: the fed work's traffic, {status:?}");

    // Asked to capture at once: refused on wgpu, and the step runs fed.
    let (captured, runner) = run::<B>(device, StepMode::Captured { warmup: 0 }, Frames::Uploaded, &BATCHES[..1]);
    let status = runner.graph_status().clone();
    assert_eq!(captured.0, eager.0[..1], "{name}: the captured mode's step differs from the eager one");
    let why = status.capture_refused.as_deref().unwrap_or_default();
    assert!(why.contains("captured on burn's cuda backend only"), "{name}: {status:?}");
    assert_eq!((status.fed_steps, status.nodes), (1, None), "{name}: {status:?}");
}

#[test]
fn a_fed_step_gives_the_eager_steps_numbers_and_its_work_asks_nothing_of_the_host() {
    let (_alone, _, device) = counted_device();
    fed_steps_equal_eager::<Autodiff<Direct>>(&device, "direct");
    // Fusion's step only with the trainer's `wgpu` feature (`host_traffic`'s reason).
    #[cfg(feature = "wgpu")]
    fed_steps_equal_eager::<Autodiff<burn::backend::Wgpu>>(&device, "fused");
}
