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

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use burn::tensor::ops::{ConvOptions, ConvTransposeOptions};
use burn::tensor::{DType, Shape, TensorMetadata};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use cubecl::cuda::CudaRuntime;
use cudarc::cudnn::result::CudnnError;
use cudarc::cudnn::sys;

use super::choice::Choice;
use super::graph::{self, GraphPlan, GraphUse};
use super::kept::{KEPT_ALGORITHMS_FILE, KeptAlgorithm, KeptAlgorithms};
use super::library;
use super::problem::{ConvDataType, ConvProblem};

/// A tensor of burn's untuned cuda backend.
pub type CudaTensor = CubeTensor<CudaRuntime>;

/// The workspace the algorithm search offers each algorithm; ones needing more are passed over.
const SEARCH_WORKSPACE: usize = 256 << 20;

/// One of the convolution's passes (the legacy API's and the graph API's alike).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pass {
    /// `[x, w]` to `y`.
    Output,
    /// `[w, dy]` to `dx`.
    InputGrad,
    /// `[x, dy]` to `dw`.
    WeightGrad,
}

/// The algorithm found for one pass: one of the legacy API's, with its workspace, or a plan of
/// the graph API's.
#[derive(Debug, Clone)]
enum Algorithm {
    Output(sys::cudnnConvolutionFwdAlgo_t, usize),
    InputGrad(sys::cudnnConvolutionBwdDataAlgo_t, usize),
    WeightGrad(sys::cudnnConvolutionBwdFilterAlgo_t, usize),
    /// A graph plan, and the legacy search's algorithm for calls it cannot take (buffers not
    /// aligned as the plan declares them).
    Graph(Arc<GraphPlan>, Option<Box<Algorithm>>),
}

impl Algorithm {
    /// The legacy algorithm `kept` names for `pass`, if it names one of that pass, with a
    /// workspace the search could have given it.
    fn from_kept(pass: Pass, kept: &KeptAlgorithm) -> Option<(Self, sys::cudnnMathType_t)> {
        let math = named(&MATH_TYPES, &kept.math)?;
        if kept.workspace > SEARCH_WORKSPACE {
            return None;
        }
        let algorithm = match pass {
            Pass::Output => Self::Output(named(&OUTPUT_ALGORITHMS, &kept.algorithm)?, kept.workspace),
            Pass::InputGrad => Self::InputGrad(named(&INPUT_GRAD_ALGORITHMS, &kept.algorithm)?, kept.workspace),
            Pass::WeightGrad => Self::WeightGrad(named(&WEIGHT_GRAD_ALGORITHMS, &kept.algorithm)?, kept.workspace),
        };
        Some((algorithm, math))
    }

    /// This legacy algorithm with `math`, as a file keeps it (none for a graph plan).
    fn to_kept(&self, math: sys::cudnnMathType_t) -> Option<KeptAlgorithm> {
        let (algorithm, workspace) = match self {
            Self::Output(algo, bytes) => (format!("{algo:?}"), *bytes),
            Self::InputGrad(algo, bytes) => (format!("{algo:?}"), *bytes),
            Self::WeightGrad(algo, bytes) => (format!("{algo:?}"), *bytes),
            Self::Graph(..) => return None,
        };
        Some(KeptAlgorithm { algorithm, math: format!("{math:?}"), workspace })
    }

    fn workspace(&self) -> usize {
        match self {
            Self::Output(_, bytes) | Self::InputGrad(_, bytes) | Self::WeightGrad(_, bytes) => *bytes,
            Self::Graph(plan, legacy) => plan.workspace.max(legacy.as_ref().map_or(0, |l| l.workspace())),
        }
    }
}

/// Whether f32 convolutions may use TF32 tensor cores: `LEROBOT_RS_CUDNN_TF32` (on unless `0`
/// or `off`) until [`allow_tf32`] says otherwise.
static TF32: OnceLock<AtomicBool> = OnceLock::new();

fn tf32() -> &'static AtomicBool {
    TF32.get_or_init(|| {
        AtomicBool::new(!std::env::var("LEROBOT_RS_CUDNN_TF32").is_ok_and(|v| matches!(v.as_str(), "0" | "off")))
    })
}

/// Lets f32 convolutions use TF32 tensor cores (torch's default), or keeps them exact f32.
pub fn allow_tf32(allow: bool) {
    tf32().store(allow, Ordering::Relaxed);
}

/// Whether only deterministic algorithms are taken: `LEROBOT_RS_CUDNN_DETERMINISTIC=1` until
/// [`deterministic`] says otherwise.
static DETERMINISTIC: OnceLock<AtomicBool> = OnceLock::new();

fn deterministic_only() -> &'static AtomicBool {
    DETERMINISTIC
        .get_or_init(|| AtomicBool::new(std::env::var("LEROBOT_RS_CUDNN_DETERMINISTIC").is_ok_and(|v| v == "1")))
}

/// Takes only algorithms that give the same bits on every run (torch's
/// `cudnn.deterministic`), or the fastest of any (the default).
pub fn deterministic(only: bool) {
    deterministic_only().store(only, Ordering::Relaxed);
}

