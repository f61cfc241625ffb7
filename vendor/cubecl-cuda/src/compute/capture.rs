//! A stream's work captured as a CUDA graph and replayed: the server's side. Patched in this
//! vendored copy (vendor/README.md): upstream cubecl's capture (#1415, #1419, #1469, after 0.10)
//! as inherent methods of [`CudaServer`], reached through our cubecl-runtime's
//! `ComputeClient::with_server`, without upstream's metadata cache: a launch's metadata is copied
//! from page-locked memory the graph holds, as a copy node replayed with it.
//!
//! The order, on one stream: [`CudaServer::graph_prepare`], a warm-up run of the work (what it
//! allocates stays in the pool), [`CudaServer::graph_begin_capture`], the run recorded (not
//! executed), [`CudaServer::graph_end_capture`], then [`CudaServer::graph_replay`] as often as
//! wanted, and [`CudaServer::graph_destroy`]. [`CudaServer::graph_cancel`] leaves a capture
//! prepared or recording.

use cubecl_common::{backtrace::BackTrace, stream_id::StreamId};
use cubecl_core::server::{ServerError, StreamErrorMode};
use cudarc::driver::sys::{CUgraph, CUgraphExec, CUstreamCaptureMode};

use super::graph::{CapturedGraph, CudaGraph, GraphId, count_nodes};
use super::server::CudaServer;
use super::stream::{Stream, StreamCapture};
use super::sync::Fence;

/// A capture's error, said.
fn capture_error(reason: impl Into<String>) -> ServerError {
    ServerError::Generic { reason: reason.into(), backtrace: BackTrace::capture() }
}

/// A driver call's error, naming the call.
fn driver_error(call: &str, err: cudarc::driver::DriverError) -> ServerError {
    capture_error(format!("{call}: {err}"))
}

/// Frees what the drop queue holds back (warm-up's page-locked staging among it): the queue is
/// double-buffered, so twice.
fn flush_drop_queue(stream: &mut Stream) {
    let sys = stream.sys;
    stream.drop_queue.flush(|| Fence::new(sys));
    stream.drop_queue.flush(|| Fence::new(sys));
}

/// Disarms both pools' capture, the memory it held going back to them.
fn disarm(stream: &mut Stream) {
    drop(stream.memory_management_gpu.capture_end());
    drop(stream.memory_management_cpu.capture_end());
    stream.capture = StreamCapture::Off;
}

/// The errors a capture's calls say first (queued from earlier work), or none.
const ERRORS_FIRST: StreamErrorMode = StreamErrorMode { ignore: false, flush: true };
/// While recording, nothing is flushed: a queued error's cleanup frees memory.
const RECORDING: StreamErrorMode = StreamErrorMode { ignore: true, flush: false };

impl CudaServer {
    /// Arms a capture on `stream_id`'s stream: from now on both pools (the device's, and the
    /// page-locked one that stages each launch's metadata) allocate persistently and hold what
    /// they hand out, so that the warm-up run that follows grows them to its whole working set.
    pub fn graph_prepare(&mut self, stream_id: StreamId) -> Result<(), ServerError> {
        let mut command = self.command_no_inputs(stream_id, ERRORS_FIRST)?;
        let stream = command.streams.current();
        if stream.capture != StreamCapture::Off {
            return Err(capture_error(format!("graph_prepare: the stream is already {:?}", stream.capture)));
        }
        stream.memory_management_gpu.capture_begin();
        stream.memory_management_cpu.capture_begin();
        stream.capture = StreamCapture::Prepared;
        Ok(())
    }

    /// Opens the recording, after the warm-up: the warm-up's slices are freed into the pools for
    /// the recorded run to reuse, and `cuStreamBeginCapture` (global mode) records what is
    /// launched on the stream until [`Self::graph_end_capture`]. Nothing recorded runs.
    pub fn graph_begin_capture(&mut self, stream_id: StreamId) -> Result<(), ServerError> {
        let mut command = self.command_no_inputs(stream_id, ERRORS_FIRST)?;
        let stream = command.streams.current();
        if stream.capture != StreamCapture::Prepared {
            return Err(capture_error(format!(
                "graph_begin_capture: the stream is {:?}, not prepared (graph_prepare, then a warm-up run)",
                stream.capture
            )));
        }
        flush_drop_queue(stream);
        stream.memory_management_gpu.capture_priming_end();
        stream.memory_management_cpu.capture_priming_end();
        // SAFETY: `stream.sys` is the stream's live CUDA stream.
        let begun = unsafe {
            cudarc::driver::sys::cuStreamBeginCapture_v2(stream.sys, CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL)
        };
        if let Err(err) = begun.result() {
            disarm(stream);
            return Err(driver_error("cuStreamBeginCapture", err));
        }
        stream.capture = StreamCapture::Recording;
        Ok(())
    }

