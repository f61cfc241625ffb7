//! The backends the tools train on, and the fused operations our training step needs beyond
//! burn's own.
//!
//! [`run_on`] runs a [`DeviceTask`] on the backend a [`DeviceKind`] names: Flex on the CPU, or
//! burn's wgpu and CUDA backends when built with the `wgpu` or `cuda` features (their compiled
//! kernels kept between runs: [`kernel_cache`]). [`Kernels`] is implemented by every one of them. Its methods have portable
//! implementations written with burn's tensor operations (used as they are on wgpu and CUDA,
//! where burn's fusion compiles each method's elementwise chain into few kernels), and the CPU
//! backend (Flex) overrides them with single passes over the buffers, in place (`flex/`). On wgpu
//! and CUDA without burn's fusion, the gradients' gather and the optimiser update are cubecl
//! kernels that take many parameters per launch (`cube.rs`); the update writes the weights in
//! place wherever it holds their only handles, as the CPU's pass does. There the weights can
//! also be views of one buffer ([`Kernels::weight_views`]), which one launch updates in place for
//! the whole model ([`Kernels::adam_update_views`]).
//!
//! The optimiser's state is flat: one contiguous buffer per quantity (gradients, Adam's two
//! moments, the weights' moving average) in which each trainable parameter owns a range
//! ([`FlatBuffers`]). The weights stay in the model's own tensors (or views of one buffer, as
//! above); one call updates them all and their ranges of the flat buffers
//! ([`Kernels::adam_update_all`]); in mixed precision the same pass writes the half-precision
//! copies the next forward reads ([`Kernels::adam_update_all_with_copies`]).
//!
//! ```
//! use burn::backend::Flex;
//! use burn::prelude::*;
//! use kernels::{AdamStep, FlatBuffers, Kernels};
//!
//! let device = Default::default();
//! let weights = Tensor::<Flex, 1>::from_floats([1.0, -2.0], &device);
//! let mut flat = FlatBuffers::<Flex>::zeros(2, false, &device);
//! flat.grads = Tensor::<Flex, 1>::from_floats([0.5, 0.5], &device).into_primitive().tensor();
//! let scale = Tensor::<Flex, 1>::from_floats([1.0], &device).into_primitive().tensor();
//! let step = AdamStep { lr: 0.1, beta_1: 0.9, beta_2: 0.999, epsilon: 1e-8, weight_decay: 0.0, time: 1, ema_weight: None };
//! let updated = Flex::adam_update(weights.into_primitive().tensor(), &mut flat, 0, &scale, &step);
//! let updated = Tensor::<Flex, 1>::from_primitive(burn::tensor::TensorPrimitive::Float(updated));
//! // Adam's first step moves each weight by about the learning rate, against its gradient.
//! updated.into_data().assert_approx_eq::<f32>(&TensorData::from([0.9, -2.1]), Default::default());
//! ```

mod activation;
mod autodiff;
#[cfg(any(feature = "wgpu-untuned", feature = "cuda-untuned"))]
mod cube;
#[cfg(feature = "cudnn")]
pub mod cudnn;
mod device;
mod flex;
#[cfg(feature = "gpu-fusion")]
mod fusion;
#[cfg(any(feature = "wgpu-untuned", feature = "cuda-untuned", test))]
mod gather_plan;
pub mod kernel_cache;
pub mod launches;
#[cfg(feature = "cudnn")]
mod pinned_upload;
pub mod portable;
#[cfg(any(feature = "wgpu-untuned", feature = "cuda-untuned"))]
mod runtime_libraries;
#[cfg(test)]
mod test_support;
mod transposed;
#[cfg(any(feature = "wgpu-untuned", feature = "cuda-untuned"))]
pub mod unfold;
mod yuv;

pub use activation::Activation;
#[cfg(any(feature = "wgpu-untuned", feature = "cuda-untuned"))]
pub use cube::{MAX_PARTS_PER_LAUNCH, PARTS_PER_LAUNCH_LIMIT, PARTS_PER_LAUNCH_VAR};
pub use device::{DeviceError, DeviceKind, DeviceTask, run_on};
pub use launches::LaunchLog;
#[cfg(any(feature = "wgpu-untuned", feature = "cuda-untuned"))]
pub use runtime_libraries::RuntimeLibraries;
pub use transposed::{conv_transpose2d_output_shape, transposed_convolution};
pub use yuv::{FixedPointTerm, Yuv420Terms, yuv420_frame_len};

use burn::prelude::*;
use burn::tensor::ops::{ConvOptions, ConvTransposeOptions, FloatTensor, IntTensor, MaxPool2dWithIndices, ModuleOps};
use burn::tensor::{DType, FloatDType, TensorMetadata, TensorPrimitive};

/// One fused optimiser update's numbers, for every parameter of the step: torch's `Adam` with
/// L2 weight decay (`weight_decay`), as LeRobot trains with it, after clipping.
///
/// Per weight `w` with gradient `g` (its range of [`FlatBuffers::grads`]) and moments `m`, `v`,
/// in torch's order of operations (`_single_tensor_adam`):
/// `g ← g·scale + weight_decay·w` (the scale carries clipping, the loss scale's inverse and,
/// for gradients summed over data-parallel replicas, 1/N), `m ← m + (1−β₁)(g − m)`,
/// `v ← β₂v + (1−β₂)g·g`, `w ← w − lr/(1−β₁ᵗ) · m / (√v / √(1−β₂ᵗ) + ε)`; then, with an average `a`,
/// `a ← a + ema_weight·(w − a)` (`a ← w` when `ema_weight` is 1). Like torch, the scalars are
/// derived in f64 and applied in f32 ([`AdamConstants`]); burn's own Adam derives them in f32,
/// where `1 − 0.999` is 1.3e-5 off.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamStep {
    /// The learning rate of this step.
    pub lr: f64,
    /// Adam's β₁.
    pub beta_1: f64,
    /// Adam's β₂.
    pub beta_2: f64,
    /// Adam's ε.
    pub epsilon: f64,
    /// L2 decay added to the gradient (0: none).
    pub weight_decay: f64,
    /// This update's number, from 1 (bias correction).
    pub time: i32,
    /// `1 − decay` of the moving average, when one is kept.
    pub ema_weight: Option<f32>,
}

