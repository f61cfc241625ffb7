//! burn's cubecl backends' own kernels (CUDA, wgpu):
//!
//! - the optimiser pass: the gradients gathered into the flat buffer and the fused update, each
//!   a kernel that takes many parameters per launch (up to [`MAX_PARTS_PER_LAUNCH`], as the
//!   device's bindings allow), where the portable versions are a launch per parameter for the
//!   gather and some twenty of burn's operations per parameter for the update; in mixed
//!   precision the gather casts the half-precision gradients up as it copies them, and the
//!   update writes the new weights' half-precision copies beside them; where the weights are
//!   views of one buffer ([`OptimiserKernels::weight_views`](crate::OptimiserKernels::weight_views)), the update is one launch over it
//!   ([`adam_views_kernel`]), which can also total the squares the gather left as partial sums
//!   and compute the clipping factors itself;
//! - GroupNorm with the activation after it: one launch forward (a cube per group: mean, then
//!   variance, then the output), two backward (the input's gradient, a cube per group; the
//!   scale's and shift's, up to 64 cubes a channel, their partial sums then added in order by a
//!   third launch where a channel takes several), where burn's operations take about ten launches
//!   forward and twenty backward; in a half-precision step it reads and writes the compute
//!   dtype, computing in f32;
//! - FiLM, one launch each way, and a bias's gradient along the channels, a cube per channel;
//! - YUV 4:2:0 frames to RGB in one launch, in the decoder's integer arithmetic.
//!
//! With burn's fusion on, the backends are `Fusion` over these, which runs the same kernels as
//! its custom operations (`fusion/`).
//!
//! The trait's families are implemented one a file (`optimiser`, `convolution`, `norm`,
//! `frames`, `collective`), over the kernels: `adam` and `views` (the update), `gather` and `sums` (the
//! gradients' gather, their squares and the clipping factors), `group_norm`, `film`, `bias`,
//! `yuv`, and `unfold` (the 1-D convolutions unfolded for cuBLAS); `launch` shapes a launch and
//! `tensors` makes its outputs. The vendor libraries are reached through `RuntimeLibraries` only.
//!
//! A launch of the gather, or of the update of weights held tensor by tensor, takes up to
//! [`MAX_PARTS_PER_LAUNCH`] parameters. The update gives each one row of cubes (the grid's
//! second axis), as torch's `multi_tensor_apply` hands each block one tensor's chunk: each unit
//! picks its parameter once, by its cube's row, then strides over that parameter's elements. The
//! gather has every unit stride over each of its parameters in turn, so that each cube's sum of
//! squares covers all of them: a launch leaves one partial sum a cube, few enough for every cube
//! of the views' update to total them.
//! (The first version gave one unit to each element of the flat range and had it search the
//! launch's 64 ranges for its own: on an H200 that search, and the gather's decoding of every
//! position through the shape with 64-bit divisions, held the gather at 20 ms and the update at
//! 9 ms for PushT's 263 million parameters, against 0.5 and 1.7 ms of memory traffic.)

mod adam;
mod bias;
mod collective;
mod convolution;
mod crop;
mod film;
mod frames;
mod gather;
mod graph;
mod group_norm;
pub(crate) mod launch;
mod norm;
mod optimiser;
mod sums;
pub(crate) mod tensors;
pub mod unfold;
mod views;
mod yuv;

pub use launch::{MAX_PARTS_PER_LAUNCH, PARTS_PER_LAUNCH_LIMIT, PARTS_PER_LAUNCH_VAR};
