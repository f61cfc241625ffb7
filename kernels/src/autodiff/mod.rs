//! [`Kernels`] under autodiff: the convolution and the transposed one, a channel bias,
//! GroupNorm, BatchNorm, FiLM and max pooling each recorded as one operation of the graph, whose
//! backward pass calls the inner backend's gradient kernels (burn's own `conv2d` would call
//! burn's; a composed GroupNorm records some twenty operations). The
//! optimiser's methods keep their defaults here: the trainer calls them on the inner backend.

mod collective;
mod convolution;
mod frames;
mod graph;
mod norm;
mod optimiser;