    /// Closes the recording and instantiates its graph, which holds every buffer the recorded
    /// run was handed (the pools' record) for its life. Refused, the capture left behind either
    /// way, where the recorded run allocated (a memory node: CUDA runs such a graph once and
    /// refuses to relaunch it), where recording failed (a call the capture does not allow, said
    /// by the driver), or where the recorded work queued an error.
    pub fn graph_end_capture(&mut self, stream_id: StreamId) -> Result<CapturedGraph, ServerError> {
        let id = GraphId(self.next_graph);
        let graph = {
            let mut command = self.command_no_inputs(stream_id, RECORDING)?;
            let stream = command.streams.current();
            if !stream.capture.is_recording() {
                return Err(capture_error(format!("graph_end_capture: the stream is {:?}, not recording", stream.capture)));
            }
            let mut recorded: CUgraph = std::ptr::null_mut();
            // SAFETY: the stream is recording (`graph_begin_capture`); the graph is ours after.
            let ended = unsafe { cudarc::driver::sys::cuStreamEndCapture(stream.sys, &mut recorded) };
            let allocated = stream.memory_management_gpu.capture_recorded_allocations().unwrap_or(0)
                + stream.memory_management_cpu.capture_recorded_allocations().unwrap_or(0);
            let mut held = stream.memory_management_gpu.capture_end();
            held.extend(stream.memory_management_cpu.capture_end());
            stream.capture = StreamCapture::Off;
            // What the recording held back is freed now (the graph holds its own).
            flush_drop_queue(stream);
            // The errors the recorded launches queued are said by the refusal, not left to fail
            // the next read: what they were about never ran.
            let queued = std::mem::take(&mut stream.errors);
            let instantiated = ended.result().map_err(|err| driver_error("cuStreamEndCapture", err)).and_then(|()| {
                // SAFETY: `recorded` is the live graph the capture's end gave; destroyed below.
                let instantiated = unsafe { instantiate(recorded, allocated, &queued) };
                // SAFETY: as above; the executable does not need it.
                unsafe { cudarc::driver::sys::cuGraphDestroy(recorded) };
                instantiated
            });
            instantiated.map(|(exec, nodes)| {
                // SAFETY: `exec` was just instantiated; uploading it ahead spares the first replay.
                if let Err(err) = unsafe { cudarc::driver::sys::cuGraphUpload(exec, stream.sys) }.result() {
                    log::warn!("the captured graph is uploaded at its first replay: cuGraphUpload: {err}");
                }
                (CudaGraph { exec, _held: held }, nodes)
            })
        };
        // The recording has ended, kept or refused: the graphs dropped meanwhile go now.
        let destroyed = self.destroy_deferred(stream_id);
        let (graph, nodes) = graph?;
        self.next_graph += 1;
        self.graphs.insert(id, graph);
        destroyed?;
        Ok(CapturedGraph { id, nodes })
    }

    /// Destroys the graphs dropped while the stream recorded, once it has finished their replays.
    fn destroy_deferred(&mut self, stream_id: StreamId) -> Result<(), ServerError> {
        if self.destroy_after_recording.is_empty() {
            return Ok(());
        }
        let synced = {
            let mut command = self.command_no_inputs(stream_id, RECORDING)?;
            Fence::new(command.streams.current().sys).wait_sync()
        };
        for graph in std::mem::take(&mut self.destroy_after_recording) {
            self.graphs.remove(&graph);
        }
        synced
    }

    /// Launches `graph` on `stream_id`'s stream, ordered after the work before it and before the
    /// work after it, as a kernel launch is. The caller keeps the graph's inputs (written in
    /// place, on the same stream) and reads its outputs from the buffers it was recorded with.
    pub fn graph_replay(&mut self, graph: GraphId, stream_id: StreamId) -> Result<(), ServerError> {
        let exec = self
            .graphs
            .get(&graph)
            .map(|graph| graph.exec)
            .ok_or_else(|| capture_error("graph_replay: no graph of that number (destroyed?)"))?;
        let mut command = self.command_no_inputs(stream_id, ERRORS_FIRST)?;
        let stream = command.streams.current();
        if stream.capture != StreamCapture::Off {
            return Err(capture_error(format!("graph_replay: the stream is {:?}", stream.capture)));
        }
        // SAFETY: `exec` is a live executable graph of this server's device.
        unsafe { cudarc::driver::sys::cuGraphLaunch(exec, stream.sys) }
            .result()
            .map_err(|err| driver_error("cuGraphLaunch", err))
    }