/// What [`Kernels::adam_update_all_with_copies`] returns: the new f32 weights and their
/// half-precision copies, each in the order the weights came in.
#[derive(Debug)]
pub struct UpdatedWeights<B: Backend> {
    /// The new weights, f32.
    pub weights: Vec<FloatTensor<B>>,
    /// The new weights in the half precision asked for.
    pub copies: Vec<FloatTensor<B>>,
}

/// Where each parameter's weights sit in a buffer of views ([`Kernels::weight_views`]): the
/// parameters in order, each at a place aligned for f32 weights and for half-precision copies
/// laid out alike, padding between.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewPlaces {
    starts: Vec<usize>,
    lens: Vec<usize>,
    extent: usize,
}

impl ViewPlaces {
    /// The places of parameters of `lens` elements (at least one parameter) in a buffer aligned
    /// to `alignment` bytes (a power of two): each a multiple of `alignment / 2` elements (at
    /// least two) after the previous one's end, so that each view's binding can be rounded up to
    /// an even count. Panics where the buffer would hold more than the update's int32 tables can
    /// reach ([`ViewTable`]).
    pub fn new(lens: &[usize], alignment: usize) -> Self {
        assert!(!lens.is_empty(), "places for no parameters");
        assert!(alignment.is_power_of_two(), "an alignment of {alignment} bytes is not a power of two");
        let step = (alignment / 2).max(2);
        let too_many = || panic!("weights of {} parameters are more than int32 tables reach", lens.len());
        let mut starts = Vec::with_capacity(lens.len());
        let mut place: usize = 0;
        for &len in lens {
            starts.push(place);
            let end = place.checked_add(len).unwrap_or_else(too_many);
            place = end.checked_next_multiple_of(step).unwrap_or_else(too_many);
        }
        if place >= i32::MAX as usize {
            too_many();
        }
        Self { starts, lens: lens.to_vec(), extent: place }
    }

    /// Where each parameter's weights start in the views' buffer.
    pub fn starts(&self) -> &[usize] {
        &self.starts
    }

    /// Each parameter's element count.
    pub fn lens(&self) -> &[usize] {
        &self.lens
    }

    /// Parameters.
    pub fn parts(&self) -> usize {
        self.lens.len()
    }

    /// Elements of the optimiser's flat buffers: every parameter's, end to end.
    pub fn len(&self) -> usize {
        self.lens.iter().sum()
    }

    /// Whether no parameter has an element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Elements of the views' buffer.
    pub fn extent(&self) -> usize {
        self.extent
    }
}

/// What [`Kernels::adam_update_views`] reads to find each weight of [`ViewPlaces`]: parameter
/// `k`'s range of the optimiser's flat buffers (laid end to end, in order) ends before `ends[k]`,
/// and its weights start `shifts[k]` elements further into the views' buffer than that range
/// starts in the flat buffers. Both 1-D int tensors on the weights' device.
#[derive(Debug, Clone)]
pub struct ViewTable<B: Backend> {
    ends: IntTensor<B>,
    shifts: IntTensor<B>,
    places: ViewPlaces,
}

impl<B: Backend> ViewTable<B> {
    /// The table of `places` on `device`, in int32 whatever the backend's default int type
    /// ([`ViewPlaces::new`] keeps every value below `i32::MAX`).
    pub fn new(places: &ViewPlaces, device: &B::Device) -> Self {
        let ends = places.lens().iter().scan(0, |end, &len| {
            *end += len;
            Some(*end as i32)
        });
        let ends: Vec<i32> = ends.collect();
        let shifts = places.starts().iter().zip(&ends).zip(places.lens());
        let shifts = shifts.map(|((&start, &end), &len)| start as i32 - (end - len as i32)).collect();
        let int = |values: Vec<i32>| {
            let n = values.len();
            Tensor::<B, 1, Int>::from_data(TensorData::new(values, [n]), (device, DType::I32)).into_primitive()
        };
        Self { ends: int(ends), shifts: int(shifts), places: places.clone() }
    }

    /// The places it finds.
    pub fn places(&self) -> &ViewPlaces {
        &self.places
    }

    /// Where each parameter's range of the flat buffers ends.
    pub fn ends(&self) -> &IntTensor<B> {
        &self.ends
    }

    /// How much further each parameter's weights start in the views' buffer than its range.
    pub fn shifts(&self) -> &IntTensor<B> {
        &self.shifts
    }

    /// Checks the buffers an update of these places reads and writes without bounds checks
    /// ([`Kernels::adam_update_views`]; the table's values are sound by construction:
    /// [`ViewPlaces::new`] lays the places out, [`ViewTable::new`] derives the ends and shifts
    /// from them): f32 gradients, moments (and average) of the places' length, this table's int32
    /// tensors of one value a parameter, the scale's one value (or the partial squares', one or
    /// more, [`Kernels::adam_update_views_clipping`]), and the views' buffer (and the
    /// copies', f16 or bf16, of its length) of the places' extent. A caller's mistake, so it
    /// panics with what does not fit.
    #[cfg(any(feature = "wgpu-untuned", feature = "cuda-untuned", feature = "gpu-fusion"))]
    pub(crate) fn check_update(
        &self,
        weights: &FloatTensor<B>,
        copies: Option<&FloatTensor<B>>,
        flat: &FlatBuffers<B>,
        scale: &FloatTensor<B>,
    ) {
        let places = &self.places;
        let elements = |t: &FloatTensor<B>| t.shape().num_elements();
        let f32_of = |t: &FloatTensor<B>, len: usize| t.dtype() == DType::F32 && elements(t) >= len;
        let buffers = [&flat.grads, &flat.moment_1, &flat.moment_2].into_iter().chain(flat.average.as_ref());
        assert!(
            buffers.into_iter().all(|t| f32_of(t, places.len())),
            "the flat buffers hold {} f32 values",
            places.len()
        );
        assert!(f32_of(scale, 1), "the scale (or the partial squares) holds f32 values");
        let parts = places.parts();
        assert!(
            [&self.ends, &self.shifts].iter().all(|t| t.shape().num_elements() == parts && t.dtype() == DType::I32),
            "the tables are {parts} int32 values"
        );
        assert!(f32_of(weights, places.extent()), "the views' buffer holds {} f32 weights", places.extent());
        if let Some(copies) = copies {
            assert!(matches!(copies.dtype(), DType::F16 | DType::BF16), "the copies are f16 or bf16");
            assert_eq!(elements(copies), elements(weights), "the copies' buffer is the weights' length");
        }
    }

