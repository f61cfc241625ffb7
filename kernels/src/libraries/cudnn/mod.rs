//! cuDNN under burn's untuned cuda backend (the `cudnn` feature): the convolutions of the step
//! (the U-Net's transposed ones too), forward and backward, in NVIDIA's library as PyTorch runs
//! them, on burn's own CUDA stream.
//!
//! cuDNN 9 is opened at run time ([`status`]); where it is missing, or a convolution is one it
//! does not take, burn's own convolution runs, and the reason is logged once. [`ConvProblem`]
//! maps burn's shapes and options to cuDNN's descriptors and is checked without a GPU. The 1-D
//! convolutions may instead run as cuBLAS's matrix products over their unfolded input
//! ([`Conv1dPath`]), and the Linear layers' products in cuBLAS ([`LinearPath`]).

mod algorithm;
mod blas;
mod choice;
mod context;
mod conv;
mod counters;
mod earlier_runs;
mod graph;
mod kept;
mod library;
mod linear;
mod pass;
mod plan;
mod problem;
mod profiler;
mod search;
mod settings;

pub use blas::ColumnMajorGemm;
pub use context::CudaTensor;
#[cfg(feature = "nccl")]
pub(crate) use context::{buffers, ptr};
pub(crate) use context::{driver, primary_context_current};
pub use conv::{
    Conv1dPath, conv_transpose2d, conv1d_path, conv2d, conv2d_input_grad, conv2d_weight_grad, takes, takes_conv1d,
    use_conv1d,
};
pub use counters::{
    blas_calls, calls, channels_last_calls, earlier_runs_choices, graph_calls, pointer_round_trips, product_calls,
    searches, second_round_changes,
};
pub use graph::{GraphUse, use_graph};
pub use kept::{KEPT_ALGORITHMS_FILE, KeptAlgorithm, KeptAlgorithms};
pub use library::status;
pub use linear::{LinearPath, linear_path, product, takes_products, use_linear};
pub use problem::{ConvDataType, ConvLayout, ConvProblem, ProblemError};
pub use profiler::profiler_range;
pub use settings::{allow_tf32, deterministic, synchronise_every_call};
