//! Work on burn's cuda backend captured as one CUDA graph and replayed: our cubecl-cuda's capture
//! (vendor/README.md), reached through our cubecl-runtime's `with_server` on the calling
//! thread's stream.

use cubecl::Runtime;
use cubecl::client::ComputeClient;
use cubecl::cuda::{CudaDevice, CudaRuntime, GraphId};
use cubecl::server::ServerError;
use cubecl::stream_id::StreamId;

use crate::{CapturedGraph, GraphNodes, GraphReplay};

/// The device's server (cubecl-cuda's, whose module is private to it).
type Server = <CudaRuntime as Runtime>::Server;

/// A graph kept by the device's server, captured on `stream` (the capturing thread's), destroyed
/// with this.
struct ServerGraph {
    client: ComputeClient<CudaRuntime>,
    id: GraphId,
    stream: StreamId,
}

impl GraphReplay for ServerGraph {
    fn replay(&self) -> Result<(), String> {
        let (id, captured) = (self.id, self.stream);
        self.client.with_server(move |server, stream| {
            if stream != captured {
                // Its inputs are written, and its outputs read, on the capturing thread's stream.
                return Err("a CUDA graph is replayed on the thread that captured it".to_string());
            }
            server.graph_replay(id, stream).map_err(said("replaying a CUDA graph"))
        })
    }
}

impl Drop for ServerGraph {
    fn drop(&mut self) {
        // On the stream of its replays, whichever thread drops it.
        let (id, captured) = (self.id, self.stream);
        if let Err(e) = self.client.with_server(move |server, _| server.graph_destroy(id, captured)) {
            tracing::warn!("destroying a CUDA graph: {e}");
        }
    }
}

/// A server's error, said after `what`.
fn said(what: &'static str) -> impl Fn(ServerError) -> String {
    move |e| format!("{what}: {e}")
}

/// Leaves a capture under way (prepared or recording) when dropped before [`Self::done`]: the
/// work failed or panicked, and the stream goes back to running its work as it comes.
struct Underway<'a> {
    client: &'a ComputeClient<CudaRuntime>,
    done: bool,
}

impl Underway<'_> {
    fn done(mut self) {
        self.done = true;
    }
}

impl Drop for Underway<'_> {
    fn drop(&mut self) {
        if !self.done
            && let Err(e) = self.client.with_server(Server::graph_cancel)
        {
            tracing::warn!("leaving a CUDA graph's capture: {e}");
        }
    }
}

/// `work` on `device` captured as one graph ([`crate::GraphKernels::capture_graph`]), with what
/// its recorded run returned.
pub(crate) fn capture(device: &CudaDevice, work: &mut dyn FnMut()) -> Result<CapturedGraph, String> {
    let client = CudaRuntime::client(device);
    // The stream `with_server` runs on for this thread's client (one never moved by `set_stream`).
    let stream = StreamId::current();
    client.with_server(Server::graph_prepare).map_err(said("preparing a CUDA graph"))?;
    let underway = Underway { client: &client, done: false };
    work();
    client.with_server(Server::graph_begin_capture).map_err(said("beginning a CUDA graph's capture"))?;
    work();
    let captured = client.with_server(Server::graph_end_capture).map_err(said("ending a CUDA graph's capture"));
    // Ended, kept or refused: the stream is back to running its work as it comes.
    underway.done();
    let captured = captured?;
    let nodes = GraphNodes {
        kernels: captured.nodes.kernels,
        copies: captured.nodes.copies,
        memory: captured.nodes.memory,
        other: captured.nodes.other,
    };
    Ok(CapturedGraph::new(Box::new(ServerGraph { client: client.clone(), id: captured.id, stream }), nodes))
}
