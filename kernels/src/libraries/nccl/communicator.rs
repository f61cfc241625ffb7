//! One process's member of an NCCL communicator, on one device: made from the group's id, its
//! collective calls enqueued on a CUDA stream, and a watchdog that turns a peer's death or a
//! network failure into an error instead of a hang.

#![expect(unsafe_code, reason = "NCCL is a C library: a raw communicator and device pointers")]

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use burn::tensor::DType;

use super::library::{IN_PROGRESS, Nccl, RawComm, RawUniqueId, SUCCESS, status};

/// How often the watchdog asks NCCL whether the communicator failed (PyTorch's asks as often).
const WATCH_EVERY: Duration = Duration::from_millis(100);

/// NCCL's library, or why there is none.
pub(crate) fn library() -> Result<&'static Nccl, String> {
    status().as_ref().map_err(Clone::clone)
}

/// NCCL's version and where it was found, or why there is none.
pub(crate) fn describe_library() -> Result<String, String> {
    library().map(|nccl| format!("NCCL {} ({})", nccl.version_text(), nccl.origin))
}

/// A new group id, made by the group's rank 0 and handed to the others.
pub(crate) fn new_id() -> Result<[u8; 128], String> {
    let nccl = library()?;
    let mut id = RawUniqueId { internal: [0; 128] };
    // SAFETY: `ncclGetUniqueId` writes one id.
    let result = unsafe { (nccl.get_unique_id)(&mut id) };
    check(nccl, result, std::ptr::null_mut(), "ncclGetUniqueId")?;
    Ok(id.internal)
}

fn check(nccl: &Nccl, result: c_int, comm: RawComm, call: &str) -> Result<(), String> {
    match result {
        SUCCESS => Ok(()),
        _ => Err(format!("{call}: {}", nccl.describe(result, comm))),
    }
}

/// NCCL's data type for `dtype` (`ncclFloat16`, `ncclFloat32`, `ncclBfloat16`), where it has one.
pub(crate) fn data_type(dtype: DType) -> Option<c_int> {
    match dtype {
        DType::F16 => Some(6),
        DType::F32 => Some(7),
        DType::BF16 => Some(9),
        _ => None,
    }
}

/// Which collective call.
#[derive(Clone, Copy)]
pub(crate) enum Collective {
    /// The sum over the ranks.
    AllReduceSum,
    /// Rank 0's values.
    Broadcast,
}

/// The raw communicator, handed to the watchdog's thread: NCCL allows `ncclCommGetAsyncError`
/// and `ncclCommAbort` from another thread than the one making the collective calls.
#[derive(Clone, Copy)]
struct SharedComm(RawComm);

// SAFETY: see `SharedComm`; the calls that are not thread-safe are made only by the owner.
unsafe impl Send for SharedComm {}
// SAFETY: as above.
unsafe impl Sync for SharedComm {}

/// This process's member of a communicator of `size` ranks, one device each.
pub(crate) struct Communicator {
    nccl: &'static Nccl,
    comm: SharedComm,
    rank: usize,
    device: usize,
    /// What ended the communicator (the watchdog's finding, or a call's), once it failed.
    failure: Arc<Mutex<Option<String>>>,
    stop: Arc<AtomicBool>,
    watchdog: Option<JoinHandle<()>>,
}