/// Whether every call synchronises the device before and after: `LEROBOT_RS_CUDA_SYNC=1` until
/// [`synchronise_every_call`] says otherwise.
static SYNC: OnceLock<AtomicBool> = OnceLock::new();

fn sync() -> &'static AtomicBool {
    SYNC.get_or_init(|| AtomicBool::new(std::env::var("LEROBOT_RS_CUDA_SYNC").is_ok_and(|v| v == "1")))
}

/// Whether every cuDNN and cuBLAS call is synchronised ([`synchronise_every_call`]).
pub(super) fn synchronising() -> bool {
    sync().load(Ordering::Relaxed)
}

/// Synchronises the device before and after every cuDNN and cuBLAS call (to check the stream
/// ordering against, and to name the call where a kernel faults), or not (the default).
pub fn synchronise_every_call(synchronise: bool) {
    sync().store(synchronise, Ordering::Relaxed);
}

/// Convolution passes cuDNN has run in this process.
static CALLS: AtomicU64 = AtomicU64::new(0);

/// 1-D convolution passes run as cuBLAS's products over the unfolded input.
static BLAS_CALLS: AtomicU64 = AtomicU64::new(0);

/// Those of them run by a plan of the graph API (not by the legacy algorithm kept beside it).
static GRAPH_CALLS: AtomicU64 = AtomicU64::new(0);

/// How many convolution passes a plan of cuDNN's graph API has run in this process.
pub fn graph_calls() -> u64 {
    GRAPH_CALLS.load(Ordering::Relaxed)
}

/// The algorithm searches this process has run (one a pass of a problem on a device, where no
/// kept choice was taken).
static SEARCHES: AtomicU64 = AtomicU64::new(0);

/// The legacy searches whose second round chose another algorithm than their first.
static SECOND_ROUND_CHANGES: AtomicU64 = AtomicU64::new(0);

/// The passes of problems that took a kept algorithm (an earlier run's, or another device's in
/// this run) instead of searching.
static EARLIER_RUNS_CHOICES: AtomicU64 = AtomicU64::new(0);

/// How many algorithm searches (legacy, with the graph API's where it is on) this process has
/// run.
pub fn searches() -> u64 {
    SEARCHES.load(Ordering::Relaxed)
}

/// How many legacy searches chose another algorithm in their second round, the one whose
/// times count, than in their first, where each algorithm's first launch also loaded its code.
pub fn second_round_changes() -> u64 {
    SECOND_ROUND_CHANGES.load(Ordering::Relaxed)
}

/// How many passes of problems took a kept algorithm (an earlier run's, or another device's of
/// the same model in this run), without searching, in this process.
pub fn earlier_runs_choices() -> u64 {
    EARLIER_RUNS_CHOICES.load(Ordering::Relaxed)
}

/// How many 1-D convolution passes ran as cuBLAS's products over their unfolded input
/// (`LEROBOT_RS_CONV1D=cublas`) in this process.
pub fn blas_calls() -> u64 {
    BLAS_CALLS.load(Ordering::Relaxed)
}

/// How many convolution passes cuDNN has enqueued in this process (the checks tell by it that
/// cuDNN ran, not burn's convolution).
pub fn calls() -> u64 {
    CALLS.load(Ordering::Relaxed)
}

fn data_type(data_type: ConvDataType) -> sys::cudnnDataType_t {
    match data_type {
        ConvDataType::F32 => sys::cudnnDataType_t::CUDNN_DATA_FLOAT,
        ConvDataType::F16 => sys::cudnnDataType_t::CUDNN_DATA_HALF,
        ConvDataType::Bf16 => sys::cudnnDataType_t::CUDNN_DATA_BFLOAT16,
    }
}

/// The legacy API's algorithms and math types, to read their kept names back.
const OUTPUT_ALGORITHMS: [sys::cudnnConvolutionFwdAlgo_t; 8] = {
    use sys::cudnnConvolutionFwdAlgo_t::*;
    [
        CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
        CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
        CUDNN_CONVOLUTION_FWD_ALGO_GEMM,
        CUDNN_CONVOLUTION_FWD_ALGO_DIRECT,
        CUDNN_CONVOLUTION_FWD_ALGO_FFT,
        CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING,
        CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD,
        CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED,
    ]
};
const INPUT_GRAD_ALGORITHMS: [sys::cudnnConvolutionBwdDataAlgo_t; 6] = {
    use sys::cudnnConvolutionBwdDataAlgo_t::*;
    [
        CUDNN_CONVOLUTION_BWD_DATA_ALGO_0,
        CUDNN_CONVOLUTION_BWD_DATA_ALGO_1,
        CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT,
        CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING,
        CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD,
        CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED,
    ]
};
const WEIGHT_GRAD_ALGORITHMS: [sys::cudnnConvolutionBwdFilterAlgo_t; 7] = {
    use sys::cudnnConvolutionBwdFilterAlgo_t::*;
    [
        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0,
        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,
        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT,
        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3,
        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD,
        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED,
        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING,
    ]
};
const MATH_TYPES: [sys::cudnnMathType_t; 4] = {
    use sys::cudnnMathType_t::*;
    [CUDNN_DEFAULT_MATH, CUDNN_TENSOR_OP_MATH, CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION, CUDNN_FMA_MATH]
};

