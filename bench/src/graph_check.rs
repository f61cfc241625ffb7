//! `bench gpu-check`'s CUDA graph check (`--only cuda-graph`): work on the build's cuda backend
//! (fusion over cubecl, as the trainer's) captured as one graph (kernels' `GraphKernels`, our
//! cubecl-cuda's capture, vendor/README.md) and replayed, against the same work run as it comes.
//! The work is a convolution (cuDNN's, where the build has it), a ReLU, a mean and a matrix
//! product: cubecl's kernels and a library's call on one stream.
//!
//! Checked: a replay gives the eager run's bits; an input written in place between replays
//! gives the eager run's bits on the new input; a recording that allocates what its warm-up did
//! not is refused by name. Reported: the graph's nodes by kind, and the wall time per run,
//! eager beside replayed.

use std::time::Instant;

use anyhow::{Context, Result, anyhow, ensure};
use burn::backend::cuda::CudaDevice;
use burn::prelude::*;
use burn::tensor::ops::ConvOptions;
use kernels::GraphKernels;

/// The trainer's cuda backend in this build (fusion over cubecl's, with `cuda`).
type Cuda = burn::backend::Cuda<f32, i32>;

/// The work's inputs: a batch of maps, a convolution's weights, a product's matrix.
struct Inputs {
    maps: Tensor<Cuda, 4>,
    weights: Tensor<Cuda, 4>,
    matrix: Tensor<Cuda, 2>,
}

/// Values in [-0.5, 0.5) from `seed`, the same on every machine.
fn values(n: usize, seed: f32) -> Vec<f32> {
    (0..n).map(|i| ((i as f32 * 0.7548 + seed).sin() * 43758.547).fract() - 0.5).collect()
}

/// Maps of `[8, 3, 32, 32]` from `seed`.
fn maps_data(seed: f32) -> TensorData {
    TensorData::new(values(8 * 3 * 32 * 32, seed), [8, 3, 32, 32])
}

/// The work: cubecl's kernels around a library's call, `[8, 16]` out.
fn work(inputs: &Inputs) -> Tensor<Cuda, 2> {
    let options = ConvOptions::new([1, 1], [1, 1], [1, 1], 1);
    let convolved = kernels::conv2d(inputs.maps.clone(), inputs.weights.clone(), None, options);
    let activated = burn::tensor::activation::relu(convolved);
    let pooled = activated.mean_dim(3).mean_dim(2).reshape([8, 16]);
    pooled.matmul(inputs.matrix.clone())
}

/// `tensor`'s values, read back (after the work before it has run).
fn read(tensor: &Tensor<Cuda, 2>) -> Result<Vec<f32>> {
    tensor.clone().into_data().to_vec::<f32>().map_err(|e| anyhow!("reading a tensor back: {e:?}"))
}

/// Whether `a` and `b` are the same bits, or the first index and values where they are not.
fn same_bits(a: &[f32], b: &[f32]) -> Result<(), String> {
    match a.iter().zip(b).position(|(a, b)| a.to_bits() != b.to_bits()) {
        None if a.len() == b.len() => Ok(()),
        None => Err(format!("{} values against {}", a.len(), b.len())),
        Some(i) => Err(format!("at {i}: {} against {}", a[i], b[i])),
    }
}

/// Milliseconds per run of `run`, over `runs` after one, the device synchronised after them.
fn timed(runs: u32, device: &CudaDevice, mut run: impl FnMut() -> Result<()>) -> Result<f64> {
    run()?;
    Cuda::sync(device)?;
    let start = Instant::now();
    for _ in 0..runs {
        run()?;
    }
    Cuda::sync(device)?;
    Ok(start.elapsed().as_secs_f64() * 1e3 / f64::from(runs))
}

/// The check's line, or what failed.
pub fn check_cuda_graph() -> Result<String> {
    let device = CudaDevice::default();
    #[cfg(feature = "cudnn")]
    kernels::cudnn::deterministic(true);
    let checked = replayed_against_eager(&device);
    #[cfg(feature = "cudnn")]
    kernels::cudnn::deterministic(false);
    let replayed = checked?;
    let refused = an_allocating_recording_is_refused(&device)?;
    Ok(format!("{replayed}; {refused}"))
}

/// The work replayed against the work run as it comes, before and after its input is written.
fn replayed_against_eager(device: &CudaDevice) -> Result<String> {
    let inputs = Inputs {
        maps: Tensor::from_data(maps_data(1.0), device),
        weights: Tensor::from_data(TensorData::new(values(16 * 3 * 3 * 3, 2.0), [16, 3, 3, 3]), device),
        matrix: Tensor::from_data(TensorData::new(values(16 * 16, 3.0), [16, 16]), device),
    };
    // The reference from fusion's second sight of the work (its first may fuse less), as the
    // recorded run is.
    drop(read(&work(&inputs))?);
    let eager = read(&work(&inputs))?;
    let (graph, output) = Cuda::capture_graph(device, || work(&inputs)).map_err(|e| anyhow!(e))?;
    let nodes = graph.nodes();
    graph.replay().map_err(|e| anyhow!(e))?;
    same_bits(&read(&output)?, &eager).map_err(|e| anyhow!("a replay against the eager run: {e} ({nodes:?})"))?;

    // The same work on other maps: eager on a tensor of its own, replayed on the graph's input
    // written in place.
    let other = Inputs {
        maps: Tensor::from_data(maps_data(4.0), device),
        weights: inputs.weights.clone(),
        matrix: inputs.matrix.clone(),
    };
    let eager_other = read(&work(&other))?;
    Cuda::write_in_place(&inputs.maps.clone().into_primitive().tensor(), &maps_data(4.0)).map_err(|e| anyhow!(e))?;
    graph.replay().map_err(|e| anyhow!(e))?;
    same_bits(&read(&output)?, &eager_other).map_err(|e| anyhow!("a replay on an input written in place: {e}"))?;

    // The eager runs' outputs kept until the device is synchronised: none is left unused.
    let mut outputs = Vec::new();
    let eager_ms = timed(50, device, || {
        outputs.push(work(&inputs));
        Ok(())
    })?;
    drop(outputs);
    let replay_ms = timed(50, device, || graph.replay().map_err(|e| anyhow!(e)))?;
    ensure!(nodes.memory == 0, "the graph kept memory nodes: {nodes:?}");
    Ok(format!(
        "cuda-graph capture: replays bit-equal to the eager run, and after an input written in place; \
         {} kernel, {} copy, {} other nodes; {eager_ms:.3} ms a run eager, {replay_ms:.3} ms replayed",
        nodes.kernels, nodes.copies, nodes.other
    ))
}

/// A recording that asks for a buffer its warm-up never did: refused, naming the allocation,
/// and the stream runs work as it comes afterwards.
fn an_allocating_recording_is_refused(device: &CudaDevice) -> Result<String> {
    let mut runs = 0usize;
    let refused = Cuda::capture_graph(device, || {
        runs += 1;
        // A size no earlier work asked for, and another at the recording (the pool pads
        // buffers to 512 bytes: these differ by 4 KiB).
        Tensor::<Cuda, 1>::ones([(1 << 20) + 1024 * runs], device) * 2.0
    });
    let Err(error) = refused else {
        return Err(anyhow!("a recording that allocated was kept"));
    };
    ensure!(error.contains("allocated"), "refused, but not for its allocation: {error}");
    let after = Tensor::<Cuda, 1>::ones([4], device).sum().into_scalar();
    ensure!(after == 4.0, "the stream after a refused capture summed four ones to {after}");
    Ok(format!("a recording that allocated refused ({})", error.lines().next().context("an empty error")?))
}
