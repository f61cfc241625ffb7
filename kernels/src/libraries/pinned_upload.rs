//! Uint8 frames to a CUDA device through page-locked staging buffers, an asynchronous copy on
//! burn's own stream (the `cudnn` feature, which brings cudarc).
//!
//! burn's `from_data` on cubecl-cuda 0.10 copies the bytes twice on the host (into the tensor's
//! data, then into a fresh vector for the write: cubecl-runtime's `do_create`), then to the device
//! from that pageable memory, which the driver stages itself: 0.4 to 0.9 GB/s measured on an
//! H200. Here the bytes are copied once, in parallel and past the CPU's caches, into a
//! page-locked buffer kept for the next batches, and the DMA is enqueued on the stream cubecl
//! orders the buffer's work on (the vendored cubecl-cuda's `GpuResource::stream`): the kernels
//! that read the frames run after it, and the host goes on. An event recorded after the copy
//! tells when the staging buffer may be written again.

#![expect(
    unsafe_code,
    reason = "page-locked host memory, device pointers and events are the CUDA driver's raw handles"
)]

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use burn::tensor::{DType, Shape};
use burn_cubecl::tensor::CubeTensor;
use cubecl::cuda::{CudaDevice, CudaRuntime};
use cudarc::driver::{result, sys};
use rayon::prelude::*;

use super::cudnn::{driver, primary_context_current};

/// Staging buffers kept at most: enough for every camera of a step and the next step's.
const MAX_STAGING: usize = 16;

/// A page-locked host buffer and the event recorded after the last copy out of it.
struct Staging {
    host: *mut u8,
    capacity: usize,
    copied: sys::CUevent,
}

// SAFETY: the buffer and the event are the driver's, usable from any thread with the context
// current; the pool's mutex gives one thread at a time.
unsafe impl Send for Staging {}

impl Staging {
    fn new(capacity: usize) -> Result<Self, String> {
        // SAFETY: a new allocation of `capacity` bytes (written only within them) and a new event,
        // both owned here.
        unsafe {
            // Portable: pinned for every context, as data-parallel replicas each have their own.
            let host = result::malloc_host(capacity, sys::CU_MEMHOSTALLOC_PORTABLE).map_err(driver)?.cast::<u8>();
            // Initialised once, so that the copies may take the buffer as a byte slice.
            std::ptr::write_bytes(host, 0, capacity);
            let copied = match result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING) {
                Ok(event) => event,
                Err(e) => {
                    let _ = result::free_host(host.cast());
                    return Err(driver(e));
                }
            };
            // An event never recorded counts as complete: the buffer starts free.
            Ok(Self { host, capacity, copied })
        }
    }

    /// Whether the last copy out of the buffer has finished.
    fn is_free(&self) -> bool {
        // SAFETY: the event is live.
        unsafe { result::event::query(self.copied).is_ok() }
    }

    /// Waits for the last copy out of the buffer.
    fn wait(&self) -> Result<(), String> {
        // SAFETY: the event is live.
        unsafe { result::event::synchronize(self.copied).map_err(driver) }
    }
}

/// Each device's staging buffers (freed with the process), by ordinal.
static POOLS: Mutex<BTreeMap<usize, Vec<Staging>>> = Mutex::new(BTreeMap::new());

/// `bytes` on `device` as a contiguous uint8 tensor of `shape`, copied through a staging buffer
/// and enqueued on burn's stream. An error before the copy is enqueued leaves nothing behind;
/// after it (the event not recorded), the staging buffer is let go, never reused.
pub fn upload_u8(bytes: &[u8], shape: Shape, device: &CudaDevice) -> Result<CubeTensor<CudaRuntime>, String> {
    assert_eq!(bytes.len(), shape.num_elements(), "uint8 frames of shape {shape:?}");
    primary_context_current(device.index)?;
    let client = <CudaRuntime as cubecl::Runtime>::client(device);
    let handle = client.empty(bytes.len());
    let resource = client.get_resource(handle.clone()).map_err(|e| format!("the buffer's device pointer: {e:?}"))?;
    let (target, stream) = (resource.resource().ptr, resource.resource().stream);

    let staging = take_staging(device.index, bytes.len())?;
    const CHUNK: usize = 4 << 20;
    // SAFETY: the buffer holds `capacity >= bytes.len()` bytes, initialised (`Staging::new`),
    // and its last copy has finished (`take_staging`), so nothing else reads or writes it while
    // this slice lives.
    let host = unsafe { std::slice::from_raw_parts_mut(staging.host, bytes.len()) };
    // Past the CPU's caches: only the DMA reads these bytes. Each copy fences its stores, and
    // rayon's join orders them before the DMA is enqueued.
    host.par_chunks_mut(CHUNK)
        .zip(bytes.par_chunks(CHUNK))
        .for_each(|(to, from)| bulk_copy::copy_past_caches(to, from));
    let host = &*host;
    // SAFETY: `target` is a new device buffer of `bytes.len()` bytes, held (`resource`) until
    // the copy is enqueued; `host` stays untouched until the event recorded after it completes.
    let enqueued = unsafe {
        result::memcpy_htod_async(target, host, stream)
            .and_then(|()| result::event::record(staging.copied, stream))
            .map_err(driver)
    };
    drop(resource);
    match enqueued {
        Ok(()) => {
            // A host upload as cubecl's own are counted (`HostTraffic`).
            cubecl::client::count_uploads(1, bytes.len());
            with_pool(device.index, |pool| pool.push(staging));
        }
        // The copy may be in flight without its event: the buffer is not reused.
        Err(e) => {
            std::mem::forget(staging);
            return Err(e);
        }
    }
    Ok(CubeTensor::new_contiguous(client, device.clone(), shape, handle, DType::U8))
}

/// `f` on device `ordinal`'s pool, locked.
fn with_pool<T>(ordinal: usize, f: impl FnOnce(&mut Vec<Staging>) -> T) -> T {
    f(POOLS.lock().unwrap_or_else(PoisonError::into_inner).entry(ordinal).or_default())
}

/// A staging buffer of at least `len` bytes whose last copy has finished, out of device
/// `ordinal`'s pool: the smallest free one that is large enough, else a new one while the pool
/// has room, else its oldest, waited for and grown where it must.
fn take_staging(ordinal: usize, len: usize) -> Result<Staging, String> {
    // Never empty: a page-locked buffer of no bytes would have no address to take a slice of.
    let capacity = len.max(1).next_multiple_of(2 << 20);
    let taken = with_pool(ordinal, |pool| {
        let free = pool.iter().enumerate().filter(|(_, s)| s.capacity >= len && s.is_free());
        if let Some((index, _)) = free.min_by_key(|(_, s)| s.capacity) {
            return Some(Ok(pool.remove(index)));
        }
        (pool.len() >= MAX_STAGING).then(|| Err(pool.remove(0)))
    });
    match taken {
        Some(Ok(free)) => Ok(free),
        None => Staging::new(capacity),
        Some(Err(oldest)) => {
            if let Err(e) = oldest.wait() {
                // Its copy may still be reading it: never freed.
                std::mem::forget(oldest);
                return Err(e);
            }
            if oldest.capacity >= len { Ok(oldest) } else { Staging::new(capacity) }
        }
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        // SAFETY: the last copy out of the buffer has finished (waited for before a drop), and
        // both were created by `Staging::new`.
        unsafe {
            let _ = result::event::destroy(self.copied);
            let _ = result::free_host(self.host.cast());
        }
    }
}