/// The member of `all` whose name (its `Debug`) is `name`.
fn named<T: Copy + std::fmt::Debug>(all: &[T], name: &str) -> Option<T> {
    all.iter().copied().find(|member| format!("{member:?}") == name)
}

/// The algorithms earlier runs chose, kept beside the compiled kernels; none where those are
/// not kept.
fn kept_algorithms() -> Option<&'static KeptAlgorithms> {
    static KEPT: OnceLock<Option<KeptAlgorithms>> = OnceLock::new();
    KEPT.get_or_init(|| {
        crate::kernel_cache::configure().map(|folder| KeptAlgorithms::load(folder.join(KEPT_ALGORITHMS_FILE)))
    })
    .as_ref()
}

/// What the legacy algorithm of `pass` of `plan` on `device` is kept under: the GPU's model,
/// cuDNN's version, the problem, the search's constraints and the pass. None where the graph
/// API takes part in the search (its plans are not kept) or the GPU cannot be named.
fn kept_key(plan: &Plan, pass: Pass, device: usize) -> Option<String> {
    if plan.settings.graph != GraphUse::Off {
        return None;
    }
    let version = library::status().as_ref().ok()?;
    let gpu = cudarc::driver::result::device::get(device as std::ffi::c_int)
        .and_then(cudarc::driver::result::device::get_name)
        .ok()?;
    let Settings { exact, deterministic, .. } = plan.settings;
    Some(format!(
        "{gpu} | cuDNN {version} | {:?} | exact f32 {exact}, deterministic {deterministic} | {pass:?}",
        plan.problem
    ))
}

/// The math torch's convolutions allow: TF32 for f32 unless exact, tensor cores for halves.
fn math(data_type: ConvDataType, tf32: bool) -> sys::cudnnMathType_t {
    match (data_type, tf32) {
        (ConvDataType::F32, true) => sys::cudnnMathType_t::CUDNN_DEFAULT_MATH,
        (ConvDataType::F32, false) => sys::cudnnMathType_t::CUDNN_FMA_MATH,
        _ => sys::cudnnMathType_t::CUDNN_TENSOR_OP_MATH,
    }
}

/// What a plan's search may take, as the switches stood when the plan was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Settings {
    /// Exact f32: FMA algorithms only.
    exact: bool,
    /// Only algorithms that give the same bits every run.
    deterministic: bool,
    /// Whether the search times the graph API's plans too, or takes them first.
    graph: GraphUse,
}

/// A problem's cuDNN descriptors (one convolution descriptor per pass, each set to the math of
/// its pass's algorithm) and the algorithms found for it.
struct Plan {
    problem: ConvProblem,
    settings: Settings,
    input: sys::cudnnTensorDescriptor_t,
    weight: sys::cudnnFilterDescriptor_t,
    output: sys::cudnnTensorDescriptor_t,
    convolution: [sys::cudnnConvolutionDescriptor_t; 3],
    algorithms: Mutex<[Option<Algorithm>; 3]>,
    /// The passes whose search found no algorithm: burn's convolution from then on, without
    /// searching again.
    no_algorithm: [AtomicBool; 3],
    /// The passes running an algorithm an earlier run chose ([`earlier_runs_choice`]).
    from_earlier_run: [AtomicBool; 3],
    /// The passes whose earlier run's algorithm failed: searched again, and the choice replaced.
    earlier_run_failed: [AtomicBool; 3],
}

// SAFETY: descriptors are host-side parameter blocks; after `Plan::new` only a pass's
// convolution descriptor is written (its math type), under `algorithms`' lock, before any call
// reads it.
unsafe impl Send for Plan {}
// SAFETY: as for `Send`.
unsafe impl Sync for Plan {}

impl Plan {
    fn new(problem: ConvProblem, settings: Settings) -> Result<Self, CudnnError> {
        use cudarc::cudnn::result as cudnn;
        let element = data_type(problem.data_type);
        let format = sys::cudnnTensorFormat_t::CUDNN_TENSOR_NCHW;
        // SAFETY: each descriptor is created here, set once with sizes ConvProblem checked, and
        // destroyed in `Drop` only.
        unsafe {
            let input = cudnn::create_tensor_descriptor()?;
            cudnn::set_tensor4d_descriptor(input, format, element, problem.input)?;
            let output = cudnn::create_tensor_descriptor()?;
            cudnn::set_tensor4d_descriptor(output, format, element, problem.output)?;
            let weight = cudnn::create_filter_descriptor()?;
            cudnn::set_filter4d_descriptor(weight, element, format, problem.weight)?;
            let mut convolution = [std::ptr::null_mut(); 3];
            for descriptor in &mut convolution {
                *descriptor = cudnn::create_convolution_descriptor()?;
                let [pad_h, pad_w] = problem.padding;
                let [stride_h, stride_w] = problem.stride;
                let [dilation_h, dilation_w] = problem.dilation;
                cudnn::set_convolution2d_descriptor(
                    *descriptor,
                    pad_h,
                    pad_w,
                    stride_h,
                    stride_w,
                    dilation_h,
                    dilation_w,
                    sys::cudnnConvolutionMode_t::CUDNN_CROSS_CORRELATION,
                    sys::cudnnDataType_t::CUDNN_DATA_FLOAT,
                )?;
                cudnn::set_convolution_group_count(*descriptor, problem.groups)?;
                cudnn::set_convolution_math_type(*descriptor, math(problem.data_type, !settings.exact))?;
            }
            Ok(Self {
                problem,
                settings,
                input,
                weight,
                output,
                convolution,
                algorithms: Mutex::new([const { None }; 3]),
                no_algorithm: Default::default(),
                from_earlier_run: Default::default(),
                earlier_run_failed: Default::default(),
            })
        }
    }

