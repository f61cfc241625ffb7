//! One convolution pass through cuDNN's graph API, the backend descriptors torch reaches through
//! cudnn_frontend: a graph of one operation, the engine configurations cuDNN's heuristics
//! (mode A) propose for it, each made an execution plan and timed on the real buffers, the
//! fastest kept. The legacy API's algorithms are a subset of these engines; on an H200 its search
//! gave most of the step's convolutions kernels without tensor cores (bench/RESULTS.md, "Seventh
//! contact").
//!
//! Off unless `LEROBOT_RS_CUDNN_GRAPH` says otherwise ([`use_graph`]): it has not yet run on a
//! GPU. With `1`, [`super::search`]'s search times these plans beside the legacy algorithms and
//! keeps the fastest; with `only`, it takes the fastest plan wherever one builds (the checks'
//! way to test the plans themselves).

#![expect(unsafe_code, reason = "cuDNN's backend API is C: raw descriptors, handles and device pointers")]

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::cudnn::result::CudnnError;
use cudarc::cudnn::sys;
use sys::cudnnBackendAttributeName_t as Attribute;
use sys::cudnnBackendAttributeType_t as Type;
use sys::cudnnBackendDescriptorType_t as Kind;

use super::choice::Choice;
use super::pass::Pass;
use super::problem::{ConvDataType, ConvLayout, ConvProblem};

/// Plans timed per pass at most (the heuristics' first ones that build and fit).
const CANDIDATES: usize = 8;

/// Timed runs of each candidate, after one untimed.
const TIMED_RUNS: usize = 3;

/// The byte alignment every buffer is declared with (cubecl's allocations are aligned beyond
/// it; [`GraphPlan::execute`] checks).
const ALIGNMENT: u64 = 16;

/// How the algorithm search uses the graph API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GraphUse {
    /// The legacy API's algorithms only (the default until the graph API has run on a GPU).
    Off,
    /// The graph API's plans timed beside the legacy algorithms, the fastest kept.
    Compete,
    /// The graph API's fastest plan wherever one builds, the legacy algorithms elsewhere.
    Only,
}

/// How the search uses the graph API: `LEROBOT_RS_CUDNN_GRAPH` (`1`: compete, `only`; off
/// otherwise) until [`use_graph`] says otherwise.
static GRAPH: Choice<GraphUse> = Choice::new(&[GraphUse::Off, GraphUse::Compete, GraphUse::Only], || {
    match std::env::var("LEROBOT_RS_CUDNN_GRAPH").as_deref() {
        Ok("1") => GraphUse::Compete,
        Ok("only") => GraphUse::Only,
        _ => GraphUse::Off,
    }
});

/// How the search uses the graph API now ([`GRAPH`]).
pub(super) fn graph_use() -> GraphUse {
    GRAPH.get()
}

/// Sets how the algorithm search uses cuDNN's graph API, for the problems it has not searched
/// yet in this mode.
pub fn use_graph(how: GraphUse) {
    GRAPH.set(how);
}

/// The tensor ids of a convolution's variant pack: the input-shaped tensor, the weight, the
/// output-shaped tensor.
const IDS: [i64; 3] = [1, 2, 3];

impl Pass {
    /// The ids of the pass's two inputs and its output, in the order the pointers come.
    fn ids(self) -> [i64; 3] {
        let [input, weight, output] = IDS;
        match self {
            Self::Output => [input, weight, output],
            Self::InputGrad => [weight, output, input],
            Self::WeightGrad => [input, output, weight],
        }
    }
}

/// A backend descriptor, destroyed when dropped.
struct Descriptor(sys::cudnnBackendDescriptor_t);

impl Drop for Descriptor {
    fn drop(&mut self) {
        // SAFETY: created by `Descriptor::new`, destroyed once.
        unsafe {
            let _ = sys::cudnnBackendDestroyDescriptor(self.0);
        }
    }
}

// SAFETY: a descriptor is a host-side parameter block. The only ones shared between threads
// are a kept plan's, finalized and only read from then on (by `cudnnBackendExecute`, on the
// calling thread's own handle, never destroyed: `conv::Handle`), as torch runs its cached
// cuDNN plans from any thread; the others live on the thread that made them.
unsafe impl Send for Descriptor {}
// SAFETY: as for `Send`.
unsafe impl Sync for Descriptor {}

