//! What the host asked of the GPU backends' devices: buffers uploaded from host data (cubecl's
//! own uploads, and our page-locked frame uploads on CUDA), and calls of cubecl's client that
//! blocked the caller until the device's runner thread answered (reads, synchronisations, the
//! libraries' buffer pointers). Counted by our cubecl-runtime (vendor/README.md), every device
//! together; a span of work is the difference of two readings. Not counted: burn-fusion's own
//! waits for its queue to be launched (on fusion's thread, not the device's), so under fusion
//! a span's blocking calls are only complete once its queue has run (a read of its result). A captured CUDA graph's
//! step may do neither, so a warmed step's count says what is left to move onto the device
//! (bench/RESULTS.md, "The host's traffic in a step").

/// The host's traffic with the GPU backends' devices so far ([`HostTraffic::now`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct HostTraffic {
    /// Buffers copied from host data: each one copy from the host.
    pub uploads: u64,
    /// The bytes of those buffers.
    pub upload_bytes: u64,
    /// Calls of cubecl's client that waited for a device's runner thread to answer.
    pub blocking_calls: u64,
}

impl HostTraffic {
    /// The counts so far; `None` in a build without a cubecl backend, where nothing is counted.
    pub fn now() -> Option<Self> {
        #[cfg(any(feature = "cuda-untuned", feature = "wgpu-untuned"))]
        {
            let counted = cubecl::client::host_traffic();
            Some(Self {
                uploads: counted.uploads,
                upload_bytes: counted.upload_bytes,
                blocking_calls: counted.blocking_calls,
            })
        }
        #[cfg(not(any(feature = "cuda-untuned", feature = "wgpu-untuned")))]
        None
    }

    /// The traffic between `earlier` and this reading.
    pub fn since(&self, earlier: &Self) -> Self {
        Self {
            uploads: self.uploads - earlier.uploads,
            upload_bytes: self.upload_bytes - earlier.upload_bytes,
            blocking_calls: self.blocking_calls - earlier.blocking_calls,
        }
    }
}

impl std::fmt::Display for HostTraffic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} uploads ({} bytes), {} blocking calls", self.uploads, self.upload_bytes, self.blocking_calls)
    }
}