    /// Whether the search may take an algorithm of `math`: with exact f32, FMA only.
    fn allows(&self, math: sys::cudnnMathType_t) -> bool {
        !(self.settings.exact && self.problem.data_type == ConvDataType::F32)
            || math == sys::cudnnMathType_t::CUDNN_FMA_MATH
    }

    /// The plan of `problem` on `device`, made at its first use there. Each device has its own,
    /// as torch's benchmark cache keys its choices by device: the graph API's plans are built
    /// with one device's cuDNN handle and run only on that device.
    fn of(problem: ConvProblem, device: usize) -> Result<Arc<Plan>, CudnnError> {
        /// The plans made, by device, problem and settings.
        type Plans = HashMap<(usize, ConvProblem, Settings), Arc<Plan>>;
        static PLANS: OnceLock<Mutex<Plans>> = OnceLock::new();
        let settings = Settings {
            exact: !tf32().load(Ordering::Relaxed),
            deterministic: deterministic_only().load(Ordering::Relaxed),
            graph: graph::graph_use(),
        };
        let mut plans = PLANS.get_or_init(Default::default).lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(plan) = plans.get(&(device, problem, settings)) {
            return Ok(plan.clone());
        }
        let plan = Arc::new(Plan::new(problem, settings)?);
        plans.insert((device, problem, settings), plan.clone());
        Ok(plan)
    }
}

impl Drop for Plan {
    fn drop(&mut self) {
        use cudarc::cudnn::result as cudnn;
        // SAFETY: created in `Plan::new`, destroyed once; errors at teardown are of no use.
        unsafe {
            let _ = cudnn::destroy_tensor_descriptor(self.input);
            let _ = cudnn::destroy_tensor_descriptor(self.output);
            let _ = cudnn::destroy_filter_descriptor(self.weight);
            for descriptor in self.convolution {
                let _ = cudnn::destroy_convolution_descriptor(descriptor);
            }
        }
    }
}

/// A CUDA driver call's error, said.
pub(crate) fn driver(e: cudarc::driver::DriverError) -> String {
    format!("CUDA driver: {e:?}")
}

/// Makes `device`'s primary context (cubecl's) current on this thread, for driver calls.
pub(crate) fn primary_context_current(device: usize) -> Result<(), String> {
    // SAFETY: the device exists (burn made the tensors on it) and the driver is initialised.
    unsafe {
        let ordinal = device as std::ffi::c_int;
        let context =
            cudarc::driver::result::primary_ctx::retain(cudarc::driver::result::device::get(ordinal).map_err(driver)?)
                .map_err(driver)?;
        cudarc::driver::result::ctx::set_current(context).map_err(driver)?;
        cudarc::driver::result::primary_ctx::release(cudarc::driver::result::device::get(ordinal).map_err(driver)?)
            .map_err(driver)?;
    }
    Ok(())
}

