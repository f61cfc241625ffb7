//! A pass's algorithm: the legacy API's candidates and math types, or a graph plan.

use std::sync::Arc;

use cudarc::cudnn::sys;

use super::graph::GraphPlan;
use super::kept::KeptAlgorithm;
use super::pass::Pass;
use super::problem::ConvDataType;

/// The workspace the algorithm search offers each algorithm; ones needing more are passed over.
pub(crate) const SEARCH_WORKSPACE: usize = 256 << 20;

/// The algorithm found for one pass: one of the legacy API's, with its workspace, or a plan of
/// the graph API's.
#[derive(Debug, Clone)]
pub(crate) enum Algorithm {
    Output(sys::cudnnConvolutionFwdAlgo_t, usize),
    InputGrad(sys::cudnnConvolutionBwdDataAlgo_t, usize),
    WeightGrad(sys::cudnnConvolutionBwdFilterAlgo_t, usize),
    /// A graph plan, and the legacy search's algorithm for calls it cannot take (buffers not
    /// aligned as the plan declares them).
    Graph(Arc<GraphPlan>, Option<Box<Algorithm>>),
}

impl Algorithm {
    /// The legacy algorithm `kept` names for `pass`, if it names one of that pass, with a
    /// workspace the search could have given it.
    pub(crate) fn from_kept(pass: Pass, kept: &KeptAlgorithm) -> Option<(Self, sys::cudnnMathType_t)> {
        let math = named(&MATH_TYPES, &kept.math)?;
        if kept.workspace > SEARCH_WORKSPACE {
            return None;
        }
        let algorithm = match pass {
            Pass::Output => Self::Output(named(&OUTPUT_ALGORITHMS, &kept.algorithm)?, kept.workspace),
            Pass::InputGrad => Self::InputGrad(named(&INPUT_GRAD_ALGORITHMS, &kept.algorithm)?, kept.workspace),
            Pass::WeightGrad => Self::WeightGrad(named(&WEIGHT_GRAD_ALGORITHMS, &kept.algorithm)?, kept.workspace),
        };
        Some((algorithm, math))
    }

    /// This legacy algorithm with `math`, as a file keeps it (none for a graph plan).
    pub(crate) fn to_kept(&self, math: sys::cudnnMathType_t) -> Option<KeptAlgorithm> {
        let (algorithm, workspace) = match self {
            Self::Output(algo, bytes) => (format!("{algo:?}"), *bytes),
            Self::InputGrad(algo, bytes) => (format!("{algo:?}"), *bytes),
            Self::WeightGrad(algo, bytes) => (format!("{algo:?}"), *bytes),
            Self::Graph(..) => return None,
        };
        Some(KeptAlgorithm { algorithm, math: format!("{math:?}"), workspace })
    }

    pub(crate) fn workspace(&self) -> usize {
        match self {
            Self::Output(_, bytes) | Self::InputGrad(_, bytes) | Self::WeightGrad(_, bytes) => *bytes,
            Self::Graph(plan, legacy) => plan.workspace.max(legacy.as_ref().map_or(0, |l| l.workspace())),
        }
    }
}

pub(crate) fn data_type(data_type: ConvDataType) -> sys::cudnnDataType_t {
    match data_type {
        ConvDataType::F32 => sys::cudnnDataType_t::CUDNN_DATA_FLOAT,
        ConvDataType::F16 => sys::cudnnDataType_t::CUDNN_DATA_HALF,
        ConvDataType::Bf16 => sys::cudnnDataType_t::CUDNN_DATA_BFLOAT16,
    }
}

/// The legacy API's algorithms and math types, to read their kept names back.
pub(crate) const OUTPUT_ALGORITHMS: [sys::cudnnConvolutionFwdAlgo_t; 8] = {
    use sys::cudnnConvolutionFwdAlgo_t::*;
    [
        CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
        CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
        CUDNN_CONVOLUTION_FWD_ALGO_GEMM,
        CUDNN_CONVOLUTION_FWD_ALGO_DIRECT,
        CUDNN_CONVOLUTION_FWD_ALGO_FFT,
        CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING,
        CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD,
        CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED,
    ]
};

pub(crate) const INPUT_GRAD_ALGORITHMS: [sys::cudnnConvolutionBwdDataAlgo_t; 6] = {
    use sys::cudnnConvolutionBwdDataAlgo_t::*;
    [
        CUDNN_CONVOLUTION_BWD_DATA_ALGO_0,
        CUDNN_CONVOLUTION_BWD_DATA_ALGO_1,
        CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT,
        CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING,
        CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD,
        CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED,
    ]
};

pub(crate) const WEIGHT_GRAD_ALGORITHMS: [sys::cudnnConvolutionBwdFilterAlgo_t; 7] = {
    use sys::cudnnConvolutionBwdFilterAlgo_t::*;
    [
        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0,
        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,
        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT,
        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3,
        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD,
        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED,
        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING,
    ]
};

pub(crate) const MATH_TYPES: [sys::cudnnMathType_t; 4] = {
    use sys::cudnnMathType_t::*;
    [CUDNN_DEFAULT_MATH, CUDNN_TENSOR_OP_MATH, CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION, CUDNN_FMA_MATH]
};

/// The member of `all` whose name (its `Debug`) is `name`.
pub(crate) fn named<T: Copy + std::fmt::Debug>(all: &[T], name: &str) -> Option<T> {
    all.iter().copied().find(|member| format!("{member:?}") == name)
}

/// The math torch's convolutions allow: TF32 for f32 unless exact, tensor cores for halves.
pub(crate) fn math(data_type: ConvDataType, tf32: bool) -> sys::cudnnMathType_t {
    match (data_type, tf32) {
        (ConvDataType::F32, true) => sys::cudnnMathType_t::CUDNN_DEFAULT_MATH,
        (ConvDataType::F32, false) => sys::cudnnMathType_t::CUDNN_FMA_MATH,
        _ => sys::cudnnMathType_t::CUDNN_TENSOR_OP_MATH,
    }
}
