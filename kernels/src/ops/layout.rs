//! The layout a backend's convolution kernels want feature maps in: channels-first (burn's and
//! LeRobot's `[N, C, H, W]`) or channels-last (`[N, H, W, C]` in memory, what cuDNN's tensor-core
//! kernels and burn's own GPU convolutions compute in). A run-time switch while the channels-last
//! path is measured on a GPU: `LEROBOT_RS_CHANNELS_LAST=1`, or [`use_channels_last`].

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

static CHANNELS_LAST: OnceLock<AtomicBool> = OnceLock::new();

fn switch() -> &'static AtomicBool {
    CHANNELS_LAST.get_or_init(|| AtomicBool::new(std::env::var("LEROBOT_RS_CHANNELS_LAST").is_ok_and(|v| v == "1")))
}

/// Whether the GPU backends keep the encoder's feature maps channels-last ([`use_channels_last`],
/// else `LEROBOT_RS_CHANNELS_LAST=1`; off by default until measured faster).
pub fn channels_last_on() -> bool {
    switch().load(Ordering::Relaxed)
}

/// Has the GPU backends keep the encoder's feature maps channels-last, or channels-first.
pub fn use_channels_last(on: bool) {
    switch().store(on, Ordering::Relaxed);
}
