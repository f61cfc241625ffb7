//! The CUDA driver's profiler range (`cuProfilerStart`, `cuProfilerStop`), beside the library
//! calls: what Nsight Compute's `--profile-from-start off` profiles, so that a profile covers the
//! steps a benchmark marks, however many launches come before them.

#![expect(unsafe_code, reason = "the CUDA driver is a C library")]

use super::context::{driver, primary_context_current};

/// Starts (`on`) or stops CUDA's profiler range on `device`'s primary context (cubecl's).
pub fn profiler_range(device: usize, on: bool) -> Result<(), String> {
    primary_context_current(device)?;
    // SAFETY: `device`'s primary context is current on this thread (above); both calls take no
    // arguments and only mark the range for a profiler attached to the process.
    let result =
        unsafe { if on { cudarc::driver::sys::cuProfilerStart() } else { cudarc::driver::sys::cuProfilerStop() } };
    result.result().map_err(driver)
}