    /// The table of `places` whose tensors are `ends` and `shifts` (made by [`ViewTable::new`] of
    /// the same places: fusion's custom operation gets them back from its handles).
    #[cfg(feature = "gpu-fusion")]
    pub(crate) fn from_parts(ends: IntTensor<B>, shifts: IntTensor<B>, places: ViewPlaces) -> Self {
        Self { ends, shifts, places }
    }
}

/// The f32 constants of one [`AdamStep`], derived in f64 as torch derives them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamConstants {
    /// L2 decay.
    pub weight_decay: f32,
    /// `1 − β₁`.
    pub one_minus_beta_1: f32,
    /// `β₂`.
    pub beta_2: f32,
    /// `1 − β₂`.
    pub one_minus_beta_2: f32,
    /// `√(1 − β₂ᵗ)`.
    pub bias_correction_2_sqrt: f32,
    /// `ε`.
    pub epsilon: f32,
    /// `lr / (1 − β₁ᵗ)`.
    pub step_size: f32,
}

impl AdamStep {
    /// The constants the elementwise pass applies.
    pub fn constants(&self) -> AdamConstants {
        AdamConstants {
            weight_decay: self.weight_decay as f32,
            one_minus_beta_1: (1.0 - self.beta_1) as f32,
            beta_2: self.beta_2 as f32,
            one_minus_beta_2: (1.0 - self.beta_2) as f32,
            bias_correction_2_sqrt: (1.0 - self.beta_2.powi(self.time)).sqrt() as f32,
            epsilon: self.epsilon as f32,
            step_size: (self.lr / (1.0 - self.beta_1.powi(self.time))) as f32,
        }
    }
}

/// The optimiser's flat f32 buffers, all of one length, each parameter owning the same range
/// in every one of them.
#[derive(Debug)]
pub struct FlatBuffers<B: Backend> {
    /// Every parameter's gradient (read).
    pub grads: FloatTensor<B>,
    /// Adam's first moment.
    pub moment_1: FloatTensor<B>,
    /// Adam's second moment.
    pub moment_2: FloatTensor<B>,
    /// The moving average of the weights, when one is kept.
    pub average: Option<FloatTensor<B>>,
}

impl<B: Backend> FlatBuffers<B> {
    /// Buffers of `len` zeros (with an average of zeros when `average`).
    pub fn zeros(len: usize, average: bool, device: &B::Device) -> Self {
        let zeros = || Tensor::<B, 1>::zeros([len], device).into_primitive().tensor();
        Self { grads: zeros(), moment_1: zeros(), moment_2: zeros(), average: average.then(zeros) }
    }
}

/// The gradients' `Σ g²` as partial sums still to be totalled, with the clipping to apply by it
/// ([`Kernels::concat_flat_with_partial_squares`]): what [`Kernels::adam_update_views_clipping`]
/// totals and clips by in its own launch, one launch fewer than the factors first.
#[derive(Debug, Clone)]
pub struct PartialSquares<B: Backend> {
    /// 1-D f32: partial sums of the gradients' squares, whose total, taken in the backend's
    /// fixed order, is `Σ g²` ([`Kernels::partial_squares_len`] of them).
    pub partials: FloatTensor<B>,
    /// The norm to clip to; 0 for none ([`Kernels::clip_factors`]).
    pub max_norm: f64,
    /// The factor the gradients carry ([`Kernels::clip_factors`]).
    pub grad_scale: f64,
}

/// What [`Kernels::adam_update_views_clipping`] gives back.
#[derive(Debug)]
pub struct ViewsUpdate<B: Backend> {
    /// The views' buffer, written in place.
    pub weights: FloatTensor<B>,
    /// The copies' buffer, written in place, where one is kept.
    pub copies: Option<FloatTensor<B>>,
    /// The gradients' norm, `[1]` ([`Kernels::clip_factors`]).
    pub norm: FloatTensor<B>,
    /// The factor the gradients were multiplied by, `[1]` ([`Kernels::clip_factors`]).
    pub scale: FloatTensor<B>,
}

/// The fused operations of a training step, for backend `Self`.
pub trait Kernels: Backend {
    /// `Σ x²` of a 1-D float tensor, as a `[1]` f32 tensor left on the device.
    fn sum_of_squares(x: FloatTensor<Self>) -> FloatTensor<Self> {
        portable::sum_of_squares::<Self>(x)
    }

    /// Float tensors of any shapes and layouts laid end to end, each in row-major order, as one
    /// 1-D f32 tensor (the gradients gathered into the flat buffer). `reuse`, a flat buffer of
    /// the same length no longer needed (the previous step's), may be written over instead of
    /// allocating: the CPU's allocator would otherwise hand a gigabyte back to the system every
    /// step and fault its pages in again.
    fn concat_flat(
        parts: Vec<FloatTensor<Self>>,
        reuse: Option<FloatTensor<Self>>,
        device: &Self::Device,
    ) -> FloatTensor<Self> {
        drop(reuse);
        portable::concat_flat::<Self>(parts, device)
    }

    /// [`Kernels::concat_flat`] and [`Kernels::sum_of_squares`] of its result, the same values,
    /// in one pass where the backend has one: the gradients' norm read as they are gathered,
    /// not from the gathered buffer again (the norm of one replica's only micro-batch).
    fn concat_flat_with_squares(
        parts: Vec<FloatTensor<Self>>,
        reuse: Option<FloatTensor<Self>>,
        device: &Self::Device,
    ) -> [FloatTensor<Self>; 2] {
        concat_flat_then_squares::<Self>(parts, reuse, device)
    }

    /// torch's `clip_grad_norm_` from the gradients' `Σ g²` (`[1]`, f32): `[norm, scale]`, the
    /// global L2 norm of the gradients divided by `grad_scale` (the factor they carry) and what
    /// the gradients are multiplied by: `min(1, max_norm / (norm + 1e-6))` (1 when `max_norm` is
    /// 0) divided by `grad_scale`. Both `[1]`, left on the device.
    fn clip_factors(squares: FloatTensor<Self>, max_norm: f64, grad_scale: f64) -> [FloatTensor<Self>; 2] {
        portable::clip_factors::<Self>(squares, max_norm, grad_scale)
    }