impl Descriptor {
    fn new(kind: Kind) -> Result<Self, CudnnError> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: `raw` receives the new descriptor.
        unsafe { sys::cudnnBackendCreateDescriptor(kind, &mut raw) }.result()?;
        Ok(Self(raw))
    }

    /// Sets `name` to `values`, of the cuDNN type their Rust type has.
    fn set<T: AttributeValue>(&self, name: Attribute, values: &[T]) -> Result<(), CudnnError> {
        let (len, values) = (values.len() as i64, values.as_ptr() as *const c_void);
        // SAFETY: `values` holds `len` elements with the layout of `T::TYPE` (`AttributeValue`).
        unsafe { sys::cudnnBackendSetAttribute(self.0, name, T::TYPE, len, values) }.result()
    }

    /// Sets `name` to the descriptors `values`.
    fn set_descriptors(&self, name: Attribute, values: &[&Descriptor]) -> Result<(), CudnnError> {
        let raw: Vec<Raw> = values.iter().map(|d| Raw(d.0)).collect();
        self.set(name, &raw)
    }

    fn finalize(self) -> Result<Self, CudnnError> {
        // SAFETY: a live descriptor whose attributes are set.
        unsafe { sys::cudnnBackendFinalize(self.0) }.result()?;
        Ok(self)
    }

    /// Up to `out.len()` values of `name`, of the cuDNN type their Rust type has; how many there
    /// are (all of them where `out` is empty).
    fn get<T: AttributeValue>(&self, name: Attribute, out: &mut [T]) -> Result<usize, CudnnError> {
        let mut count = 0i64;
        let (len, values) =
            (out.len() as i64, if out.is_empty() { std::ptr::null_mut() } else { out.as_mut_ptr() as *mut c_void });
        // SAFETY: `out` has room for `len` elements with the layout of `T::TYPE`.
        unsafe { sys::cudnnBackendGetAttribute(self.0, name, T::TYPE, len, &mut count, values) }.result()?;
        Ok(count as usize)
    }
}

/// A Rust type laid out as one of cuDNN's attribute types, `TYPE`: what [`Descriptor::set`] and
/// [`Descriptor::get`] pass, so no call can name one type and hand over another.
///
/// # Safety
/// `Self` must have the layout of the C type `TYPE` names.
unsafe trait AttributeValue: Copy {
    const TYPE: Type;
}

/// A backend descriptor as an attribute's value (a plain pointer is a `VOID_PTR`).
#[derive(Clone, Copy)]
#[repr(transparent)]
struct Raw(sys::cudnnBackendDescriptor_t);

// Each implementation below is the C type of the attribute type it names, or a transparent
// wrapper of it; cuDNN's enums are C `int`s, laid out as cudarc's `repr(u32)` enums and `u32` are.
// SAFETY: as above.
unsafe impl AttributeValue for i64 {
    const TYPE: Type = Type::CUDNN_TYPE_INT64;
}
// SAFETY: as above.
unsafe impl AttributeValue for f32 {
    const TYPE: Type = Type::CUDNN_TYPE_FLOAT;
}
// SAFETY: as above.
unsafe impl AttributeValue for *mut c_void {
    const TYPE: Type = Type::CUDNN_TYPE_VOID_PTR;
}
// SAFETY: as above.
unsafe impl AttributeValue for Raw {
    const TYPE: Type = Type::CUDNN_TYPE_BACKEND_DESCRIPTOR;
}
// SAFETY: as above.
unsafe impl AttributeValue for sys::cudnnHandle_t {
    const TYPE: Type = Type::CUDNN_TYPE_HANDLE;
}
// SAFETY: as above.
unsafe impl AttributeValue for sys::cudnnDataType_t {
    const TYPE: Type = Type::CUDNN_TYPE_DATA_TYPE;
}
// SAFETY: as above.
unsafe impl AttributeValue for sys::cudnnConvolutionMode_t {
    const TYPE: Type = Type::CUDNN_TYPE_CONVOLUTION_MODE;
}
// SAFETY: as above.
unsafe impl AttributeValue for sys::cudnnBackendHeurMode_t {
    const TYPE: Type = Type::CUDNN_TYPE_HEUR_MODE;
}
/// A numerical note read as its number (a newer cuDNN may have notes this build does not name).
// SAFETY: as above.
unsafe impl AttributeValue for u32 {
    const TYPE: Type = Type::CUDNN_TYPE_NUMERICAL_NOTE;
}

