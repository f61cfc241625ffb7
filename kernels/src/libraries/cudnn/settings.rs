//! The run-time switches of the cuDNN path: TF32, deterministic algorithms only, a synchronisation
//! around every call.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether f32 convolutions may use TF32 tensor cores: `LEROBOT_RS_CUDNN_TF32` (on unless `0`
/// or `off`) until [`allow_tf32`] says otherwise.
pub(crate) static TF32: OnceLock<AtomicBool> = OnceLock::new();

pub(crate) fn tf32() -> &'static AtomicBool {
    TF32.get_or_init(|| {
        AtomicBool::new(!std::env::var("LEROBOT_RS_CUDNN_TF32").is_ok_and(|v| matches!(v.as_str(), "0" | "off")))
    })
}

/// Lets f32 convolutions use TF32 tensor cores (torch's default), or keeps them exact f32.
pub fn allow_tf32(allow: bool) {
    tf32().store(allow, Ordering::Relaxed);
}

/// Whether only deterministic algorithms are taken: `LEROBOT_RS_CUDNN_DETERMINISTIC=1` until
/// [`deterministic`] says otherwise.
pub(crate) static DETERMINISTIC: OnceLock<AtomicBool> = OnceLock::new();

pub(crate) fn deterministic_only() -> &'static AtomicBool {
    DETERMINISTIC
        .get_or_init(|| AtomicBool::new(std::env::var("LEROBOT_RS_CUDNN_DETERMINISTIC").is_ok_and(|v| v == "1")))
}

/// Takes only algorithms that give the same bits on every run (torch's
/// `cudnn.deterministic`), or the fastest of any (the default).
pub fn deterministic(only: bool) {
    deterministic_only().store(only, Ordering::Relaxed);
}

/// Whether every call synchronises the device before and after: `LEROBOT_RS_CUDA_SYNC=1` until
/// [`synchronise_every_call`] says otherwise.
pub(crate) static SYNC: OnceLock<AtomicBool> = OnceLock::new();

pub(crate) fn sync() -> &'static AtomicBool {
    SYNC.get_or_init(|| AtomicBool::new(std::env::var("LEROBOT_RS_CUDA_SYNC").is_ok_and(|v| v == "1")))
}

/// Whether every cuDNN and cuBLAS call is synchronised ([`synchronise_every_call`]).
pub(super) fn synchronising() -> bool {
    sync().load(Ordering::Relaxed)
}

/// Synchronises the device before and after every cuDNN and cuBLAS call (to check the stream
/// ordering against, and to name the call where a kernel faults), or not (the default).
pub fn synchronise_every_call(synchronise: bool) {
    sync().store(synchronise, Ordering::Relaxed);
}