/// This thread's handle of `library` for `device`, made by `create` at its first use. Never
/// destroyed: the graph API's plans, kept for the process, hold the cuDNN handle they were built
/// with (torch keeps its pooled handles for the same reason), and a thread that ends leaves its
/// few kilobytes behind.
pub(super) fn thread_handle(
    library: &'static str,
    device: usize,
    create: impl FnOnce() -> Result<*mut c_void, String>,
) -> Result<*mut c_void, String> {
    thread_local! {
        static HANDLES: RefCell<HashMap<(&'static str, usize), usize>> = RefCell::new(HashMap::new());
    }
    HANDLES.with(|handles| match handles.borrow_mut().entry((library, device)) {
        std::collections::hash_map::Entry::Occupied(entry) => Ok(*entry.get() as *mut c_void),
        std::collections::hash_map::Entry::Vacant(entry) => Ok(*entry.insert(create()? as usize) as *mut c_void),
    })
}

/// Runs `f` with this thread's cuDNN handle for `device`, on `stream`, the device's primary
/// context (cubecl's) current.
fn with_handle<T>(
    device: usize,
    stream: cudarc::driver::sys::CUstream,
    f: impl FnOnce(sys::cudnnHandle_t) -> Result<T, String>,
) -> Result<T, String> {
    primary_context_current(device)?;
    let create = || match cudarc::cudnn::result::create_handle() {
        Ok(handle) => Ok(handle.cast()),
        Err(e) => Err(format!("cudnnCreate: {e}")),
    };
    let handle: sys::cudnnHandle_t = thread_handle("cudnn", device, create)?.cast();
    // SAFETY: the handle is live; the stream is cubecl's, live while its tensors are.
    unsafe { cudarc::cudnn::result::set_stream(handle, stream as sys::cudaStream_t) }
        .map_err(|e| format!("cudnnSetStream: {e}"))?;
    f(handle)
}

fn dims(tensor: &CudaTensor) -> Option<[usize; 4]> {
    let shape = tensor.shape();
    (shape.num_dims() == 4).then(|| [shape[0], shape[1], shape[2], shape[3]])
}

/// The device pointers of some tensors' buffers (and a workspace's), held while a library call
/// that reads them is enqueued, and the stream cubecl orders their work on.
pub(super) struct Buffers {
    /// In the order asked for, the workspace last.
    pub(super) pointers: Vec<u64>,
    /// The stream of the last buffer's resource (all one device's).
    pub(super) stream: cudarc::driver::sys::CUstream,
    _held: Vec<Box<dyn std::any::Any>>,
}

/// The buffers of `tensors` (and of `workspace`), as [`Buffers`].
pub(super) fn buffers(tensors: &[&CudaTensor], workspace: Option<&cubecl::server::Handle>) -> Result<Buffers, String> {
    let client = &tensors[0].client;
    let mut pointers = Vec::new();
    let mut held: Vec<Box<dyn std::any::Any>> = Vec::new();
    let mut stream = std::ptr::null_mut();
    let handles = tensors.iter().map(|t| t.handle.clone()).chain(workspace.cloned());
    for handle in handles {
        let resource = client.get_resource(handle).map_err(|e| format!("a buffer's device pointer: {e:?}"))?;
        pointers.push(resource.resource().ptr);
        stream = resource.resource().stream;
        held.push(Box::new(resource));
    }
    Ok(Buffers { pointers, stream, _held: held })
}

/// Runs one pass: `inputs` (contiguous) in, a new tensor of `out_shape` out.
fn run(pass: Pass, problem: ConvProblem, inputs: [&CudaTensor; 2], dtype: DType) -> Result<CudaTensor, String> {
    let device = inputs[0].device.index;
    let plan = Plan::of(problem, device).map_err(|e| format!("descriptors: {e}"))?;
    let out_shape = match pass {
        Pass::Output => problem.output_shape(),
        Pass::InputGrad => problem.input.map(|d| d as usize),
        Pass::WeightGrad => problem.weight.map(|d| d as usize),
    };
    let output = crate::cube::empty_like(inputs[0], Shape::from(out_shape.to_vec()), dtype);
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
        // SAFETY: the pointers are live buffers of the sizes the descriptors give (contiguous,
        // shapes checked by ConvProblem and the callers), held until the call is enqueued; the
        // workspace is as large as the algorithm asked.
        unsafe { enqueue(&plan, handle, &algorithm, [a, b], out, (ws, algorithm.workspace())) }
            .inspect_err(|_| distrust_earlier_run(&plan, pass, device))
            .map_err(|e| format!("{pass:?}: {e}"))?;
        if sync {
            cudarc::driver::result::ctx::synchronize().map_err(|e| format!("synchronise: {e:?}"))?;
        }
        CALLS.fetch_add(1, Ordering::Relaxed);
        Ok(())
    })?;
    Ok(output)
}

/// The algorithm an earlier run chose for `pass` of `plan`, if one is kept and the plan's
/// settings allow its math: set on the pass's convolution descriptor with its math, and taken
/// for the rest of the run.
fn earlier_runs_choice(plan: &Plan, pass: Pass, device: usize) -> Option<Algorithm> {
    if plan.earlier_run_failed[pass as usize].load(Ordering::Relaxed) {
        return None;
    }
    let key = kept_key(plan, pass, device)?;
    let kept = kept_algorithms()?.get(&key)?;
    let Some((algorithm, math)) = Algorithm::from_kept(pass, &kept).filter(|(_, math)| plan.allows(*math)) else {
        tracing::warn!("cuDNN: the kept {kept:?} is not one this build takes for {pass:?}: searching again");
        return None;
    };
    let mut algorithms = plan.algorithms.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(found) = &algorithms[pass as usize] {
        return Some(found.clone());
    }
    // SAFETY: the descriptor is live; no call reads it while the lock is held.
    unsafe { cudarc::cudnn::result::set_convolution_math_type(plan.convolution[pass as usize], math) }
        .inspect_err(|e| tracing::warn!("cudnnSetConvolutionMathType: {e}: searching again"))
        .ok()?;
    tracing::debug!("cuDNN {pass:?} of {:?}: {algorithm:?}, {math:?}, kept", plan.problem);
    algorithms[pass as usize] = Some(algorithm.clone());
    plan.from_earlier_run[pass as usize].store(true, Ordering::Relaxed);
    EARLIER_RUNS_CHOICES.fetch_add(1, Ordering::Relaxed);
    Some(algorithm)
}

/// After a failed call: where `pass` ran an earlier run's algorithm, it is taken out of the
/// file and the pass's next call searches (its choice then kept instead); this call takes burn's
/// operation.
fn distrust_earlier_run(plan: &Plan, pass: Pass, device: usize) {
    let mut algorithms = plan.algorithms.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if plan.from_earlier_run[pass as usize].swap(false, Ordering::Relaxed) {
        tracing::warn!("cuDNN: an earlier run's algorithm for {pass:?} of {:?} failed: searching again", plan.problem);
        plan.earlier_run_failed[pass as usize].store(true, Ordering::Relaxed);
        algorithms[pass as usize] = None;
        if let (Some(key), Some(kept_algorithms)) = (kept_key(plan, pass, device), kept_algorithms()) {
            _ = kept_algorithms.forget(&key).inspect_err(|why| tracing::warn!("cuDNN: {why}"));
        }
    }
}

