//! The backends the tools train on, and the fused operations our training step needs beyond
//! burn's own.
//!
//! [`run_on`] runs a [`DeviceTask`] on the backend a [`DeviceKind`] names: Flex on the CPU, or
//! burn's wgpu and CUDA backends when built with the `wgpu` or `cuda` features (their compiled
//! kernels kept between runs: [`kernel_cache`]; their launches counted: [`LaunchLog`]).
//! [`Kernels`] is implemented by every one of them, as six families of operations, each a
//! trait: [`OptimiserKernels`] (the gradients gathered into one flat buffer, their norm and
//! clipping, Adam's update), [`ConvolutionKernels`] (convolutions, the Linear layers' products,
//! the channel bias, max pooling), [`NormKernels`] (GroupNorm, BatchNorm, FiLM), [`FrameKernels`] (frames uploaded
//! as bytes and converted to RGB on the device), [`CollectiveKernels`] (sums and broadcasts
//! between processes' devices, through a [`DeviceGroup`]: NCCL on CUDA) and [`GraphKernels`]
//! (work captured as one CUDA graph and replayed: on CUDA). Each method has a portable
//! implementation written with burn's tensor operations ([`portable`]); each backend overrides
//! what it does faster.
//!
//! The rooms, one folder each:
//! - `ops/`: the traits, the optimiser's types ([`AdamStep`], [`FlatBuffers`], [`ViewPlaces`]),
//!   the portable operations, and the tensor-level functions the model calls ([`conv2d`],
//!   [`group_norm`], [`film`], ...).
//! - `flex/`: the CPU's kernels (Flex): single passes over the buffers on every core, in place.
//! - `cube/`: our cubecl kernels for burn's wgpu and CUDA backends (the gradients' gather, the
//!   optimiser's update of many parameters per launch, GroupNorm, FiLM, YUV → RGB), one launch
//!   where burn's operations take several; the weights can be views of one buffer
//!   ([`OptimiserKernels::weight_views`]) that one launch updates in place.
//! - `fusion/`: the same kernels as custom operations of burn's fusion (`gpu-fusion`), so that
//!   fusion's own kernels run around them.
//! - `autodiff/`: each fused operation as one node of burn's autodiff graph, its backward pass
//!   the backend's fused gradient.
//! - `libraries/`: the vendor libraries under the CUDA backend (`cudnn` and `nccl` features),
//!   reached from `cube/` through one trait ([`RuntimeLibraries`]): cuDNN's convolutions and
//!   cuBLAS's products on burn's own stream ([`cudnn`]), NCCL's sums between processes, frames
//!   uploaded through page-locked memory, CUDA graphs captured and replayed. The crate's FFI is
//!   there and nowhere else.
//! - `backend/`: the backend choice ([`run_on`]), the kernel cache, the launch log, the count of
//!   what the host asks of a device ([`HostTraffic`]) and the constants kept on it
//!   ([`device_constant`]).
//!
//! The optimiser's state is flat: one contiguous buffer per quantity (gradients, Adam's two
//! moments, the weights' moving average) in which each trainable parameter owns a range
//! ([`FlatBuffers`]). The weights stay in the model's own tensors (or views of one buffer, as
//! above); one call updates them all and their ranges of the flat buffers
//! ([`OptimiserKernels::adam_update_all`]); in mixed precision the same pass writes the
//! half-precision copies the next forward reads ([`OptimiserKernels::adam_update_all_with_copies`]).
//!
//! The user's guide to training on these backends is `docs/gpu.md` in the repository.
//!
//! ```
//! use burn::backend::Flex;
//! use burn::prelude::*;
//! use kernels::{AdamStep, FlatBuffers, OptimiserKernels};
//!
//! let device = Default::default();
//! let weights = Tensor::<Flex, 1>::from_floats([1.0, -2.0], &device);
//! let mut flat = FlatBuffers::<Flex>::zeros(2, false, &device);
//! flat.grads = Tensor::<Flex, 1>::from_floats([0.5, 0.5], &device).into_primitive().tensor();
//! let scale = Tensor::<Flex, 1>::from_floats([1.0], &device).into_primitive().tensor();
//! let step = AdamStep { lr: 0.1, beta_1: 0.9, beta_2: 0.999, epsilon: 1e-8, weight_decay: 0.0, time: 1, ema_weight: None };
//! let updated = Flex::adam_update(weights.into_primitive().tensor(), &mut flat, 0, &scale, &step);
//! let updated = Tensor::<Flex, 1>::from_primitive(burn::tensor::TensorPrimitive::Float(updated));
//! // Adam's first step moves each weight by about the learning rate, against its gradient.
//! updated.into_data().assert_approx_eq::<f32>(&TensorData::from([0.9, -2.1]), Default::default());
//! ```

mod autodiff;
mod backend;
#[cfg(any(feature = "wgpu-untuned", feature = "cuda-untuned"))]
mod cube;
mod flex;
#[cfg(feature = "gpu-fusion")]
mod fusion;
#[cfg(any(feature = "wgpu-untuned", feature = "cuda-untuned", test))]
mod gather_plan;
#[cfg(any(feature = "wgpu-untuned", feature = "cuda-untuned"))]
mod libraries;
mod ops;
#[cfg(test)]
mod test_support;

pub use backend::constants::device_constant;
pub use backend::device::{DeviceError, DeviceKind, DeviceTask, run_on};
pub use backend::launches::LaunchLog;
pub use backend::traffic::HostTraffic;
pub use backend::{kernel_cache, launches, traffic};
#[cfg(any(feature = "wgpu-untuned", feature = "cuda-untuned"))]
pub use cube::unfold;
#[cfg(any(feature = "wgpu-untuned", feature = "cuda-untuned"))]
pub use cube::{MAX_PARTS_PER_LAUNCH, PARTS_PER_LAUNCH_LIMIT, PARTS_PER_LAUNCH_VAR};
#[cfg(any(feature = "wgpu-untuned", feature = "cuda-untuned"))]
pub use libraries::RuntimeLibraries;
#[cfg(feature = "cudnn")]
pub use libraries::cudnn;
pub use ops::Kernels;
pub use ops::activation::Activation;
pub use ops::adam::{ADAM_SCALARS, AdamConstants, AdamStep, FlatBuffers, PartialSquares, UpdatedWeights, ViewsUpdate};
pub use ops::collective::{Collective, CollectiveKernels, DeviceGroup, GroupId};
pub use ops::convolution::{ConvolutionKernels, add_channel_bias, conv_transpose2d, conv2d, linear, max_pool2d};
pub use ops::frames::FrameKernels;
pub use ops::graph::{CapturedGraph, GraphKernels, GraphNodes, GraphReplay};
pub use ops::layout::{channels_last_on, use_channels_last};
pub use ops::norm::{
    NormKernels, batch_norm, film, film_dtypes, film_shape, group_norm, group_norm_dtypes, group_norm_shape,
};
pub use ops::optimiser::{OptimiserKernels, adam_update_all_copying};
pub use ops::portable;
pub use ops::transposed::{conv_transpose2d_output_shape, transposed_convolution};
pub use ops::views::{ViewPlaces, ViewTable, ViewedWeight};
pub use ops::yuv::{FixedPointTerm, Yuv420Terms, yuv420_frame_len};
