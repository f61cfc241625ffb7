//! [`OptimiserKernels`] under autodiff: the portable versions. The optimiser runs on the inner
//! backend's tensors, outside the graph, so nothing here is ever the fast path.

use burn::backend::Autodiff;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;

use crate::{Kernels, OptimiserKernels};

impl<B: Kernels, C: CheckpointStrategy> OptimiserKernels for Autodiff<B, C> {}
