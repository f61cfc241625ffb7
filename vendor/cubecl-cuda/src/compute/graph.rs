//! Graphs captured from a stream's work, as the server keeps them. Patched in this vendored copy
//! (upstream cubecl #1469's `graph.rs`, with the nodes counted by type).

use cubecl_runtime::memory_management::ManagedMemoryHandle;
use cudarc::driver::DriverError;
use cudarc::driver::sys::{CUgraph, CUgraphExec, CUgraphNode, CUgraphNodeType};

/// A captured graph, by the number the server gave it at the capture's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GraphId(pub(crate) u64);

/// The nodes of a captured graph, by what they do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GraphNodes {
    /// Kernels: cubecl's, and the libraries' (cuDNN, cuBLAS) run on the stream.
    pub kernels: usize,
    /// Copies (a launch's metadata from page-locked memory, at each replay) and sets.
    pub copies: usize,
    /// Allocations and frees: a graph with any is refused (CUDA runs it once, then refuses).
    pub memory: usize,
    /// Any other kind (events, host calls, child graphs).
    pub other: usize,
}

/// What a capture's end gives the caller: the graph's number, and its nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapturedGraph {
    /// The graph's number, for `graph_replay` and `graph_destroy`.
    pub id: GraphId,
    /// Its nodes, by what they do.
    pub nodes: GraphNodes,
}

/// An instantiated graph, destroyed on drop, and every buffer its replays read or write, held
/// for its life so that the pool gives none of them to another tensor.
#[derive(Debug)]
pub(crate) struct CudaGraph {
    pub(crate) exec: CUgraphExec,
    pub(crate) _held: Vec<ManagedMemoryHandle>,
}

impl Drop for CudaGraph {
    fn drop(&mut self) {
        // SAFETY: `exec` came from `cuGraphInstantiateWithFlags` and is destroyed once, here,
        // after the server synchronised the stream (`graph_destroy`).
        unsafe {
            cudarc::driver::sys::cuGraphExecDestroy(self.exec);
        }
    }
}

/// `graph`'s nodes by type.
///
/// # Safety
///
/// `graph` is a live `CUgraph`.
pub(crate) unsafe fn count_nodes(graph: CUgraph) -> Result<GraphNodes, DriverError> {
    let mut count = 0usize;
    // SAFETY: `graph` is live; a null array asks for the count only.
    unsafe { cudarc::driver::sys::cuGraphGetNodes(graph, std::ptr::null_mut(), &mut count) }.result()?;
    let mut nodes: Vec<CUgraphNode> = vec![std::ptr::null_mut(); count];
    // SAFETY: `nodes` has room for `count` nodes, the count just read.
    unsafe { cudarc::driver::sys::cuGraphGetNodes(graph, nodes.as_mut_ptr(), &mut count) }.result()?;
    let mut counted = GraphNodes::default();
    for node in nodes.into_iter().take(count) {
        let mut kind = CUgraphNodeType::CU_GRAPH_NODE_TYPE_EMPTY;
        // SAFETY: `node` is one of `graph`'s, just read.
        unsafe { cudarc::driver::sys::cuGraphNodeGetType(node, &mut kind) }.result()?;
        match kind {
            CUgraphNodeType::CU_GRAPH_NODE_TYPE_KERNEL => counted.kernels += 1,
            CUgraphNodeType::CU_GRAPH_NODE_TYPE_MEMCPY | CUgraphNodeType::CU_GRAPH_NODE_TYPE_MEMSET => {
                counted.copies += 1
            }
            CUgraphNodeType::CU_GRAPH_NODE_TYPE_MEM_ALLOC | CUgraphNodeType::CU_GRAPH_NODE_TYPE_MEM_FREE => {
                counted.memory += 1
            }
            _ => counted.other += 1,
        }
    }
    Ok(counted)
}
