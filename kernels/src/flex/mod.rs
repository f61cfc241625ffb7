//! The CPU backend's (Flex's) [`Kernels`]: fused passes that each read and write their buffers
//! once, in place, on rayon's threads. Each family of the trait is implemented in a file of its
//! own (`optimiser`, the optimiser's passes too; `convolution`, `norm`, `frames`, `collective`), over the
//! passes of each family of layers: `conv` (the 2-D convolution as matrix products over chunks
//! of images) on `im2col` (the unfolding and its geometry), `group_norm` and `batch_norm` (with
//! their activation, their per-plane loops shared in `norm_plane`), `pool` (max pooling), and
//! under them `sums` (f64 sums in fixed lanes) on `simd` (the widest SIMD the CPU has).

mod batch_norm;
mod collective;
mod conv;
mod convolution;
mod frames;
mod graph;
mod group_norm;
mod im2col;
mod norm;
mod norm_plane;
mod optimiser;
mod pool;
mod simd;
mod sums;
