//! The convolution's three passes (output, input gradient, weight gradient) in cuDNN, on burn's
//! cuda tensors, enqueued on the CUDA stream cubecl orders their work on (the vendored
//! cubecl-cuda's `GpuResource::stream`): no host synchronisation, the outputs and workspaces
//! from burn's own allocator.
//!
//! Each problem (shapes, options, element type) gets its descriptors once, and each pass its
//! algorithm at its first call, by cuDNN's own timing of every algorithm on the real buffers
//! (`cudnnFind*AlgorithmEx`, as torch's `cudnn.benchmark` does; run twice, the first round
//! loading every candidate's kernels so that the second's times choose), or, where an earlier
//! run on this GPU model and cuDNN chose one, that run's ([`super::kept`]). f32 may use TF32
//! tensor cores, as torch's convolutions do by default; `LEROBOT_RS_CUDNN_TF32=0`
//! ([`allow_tf32`]) keeps exact f32 (FMA kernels only). `LEROBOT_RS_CUDNN_GRAPH` adds the plans
//! of cuDNN's graph API to the search ([`super::graph`]). `LEROBOT_RS_CUDA_SYNC=1`
//! ([`synchronise_every_call`]) synchronises the device around every call, to check the stream
//! ordering against.

#![expect(unsafe_code, reason = "cuDNN is a C library: raw handles, descriptors and device pointers")]

use std::sync::atomic::Ordering;
use std::sync::{Mutex, OnceLock};

use burn::tensor::DType;
use burn::tensor::ops::{ConvOptions, ConvTransposeOptions};

use super::algorithm::SEARCH_WORKSPACE;
use super::choice::Choice;
use super::context::{CudaTensor, buffers, dims, with_handle};
use super::counters::{BLAS_CALLS, CALLS, CHANNELS_LAST_CALLS, SEARCHES};
use super::earlier_runs::{distrust_earlier_run, earlier_runs_choice, keep};
use super::library;
use super::pass::Pass;
use super::plan::Plan;
use super::problem::{ConvDataType, ConvLayout, ConvProblem};
use super::search::{enqueue, search};
use super::settings::{synchronising, tf32};
use crate::cube::tensors::{empty_in_layout, into_layout, is_channels_last};

