//! What a library call runs in: the device's primary context made current, cuDNN's handle per
//! thread on burn's stream, and the device pointers of burn's buffers.

#![expect(unsafe_code, reason = "cuDNN is a C library: raw handles, descriptors and device pointers")]

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::Ordering;

use burn::tensor::TensorMetadata;
use burn_cubecl::tensor::CubeTensor;
use cubecl::cuda::CudaRuntime;
use cudarc::cudnn::sys;

use super::counters;

/// A tensor of burn's untuned cuda backend.
pub type CudaTensor = CubeTensor<CudaRuntime>;

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
pub(crate) fn with_handle<T>(
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

pub(crate) fn dims(tensor: &CudaTensor) -> Option<[usize; 4]> {
    let shape = tensor.shape();
    (shape.num_dims() == 4).then(|| [shape[0], shape[1], shape[2], shape[3]])
}

/// The device pointers of some tensors' buffers (and a workspace's), held while a library call
/// that reads them is enqueued, and the stream cubecl orders their work on.
pub(crate) struct Buffers {
    /// In the order asked for, the workspace last.
    pub(crate) pointers: Vec<u64>,
    /// The stream of the last buffer's resource (all one device's).
    pub(crate) stream: cudarc::driver::sys::CUstream,
    pub(crate) _held: Vec<Box<dyn std::any::Any>>,
}

/// The buffers of `tensors` (and of `workspace`), as [`Buffers`]: one blocking round trip to
/// cubecl's runner for all of them (our cubecl-runtime's `get_resources`, vendor/README.md).
pub(crate) fn buffers(tensors: &[&CudaTensor], workspace: Option<&cubecl::server::Handle>) -> Result<Buffers, String> {
    let client = &tensors[0].client;
    let handles: Vec<_> = tensors.iter().map(|t| t.handle.clone()).chain(workspace.cloned()).collect();
    counters::POINTER_ROUND_TRIPS.fetch_add(1, Ordering::Relaxed);
    counters::POINTERS.fetch_add(handles.len() as u64, Ordering::Relaxed);
    let resources = client.get_resources(handles).map_err(|e| format!("the buffers' device pointers: {e:?}"))?;
    let pointers = resources.iter().map(|r| r.resource().ptr).collect();
    let stream = resources.last().map_or(std::ptr::null_mut(), |r| r.resource().stream);
    let held = resources.into_iter().map(|r| Box::new(r) as Box<dyn std::any::Any>).collect();
    Ok(Buffers { pointers, stream, _held: held })
}

pub(crate) fn ptr(address: u64) -> *mut c_void {
    address as usize as *mut c_void
}