    /// [`Kernels::concat_flat_with_squares`] with the squares left as partial sums (1-D f32):
    /// `[flat, partials]`, for [`Kernels::clip_partial_squares`] or an update that totals them
    /// itself ([`Kernels::adam_update_views_clipping`]). The GPU backends leave a sum per cube of
    /// the gather's launches; the default, one.
    fn concat_flat_with_partial_squares(
        parts: Vec<FloatTensor<Self>>,
        reuse: Option<FloatTensor<Self>>,
        device: &Self::Device,
    ) -> [FloatTensor<Self>; 2] {
        Self::concat_flat_with_squares(parts, reuse, device)
    }

    /// How many partial sums [`Kernels::concat_flat_with_partial_squares`] gives for parts of
    /// these element counts and dtypes, in order: 1 by default.
    fn partial_squares_len(parts: &[(usize, DType)], device: &Self::Device) -> usize {
        let _ = (parts, device);
        1
    }

    /// [`Kernels::clip_factors`] of the total of `squares`' partial sums: `[norm, scale]`. The
    /// GPU backends total and clip in one launch.
    fn clip_partial_squares(squares: &PartialSquares<Self>) -> [FloatTensor<Self>; 2] {
        let partials = squares.partials.clone();
        let total = if partials.shape().num_elements() == 1 { partials } else { Self::float_sum(partials) };
        Self::clip_factors(total, squares.max_norm, squares.grad_scale)
    }

    /// Updates one parameter, `weights` (1-D, f32), whose ranges of `flat` start at `offset`, as
    /// [`AdamStep`] says, its gradient multiplied by the `[1]` tensor `scale`; returns the new
    /// weights and updates the moments and the average in place.
    fn adam_update(
        weights: FloatTensor<Self>,
        flat: &mut FlatBuffers<Self>,
        offset: usize,
        scale: &FloatTensor<Self>,
        step: &AdamStep,
    ) -> FloatTensor<Self> {
        portable::adam_update::<Self>(weights, flat, offset, scale, step)
    }

    /// Updates every trainable parameter of a step: `weights[k]` (1-D, f32) owns the ranges of
    /// `flat` that start at `offsets[k]`; returns the new weights in the same order (written over
    /// the given ones where the backend can, and no other handle shares them). The same
    /// numbers as [`Kernels::adam_update`] on each in turn, which is what it does unless the
    /// backend updates many parameters in one launch.
    fn adam_update_all(
        weights: Vec<FloatTensor<Self>>,
        offsets: &[usize],
        flat: &mut FlatBuffers<Self>,
        scale: &FloatTensor<Self>,
        step: &AdamStep,
    ) -> Vec<FloatTensor<Self>> {
        adam_update_each::<Self>(weights, offsets, flat, scale, step)
    }

    /// [`Kernels::adam_update_all`], also returning each new weight cast to `copy` (f16 or
    /// bf16: the copy a half-precision forward reads), with the rounding of burn's cast. The
    /// GPU backends write both in one pass; the others update, then cast.
    fn adam_update_all_with_copies(
        weights: Vec<FloatTensor<Self>>,
        offsets: &[usize],
        flat: &mut FlatBuffers<Self>,
        scale: &FloatTensor<Self>,
        step: &AdamStep,
        copy: FloatDType,
    ) -> UpdatedWeights<Self> {
        update_then_cast::<Self>(weights, offsets, flat, scale, step, copy)
    }

    /// The alignment, in bytes, at which this backend keeps weights as views of one flat buffer
    /// ([`Kernels::weight_views`]) that [`Kernels::adam_update_views`] updates in one pass over
    /// every parameter; `None` (the default) where it keeps none, and the weights are updated
    /// tensor by tensor ([`Kernels::adam_update_all`]).
    fn weight_view_alignment(_device: &Self::Device) -> Option<usize> {
        None
    }

    /// The largest buffer this backend allocates on `device` in one piece, in bytes: on burn's
    /// cubecl backends, their memory manager's largest page (on CUDA a quarter of the GPU's
    /// memory; on wgpu the largest storage buffer); `None` (the default) where tensors live in
    /// the host's memory, under no such limit.
    fn largest_allocation(_device: &Self::Device) -> Option<u64> {
        None
    }

    /// Views of the 1-D buffer `flat` (of the places' extent), which share its memory: the `k`-th
    /// is 1-D, the `k`-th parameter's elements at its place ([`ViewPlaces::new`], made with
    /// [`Kernels::weight_view_alignment`]). Only on a backend that keeps views; others panic, as
    /// their alignment (`None`) says.
    fn weight_views(_flat: FloatTensor<Self>, _places: &ViewPlaces) -> Vec<FloatTensor<Self>> {
        panic!("this backend keeps no weight views: Kernels::weight_view_alignment is None")
    }

    /// [`Kernels::adam_update_all`] of weights kept as views ([`Kernels::weight_views`]) of
    /// `weights`, the flat f32 buffer laid out as `table` says, in one pass: written in place,
    /// though the views share it (so that the model reads the new weights), as are `copies`,
    /// the views' buffer of the half-precision copies when one is kept. Every operation the
    /// calling thread asked for before reads the weights as they were, every one after as they
    /// are. Returns both buffers. The same numbers as [`Kernels::adam_update_all`]. Only on a
    /// backend that keeps views; others panic.
    fn adam_update_views(
        _weights: FloatTensor<Self>,
        _copies: Option<FloatTensor<Self>>,
        _table: &ViewTable<Self>,
        _flat: &mut FlatBuffers<Self>,
        _scale: &FloatTensor<Self>,
        _step: &AdamStep,
    ) -> (FloatTensor<Self>, Option<FloatTensor<Self>>) {
        panic!("this backend keeps no weight views: Kernels::weight_view_alignment is None")
    }