/// Keeps the legacy algorithm the search found for `pass` of `plan`, of `math`, for later runs;
/// a file that cannot be written is said once.
fn keep(plan: &Plan, pass: Pass, device: usize, algorithm: &Algorithm, math: sys::cudnnMathType_t) {
    let (Some(key), Some(kept_algorithms)) = (kept_key(plan, pass, device), kept_algorithms()) else { return };
    let Some(kept) = algorithm.to_kept(math) else { return };
    if let Err(why) = kept_algorithms.keep(key, kept) {
        static SAID: AtomicBool = AtomicBool::new(false);
        if !SAID.swap(true, Ordering::Relaxed) {
            tracing::warn!("cuDNN's algorithms not kept for later runs: {why}");
        }
    }
}

fn ptr(address: u64) -> *mut c_void {
    address as usize as *mut c_void
}

/// Enqueues one pass with its algorithm: `[x, w]` to y, `[w, dy]` to dx, `[x, dy]` to dw.
///
/// # Safety
/// The pointers must be live device buffers as large as the plan's descriptors say.
unsafe fn enqueue(
    plan: &Plan,
    handle: sys::cudnnHandle_t,
    algorithm: &Algorithm,
    [a, b]: [u64; 2],
    out: u64,
    (workspace, workspace_size): (u64, usize),
) -> Result<(), String> {
    let (one, zero) = (1f32, 0f32);
    let (one, zero) = (&one as *const f32 as *const c_void, &zero as *const f32 as *const c_void);
    // SAFETY: as the function says.
    unsafe {
        match *algorithm {
            Algorithm::Graph(ref graph_plan, ref legacy) => {
                return match legacy {
                    Some(legacy) if !graph_plan.takes([a, b, out]) => {
                        enqueue(plan, handle, legacy, [a, b], out, (workspace, workspace_size))
                    }
                    _ => graph_plan
                        .execute(handle, [a, b], out, workspace)
                        .inspect(|()| _ = GRAPH_CALLS.fetch_add(1, Ordering::Relaxed)),
                };
            }
            Algorithm::Output(algo, _) => sys::cudnnConvolutionForward(
                handle,
                one,
                plan.input,
                ptr(a),
                plan.weight,
                ptr(b),
                plan.convolution[Pass::Output as usize],
                algo,
                ptr(workspace),
                workspace_size,
                zero,
                plan.output,
                ptr(out),
            ),
            Algorithm::InputGrad(algo, _) => sys::cudnnConvolutionBackwardData(
                handle,
                one,
                plan.weight,
                ptr(a),
                plan.output,
                ptr(b),
                plan.convolution[Pass::InputGrad as usize],
                algo,
                ptr(workspace),
                workspace_size,
                zero,
                plan.input,
                ptr(out),
            ),
            Algorithm::WeightGrad(algo, _) => sys::cudnnConvolutionBackwardFilter(
                handle,
                one,
                plan.input,
                ptr(a),
                plan.output,
                ptr(b),
                plan.convolution[Pass::WeightGrad as usize],
                algo,
                ptr(workspace),
                workspace_size,
                zero,
                plan.weight,
                ptr(out),
            ),
        }
        .result()
        .map_err(|e| e.to_string())
    }
}