/// Runs one pass: `inputs` (lying in the problem's layout) in, a new tensor of its output's
/// shape out, lying in that layout too.
pub(crate) fn run(
    pass: Pass,
    problem: ConvProblem,
    inputs: [&CudaTensor; 2],
    dtype: DType,
) -> Result<CudaTensor, String> {
    let device = inputs[0].device.index;
    let plan = Plan::of(problem, device).map_err(|e| format!("descriptors: {e}"))?;
    let out_shape = match pass {
        Pass::Output => problem.output_shape(),
        Pass::InputGrad => problem.input.map(|d| d as usize),
        Pass::WeightGrad => problem.weight.map(|d| d as usize),
    };
    let output = empty_in_layout(inputs[0], &out_shape, dtype, problem.layout == ConvLayout::Nhwc);
    if plan.no_algorithm[pass as usize].load(Ordering::Relaxed) {
        return Err(format!("{pass:?}: no algorithm was found for this problem"));
    }
    let known = plan.algorithms.lock().unwrap_or_else(std::sync::PoisonError::into_inner)[pass as usize].clone();
    let algorithm = match known.or_else(|| earlier_runs_choice(&plan, pass, device)) {
        Some(algorithm) => algorithm,
        None => {
            let workspace = inputs[0].client.empty(SEARCH_WORKSPACE);
            let held = buffers(&[inputs[0], inputs[1], &output], Some(&workspace))?;
            SEARCHES.fetch_add(1, Ordering::Relaxed);
            let searched = with_handle(device, held.stream, |handle| {
                let [a, b, out, ws] = held.pointers[..] else { unreachable!("four buffers") };
                search(&plan, pass, (handle, held.stream), [a, b], out, ws)
            })
            .inspect_err(|_| plan.no_algorithm[pass as usize].store(true, Ordering::Relaxed))?;
            drop(held);
            if let Some(math) = searched.legacy_math {
                keep(&plan, pass, device, &searched.algorithm, math);
            }
            searched.algorithm
        }
    };
    let workspace = (algorithm.workspace() > 0).then(|| inputs[0].client.empty(algorithm.workspace()));
    let held = buffers(&[inputs[0], inputs[1], &output], workspace.as_ref())?;
    with_handle(device, held.stream, |handle| {
        let [a, b, out] = held.pointers[..3] else { unreachable!("three buffers") };
        let ws = held.pointers.get(3).copied().unwrap_or(0);
        let sync = synchronising();
        if sync {
            cudarc::driver::result::ctx::synchronize().map_err(|e| format!("synchronise: {e:?}"))?;
        }
        // SAFETY: the pointers are live buffers of the sizes the descriptors give (each lying
        // in the problem's layout, `attempt`'s and the output's; shapes checked by ConvProblem
        // and the callers), held until the call is enqueued; the
        // workspace is as large as the algorithm asked.
        unsafe { enqueue(&plan, handle, &algorithm, [a, b], out, (ws, algorithm.workspace())) }
            .inspect_err(|_| distrust_earlier_run(&plan, pass, device))
            .map_err(|e| format!("{pass:?}: {e}"))?;
        if sync {
            cudarc::driver::result::ctx::synchronize().map_err(|e| format!("synchronise: {e:?}"))?;
        }
        CALLS.fetch_add(1, Ordering::Relaxed);
        if problem.layout == ConvLayout::Nhwc {
            CHANNELS_LAST_CALLS.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    })?;
    Ok(output)
}

/// The problem of `x` by `w` with `options`, if cuDNN is here and takes it: channels-last where
/// the switch is on (`crate::channels_last_on`, the encoder's maps held so) and `x`, a 2-D
/// convolution's input, lies so; else channels-first (a 1-D convolution's input may lie
/// channels-last by accident, the U-Net's `[B, T, A]` actions seen as `[B, A, 1, T]`).
pub(crate) fn problem(x: &CudaTensor, w: &CudaTensor, options: &ConvOptions<2>) -> Option<ConvProblem> {
    library::status().as_ref().ok()?;
    let problem = ConvProblem::new(dims(x)?, dims(w)?, options, [x.dtype, w.dtype]);
    let problem = problem.map_err(|e| tracing::debug!("burn's convolution: {e}")).ok()?;
    let channels_last = crate::channels_last_on() && is_channels_last(x) && as_conv1d(&problem).is_none();
    Some(problem.in_layout(if channels_last { ConvLayout::Nhwc } else { ConvLayout::Nchw }))
}

/// The passes of problems a library failed on.
pub(crate) struct Failures(OnceLock<Mutex<Vec<(ConvProblem, Pass)>>>);

impl Failures {
    pub(crate) const fn new() -> Self {
        Self(OnceLock::new())
    }

    pub(crate) fn seen(&self) -> std::sync::MutexGuard<'_, Vec<(ConvProblem, Pass)>> {
        self.0.get_or_init(Default::default).lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Notes that `pass` of `problem` failed; true where it had not before.
    pub(crate) fn first(&self, problem: ConvProblem, pass: Pass) -> bool {
        let mut seen = self.seen();
        let first = !seen.contains(&(problem, pass));
        if first {
            seen.push((problem, pass));
        }
        first
    }

    /// Whether `pass` of `problem` failed before.
    pub(crate) fn before(&self, problem: ConvProblem, pass: Pass) -> bool {
        self.seen().contains(&(problem, pass))
    }
}

/// Where cuDNN failed (burn's operation runs instead, each call: cuDNN may take the next).
pub(crate) static CUDNN_FAILED: Failures = Failures::new();

/// Where cuBLAS's products failed (cuDNN takes the pass from then on).
pub(crate) static CUBLAS_FAILED: Failures = Failures::new();

/// Says once per problem and pass why cuDNN failed (burn's own convolution or transposed
/// convolution runs instead).
pub(crate) fn fell_back(problem: ConvProblem, pass: Pass, why: String) {
    if CUDNN_FAILED.first(problem, pass) {
        tracing::warn!("cuDNN failed on {problem:?} ({why}): burn's own operation instead");
    }
}

/// Runs `pass` of `problem` on `inputs` (each brought to the problem's layout: a copy where it
/// lies otherwise) through cuBLAS's products where asked for 1-D convolutions, else cuDNN; `None`
/// where both fail.
pub(crate) fn attempt(pass: Pass, problem: ConvProblem, inputs: [CudaTensor; 2], dtype: DType) -> Option<CudaTensor> {
    let inputs = inputs.map(|t| into_layout(t, problem.layout == ConvLayout::Nhwc));
    if problem.layout == ConvLayout::Nchw
        && conv1d_path() == Conv1dPath::Cublas
        && let Some(conv) = as_conv1d(&problem)
        && super::blas::loaded()
        && !CUBLAS_FAILED.before(problem, pass)
    {
        let products = super::blas::Cublas { tf32: !exact_f32(problem.data_type) };
        let [a, b] = inputs.clone();
        let unfolded = match pass {
            Pass::Output => crate::cube::unfold::output(a, b, &conv, &products),
            Pass::InputGrad => crate::cube::unfold::input_grad(a, b, &conv, &products),
            Pass::WeightGrad => crate::cube::unfold::weight_grad(a, b, &conv, &products),
        };
        match unfolded {
            Ok(out) => {
                BLAS_CALLS.fetch_add(1, Ordering::Relaxed);
                return Some(out);
            }
            Err(why) => {
                if CUBLAS_FAILED.first(problem, pass) {
                    tracing::warn!("cuBLAS's products failed on {problem:?} ({why}): cuDNN from now on");
                }
            }
        }
    }
    run(pass, problem, [&inputs[0], &inputs[1]], dtype).map_err(|why| fell_back(problem, pass, why)).ok()
}

/// Whether convolutions of `data_type` are computed in exact f32 now (f32, TF32 not allowed).
pub(crate) fn exact_f32(data_type: ConvDataType) -> bool {
    data_type == ConvDataType::F32 && !tf32().load(Ordering::Relaxed)
}

/// The 1-D convolution `problem` is, if it is one ([`crate::cube::unfold::Conv1d::of_2d`]).
pub(crate) fn as_conv1d(problem: &ConvProblem) -> Option<crate::cube::unfold::Conv1d> {
    let sizes = |values: [i32; 4]| values.map(|v| usize::try_from(v).unwrap_or(0));
    let pair = |values: [i32; 2]| values.map(|v| usize::try_from(v).unwrap_or(0));
    crate::cube::unfold::Conv1d::of_2d(
        sizes(problem.input),
        sizes(problem.weight),
        pair(problem.padding),
        pair(problem.stride),
        pair(problem.dilation),
        usize::try_from(problem.groups).unwrap_or(0),
    )
}

/// `x` `[N, C, H, W]` convolved with `w` `[O, C / groups, kh, kw]` (no bias), or `None` where
/// cuDNN is missing or does not take it.
pub fn conv2d(x: &CudaTensor, w: &CudaTensor, options: &ConvOptions<2>) -> Option<CudaTensor> {
    let problem = problem(x, w, options)?;
    attempt(Pass::Output, problem, [x.clone(), w.clone()], x.dtype)
}

/// The gradient of [`conv2d`] with respect to `x`, given the output's, `dy`.
pub fn conv2d_input_grad(
    x: &CudaTensor,
    w: &CudaTensor,
    dy: &CudaTensor,
    options: &ConvOptions<2>,
) -> Option<CudaTensor> {
    let problem = problem(x, w, options)?;
    (dims(dy)? == problem.output_shape() && dy.dtype == x.dtype).then_some(())?;
    attempt(Pass::InputGrad, problem, [w.clone(), dy.clone()], x.dtype)
}

/// The gradient of [`conv2d`] with respect to `w`, given the output's, `dy`.
pub fn conv2d_weight_grad(
    x: &CudaTensor,
    w: &CudaTensor,
    dy: &CudaTensor,
    options: &ConvOptions<2>,
) -> Option<CudaTensor> {
    let problem = problem(x, w, options)?;
    (dims(dy)? == problem.output_shape() && dy.dtype == x.dtype).then_some(())?;
    attempt(Pass::WeightGrad, problem, [x.clone(), dy.clone()], w.dtype)
}

/// `x` `[N, C_in, H, W]` by `w` `[C_in, C_out / groups, kh, kw]` in a transposed convolution
/// (no bias): the input-gradient pass of the convolution it transposes, or `None` where cuDNN
/// is missing or does not take it. Its gradients are that convolution's other two passes
/// ([`crate::ConvolutionKernels::conv_transpose2d_input_grad`]).
pub fn conv_transpose2d(x: &CudaTensor, w: &CudaTensor, options: &ConvTransposeOptions<2>) -> Option<CudaTensor> {
    library::status().as_ref().ok()?;
    let problem = ConvProblem::transposed(dims(x)?, dims(w)?, options, [x.dtype, w.dtype]);
    let problem = problem.map_err(|e| tracing::debug!("burn's transposed convolution: {e}")).ok()?;
    attempt(Pass::InputGrad, problem, [w.clone(), x.clone()], x.dtype)
}

/// Whether convolutions of `dtype` go to cuDNN (it loaded, and convolves that type).
pub fn takes(dtype: DType) -> bool {
    library::status().is_ok() && ConvDataType::of(dtype).is_some()
}

/// Where 1-D convolutions (the U-Net's, 2-D ones of height 1) run on cuda.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conv1dPath {
    /// cuDNN's algorithms, as every other convolution (the default).
    Cudnn,
    /// The caller's composition of burn's operations: the windows side by side, one matrix
    /// product on cubecl's TF32 tensor cores in f32 (`trainer`'s `GemmConv1d`).
    Burn,
    /// One cuBLAS product over the unfolded input per pass ([`crate::unfold`]), cuDNN where
    /// cuBLAS fails.
    Cublas,
}