fn data_type(data_type: ConvDataType) -> sys::cudnnDataType_t {
    match data_type {
        ConvDataType::F32 => sys::cudnnDataType_t::CUDNN_DATA_FLOAT,
        ConvDataType::F16 => sys::cudnnDataType_t::CUDNN_DATA_HALF,
        ConvDataType::Bf16 => sys::cudnnDataType_t::CUDNN_DATA_BFLOAT16,
    }
}

/// A tensor of `dims` lying in `layout` (a weight is `[O, C / groups, kh, kw]`: cuDNN reads the
/// groups from the channels).
fn tensor(id: i64, dims: [i32; 4], element: ConvDataType, layout: ConvLayout) -> Result<Descriptor, CudnnError> {
    let strides = layout.strides(dims);
    let dims = dims.map(i64::from);
    let tensor = Descriptor::new(Kind::CUDNN_BACKEND_TENSOR_DESCRIPTOR)?;
    tensor.set(Attribute::CUDNN_ATTR_TENSOR_DATA_TYPE, &[data_type(element)])?;
    tensor.set(Attribute::CUDNN_ATTR_TENSOR_DIMENSIONS, &dims)?;
    tensor.set(Attribute::CUDNN_ATTR_TENSOR_STRIDES, &strides)?;
    tensor.set(Attribute::CUDNN_ATTR_TENSOR_UNIQUE_ID, &[id])?;
    tensor.set(Attribute::CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, &[ALIGNMENT as i64])?;
    tensor.finalize()
}

/// The convolution: cross-correlation accumulated in f32, with the problem's padding, strides
/// and dilation.
fn convolution(problem: &ConvProblem) -> Result<Descriptor, CudnnError> {
    let two = |values: [i32; 2]| values.map(i64::from);
    let conv = Descriptor::new(Kind::CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR)?;
    let float = [sys::cudnnDataType_t::CUDNN_DATA_FLOAT];
    conv.set(Attribute::CUDNN_ATTR_CONVOLUTION_COMP_TYPE, &float)?;
    let mode = [sys::cudnnConvolutionMode_t::CUDNN_CROSS_CORRELATION];
    conv.set(Attribute::CUDNN_ATTR_CONVOLUTION_CONV_MODE, &mode)?;
    conv.set(Attribute::CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, &[2i64])?;
    conv.set(Attribute::CUDNN_ATTR_CONVOLUTION_DILATIONS, &two(problem.dilation))?;
    conv.set(Attribute::CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, &two(problem.stride))?;
    conv.set(Attribute::CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, &two(problem.padding))?;
    conv.set(Attribute::CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, &two(problem.padding))?;
    conv.finalize()
}

/// The graph of `pass` over `problem`: its one operation, `y = 1·conv + 0·y`.
fn operation_graph(
    handle: sys::cudnnHandle_t,
    problem: &ConvProblem,
    pass: Pass,
) -> Result<[Descriptor; 6], CudnnError> {
    let [input_id, weight_id, output_id] = IDS;
    let input = tensor(input_id, problem.input, problem.data_type, problem.layout)?;
    let weight = tensor(weight_id, problem.weight, problem.data_type, problem.layout)?;
    let output = tensor(output_id, problem.output, problem.data_type, problem.layout)?;
    let conv = convolution(problem)?;
    use Attribute::*;
    let (kind, [alpha, beta, conv_name], names) = match pass {
        Pass::Output => (
            Kind::CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
            [
                CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
                CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
                CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
            ],
            [
                CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
                CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
                CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
            ],
        ),
        Pass::InputGrad => (
            Kind::CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
            [
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
            ],
            [
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
            ],
        ),
        Pass::WeightGrad => (
            Kind::CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
            [
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
            ],
            [
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
                CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
            ],
        ),
    };
    let operation = Descriptor::new(kind)?;
    // The input-shaped, weight and output-shaped tensors, in the roles `names` gives them.
    for (name, tensor) in names.into_iter().zip([&input, &weight, &output]) {
        operation.set_descriptors(name, &[tensor])?;
    }
    operation.set_descriptors(conv_name, &[&conv])?;
    operation.set(alpha, &[1f32])?;
    operation.set(beta, &[0f32])?;
    let operation = operation.finalize()?;
    let graph = Descriptor::new(Kind::CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)?;
    graph.set_descriptors(CUDNN_ATTR_OPERATIONGRAPH_OPS, &[&operation])?;
    graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, &[handle])?;
    let graph = graph.finalize()?;
    Ok([graph, operation, conv, input, weight, output])
}

