//! The CPU backend's (Flex's) [`Kernels`]: fused passes that each read and write their buffers
//! once, in place, on rayon's threads. The optimiser's passes are here; each family of layers
//! has a module of its own: `conv` (the 2-D convolution as matrix products over chunks of
//! images), `group_norm` and `batch_norm` (with their activation, their per-plane loops shared in
//! `norm_plane`), `pool` (max pooling), and under them `sums` (f64 sums in fixed lanes) on
//! `simd` (the widest SIMD the CPU has).

mod batch_norm;
mod conv;
mod convolution;
mod frames;
mod group_norm;
mod im2col;
mod norm;
mod norm_plane;
mod optimiser;
mod pool;
mod simd;
mod sums;
