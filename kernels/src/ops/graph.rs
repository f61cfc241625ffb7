//! The graph family of [`Kernels`](super::Kernels): a run of work captured as one CUDA graph on
//! the device's stream and replayed, so that the host launches it once where it launched each
//! kernel and library call (issue 59, docs/plans/cuda-graph.md). burn's cuda backend captures,
//! direct and under fusion (our cubecl-cuda's capture, vendor/README.md); every other backend
//! says it cannot. A graph's inputs change between replays by writing them in place
//! ([`GraphKernels::write_in_place`]), which every cubecl backend can.

use burn::prelude::*;
use burn::tensor::ops::{BoolTensor, FloatTensor, IntTensor};

/// A captured graph's nodes, by what they do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct GraphNodes {
    /// Kernels: cubecl's, and the libraries' (cuDNN, cuBLAS).
    pub kernels: usize,
    /// Copies and sets (a launch's metadata, copied at each replay).
    pub copies: usize,
    /// Allocations and frees: none in a graph that was kept.
    pub memory: usize,
    /// Anything else (events, host calls, child graphs).
    pub other: usize,
}

/// How a backend replays and releases a graph it captured.
pub trait GraphReplay: Send {
    /// Launches the graph on the stream it was captured on.
    fn replay(&self) -> Result<(), String>;
}

/// Work captured as one graph ([`GraphKernels::capture_graph`]): each [`CapturedGraph::replay`]
/// runs it again on the device's stream, reading the memory its inputs were in at the capture
/// and writing its outputs where the recorded run left them. Released on drop, once the device
/// has finished its replays.
pub struct CapturedGraph {
    replay: Box<dyn GraphReplay>,
    nodes: GraphNodes,
}

impl std::fmt::Debug for CapturedGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CapturedGraph").field("nodes", &self.nodes).finish_non_exhaustive()
    }
}

impl CapturedGraph {
    /// A graph replayed by `replay`, of `nodes`.
    pub fn new(replay: Box<dyn GraphReplay>, nodes: GraphNodes) -> Self {
        Self { replay, nodes }
    }

    /// Runs the captured work again, without waiting for it: on the thread that captured it,
    /// ordered after the work asked for before and before the work asked for after, as a kernel
    /// launch is.
    pub fn replay(&self) -> Result<(), String> {
        self.replay.replay()
    }

    /// The graph's nodes, by what they do.
    pub fn nodes(&self) -> GraphNodes {
        self.nodes
    }
}

/// Why a backend other than burn's cuda one cannot capture: `backend` is its name.
pub(crate) fn no_graphs_on(backend: &str) -> String {
    format!("{backend}: CUDA graphs are captured on burn's cuda backend only")
}

/// Why a backend cannot write a tensor in place.
fn no_writes() -> String {
    "tensors are written in place on burn's cubecl backends (wgpu, cuda) only".into()
}

/// Captures work as one graph, where the backend can.
pub trait GraphKernels: Backend {
    /// `work` captured on `device`'s stream for this thread: `work` runs once as a warm-up (it
    /// compiles its kernels, makes its library plans and grows the memory pool to what it
    /// uses, which the recording may not do), then a second time recorded, not run. Returns the
    /// graph and what the recorded run returned, whose buffers each replay writes. Between
    /// replays the caller writes the graph's inputs in place and keeps every tensor `work`
    /// read alive; nothing may read the device on this thread while `work` records.
    ///
    /// An error, the backend left as it was, where the backend cannot capture (all but burn's
    /// cuda backend), or where the recording failed or would not replay (the recorded run
    /// allocated, or asked for something a capture does not allow, which the error names).
    fn capture_graph<T>(device: &Self::Device, work: impl FnMut() -> T) -> Result<(CapturedGraph, T), String> {
        let _ = (device, work);
        Err(no_graphs_on(&Self::name(device)))
    }

    /// `data` written into `tensor`'s memory in place, on this thread's stream: after the work
    /// asked for before, before the work asked for after; every tensor sharing the memory (a
    /// captured graph's input among them) sees it. An error, nothing written, where `data` is
    /// not of `tensor`'s shape and dtype, where `tensor` is not contiguous, or where the backend
    /// cannot (all but burn's cubecl backends).
    fn write_in_place(tensor: &FloatTensor<Self>, data: &TensorData) -> Result<(), String> {
        let _ = (tensor, data);
        Err(no_writes())
    }

    /// [`GraphKernels::write_in_place`] for an integer tensor: `data` of its dtype.
    fn write_int_in_place(tensor: &IntTensor<Self>, data: &TensorData) -> Result<(), String> {
        let _ = (tensor, data);
        Err(no_writes())
    }

    /// [`GraphKernels::write_in_place`] for a boolean tensor: `data` as burn's bools
    /// (`DType::Bool(BoolStore::Native)`), or as the tensor holds them.
    fn write_bool_in_place(tensor: &BoolTensor<Self>, data: &TensorData) -> Result<(), String> {
        let _ = (tensor, data);
        Err(no_writes())
    }

    /// Whether this backend writes tensors in place ([`GraphKernels::write_in_place`]): burn's
    /// cubecl backends do, directly and under fusion and autodiff.
    fn writes_in_place() -> bool {
        false
    }
}
