//! The frame caches' frames kept in the training device's memory (`dataset.frames_on_device`):
//! whether a run keeps them there ([`FramesOnDevice`], decided once at its start from the
//! caches and the device), and the frames themselves, uploaded once and gathered there by each
//! step ([`DeviceFrames`]).

mod choice;
mod store;

pub use choice::FramesOnDevice;
pub(crate) use choice::decide;
pub use store::DeviceFrames;