/// An execution plan of one pass, with what it was built from.
pub(super) struct GraphPlan {
    plan: Descriptor,
    _config: Descriptor,
    /// The graph the plan was built from, its operation and tensors.
    _graph: Arc<[Descriptor; 6]>,
    pass: Pass,
    /// The workspace it needs, in bytes.
    pub workspace: usize,
    /// cuDNN's number for its engine (for the log).
    pub engine: i64,
    /// Held while the plan is executed: plans are kept for the process, and cuDNN does not
    /// promise that every engine's plan runs from two threads at once (torch keeps its plans per
    /// thread for that reason).
    executing: std::sync::Mutex<()>,
}

impl std::fmt::Debug for GraphPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "graph engine {} ({} bytes of workspace)", self.engine, self.workspace)
    }
}

impl GraphPlan {
    /// Whether the buffers `pointers` are aligned as the plan declares them.
    pub(super) fn takes(&self, pointers: [u64; 3]) -> bool {
        pointers.iter().all(|&p| p % ALIGNMENT == 0)
    }

    /// The variant pack of one call: `[a, b]` in, `out` out, as `conv::enqueue` takes them, and
    /// `workspace` (at least [`GraphPlan::workspace`] bytes, or 0 where none).
    fn variant_pack(&self, [a, b]: [u64; 2], out: u64, workspace: u64) -> Result<Descriptor, String> {
        let pointers = [a, b, out];
        if let Some(unaligned) = pointers.iter().find(|&&p| p % ALIGNMENT != 0) {
            return Err(format!("a buffer at {unaligned:#x} is not aligned to {ALIGNMENT} bytes"));
        }
        let described = || -> Result<Descriptor, CudnnError> {
            let pack = Descriptor::new(Kind::CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)?;
            let data: Vec<*mut c_void> = pointers.iter().map(|&p| p as usize as *mut c_void).collect();
            pack.set(Attribute::CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, &self.pass.ids())?;
            pack.set(Attribute::CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, &data)?;
            let workspace = [workspace as usize as *mut c_void];
            pack.set(Attribute::CUDNN_ATTR_VARIANT_PACK_WORKSPACE, &workspace)?;
            pack.finalize()
        };
        described().map_err(|e| format!("variant pack: {e}"))
    }

    /// Enqueues the call `pack` describes on `handle`'s stream.
    ///
    /// # Safety
    /// The pack's pointers must be live device buffers as large as the problem's shapes say.
    unsafe fn run(&self, handle: sys::cudnnHandle_t, pack: &Descriptor) -> Result<(), String> {
        let _alone = self.executing.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // SAFETY: as the function says; the plan and pack are finalized.
        unsafe { sys::cudnnBackendExecute(handle, self.plan.0, pack.0) }
            .result()
            .map_err(|e| format!("cudnnBackendExecute: {e}"))
    }

    /// Enqueues the pass on `handle`'s stream: `[a, b]` in, `out` out, as `conv::enqueue` takes
    /// them, with `workspace` (at least [`GraphPlan::workspace`] bytes, or 0 where none).
    ///
    /// # Safety
    /// The pointers must be live device buffers as large as the problem's shapes say.
    pub(super) unsafe fn execute(
        &self,
        handle: sys::cudnnHandle_t,
        inputs: [u64; 2],
        out: u64,
        workspace: u64,
    ) -> Result<(), String> {
        let pack = self.variant_pack(inputs, out, workspace)?;
        // SAFETY: as the function says.
        unsafe { self.run(handle, &pack) }
    }
}