/// [`Conv1dPath`] as `LEROBOT_RS_CONV1D` names it (`cudnn`, `burn` or `cublas`; cuDNN where unset
/// or unknown) until [`use_conv1d`] says otherwise.
pub(crate) static CONV1D: Choice<Conv1dPath> =
    Choice::new(&[Conv1dPath::Cudnn, Conv1dPath::Burn, Conv1dPath::Cublas], || {
        match std::env::var("LEROBOT_RS_CONV1D").as_deref() {
            Ok("burn") => Conv1dPath::Burn,
            Ok("cublas") => Conv1dPath::Cublas,
            Ok("cudnn") | Err(_) => Conv1dPath::Cudnn,
            Ok(other) => {
                tracing::warn!("LEROBOT_RS_CONV1D={other:?} is none of cudnn, burn or cublas: cuDNN");
                Conv1dPath::Cudnn
            }
        }
    });

/// Sends 1-D convolutions down `path`: the seventh contact's profile had cuDNN's chosen kernels
/// at 10-15 TFLOP/s on the U-Net's largest ones, so the other two are there to be timed beside
/// it.
pub fn use_conv1d(path: Conv1dPath) {
    CONV1D.set(path);
}

/// The path 1-D convolutions take now ([`use_conv1d`], else `LEROBOT_RS_CONV1D`).
pub fn conv1d_path() -> Conv1dPath {
    CONV1D.get()
}

/// Whether 1-D convolutions of `dtype` come here ([`takes`], unless [`use_conv1d`] leaves them to
/// burn's product). Exact f32 keeps them: burn's product takes TF32 for f32 on tensor cores.
pub fn takes_conv1d(dtype: DType) -> bool {
    takes(dtype) && (conv1d_path() != Conv1dPath::Burn || ConvDataType::of(dtype).is_some_and(exact_f32))
}