/// Times every algorithm of `pass` on the real buffers (cuDNN's search, which waits for the
/// device; twice, the second round's times choosing) and keeps the fastest that ran, with exact
/// f32 only the FMA ones, when asked only deterministic ones; sets the pass's convolution descriptor to its math. Where the graph API
/// is on ([`graph::use_graph`]), its heuristics' plans are timed too, and the fastest of all kept.
fn search(
    plan: &Plan,
    pass: Pass,
    (handle, stream): (sys::cudnnHandle_t, cudarc::driver::sys::CUstream),
    [a, b]: [u64; 2],
    out: u64,
    workspace: u64,
) -> Result<Searched, String> {
    let mut algorithms = plan.algorithms.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(algorithm) = &algorithms[pass as usize] {
        return Ok(Searched { algorithm: algorithm.clone(), legacy_math: None });
    }
    // cuDNN times each algorithm once, and the first launch of a kernel in a process loads its
    // module (CUDA's lazy loading) inside the timed interval: a first round runs every
    // candidate, and the second's times choose.
    let buffers = [a, b, out, workspace];
    let warm = legacy_search(plan, pass, handle, buffers);
    let found = legacy_search(plan, pass, handle, buffers);
    if let (Ok(Some((first, first_math, first_ms))), Ok(Some((second, second_math, second_ms)))) = (&warm, &found)
        && (format!("{first:?}"), first_math) != (format!("{second:?}"), second_math)
    {
        SECOND_ROUND_CHANGES.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(
            "cuDNN {pass:?} of {:?}: the second round chose {second:?}, {second_math:?} ({second_ms:.3} ms), the first \
             {first:?}, {first_math:?} ({first_ms:.3} ms)",
            plan.problem
        );
    }
    let legacy = match found {
        Ok(legacy) => legacy,
        Err(e) if plan.settings.graph == GraphUse::Off => return Err(format!("{pass:?} algorithm search: {e}")),
        Err(e) => {
            tracing::debug!("cuDNN's legacy search on {:?} failed ({e}): its graph API alone", plan.problem);
            None
        }
    };
    let graph = if plan.settings.graph != GraphUse::Off {
        let buffers = [a, b, out];
        let settings = [plan.settings.exact, plan.settings.deterministic];
        let workspace = (workspace, SEARCH_WORKSPACE);
        graph::fastest_plan(handle, stream, &plan.problem, pass, settings, buffers, workspace)
            .inspect_err(|why| tracing::warn!("cuDNN's graph API on {:?}: {why}", plan.problem))
            .ok()
            .flatten()
    } else {
        None
    };
    // The legacy algorithm's math on the pass's descriptor, for it or as the graph plan's
    // fallback.
    if let Some((_, math, _)) = &legacy {
        // SAFETY: the descriptor is live; no call reads it while the lock is held.
        unsafe { cudarc::cudnn::result::set_convolution_math_type(plan.convolution[pass as usize], *math) }
            .map_err(|e| format!("cudnnSetConvolutionMathType: {e}"))?;
    }
    let (algorithm, legacy_math) = match (legacy, graph) {
        (legacy, Some((graph_plan, graph_ms)))
            if plan.settings.graph == GraphUse::Only
                || legacy.as_ref().is_none_or(|(_, _, legacy_ms)| graph_ms < *legacy_ms) =>
        {
            let legacy_ms = legacy.as_ref().map(|(_, _, ms)| *ms);
            tracing::debug!(
                "cuDNN {pass:?} of {:?}: {graph_plan:?}, {graph_ms:.3} ms (legacy's best {legacy_ms:?} ms)",
                plan.problem
            );
            (Algorithm::Graph(Arc::new(graph_plan), legacy.map(|(algorithm, _, _)| Box::new(algorithm))), None)
        }
        (Some((algorithm, math, legacy_ms)), graph) => {
            let graph_ms = graph.map(|(_, ms)| ms);
            tracing::debug!(
                "cuDNN {pass:?} of {:?}: {algorithm:?}, {math:?}, {legacy_ms:.3} ms (the graph's best {graph_ms:?} ms)",
                plan.problem
            );
            (algorithm, Some(math))
        }
        (None, None) => return Err(format!("{pass:?}: no algorithm ran for {:?}", plan.problem)),
        (None, Some(_)) => unreachable!("a graph plan without a legacy algorithm is taken above"),
    };
    algorithms[pass as usize] = Some(algorithm.clone());
    Ok(Searched { algorithm, legacy_math })
}

/// The legacy API's fastest algorithm for `pass` of `plan` that the plan's settings allow, by
/// cuDNN's timing of each on the search's buffers (`[a, b, out, workspace]` as [`search`] takes
/// them), with its math and milliseconds; `None` where none ran.
fn legacy_search(
    plan: &Plan,
    pass: Pass,
    handle: sys::cudnnHandle_t,
    [a, b, out, workspace]: [u64; 4],
) -> Result<Option<(Algorithm, sys::cudnnMathType_t, f32)>, CudnnError> {
    let convolution = plan.convolution[pass as usize];
    let allowed = |math: sys::cudnnMathType_t, determinism: sys::cudnnDeterminism_t| {
        plan.allows(math)
            && (!plan.settings.deterministic || determinism == sys::cudnnDeterminism_t::CUDNN_DETERMINISTIC)
    };
    let ok = sys::cudnnStatus_t::CUDNN_STATUS_SUCCESS;
    let mut count = 0;
    // Each search returns its results fastest first.
    unsafe {
        // SAFETY: the buffers are live and as large as the descriptors say; the workspace holds
        // SEARCH_WORKSPACE bytes; each results array is as long as the count asked for.
        match pass {
            Pass::Output => {
                let mut results = [std::mem::zeroed::<sys::cudnnConvolutionFwdAlgoPerf_t>(); 16];
                sys::cudnnFindConvolutionForwardAlgorithmEx(
                    handle,
                    plan.input,
                    ptr(a),
                    plan.weight,
                    ptr(b),
                    convolution,
                    plan.output,
                    ptr(out),
                    results.len() as i32,
                    &mut count,
                    results.as_mut_ptr(),
                    ptr(workspace),
                    SEARCH_WORKSPACE,
                )
                .result()
                .map(|()| {
                    results[..count as usize]
                        .iter()
                        .find(|r| r.status == ok && allowed(r.mathType, r.determinism))
                        .map(|r| (Algorithm::Output(r.algo, r.memory), r.mathType, r.time))
                })
            }
            Pass::InputGrad => {
                let mut results = [std::mem::zeroed::<sys::cudnnConvolutionBwdDataAlgoPerf_t>(); 16];
                sys::cudnnFindConvolutionBackwardDataAlgorithmEx(
                    handle,
                    plan.weight,
                    ptr(a),
                    plan.output,
                    ptr(b),
                    convolution,
                    plan.input,
                    ptr(out),
                    results.len() as i32,
                    &mut count,
                    results.as_mut_ptr(),
                    ptr(workspace),
                    SEARCH_WORKSPACE,
                )
                .result()
                .map(|()| {
                    results[..count as usize]
                        .iter()
                        .find(|r| r.status == ok && allowed(r.mathType, r.determinism))
                        .map(|r| (Algorithm::InputGrad(r.algo, r.memory), r.mathType, r.time))
                })
            }
            Pass::WeightGrad => {
                let mut results = [std::mem::zeroed::<sys::cudnnConvolutionBwdFilterAlgoPerf_t>(); 16];
                sys::cudnnFindConvolutionBackwardFilterAlgorithmEx(
                    handle,
                    plan.input,
                    ptr(a),
                    plan.output,
                    ptr(b),
                    convolution,
                    plan.weight,
                    ptr(out),
                    results.len() as i32,
                    &mut count,
                    results.as_mut_ptr(),
                    ptr(workspace),
                    SEARCH_WORKSPACE,
                )
                .result()
                .map(|()| {
                    results[..count as usize]
                        .iter()
                        .find(|r| r.status == ok && allowed(r.mathType, r.determinism))
                        .map(|r| (Algorithm::WeightGrad(r.algo, r.memory), r.mathType, r.time))
                })
            }
        }
    }
}

