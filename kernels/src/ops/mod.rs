//! What every backend offers the training step: the [`Kernels`] trait, made of six families
//! ([`OptimiserKernels`], [`ConvolutionKernels`], [`NormKernels`], [`FrameKernels`],
//! [`CollectiveKernels`], [`GraphKernels`]), the
//! optimiser's types, and the portable implementations written with burn's tensor operations
//! that each family's methods fall back to ([`portable`]).
//!
//! Adding an operation touches its family's trait here and that family's file in each backend
//! (`flex/`, `cube/`, `fusion/`, `autodiff/`).

pub mod activation;
pub mod adam;
pub mod collective;
pub mod collective_call;
pub mod convolution;
pub mod elements;
pub mod frames;
pub mod graph;
pub mod layout;
pub mod norm;
pub mod optimiser;
pub mod portable;
pub mod transposed;
pub mod views;
pub mod yuv;

use self::collective::CollectiveKernels;
use self::convolution::ConvolutionKernels;
use self::frames::FrameKernels;
use self::graph::GraphKernels;
use self::norm::NormKernels;
use self::optimiser::OptimiserKernels;

/// The fused operations of a training step, for backend `Self`: every family's. Implemented for
/// every backend that implements the six families; a caller names this one bound.
pub trait Kernels:
    OptimiserKernels + ConvolutionKernels + NormKernels + FrameKernels + CollectiveKernels + GraphKernels
{
}

impl<B: OptimiserKernels + ConvolutionKernels + NormKernels + FrameKernels + CollectiveKernels + GraphKernels> Kernels
    for B
{
}