    /// [`Kernels::adam_update_views`] by the clipping of `squares` (the gradients' partial
    /// squares, [`Kernels::concat_flat_with_partial_squares`]): the update totals them and
    /// computes the factors itself where the backend can (one launch for the clipping's last
    /// step and the update), else [`Kernels::clip_partial_squares`] first. Returns both
    /// buffers, and the `[norm, scale]` of [`Kernels::clip_partial_squares`], to the bit.
    fn adam_update_views_clipping(
        weights: FloatTensor<Self>,
        copies: Option<FloatTensor<Self>>,
        table: &ViewTable<Self>,
        flat: &mut FlatBuffers<Self>,
        squares: &PartialSquares<Self>,
        step: &AdamStep,
    ) -> ViewsUpdate<Self> {
        clip_then_update_views::<Self>(weights, copies, table, flat, squares, step)
    }

    /// Whether [`Kernels::conv2d_no_bias`] and its gradients are this backend's own
    /// matrix-product kernels for tensors of `dtype` (the CPU's in f32, cuDNN's on cuda), rather
    /// than burn's convolution. A caller that would otherwise build a convolution from burn's matrix
    /// product (the U-Net's 1-D convolutions) takes [`conv2d`] where this holds.
    fn has_conv2d_products(dtype: DType) -> bool {
        let _ = dtype;
        false
    }

    /// Whether a 1-D convolution of `dtype` should be [`conv2d`] of height 1: where
    /// [`Kernels::has_conv2d_products`] holds, unless the backend's library is set to leave 1-D
    /// convolutions to the caller's matrix product (`kernels::cudnn::use_conv1d`).
    fn has_conv1d_products(dtype: DType) -> bool {
        Self::has_conv2d_products(dtype)
    }

    /// A 2-D convolution without bias, `x` `[N, C, H, W]` by `weight` `[O, C, kh, kw]`, as
    /// burn's `conv2d` computes it (its implementation, unless the backend has a faster one).
    fn conv2d_no_bias(x: FloatTensor<Self>, weight: FloatTensor<Self>, options: ConvOptions<2>) -> FloatTensor<Self> {
        <Self as ModuleOps<Self>>::conv2d(x, weight, None, options)
    }