/// What an engine's numerical notes (cuDNN's numbers, read as such: a newer cuDNN may have notes
/// this build does not name) allow, as torch filters them: never inputs converted down to a
/// narrower type; with `exact`, no tensor cores (exact f32); with `deterministic`, no run-to-run
/// variation.
fn notes_allow(notes: &[u32], exact: bool, deterministic: bool) -> bool {
    use sys::cudnnBackendNumericalNote_t as Note;
    notes.iter().all(|&note| {
        note != Note::CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS as u32
            && !(exact && note == Note::CUDNN_NUMERICAL_NOTE_TENSOR_CORE as u32)
            && !(deterministic && note == Note::CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC as u32)
    })
}

/// The plan of one engine configuration, if it builds, the notes allow it and its workspace
/// fits in `max_workspace`: the plan, the configuration, its workspace and its engine's
/// number. A configuration cuDNN fails to describe is passed over, said in the debug log.
fn plan_of(
    handle: sys::cudnnHandle_t,
    config: Descriptor,
    settings: [bool; 2],
    max_workspace: usize,
) -> Option<(Descriptor, Descriptor, usize, i64)> {
    try_plan_of(handle, config, settings, max_workspace)
        .inspect_err(|e| tracing::debug!("cuDNN's graph API: an engine configuration passed over: {e}"))
        .ok()
        .flatten()
}

fn try_plan_of(
    handle: sys::cudnnHandle_t,
    config: Descriptor,
    [exact, deterministic]: [bool; 2],
    max_workspace: usize,
) -> Result<Option<(Descriptor, Descriptor, usize, i64)>, CudnnError> {
    let engine = Descriptor::new(Kind::CUDNN_BACKEND_ENGINE_DESCRIPTOR)?;
    let mut raw = [Raw(engine.0)];
    config.get(Attribute::CUDNN_ATTR_ENGINECFG_ENGINE, &mut raw)?;
    let mut notes = [0u32; 16];
    let count = engine.get(Attribute::CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, &mut notes)?;
    if !notes_allow(&notes[..count.min(notes.len())], exact, deterministic) {
        return Ok(None);
    }
    let mut index = [0i64];
    engine.get(Attribute::CUDNN_ATTR_ENGINE_GLOBAL_INDEX, &mut index)?;
    let plan = Descriptor::new(Kind::CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR)?;
    plan.set(Attribute::CUDNN_ATTR_EXECUTION_PLAN_HANDLE, &[handle])?;
    plan.set_descriptors(Attribute::CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, &[&config])?;
    // An engine the heuristics propose may still not build for this problem: passed over. One
    // compiled at run time (NVRTC) can take seconds to build: said, so a slow start-up is
    // explained.
    let building = std::time::Instant::now();
    let built = plan.finalize();
    let took = building.elapsed();
    if took > std::time::Duration::from_millis(500) {
        tracing::info!("cuDNN's graph API: engine {} took {took:.1?} to build its plan", index[0]);
    }
    let Ok(plan) = built else { return Ok(None) };
    let mut workspace = [0i64];
    plan.get(Attribute::CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, &mut workspace)?;
    let workspace = usize::try_from(workspace[0]).unwrap_or(usize::MAX);
    Ok((workspace <= max_workspace).then_some((plan, config, workspace, index[0])))
}

