//! The process's memory policy for training: freed memory stays with the allocator.
//!
//! glibc's malloc serves large blocks (above its mmap threshold, at most 32 MiB) with fresh
//! mappings and unmaps them when they are freed, and trims the top of its heap back to the system.
//! A training step allocates and frees the same buffers every step, so every step asked the kernel
//! for hundreds of megabytes again and had it zero them page by page: on the 2-core AMD EPYC
//! machine, PushT's classic step at batch 8 took 3.4–3.9 s that way and 1.7–2.0 s with freed
//! memory kept (bench/RESULTS.md). The tiny policy's step, whose buffers stay under the
//! threshold, does not change.

/// Keeps freed memory in the allocator for the rest of the process: blocks are served from its
/// heaps rather than by mappings of their own (except, in threads other than the main one, blocks
/// over 64 MiB: glibc's per-thread heaps are no larger), and the heaps are never trimmed. Call it once, at the start of a program that
/// trains; the process then holds its peak heap until it exits. Does nothing where the C library
/// is not glibc.
#[allow(unsafe_code, reason = "malloc's tuning is a C call; nothing safe wraps it")]
pub fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` only sets malloc's tuning parameters; both are valid for any value.
    unsafe {
        libc::mallopt(libc::M_MMAP_MAX, 0);
        libc::mallopt(libc::M_TRIM_THRESHOLD, libc::c_int::MAX);
    }
}
