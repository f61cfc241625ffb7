//! The vendor libraries and driver calls under burn's CUDA backend, and the one trait through
//! which our cubecl backends reach them ([`RuntimeLibraries`]): cuDNN's convolutions and
//! cuBLAS's products on burn's own stream ([`cudnn`], the `cudnn` feature), and frames uploaded
//! through page-locked memory (`pinned_upload`). Every foreign call of the crate is in this
//! room; the rest of the crate sees only [`RuntimeLibraries`].

#[cfg(feature = "cudnn")]
pub mod cudnn;
#[cfg(feature = "cudnn")]
mod pinned_upload;
mod runtime;

pub use runtime::RuntimeLibraries;