    /// The gradient of [`Kernels::conv2d_no_bias`] with respect to `x`, given the output's.
    fn conv2d_input_grad(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self> {
        <Self as ModuleOps<Self>>::conv2d_x_backward(x, weight, output_grad, options)
    }

    /// The gradient of [`Kernels::conv2d_no_bias`] with respect to `weight`, given the output's.
    fn conv2d_weight_grad(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self> {
        <Self as ModuleOps<Self>>::conv2d_weight_backward(x, weight, output_grad, options)
    }

    /// A 2-D transposed convolution without bias, `x` `[N, C_in, H, W]` by `weight`
    /// `[C_in, C_out / groups, kh, kw]`, as burn's `conv_transpose2d` computes it, unless the
    /// backend has a faster one (the input gradient of the convolution it transposes:
    /// [`transposed_convolution`]).
    fn conv_transpose2d_no_bias(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        options: ConvTransposeOptions<2>,
    ) -> FloatTensor<Self> {
        <Self as ModuleOps<Self>>::conv_transpose2d(x, weight, None, options)
    }

    /// The gradient of [`Kernels::conv_transpose2d_no_bias`] with respect to `x`, given the
    /// output's: the convolution it transposes applied to `output_grad`, through
    /// [`Kernels::conv2d_no_bias`] where the backend has its own convolution
    /// ([`Kernels::has_conv2d_products`]), burn's otherwise.
    fn conv_transpose2d_input_grad(
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        options: ConvTransposeOptions<2>,
    ) -> FloatTensor<Self> {
        match transposed_convolution(&options) {
            Some(convolution) if Self::has_conv2d_products(output_grad.dtype()) => {
                Self::conv2d_no_bias(output_grad, weight, convolution)
            }
            _ => <Self as ModuleOps<Self>>::conv_transpose2d_x_backward(weight, output_grad, options),
        }
    }

    /// The gradient of [`Kernels::conv_transpose2d_no_bias`] with respect to `weight`, given the
    /// output's: the weight gradient of the convolution it transposes, with `output_grad` as
    /// that convolution's input and `x` as its output gradient, through
    /// [`Kernels::conv2d_weight_grad`] where the backend has its own convolution, burn's
    /// otherwise.
    fn conv_transpose2d_weight_grad(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        options: ConvTransposeOptions<2>,
    ) -> FloatTensor<Self> {
        match transposed_convolution(&options) {
            Some(convolution) if Self::has_conv2d_products(output_grad.dtype()) => {
                Self::conv2d_weight_grad(output_grad, weight, x, convolution)
            }
            _ => <Self as ModuleOps<Self>>::conv_transpose2d_weight_backward(x, weight, output_grad, options),
        }
    }

    /// `y` `[N, C, ..]` plus `bias` `[C]` along its second dimension (a convolution's bias).
    /// Under autodiff one operation of the graph, whose backward pass sums the bias's gradient
    /// in one call ([`Kernels::channel_bias_grad`]) where burn's broadcast sums it a dimension
    /// at a time.
    fn add_channel_bias(y: FloatTensor<Self>, bias: FloatTensor<Self>) -> FloatTensor<Self> {
        portable::add_channel_bias::<Self>(y, bias)
    }

    /// The gradient of [`Kernels::add_channel_bias`]'s bias: `output_grad` `[N, C, ..]` summed
    /// over every dimension but the second, `[C]`, in its dtype (on burn's cubecl backends one
    /// launch, summing in f32 for the half precisions too).
    fn channel_bias_grad(output_grad: FloatTensor<Self>) -> FloatTensor<Self> {
        portable::channel_bias_grad::<Self>(output_grad)
    }

    /// Max pooling of `x` `[N, C, H, W]` with a `kernel` window moved by `stride` over the input
    /// padded by `padding` (dilation 1, output size rounded down): the output and the index of
    /// each output's maximum in its input plane, as burn's `max_pool2d_with_indices`.
    fn max_pool2d_indexed(
        x: FloatTensor<Self>,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
    ) -> MaxPool2dWithIndices<Self> {
        portable::max_pool2d_indexed::<Self>(x, kernel, stride, padding)
    }

    /// The gradient of [`Kernels::max_pool2d_indexed`] with respect to `x`, given the
    /// output's and the indices of the maxima.
    fn max_pool2d_input_grad(
        x: FloatTensor<Self>,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        output_grad: FloatTensor<Self>,
        indices: IntTensor<Self>,
    ) -> FloatTensor<Self> {
        portable::max_pool2d_input_grad::<Self>(x, kernel, stride, padding, output_grad, indices)
    }

    /// Whether [`Kernels::group_norm_forward`] and its backward pass are this backend's own
    /// kernels for every GroupNorm of [`group_norm_dtypes`] that [`group_norm_shape`] accepts, known before they run
    /// (fusion registers them as its custom operations ahead of their execution).
    fn has_group_norm_kernels() -> bool {
        false
    }

    /// GroupNorm of `x` `[N, C, S]` (f32; the GPU backends' kernels also take f16 and bf16,
    /// [`group_norm_dtypes`]) in `groups` groups of channels, scaled by `gamma` and
    /// shifted by `beta` (`[C]`), then `activation`, in one fused pass where the backend has
    /// one: the output and, for the backward pass, each group's mean and `1/√(σ² + ε)`
    /// (`[N, groups, 2]`). `None` where it has none (the caller composes burn's operations).
    fn group_norm_forward(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        groups: usize,
        epsilon: f64,
        activation: Activation,
    ) -> Option<(FloatTensor<Self>, FloatTensor<Self>)> {
        let _ = (x, gamma, beta, groups, epsilon, activation);
        None
    }

    /// The gradients of [`Kernels::group_norm_forward`] with respect to `x`, `gamma` and `beta`,
    /// given the output's and the statistics the forward pass returned.
    fn group_norm_backward(
        x: FloatTensor<Self>,
        [gamma, beta]: [FloatTensor<Self>; 2],
        stats: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        groups: usize,
        activation: Activation,
    ) -> [FloatTensor<Self>; 3] {
        portable::group_norm_backward::<Self>(x, [gamma, beta], stats, output_grad, groups, activation)
    }

    /// Whether [`Kernels::film_forward`] and its backward pass are this backend's own kernels
    /// for every FiLM of [`film_dtypes`] that [`film_shape`] accepts, known before they run (fusion registers
    /// them as its custom operations ahead of their execution).
    fn has_film_kernels() -> bool {
        false
    }

    /// FiLM's scale and shift of `x` `[B, C, T]` by `embedding` `[B, 2C]` (both f32, or both
    /// in one half precision), each sample's
    /// scales then its shifts (`y = embedding[.., c]·x + embedding[.., C + c]`), in one launch
    /// where the backend has a kernel for it; `None` where it has none (the caller composes
    /// burn's operations: [`portable::film`]).
    fn film_forward(x: FloatTensor<Self>, embedding: FloatTensor<Self>) -> Option<FloatTensor<Self>> {
        let _ = (x, embedding);
        None
    }

    /// The gradients of [`Kernels::film_forward`] with respect to `x` and `embedding`, given the
    /// output's.
    fn film_backward(
        x: FloatTensor<Self>,
        embedding: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
    ) -> [FloatTensor<Self>; 2] {
        portable::film_backward::<Self>(x, embedding, output_grad)
    }

    /// Whether [`Kernels::yuv420_to_rgb`] has a kernel here, known before it runs (fusion
    /// registers it as its custom operation ahead of its execution).
    fn has_yuv420_kernel() -> bool {
        false
    }

    /// `frames` YUV 4:2:0 frames of `height × width` (`planes`: each frame's
    /// [`yuv420_frame_len`] uint8 values, its luma then its U and V planes of `⌈H/2⌉ × ⌈W/2⌉`,
    /// in an integer tensor of any shape) as RGB in [0, 1], `[frames, 3, H, W]` in `dtype` (what
    /// the device's `Tensor::float` gives): each chroma sample stands for its 2×2 block, and each channel is the sum of
    /// `terms` clamped to [0, 255], over 255, in one launch where the backend has a kernel for
    /// it; `None` where it has none (the caller composes burn's operations).
    fn yuv420_to_rgb(
        planes: IntTensor<Self>,
        frames: usize,
        size: (usize, usize),
        terms: &Yuv420Terms,
        dtype: FloatDType,
    ) -> Option<FloatTensor<Self>> {
        let _ = (planes, frames, size, terms, dtype);
        None
    }

    /// `bytes` on `device` as a contiguous uint8 tensor of `shape`, through the backend's own
    /// upload where it has one (CUDA with the `cudnn` feature: one parallel copy into a reused
    /// page-locked buffer, then an asynchronous copy on burn's stream); `None` elsewhere, and
    /// the caller uses burn's `from_data`.
    fn upload_u8(bytes: &[u8], shape: Shape, device: &Self::Device) -> Option<IntTensor<Self>> {
        let _ = (bytes, shape, device);
        None
    }

    /// BatchNorm in training mode of `x` `[N, C, S]` (f32), normalised by the batch's
    /// statistics of each channel, scaled by `gamma` and shifted by `beta` (`[C]`), in one fused
    /// pass where the backend has one: the output and each channel's mean, `1/√(σ² + ε)` and
    /// biased variance `σ²` (`[C, 3]`; the running statistics are the caller's), the output
    /// passed through `activation`. `None` where it has none (the caller composes burn's
    /// operations).
    fn batch_norm_forward(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        epsilon: f64,
        activation: Activation,
    ) -> Option<(FloatTensor<Self>, FloatTensor<Self>)> {
        let _ = (x, gamma, beta, epsilon, activation);
        None
    }

    /// The gradients of [`Kernels::batch_norm_forward`] with respect to `x`, `gamma` and
    /// `beta`, given the output's and the statistics the forward pass returned.
    fn batch_norm_backward(
        x: FloatTensor<Self>,
        [gamma, beta]: [FloatTensor<Self>; 2],
        stats: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        activation: Activation,
    ) -> [FloatTensor<Self>; 3] {
        portable::batch_norm_backward::<Self>(x, [gamma, beta], stats, output_grad, activation)
    }
}

/// `[N, C, S]` of a GroupNorm the GPU kernels take: `x` of three dimensions, nothing empty,
/// the channels a whole number of `groups`, `gamma` and `beta` of `C` elements each, and at
/// most 65,535 groups in all and 65,535 channels (a cube each, along one axis of the grid).
pub fn group_norm_shape(x: &[usize], gamma: usize, beta: usize, groups: usize) -> Option<[usize; 3]> {
    let [samples, channels, positions] = <[usize; 3]>::try_from(x).ok()?;
    let fits = groups > 0
        && channels % groups == 0
        && gamma == channels
        && beta == channels
        && samples * channels * positions > 0
        && samples * groups <= u16::MAX as usize
        && channels <= u16::MAX as usize;
    fits.then_some([samples, channels, positions])
}

/// Whether the GPU backends' GroupNorm kernels take an input of `x` (and its gradient's) dtype
/// with parameters and statistics of `others`: f32, or f16 or bf16 (a half-precision forward,
/// read and written in its dtype, computed in f32), with everything else f32.
pub fn group_norm_dtypes(x: DType, others: &[DType]) -> bool {
    kernel_float(x) && others.iter().all(|&d| d == DType::F32)
}

/// Whether the GPU backends' FiLM kernels take tensors of `dtypes`: all f32, or all f16 or all
/// bf16 (a half-precision forward's).
pub fn film_dtypes(dtypes: &[DType]) -> bool {
    dtypes.first().is_some_and(|&first| kernel_float(first) && dtypes.iter().all(|&d| d == first))
}

/// [`Kernels::adam_update_all`], with the new weights' copies in `copy` where one is asked for
/// ([`Kernels::adam_update_all_with_copies`]; none otherwise).
pub fn adam_update_all_copying<B: Kernels>(
    weights: Vec<FloatTensor<B>>,
    offsets: &[usize],
    flat: &mut FlatBuffers<B>,
    scale: &FloatTensor<B>,
    step: &AdamStep,
    copy: Option<FloatDType>,
) -> UpdatedWeights<B> {
    match copy {
        Some(copy) => B::adam_update_all_with_copies(weights, offsets, flat, scale, step, copy),
        None => UpdatedWeights { weights: B::adam_update_all(weights, offsets, flat, scale, step), copies: Vec::new() },
    }
}

/// [`Kernels::adam_update_all_with_copies`] in two passes, the update then burn's cast: where a
/// backend has no single pass (and the GPU backends' fallback for tensors their kernel declines).
pub(crate) fn update_then_cast<B: Kernels>(
    weights: Vec<FloatTensor<B>>,
    offsets: &[usize],
    flat: &mut FlatBuffers<B>,
    scale: &FloatTensor<B>,
    step: &AdamStep,
    copy: FloatDType,
) -> UpdatedWeights<B> {
    let weights = B::adam_update_all(weights, offsets, flat, scale, step);
    let copies = weights.iter().map(|w| B::float_cast(w.clone(), copy)).collect();
    UpdatedWeights { weights, copies }
}

/// Whether our GPU kernels read and write `dtype`: f32, or the half precisions of a
/// mixed-precision step (f16, bf16).
pub(crate) fn kernel_float(dtype: DType) -> bool {
    matches!(dtype, DType::F32 | DType::F16 | DType::BF16)
}

/// Where each of parts of `lens` elements starts when they are laid end to end.
pub(crate) fn starts_of(lens: &[usize]) -> Vec<usize> {
    lens.iter().scan(0, |at, &n| Some(std::mem::replace(at, *at + n))).collect()
}

/// [`Kernels::adam_update_all`] one parameter at a time ([`Kernels::adam_update`]).
fn adam_update_each<B: Kernels>(
    weights: Vec<FloatTensor<B>>,
    offsets: &[usize],
    flat: &mut FlatBuffers<B>,
    scale: &FloatTensor<B>,
    step: &AdamStep,
) -> Vec<FloatTensor<B>> {
    assert_eq!(weights.len(), offsets.len(), "one offset per parameter");
    weights
        .into_iter()
        .zip(offsets)
        .map(|(weights, &offset)| B::adam_update(weights, flat, offset, scale, step))
        .collect()
}

/// [`Kernels::adam_update_views_clipping`] in two steps: [`Kernels::clip_partial_squares`], then
/// [`Kernels::adam_update_views`] by its scale (the default, and the GPU backends' way where the
/// partial sums are too many for every cube of the update to total).
pub(crate) fn clip_then_update_views<B: Kernels>(
    weights: FloatTensor<B>,
    copies: Option<FloatTensor<B>>,
    table: &ViewTable<B>,
    flat: &mut FlatBuffers<B>,
    squares: &PartialSquares<B>,
    step: &AdamStep,
) -> ViewsUpdate<B> {
    let [norm, scale] = B::clip_partial_squares(squares);
    let (weights, copies) = B::adam_update_views(weights, copies, table, flat, &scale, step);
    ViewsUpdate { weights, copies, norm, scale }
}

/// [`Kernels::concat_flat`], then [`Kernels::sum_of_squares`] of the gathered buffer: two passes,
/// where a backend has no single one (and the fallback of Flex and of the GPU backends for parts
/// their passes cannot read).
pub(crate) fn concat_flat_then_squares<B: Kernels>(
    parts: Vec<FloatTensor<B>>,
    reuse: Option<FloatTensor<B>>,
    device: &B::Device,
) -> [FloatTensor<B>; 2] {
    let flat = B::concat_flat(parts, reuse, device);
    let squares = B::sum_of_squares(flat.clone());
    [flat, squares]
}

/// `[B, C, T]` of a FiLM the GPU kernels take: `x` of three dimensions, nothing empty, and
/// `embedding` `[B, 2C]`.
pub fn film_shape(x: &[usize], embedding: &[usize]) -> Option<[usize; 3]> {
    match (x, embedding) {
        (&[b, c, t], &[eb, ec]) if b * c * t > 0 && eb == b && ec == 2 * c => Some([b, c, t]),
        _ => None,
    }
}

/// FiLM's scale and shift of `x` `[B, C, T]` by `embedding` `[B, 2C]` (each sample's scales,
/// then its shifts), in the backend's kernel and, under autodiff, its backward kernel
/// ([`Kernels::film_forward`], [`Kernels::film_backward`]): one launch each way where burn's
/// operations take about four forward and nine backward. Elsewhere burn's operations
/// ([`portable::film`]).
pub fn film<B: Kernels>(x: Tensor<B, 3>, embedding: Tensor<B, 2>) -> Tensor<B, 3> {
    match B::film_forward(x.clone().into_primitive().tensor(), embedding.clone().into_primitive().tensor()) {
        Some(y) => Tensor::from_primitive(TensorPrimitive::Float(y)),
        None => portable::film(x, embedding),
    }
}

/// GroupNorm of `x` `[N, C, S]` (f32; on the GPU backends also f16 or bf16, read and written in
/// its dtype, computed in f32) in `groups` groups, scaled by `gamma` and shifted by
/// `beta` (`[C]`), as PyTorch computes it (`(x − μ) / √(σ² + ε) · γ + β`, biased variance),
/// then `activation`, in the backend's fused pass and, under autodiff, its fused backward pass
/// ([`Kernels::group_norm_forward`], [`Kernels::group_norm_backward`]). `None` where the backend
/// has none: compose burn's operations then.
pub fn group_norm<B: Kernels>(
    x: Tensor<B, 3>,
    [gamma, beta]: [Tensor<B, 1>; 2],
    groups: usize,
    epsilon: f64,
    activation: Activation,
) -> Option<Tensor<B, 3>> {
    let (x, gamma, beta) =
        (x.into_primitive().tensor(), gamma.into_primitive().tensor(), beta.into_primitive().tensor());
    let (y, _stats) = B::group_norm_forward(x, gamma, beta, groups, epsilon, activation)?;
    Some(Tensor::from_primitive(TensorPrimitive::Float(y)))
}

/// BatchNorm in training mode of `x` `[N, C, S]` (f32): normalised by each channel's mean and
/// biased variance over the batch and positions, scaled by `gamma` and shifted by `beta`
/// (`[C]`), as PyTorch computes it, then `activation`, in the backend's fused pass and, under
/// autodiff, its fused backward pass ([`Kernels::batch_norm_forward`],
/// [`Kernels::batch_norm_backward`]). Returns the output and the batch's mean and biased
/// variance per channel (`[C]`, outside the graph), from which the caller updates the running
/// statistics. `None` where the backend has none: compose burn's operations then.
pub fn batch_norm<B: Kernels>(
    x: Tensor<B, 3>,
    [gamma, beta]: [Tensor<B, 1>; 2],
    epsilon: f64,
    activation: Activation,
) -> Option<(Tensor<B, 3>, Tensor<B, 1>, Tensor<B, 1>)> {
    let (x, gamma, beta) =
        (x.into_primitive().tensor(), gamma.into_primitive().tensor(), beta.into_primitive().tensor());
    let (y, stats) = B::batch_norm_forward(x, gamma, beta, epsilon, activation)?;
    let stats = Tensor::<B, 2>::from_primitive(TensorPrimitive::Float(stats));
    let channels = stats.dims()[0];
    let column = |i: usize| stats.clone().slice(s![.., i..i + 1]).reshape([channels]);
    Some((Tensor::from_primitive(TensorPrimitive::Float(y)), column(0), column(2)))
}

/// A 2-D convolution, `x` `[N, C, H, W]` by `weight` `[O, C, kh, kw]`, plus `bias` `[O]`: burn's
/// `conv2d`, computed by the backend's [`Kernels::conv2d_no_bias`] and, under autodiff, its
/// gradients by [`Kernels::conv2d_input_grad`] and [`Kernels::conv2d_weight_grad`] (on the CPU,
/// matrix products over chunks of images on every core instead of burn's single-threaded
/// transposed convolution).
pub fn conv2d<B: Kernels>(
    x: Tensor<B, 4>,
    weight: Tensor<B, 4>,
    bias: Option<Tensor<B, 1>>,
    options: ConvOptions<2>,
) -> Tensor<B, 4> {
    let y = B::conv2d_no_bias(x.into_primitive().tensor(), weight.into_primitive().tensor(), options);
    let y = Tensor::from_primitive(TensorPrimitive::Float(y));
    match bias {
        Some(bias) => add_channel_bias(y, bias),
        None => y,
    }
}

/// A 2-D transposed convolution, `x` `[N, C_in, H, W]` by `weight` `[C_in, C_out / groups, kh,
/// kw]`, plus `bias` `[C_out]`: burn's `conv_transpose2d`, computed by the backend's
/// [`Kernels::conv_transpose2d_no_bias`] and, under autodiff, its gradients by
/// [`Kernels::conv_transpose2d_input_grad`] and [`Kernels::conv_transpose2d_weight_grad`]
/// (where the backend has its own convolution, its passes: cuDNN's on cuda, the CPU's matrix
/// products, instead of burn's direct kernels).
pub fn conv_transpose2d<B: Kernels>(
    x: Tensor<B, 4>,
    weight: Tensor<B, 4>,
    bias: Option<Tensor<B, 1>>,
    options: ConvTransposeOptions<2>,
) -> Tensor<B, 4> {
    let y = B::conv_transpose2d_no_bias(x.into_primitive().tensor(), weight.into_primitive().tensor(), options);
    let y = Tensor::from_primitive(TensorPrimitive::Float(y));
    match bias {
        Some(bias) => add_channel_bias(y, bias),
        None => y,
    }
}

/// `y` `[N, C, ..]` plus `bias` `[C]` along its second dimension, its bias's gradient summed in
/// one call ([`Kernels::add_channel_bias`]).
pub fn add_channel_bias<B: Kernels, const D: usize>(y: Tensor<B, D>, bias: Tensor<B, 1>) -> Tensor<B, D> {
    let y = B::add_channel_bias(y.into_primitive().tensor(), bias.into_primitive().tensor());
    Tensor::from_primitive(TensorPrimitive::Float(y))
}

/// Max pooling of `x` `[N, C, H, W]` with a `kernel` window moved by `stride` over the input
/// padded by `padding` (dilation 1, output size rounded down): burn's `max_pool2d`, computed by
/// the backend's [`Kernels::max_pool2d_indexed`] and, under autodiff, its gradient by
/// [`Kernels::max_pool2d_input_grad`] (on the CPU, one pass per plane on every core).
pub fn max_pool2d<B: Kernels>(
    x: Tensor<B, 4>,
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
) -> Tensor<B, 4> {
    let pooled = B::max_pool2d_indexed(x.into_primitive().tensor(), kernel, stride, padding);
    Tensor::from_primitive(TensorPrimitive::Float(pooled.output))
}
