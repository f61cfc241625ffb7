//! The vendor libraries and driver calls under burn's CUDA backend, and the one trait through
//! which our cubecl backends reach them ([`RuntimeLibraries`]): cuDNN's convolutions and
//! cuBLAS's products on burn's own stream ([`cudnn`], the `cudnn` feature), NCCL's sums between
//! processes (`nccl`, the `nccl` feature), frames uploaded through page-locked memory
//! (`pinned_upload`), work captured as one CUDA graph (`graph`, through our cubecl-cuda's
//! capture), and where pip's wheels keep the libraries (`wheels`). Every foreign call
//! of the crate is in this room; the rest of the crate sees only [`RuntimeLibraries`] (and
//! [`DeviceGroup`](crate::DeviceGroup), which holds an NCCL communicator).

#[cfg(feature = "cudnn")]
pub mod cudnn;
#[cfg(feature = "cuda-untuned")]
mod graph;
#[cfg(feature = "nccl")]
pub(crate) mod nccl;
#[cfg(feature = "cudnn")]
mod pinned_upload;
mod runtime;
#[cfg(feature = "cudnn")]
mod wheels;

pub use runtime::RuntimeLibraries;