/// The engine configurations cuDNN's heuristics (mode A) propose for `graph`, best first.
fn configurations(graph: &Descriptor) -> Result<Vec<Descriptor>, CudnnError> {
    let heuristics = Descriptor::new(Kind::CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR)?;
    heuristics.set_descriptors(Attribute::CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, &[graph])?;
    let mode = [sys::cudnnBackendHeurMode_t::CUDNN_HEUR_MODE_A];
    heuristics.set(Attribute::CUDNN_ATTR_ENGINEHEUR_MODE, &mode)?;
    let heuristics = heuristics.finalize()?;
    let mut none: [Raw; 0] = [];
    let available = heuristics.get(Attribute::CUDNN_ATTR_ENGINEHEUR_RESULTS, &mut none)?;
    let configs: Vec<Descriptor> =
        (0..available).map(|_| Descriptor::new(Kind::CUDNN_BACKEND_ENGINECFG_DESCRIPTOR)).collect::<Result<_, _>>()?;
    let mut raw: Vec<Raw> = configs.iter().map(|c| Raw(c.0)).collect();
    let filled = heuristics.get(Attribute::CUDNN_ATTR_ENGINEHEUR_RESULTS, &mut raw)?;
    Ok(configs.into_iter().take(filled).collect())
}

/// Milliseconds one run of `plan` takes on `stream`, the mean of [`TIMED_RUNS`] after one
/// untimed.
fn time(
    plan: &GraphPlan,
    handle: sys::cudnnHandle_t,
    stream: cudarc::driver::sys::CUstream,
    [a, b, out, workspace]: [u64; 4],
) -> Result<f32, String> {
    use cudarc::driver::result::event;
    let driver = super::context::driver;
    let pack = plan.variant_pack([a, b], out, workspace)?;
    let flags = cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT;
    let start = event::create(flags).map_err(driver)?;
    let end = match event::create(flags) {
        Ok(end) => end,
        Err(e) => {
            // SAFETY: created above; nothing waits on it.
            let _ = unsafe { event::destroy(start) };
            return Err(driver(e));
        }
    };
    // SAFETY: the buffers are the search's, live and as large as the problem says; the events
    // are created above, recorded on the handle's stream and destroyed below.
    let timed = unsafe {
        (|| {
            plan.run(handle, &pack)?;
            event::record(start, stream).map_err(driver)?;
            for _ in 0..TIMED_RUNS {
                plan.run(handle, &pack)?;
            }
            event::record(end, stream).map_err(driver)?;
            event::synchronize(end).map_err(driver)?;
            event::elapsed(start, end).map_err(driver)
        })()
    };
    // SAFETY: created above; nothing waits on them now.
    unsafe {
        let _ = event::destroy(start);
        let _ = event::destroy(end);
    }
    Ok(timed? / TIMED_RUNS as f32)
}

/// The fastest of the plans cuDNN's heuristics propose for `pass` over `problem`, timed on the
/// search's buffers (`[a, b, out]` as `conv::enqueue` takes them, and a workspace of
/// `max_workspace` bytes), with its time in milliseconds; `None` where none builds.
pub(super) fn fastest_plan(
    handle: sys::cudnnHandle_t,
    stream: cudarc::driver::sys::CUstream,
    problem: &ConvProblem,
    pass: Pass,
    [exact, deterministic]: [bool; 2],
    [a, b, out]: [u64; 3],
    (workspace, max_workspace): (u64, usize),
) -> Result<Option<(GraphPlan, f32)>, String> {
    let exact = exact && problem.data_type == ConvDataType::F32;
    let said = |what: &'static str| move |e: CudnnError| format!("{what}: {e}");
    let graph = Arc::new(operation_graph(handle, problem, pass).map_err(said("graph"))?);
    let mut best: Option<(GraphPlan, f32)> = None;
    let mut tried = 0;
    for config in configurations(&graph[0]).map_err(said("heuristics"))? {
        if tried == CANDIDATES {
            break;
        }
        let Some((plan, config, workspace_size, engine)) =
            plan_of(handle, config, [exact, deterministic], max_workspace)
        else {
            continue;
        };
        tried += 1;
        let plan = GraphPlan {
            plan,
            _config: config,
            _graph: graph.clone(),
            pass,
            workspace: workspace_size,
            engine,
            executing: Default::default(),
        };
        match time(&plan, handle, stream, [a, b, out, workspace]) {
            Ok(ms) if best.as_ref().is_none_or(|(_, fastest)| ms < *fastest) => best = Some((plan, ms)),
            Ok(_) => {}
            Err(why) => tracing::debug!("cuDNN {plan:?} for {pass:?} of {problem:?} did not run: {why}"),
        }
    }
    Ok(best)
}
