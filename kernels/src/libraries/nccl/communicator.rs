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

use crate::ops::collective_call::Collective;

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

/// The raw communicator and what ended it, behind one lock: every NCCL call on it is made
/// holding the lock, so that the watchdog's abort (which frees it) never races another call.
struct Shared {
    comm: RawComm,
    /// What ended the communicator (the watchdog's finding, or a call's), once it failed; the
    /// communicator is aborted (freed) then.
    failure: Option<String>,
}

// SAFETY: the raw communicator is only used under `Mutex<Shared>`'s lock (NCCL allows its calls
// from any thread, one at a time).
unsafe impl Send for Shared {}

impl Shared {
    /// Records `error` as what ended the communicator and aborts it (once): its enqueued calls
    /// return, and its peers' calls fail instead of waiting.
    fn fail(&mut self, nccl: &Nccl, error: String) {
        if self.failure.is_none() {
            tracing::error!("{error}; aborting NCCL's communicator");
            self.failure = Some(error);
            // SAFETY: the communicator is live (no failure recorded yet), and the lock is held.
            unsafe { (nccl.comm_abort)(self.comm) };
        }
    }
}

/// This process's member of a communicator of `size` ranks, one device each.
pub(crate) struct Communicator {
    nccl: &'static Nccl,
    shared: Arc<Mutex<Shared>>,
    rank: usize,
    device: usize,
    stop: Arc<AtomicBool>,
    watchdog: Option<JoinHandle<()>>,
}

impl Communicator {
    /// Joins the communicator of group `id` as `rank` of `size`, on CUDA device `device` (whose
    /// primary context, cubecl's, is retained for the communicator's life and made current).
    /// Blocks until every rank joined.
    pub(crate) fn join(id: [u8; 128], rank: usize, size: usize, device: usize) -> Result<Self, String> {
        let nccl = library()?;
        // SAFETY: opening the driver's library runs its initialisers, sound in any process.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(format!("rank {rank}: no CUDA driver (libcuda.so.1) on this machine, so no GPU for NCCL"));
        }
        retain_primary_context(device)?;
        let joined = init_rank(nccl, id, rank, size, device);
        if joined.is_err() {
            release_primary_context(device);
        }
        joined
    }

    /// What ended the communicator, once something did.
    pub(crate) fn failure(&self) -> Option<String> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner).failure.clone()
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
        crate::libraries::cudnn::primary_context_current(self.device)?;
        let mut shared = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(failure) = &shared.failure {
            return Err(failure.clone());
        }
        let (comm, nccl) = (shared.comm, self.nccl);
        // SAFETY: the caller holds both buffers of `count` values live on this device until the
        // stream has run the call; the communicator is live (no failure) and the lock is held.
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
        if result == SUCCESS || result == IN_PROGRESS {
            return Ok(());
        }
        let error = format!("rank {}: {call}: {}", self.rank, nccl.describe(result, comm));
        shared.fail(nccl, error.clone());
        Err(error)
    }
}

/// `ncclCommInitRank`, then the watchdog; the communicator aborted where the watchdog cannot start.
fn init_rank(
    nccl: &'static Nccl,
    id: [u8; 128],
    rank: usize,
    size: usize,
    device: usize,
) -> Result<Communicator, String> {
    let (ranks, me) = (c_int::try_from(size), c_int::try_from(rank));
    let (Ok(ranks), Ok(me)) = (ranks, me) else { return Err(format!("rank {rank} of {size}: too many ranks")) };
    let mut comm: RawComm = std::ptr::null_mut();
    // SAFETY: `ncclCommInitRank` writes one communicator; the id is passed by value; the device's
    // primary context is current.
    let result = unsafe { (nccl.comm_init_rank)(&mut comm, ranks, RawUniqueId { internal: id }, me) };
    check(nccl, result, comm, "ncclCommInitRank").map_err(|e| format!("rank {rank} joining NCCL's group: {e}"))?;
    let shared = Arc::new(Mutex::new(Shared { comm, failure: None }));
    let stop = Arc::new(AtomicBool::new(false));
    match watch(nccl, rank, Arc::clone(&shared), Arc::clone(&stop)) {
        Ok(watchdog) => Ok(Communicator { nccl, shared, rank, device, stop, watchdog: Some(watchdog) }),
        Err(e) => {
            let error = format!("rank {rank}: starting NCCL's watchdog: {e}");
            shared.lock().unwrap_or_else(PoisonError::into_inner).fail(nccl, error.clone());
            Err(error)
        }
    }
}

/// Initialises the driver and retains `device`'s primary context (cubecl's), current on this
/// thread: NCCL's communicator is made in it, and it must outlive the communicator even where
/// cubecl has not used the device yet.
fn retain_primary_context(device: usize) -> Result<(), String> {
    use crate::libraries::cudnn::driver;
    let ordinal = c_int::try_from(device).map_err(|_| format!("no CUDA device {device}"))?;
    // SAFETY: `cuInit` may be called any number of times; the device is checked by `get`.
    unsafe {
        cudarc::driver::result::init().map_err(driver)?;
        let context =
            cudarc::driver::result::primary_ctx::retain(cudarc::driver::result::device::get(ordinal).map_err(driver)?)
                .map_err(driver)?;
        cudarc::driver::result::ctx::set_current(context).map_err(driver)?;
    }
    Ok(())
}

/// Releases what [`retain_primary_context`] retained.
fn release_primary_context(device: usize) {
    let Ok(ordinal) = c_int::try_from(device) else { return };
    // SAFETY: the context was retained by `retain_primary_context` for this device.
    unsafe {
        if let Ok(handle) = cudarc::driver::result::device::get(ordinal) {
            let _ = cudarc::driver::result::primary_ctx::release(handle);
        }
    }
}

/// Starts the thread that asks NCCL every [`WATCH_EVERY`] whether the communicator failed (a peer
/// died, the network failed) and aborts it then, until `stop`. It skips a turn while a call holds
/// the lock.
fn watch(
    nccl: &'static Nccl,
    rank: usize,
    shared: Arc<Mutex<Shared>>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name(format!("nccl-watchdog-{rank}")).spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            std::thread::sleep(WATCH_EVERY);
            let Ok(mut shared) = shared.try_lock() else { continue };
            if shared.failure.is_some() {
                return;
            }
            let mut state = SUCCESS;
            // SAFETY: the communicator is live (no failure recorded) and the lock is held.
            let result = unsafe { (nccl.comm_get_async_error)(shared.comm, &mut state) };
            let error = match (result, state) {
                (SUCCESS, SUCCESS | IN_PROGRESS) => continue,
                (SUCCESS, state) => nccl.describe(state, shared.comm),
                (result, _) => nccl.describe(result, shared.comm),
            };
            shared.fail(nccl, format!("rank {rank}: NCCL's communicator failed (a peer ended?): {error}"));
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
        let shared = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        if shared.failure.is_none() {
            // SAFETY: the communicator is live and no call on it is running (its owner is
            // dropping it, the watchdog has ended). The run's last call was read back to the
            // host, so nothing is outstanding for NCCL to wait on; an aborted one was freed by the
            // abort.
            unsafe { (self.nccl.comm_destroy)(shared.comm) };
        }
        drop(shared);
        release_primary_context(self.device);
    }
}