    /// Destroys `graph` once the stream has finished its replays, and frees what it held into
    /// the pools; while the stream records another, once that recording has ended (waiting on the
    /// host would end it). Nothing for a graph already destroyed.
    pub fn graph_destroy(&mut self, graph: GraphId, stream_id: StreamId) -> Result<(), ServerError> {
        if !self.graphs.contains_key(&graph) {
            return Ok(());
        }
        let (recording, sys) = {
            let mut command = self.command_no_inputs(stream_id, RECORDING)?;
            let stream = command.streams.current();
            (stream.capture.is_recording(), stream.sys)
        };
        if recording {
            self.destroy_after_recording.push(graph);
            return Ok(());
        }
        let synced = Fence::new(sys).wait_sync();
        // Destroyed even where the stream failed: no replay runs on a failed stream.
        self.graphs.remove(&graph);
        synced
    }

    /// Leaves a capture prepared or recording on `stream_id`'s stream, its graph (if any)
    /// discarded and the pools disarmed; nothing where none is under way.
    pub fn graph_cancel(&mut self, stream_id: StreamId) -> Result<(), ServerError> {
        let ended = {
            let mut command = self.command_no_inputs(stream_id, RECORDING)?;
            let stream = command.streams.current();
            let ended = match stream.capture {
                StreamCapture::Off => return Ok(()),
                StreamCapture::Prepared => Ok(()),
                StreamCapture::Recording => {
                    let mut recorded: CUgraph = std::ptr::null_mut();
                    // SAFETY: the stream is recording; the graph it gives is destroyed at once.
                    let ended =
                        unsafe { cudarc::driver::sys::cuStreamEndCapture(stream.sys, &mut recorded) }.result();
                    if !recorded.is_null() {
                        // SAFETY: as above.
                        unsafe { cudarc::driver::sys::cuGraphDestroy(recorded) };
                    }
                    ended.map_err(|err| driver_error("cuStreamEndCapture", err))
                }
            };
            if stream.capture.is_recording() {
                // What the recorded launches queued never ran.
                stream.errors.clear();
            }
            disarm(stream);
            flush_drop_queue(stream);
            ended
        };
        // Said after the deferred graphs are gone: the capture is left either way.
        let destroyed = self.destroy_deferred(stream_id);
        ended.and(destroyed)
    }

    /// An error where `stream_id`'s stream is recording: what waits on the host (a read, a
    /// synchronisation, a flush, a profile) would end the capture.
    pub(crate) fn refuse_while_recording(&mut self, stream_id: StreamId, what: &str) -> Result<(), ServerError> {
        let mut command = self.command_no_inputs(stream_id, RECORDING)?;
        if command.streams.current().capture.is_recording() {
            return Err(capture_error(format!("{what} while a CUDA graph is being recorded on this stream")));
        }
        Ok(())
    }
}

/// `recorded` instantiated, with its nodes, unless the recording allocated (`allocated` pages,
/// or memory nodes) or queued `errors`.
///
/// # Safety
///
/// `recorded` is a live graph.
unsafe fn instantiate(
    recorded: CUgraph,
    allocated: u64,
    errors: &[ServerError],
) -> Result<(CUgraphExec, super::graph::GraphNodes), ServerError> {
    if !errors.is_empty() {
        return Err(capture_error(format!("the recorded work failed: {errors:?}")));
    }
    // SAFETY: `recorded` is live (this function's contract).
    let nodes = unsafe { count_nodes(recorded) }.map_err(|err| driver_error("cuGraphGetNodes", err))?;
    if allocated > 0 || nodes.memory > 0 {
        return Err(capture_error(format!(
            "the recorded run allocated ({allocated} pages, {} memory nodes), which a graph cannot \
             replay: the warm-up before the capture must do all the recorded run does",
            nodes.memory
        )));
    }
    let mut exec: CUgraphExec = std::ptr::null_mut();
    // SAFETY: `recorded` is live; `exec` receives the executable.
    unsafe { cudarc::driver::sys::cuGraphInstantiateWithFlags(&mut exec, recorded, 0) }
        .result()
        .map_err(|err| driver_error("cuGraphInstantiateWithFlags", err))?;
    Ok((exec, nodes))
}
