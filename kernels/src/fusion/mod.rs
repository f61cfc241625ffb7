//! [`Kernels`] under burn's fusion (`gpu-fusion`): the backend is `Fusion<B>` over cubecl's, which
//! records operations and runs them later, fused where it can. The convolutions and the
//! transposed ones (cuDNN on cuda with the `cudnn` feature), GroupNorm with its activation and
//! FiLM, forward and backward, a channel bias's gradient, YUV 4:2:0 frames to RGB, the gradients'
//! gather, the optimiser update and the weights' views are registered as fusion's custom
//! operations that run the inner backend's own methods (for cubecl's backends, `cube/`: one
//! launch per GroupNorm, many parameters a launch), so fusion keeps joining the elementwise
//! chains around them. The other methods keep their portable versions, whose elementwise chains
//! fusion compiles into few kernels.

mod collective;
mod convolution;
mod frames;
mod graph;
mod norm;
mod optimiser;
mod register;
mod views;
