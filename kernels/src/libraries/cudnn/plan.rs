//! One problem's descriptors (tensors, filter, a convolution per pass) and the algorithm each
//! pass found, made once per problem and device.

#![expect(unsafe_code, reason = "cuDNN is a C library: raw handles, descriptors and device pointers")]

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::cudnn::result::CudnnError;
use cudarc::cudnn::sys;

use super::algorithm::{Algorithm, data_type, math};
use super::graph::{self, GraphUse};
use super::problem::{ConvDataType, ConvLayout, ConvProblem};
use super::settings::{deterministic_only, tf32};

/// What a plan's search may take, as the switches stood when the plan was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Settings {
    /// Exact f32: FMA algorithms only.
    pub(crate) exact: bool,
    /// Only algorithms that give the same bits every run.
    pub(crate) deterministic: bool,
    /// Whether the search times the graph API's plans too, or takes them first.
    pub(crate) graph: GraphUse,
}

/// A problem's cuDNN descriptors (one convolution descriptor per pass, each set to the math of
/// its pass's algorithm) and the algorithms found for it.
pub(crate) struct Plan {
    pub(crate) problem: ConvProblem,
    pub(crate) settings: Settings,
    pub(crate) input: sys::cudnnTensorDescriptor_t,
    pub(crate) weight: sys::cudnnFilterDescriptor_t,
    pub(crate) output: sys::cudnnTensorDescriptor_t,
    pub(crate) convolution: [sys::cudnnConvolutionDescriptor_t; 3],
    pub(crate) algorithms: Mutex<[Option<Algorithm>; 3]>,
    /// The passes whose search found no algorithm: burn's convolution from then on, without
    /// searching again.
    pub(crate) no_algorithm: [AtomicBool; 3],
    /// The passes running an algorithm an earlier run chose ([`earlier_runs_choice`]).
    pub(crate) from_earlier_run: [AtomicBool; 3],
    /// The passes whose earlier run's algorithm failed: searched again, and the choice replaced.
    pub(crate) earlier_run_failed: [AtomicBool; 3],
}

// SAFETY: descriptors are host-side parameter blocks; after `Plan::new` only a pass's
// convolution descriptor is written (its math type), under `algorithms`' lock, before any call
// reads it.
unsafe impl Send for Plan {}
// SAFETY: as for `Send`.
unsafe impl Sync for Plan {}

impl Plan {
    pub(crate) fn new(problem: ConvProblem, settings: Settings) -> Result<Self, CudnnError> {
        use cudarc::cudnn::result as cudnn;
        let element = data_type(problem.data_type);
        // The filter's format names its layout too: NHWC is KRSC, `[O, kh, kw, C]`.
        let format = match problem.layout {
            ConvLayout::Nchw => sys::cudnnTensorFormat_t::CUDNN_TENSOR_NCHW,
            ConvLayout::Nhwc => sys::cudnnTensorFormat_t::CUDNN_TENSOR_NHWC,
        };
        // SAFETY: each descriptor is created here, set once with sizes ConvProblem checked, and
        // destroyed in `Drop` only.
        unsafe {
            let input = cudnn::create_tensor_descriptor()?;
            cudnn::set_tensor4d_descriptor(input, format, element, problem.input)?;
            let output = cudnn::create_tensor_descriptor()?;
            cudnn::set_tensor4d_descriptor(output, format, element, problem.output)?;
            let weight = cudnn::create_filter_descriptor()?;
            cudnn::set_filter4d_descriptor(weight, element, format, problem.weight)?;
            let mut convolution = [std::ptr::null_mut(); 3];
            for descriptor in &mut convolution {
                *descriptor = cudnn::create_convolution_descriptor()?;
                let [pad_h, pad_w] = problem.padding;
                let [stride_h, stride_w] = problem.stride;
                let [dilation_h, dilation_w] = problem.dilation;
                cudnn::set_convolution2d_descriptor(
                    *descriptor,
                    pad_h,
                    pad_w,
                    stride_h,
                    stride_w,
                    dilation_h,
                    dilation_w,
                    sys::cudnnConvolutionMode_t::CUDNN_CROSS_CORRELATION,
                    sys::cudnnDataType_t::CUDNN_DATA_FLOAT,
                )?;
                cudnn::set_convolution_group_count(*descriptor, problem.groups)?;
                cudnn::set_convolution_math_type(*descriptor, math(problem.data_type, !settings.exact))?;
            }
            Ok(Self {
                problem,
                settings,
                input,
                weight,
                output,
                convolution,
                algorithms: Mutex::new([const { None }; 3]),
                no_algorithm: Default::default(),
                from_earlier_run: Default::default(),
                earlier_run_failed: Default::default(),
            })
        }
    }

    /// Whether the search may take an algorithm of `math`: with exact f32, FMA only.
    pub(crate) fn allows(&self, math: sys::cudnnMathType_t) -> bool {
        !(self.settings.exact && self.problem.data_type == ConvDataType::F32)
            || math == sys::cudnnMathType_t::CUDNN_FMA_MATH
    }

    /// The plan of `problem` on `device`, made at its first use there. Each device has its own,
    /// as torch's benchmark cache keys its choices by device: the graph API's plans are built
    /// with one device's cuDNN handle and run only on that device.
    pub(crate) fn of(problem: ConvProblem, device: usize) -> Result<Arc<Plan>, CudnnError> {
        /// The plans made, by device, problem and settings.
        type Plans = HashMap<(usize, ConvProblem, Settings), Arc<Plan>>;
        static PLANS: OnceLock<Mutex<Plans>> = OnceLock::new();
        let settings = Settings {
            exact: !tf32().load(Ordering::Relaxed),
            deterministic: deterministic_only().load(Ordering::Relaxed),
            graph: graph::graph_use(),
        };
        let mut plans = PLANS.get_or_init(Default::default).lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(plan) = plans.get(&(device, problem, settings)) {
            return Ok(plan.clone());
        }
        let plan = Arc::new(Plan::new(problem, settings)?);
        plans.insert((device, problem, settings), plan.clone());
        Ok(plan)
    }
}

impl Drop for Plan {
    fn drop(&mut self) {
        use cudarc::cudnn::result as cudnn;
        // SAFETY: created in `Plan::new`, destroyed once; errors at teardown are of no use.
        unsafe {
            let _ = cudnn::destroy_tensor_descriptor(self.input);
            let _ = cudnn::destroy_tensor_descriptor(self.output);
            let _ = cudnn::destroy_filter_descriptor(self.weight);
            for descriptor in self.convolution {
                let _ = cudnn::destroy_convolution_descriptor(descriptor);
            }
        }
    }
}