impl Communicator {
    /// Joins the communicator of group `id` as `rank` of `size`, on CUDA device `device`
    /// (whose primary context, cubecl's, becomes current). Blocks until every rank joined.
    pub(crate) fn join(id: [u8; 128], rank: usize, size: usize, device: usize) -> Result<Self, String> {
        let nccl = library()?;
        // SAFETY: opening the driver's library runs its initialisers, sound in any process.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(format!("rank {rank}: no CUDA driver (libcuda.so.1) on this machine, so no GPU for NCCL"));
        }
        crate::libraries::cudnn::primary_context_current(device)?;
        let (ranks, me) = (c_int::try_from(size), c_int::try_from(rank));
        let (Ok(ranks), Ok(me)) = (ranks, me) else { return Err(format!("rank {rank} of {size}: too many ranks")) };
        let mut comm: RawComm = std::ptr::null_mut();
        // SAFETY: `ncclCommInitRank` writes one communicator; the id is passed by value.
        let result = unsafe { (nccl.comm_init_rank)(&mut comm, ranks, RawUniqueId { internal: id }, me) };
        check(nccl, result, comm, "ncclCommInitRank").map_err(|e| format!("rank {rank} joining NCCL's group: {e}"))?;
        let (failure, stop) = (Arc::new(Mutex::new(None)), Arc::new(AtomicBool::new(false)));
        let watchdog = watch(nccl, SharedComm(comm), rank, Arc::clone(&failure), Arc::clone(&stop))
            .map_err(|e| format!("rank {rank}: starting NCCL's watchdog: {e}"))?;
        Ok(Self { nccl, comm: SharedComm(comm), rank, device, failure, stop, watchdog: Some(watchdog) })
    }

    /// What ended the communicator, once something did.
    pub(crate) fn failure(&self) -> Option<String> {
        self.failure.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The CUDA device this member's calls run on.
    pub(crate) fn device(&self) -> usize {
        self.device
    }

    /// Enqueues `collective` on `stream`: over the ranks' `count` values of NCCL type `dtype` at
    /// `send`, into `receive` (the same address: in place).
    pub(crate) fn enqueue(
        &self,
        collective: Collective,
        send: *const c_void,
        receive: *mut c_void,
        count: usize,
        dtype: c_int,
        stream: *mut c_void,
    ) -> Result<(), String> {
        self.usable()?;
        crate::libraries::cudnn::primary_context_current(self.device)?;
        let (comm, nccl) = (self.comm.0, self.nccl);
        // SAFETY: the caller holds both buffers of `count` values live on this device until the
        // stream has run the call; the communicator is live (not destroyed before `Drop`).
        let (result, call) = unsafe {
            match collective {
                Collective::AllReduceSum => {
                    ((nccl.all_reduce)(send, receive, count, dtype, super::library::SUM, comm, stream), "ncclAllReduce")
                }
                Collective::Broadcast => {
                    ((nccl.broadcast)(send, receive, count, dtype, 0, comm, stream), "ncclBroadcast")
                }
            }
        };
        self.checked(result, call)
    }

    fn usable(&self) -> Result<(), String> {
        match self.failure() {
            Some(failure) => Err(failure),
            None => Ok(()),
        }
    }

    /// `result` of `call`; a failure aborts the communicator (so that no peer waits on it).
    fn checked(&self, result: c_int, call: &str) -> Result<(), String> {
        if result == SUCCESS || result == IN_PROGRESS {
            return Ok(());
        }
        let error = format!("rank {}: {call}: {}", self.rank, self.nccl.describe(result, self.comm.0));
        fail(self.nccl, self.comm, &self.failure, error.clone());
        Err(error)
    }
}

/// Records `error` as what ended the communicator and aborts it (once): its enqueued calls
/// return, and its peers' calls fail instead of waiting.
fn fail(nccl: &Nccl, comm: SharedComm, failure: &Mutex<Option<String>>, error: String) {
    let mut failure = failure.lock().unwrap_or_else(PoisonError::into_inner);
    if failure.is_none() {
        tracing::error!("{error}; aborting NCCL's communicator");
        *failure = Some(error);
        // SAFETY: the communicator is live; NCCL allows the abort from any thread.
        unsafe { (nccl.comm_abort)(comm.0) };
    }
}

/// Starts the thread that asks NCCL every [`WATCH_EVERY`] whether `comm` failed (a peer died, the
/// network failed) and aborts it then, until `stop`.
fn watch(
    nccl: &'static Nccl,
    comm: SharedComm,
    rank: usize,
    failure: Arc<Mutex<Option<String>>>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name(format!("nccl-watchdog-{rank}")).spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            std::thread::sleep(WATCH_EVERY);
            if failure.lock().unwrap_or_else(PoisonError::into_inner).is_some() {
                return;
            }
            let mut state = SUCCESS;
            // SAFETY: the communicator is live until `stop` is set and this thread joined.
            let result = unsafe { (nccl.comm_get_async_error)(comm.0, &mut state) };
            let error = match (result, state) {
                (SUCCESS, SUCCESS | IN_PROGRESS) => continue,
                (SUCCESS, state) => nccl.describe(state, comm.0),
                (result, _) => nccl.describe(result, comm.0),
            };
            fail(nccl, comm, &failure, format!("rank {rank}: NCCL's communicator failed (a peer ended?): {error}"));
            return;
        }
    })
}

impl Drop for Communicator {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(watchdog) = self.watchdog.take() {
            let _ = watchdog.join();
        }
        if self.failure().is_none() {
            // SAFETY: the communicator is live and no call on it is running (its owner is
            // dropping it, the watchdog has ended); an aborted one was freed by the abort.
            unsafe { (self.nccl.comm_destroy)(self.comm.0) };
        }
    }
}