/// What a search found: the algorithm, and where it is the legacy API's, its math.
struct Searched {
    algorithm: Algorithm,
    legacy_math: Option<sys::cudnnMathType_t>,
}

/// The problem of `x` by `w` with `options`, if cuDNN is here and takes it.
fn problem(x: &CudaTensor, w: &CudaTensor, options: &ConvOptions<2>) -> Option<ConvProblem> {
    library::status().as_ref().ok()?;
    let problem = ConvProblem::new(dims(x)?, dims(w)?, options, [x.dtype, w.dtype]);
    problem.map_err(|e| tracing::debug!("burn's convolution: {e}")).ok()
}

/// The passes of problems a library failed on.
struct Failures(OnceLock<Mutex<Vec<(ConvProblem, Pass)>>>);

impl Failures {
    const fn new() -> Self {
        Self(OnceLock::new())
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Vec<(ConvProblem, Pass)>> {
        self.0.get_or_init(Default::default).lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Notes that `pass` of `problem` failed; true where it had not before.
    fn first(&self, problem: ConvProblem, pass: Pass) -> bool {
        let mut seen = self.seen();
        let first = !seen.contains(&(problem, pass));
        if first {
            seen.push((problem, pass));
        }
        first
    }

    /// Whether `pass` of `problem` failed before.
    fn before(&self, problem: ConvProblem, pass: Pass) -> bool {
        self.seen().contains(&(problem, pass))
    }
}

/// Where cuDNN failed (burn's operation runs instead, each call: cuDNN may take the next).
static CUDNN_FAILED: Failures = Failures::new();

/// Where cuBLAS's products failed (cuDNN takes the pass from then on).
static CUBLAS_FAILED: Failures = Failures::new();

/// Says once per problem and pass why cuDNN failed (burn's own convolution or transposed
/// convolution runs instead).
fn fell_back(problem: ConvProblem, pass: Pass, why: String) {
    if CUDNN_FAILED.first(problem, pass) {
        tracing::warn!("cuDNN failed on {problem:?} ({why}): burn's own operation instead");
    }
}

fn attempt(pass: Pass, problem: ConvProblem, inputs: [CudaTensor; 2], dtype: DType) -> Option<CudaTensor> {
    let inputs = inputs.map(into_contiguous);
    if conv1d_path() == Conv1dPath::Cublas
        && let Some(conv) = as_conv1d(&problem)
        && super::blas::loaded()
        && !CUBLAS_FAILED.before(problem, pass)
    {
        let products = super::blas::Cublas { tf32: !exact_f32(problem.data_type) };
        let [a, b] = inputs.clone();
        let unfolded = match pass {
            Pass::Output => crate::unfold::output(a, b, &conv, &products),
            Pass::InputGrad => crate::unfold::input_grad(a, b, &conv, &products),
            Pass::WeightGrad => crate::unfold::weight_grad(a, b, &conv, &products),
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
fn exact_f32(data_type: ConvDataType) -> bool {
    data_type == ConvDataType::F32 && !tf32().load(Ordering::Relaxed)
}

/// The 1-D convolution `problem` is, if it is one ([`crate::unfold::Conv1d::of_2d`]).
fn as_conv1d(problem: &ConvProblem) -> Option<crate::unfold::Conv1d> {
    let sizes = |values: [i32; 4]| values.map(|v| usize::try_from(v).unwrap_or(0));
    let pair = |values: [i32; 2]| values.map(|v| usize::try_from(v).unwrap_or(0));
    crate::unfold::Conv1d::of_2d(
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
/// ([`crate::Kernels::conv_transpose2d_input_grad`]).
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
static CONV1D: Choice<Conv1dPath> = Choice::new(&[Conv1dPath::Cudnn, Conv1dPath::Burn, Conv1dPath::Cublas], || {
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
