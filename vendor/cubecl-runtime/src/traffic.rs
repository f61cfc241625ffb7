//! Patched in this vendored copy: counts of what the process's compute clients asked of their
//! servers, for a caller to measure the host's share of a workload (uploads, and calls that
//! block the caller on the server's thread) without a profiler.

use core::sync::atomic::{AtomicU64, Ordering};

static UPLOADS: AtomicU64 = AtomicU64::new(0);
static UPLOAD_BYTES: AtomicU64 = AtomicU64::new(0);
static BLOCKING_CALLS: AtomicU64 = AtomicU64::new(0);

/// What the process's compute clients have asked of their servers so far, every device and
/// stream together. Take the difference of two readings to count a span of work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostTraffic {
    /// Buffers created from host data (each one copy from the host to the device), and copies
    /// callers made into buffers themselves ([`count_uploads`]).
    pub uploads: u64,
    /// The bytes of those buffers.
    pub upload_bytes: u64,
    /// Calls of a client that waited for the server's thread to answer (reads, syncs,
    /// resources, flushes, memory usage, staging, profiles); not the device handle's
    /// `exclusive`, nor callers' own waits.
    pub blocking_calls: u64,
}

impl HostTraffic {
    /// The traffic between `earlier` and this reading.
    pub fn since(&self, earlier: &Self) -> Self {
        Self {
            uploads: self.uploads - earlier.uploads,
            upload_bytes: self.upload_bytes - earlier.upload_bytes,
            blocking_calls: self.blocking_calls - earlier.blocking_calls,
        }
    }
}

/// The traffic so far.
pub fn host_traffic() -> HostTraffic {
    HostTraffic {
        uploads: UPLOADS.load(Ordering::Relaxed),
        upload_bytes: UPLOAD_BYTES.load(Ordering::Relaxed),
        blocking_calls: BLOCKING_CALLS.load(Ordering::Relaxed),
    }
}

/// Counts `count` buffers of `bytes` bytes in all copied from host data: by the clients, and by
/// callers that copy into a client's buffers themselves (a page-locked upload of their own).
pub fn count_uploads(count: usize, bytes: usize) {
    UPLOADS.fetch_add(count as u64, Ordering::Relaxed);
    UPLOAD_BYTES.fetch_add(bytes as u64, Ordering::Relaxed);
}

/// Counts one call that blocks its caller on the server.
pub(crate) fn count_blocking() {
    BLOCKING_CALLS.fetch_add(1, Ordering::Relaxed);
}
