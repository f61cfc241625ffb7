//! Adam's update as a cubecl kernel over many parameters a launch, and the launches that run it
//! over every parameter of a step.
#![expect(unsafe_code, reason = "cubecl launches a kernel without bounds checks only through unsafe")]

use burn::tensor::{DType, TensorMetadata};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{BoolElement, CubeBackend, CubeRuntime, FloatElement, IntElement};
use cubecl::prelude::*;

use super::launch::{grid, launch_width};
use super::tensors::{empty_f32, empty_like, writable};
use crate::{ADAM_SCALARS, AdamStep, FlatBuffers, RuntimeLibraries, UpdatedWeights, portable};

/// The update's scalars ([`crate::AdamConstants`], the average's weight), as a kernel holds them
/// once read from the step's scalars buffer ([`read_adam_scalars`]).
#[derive(CubeType)]
pub(crate) struct AdamScalars {
    pub(crate) weight_decay: f32,
    pub(crate) one_minus_beta_1: f32,
    pub(crate) beta_2: f32,
    pub(crate) one_minus_beta_2: f32,
    pub(crate) bias_correction_2_sqrt: f32,
    pub(crate) epsilon: f32,
    pub(crate) step_size: f32,
    pub(crate) ema_weight: f32,
}

/// The update's scalars from `values`, the step's scalars buffer ([`adam_scalars`]), in the
/// order of [`AdamScalars`]' fields. A buffer rather than the launch's arguments: a launch's
/// arguments are fixed when a step is captured as a CUDA graph, a buffer is written before each
/// replay (docs/plans/cuda-graph.md).
#[cube]
pub(crate) fn read_adam_scalars(values: &Tensor<f32>) -> AdamScalars {
    AdamScalars {
        weight_decay: values[0],
        one_minus_beta_1: values[1],
        beta_2: values[2],
        one_minus_beta_2: values[3],
        bias_correction_2_sqrt: values[4],
        epsilon: values[5],
        step_size: values[6],
        ema_weight: values[7],
    }
}

/// Adam's update of element `j` of the flat buffers, whose weight is `w`, in [`AdamStep`]'s
/// (torch's) order of operations, the decay added only where there is one (as the CPU's pass and
/// the portable operations do): writes the moments and, when `has_average`, the average at `j`
/// in place, and returns the new weight.
#[cube]
#[expect(clippy::too_many_arguments, reason = "a kernel's buffers are its arguments")]
pub(crate) fn adam_element<F: Float>(
    w: F,
    j: usize,
    grads: &Tensor<F>,
    moment_1: &mut Tensor<F>,
    moment_2: &mut Tensor<F>,
    average: &mut Tensor<F>,
    scale: F,
    scalars: &AdamScalars,
    #[comptime] has_weight_decay: bool,
    #[comptime] has_average: bool,
) -> F {
    let mut g = grads[j] * scale;
    if has_weight_decay {
        g += w * F::cast_from(scalars.weight_decay);
    }
    let m = moment_1[j] + (g - moment_1[j]) * F::cast_from(scalars.one_minus_beta_1);
    let v = moment_2[j] * F::cast_from(scalars.beta_2) + g * F::cast_from(scalars.one_minus_beta_2) * g;
    let denominator = F::sqrt(v) / F::cast_from(scalars.bias_correction_2_sqrt) + F::cast_from(scalars.epsilon);
    let w = w + m / denominator * -F::cast_from(scalars.step_size);
    moment_1[j] = m;
    moment_2[j] = v;
    if has_average {
        let ema = F::cast_from(scalars.ema_weight);
        if ema >= F::new(1.0) {
            average[j] = w;
        } else {
            average[j] = average[j] + (w - average[j]) * ema;
        }
    }
    w
}

/// The units of cube row `t` stride over parameter `t`'s elements `i`: `weights[t][i]` updated in
/// place (each unit reads its element, then writes it) from itself and the flat buffers' element
/// `j = starts[t] + i` ([`adam_element`]), which also updates the moments and, when
/// `has_average`, the average in place. With `has_copies`, `copies[t][i]` is the new weight cast
/// to `H`, as burn's cast kernel casts it.
#[cube(launch_unchecked)]
#[expect(clippy::too_many_arguments, reason = "a kernel's buffers are its arguments")]
pub(crate) fn adam_kernel<F: Float, H: Float>(
    weights: &mut Sequence<Tensor<F>>,
    copies: &mut Sequence<Tensor<H>>,
    starts: Sequence<usize>,
    lens: Sequence<usize>,
    grads: &Tensor<F>,
    moment_1: &mut Tensor<F>,
    moment_2: &mut Tensor<F>,
    average: &mut Tensor<F>,
    scale: &Tensor<F>,
    scalars: &Tensor<f32>,
    #[comptime] has_weight_decay: bool,
    #[comptime] has_average: bool,
    #[comptime] has_copies: bool,
    #[define(F, H)] _dtypes: [StorageType; 2],
) {
    let count = comptime!(weights.len());
    let stride = (CUBE_COUNT_X * CUBE_DIM_X) as usize;
    let factor = scale[0];
    let scalars = read_adam_scalars(scalars);
    #[unroll]
    for t in 0..count {
        if CUBE_POS_Y as usize == t {
            let (start, len) = (starts[t], lens[t]);
            let mut i = ABSOLUTE_POS_X as usize;
            while i < len {
                let w = adam_element::<F>(
                    weights[t][i],
                    start + i,
                    grads,
                    moment_1,
                    moment_2,
                    average,
                    factor,
                    &scalars,
                    has_weight_decay,
                    has_average,
                );
                let out = weights.index_mut(t);
                out[i] = w;
                if has_copies {
                    let copy = copies.index_mut(t);
                    copy[i] = H::cast_from(w);
                }
                i += stride;
            }
        }
    }
}

/// The buffers an update writes beside the weights, taken out of the optimiser's
/// [`FlatBuffers`] for the launch (each then held once, [`writable`]) and put back after.
pub(crate) struct AdamState<R: CubeRuntime> {
    pub(crate) moment_1: CubeTensor<R>,
    pub(crate) moment_2: CubeTensor<R>,
    /// The average, or where none moves, the second moment standing in (never read).
    pub(crate) average: CubeTensor<R>,
    /// Whether the step moves the average.
    pub(crate) has_average: bool,
}

impl<R: CubeRuntime> AdamState<R> {
    /// The moments and, where `step` moves one, the average, taken out of `flat`.
    pub(crate) fn take<F: FloatElement, I: IntElement, BT: BoolElement>(
        flat: &mut FlatBuffers<CubeBackend<R, F, I, BT>>,
        step: &AdamStep,
    ) -> Self {
        let take = |buffer: &mut CubeTensor<R>| {
            let empty = empty_f32(buffer, [0].into());
            writable(std::mem::replace(buffer, empty))
        };
        let moment_1 = take(&mut flat.moment_1);
        let moment_2 = take(&mut flat.moment_2);
        let has_average = flat.average.is_some() && step.ema_weight.is_some();
        let average = match &mut flat.average {
            Some(average) if has_average => take(average),
            _ => moment_2.clone(),
        };
        Self { moment_1, moment_2, average, has_average }
    }

    /// Puts the buffers back into `flat`, updated.
    pub(crate) fn put_back<F: FloatElement, I: IntElement, BT: BoolElement>(
        self,
        flat: &mut FlatBuffers<CubeBackend<R, F, I, BT>>,
    ) {
        flat.moment_1 = self.moment_1;
        flat.moment_2 = self.moment_2;
        if self.has_average {
            flat.average = Some(self.average);
        }
    }
}

/// The scalars buffer of an update ([`read_adam_scalars`]): the one `flat` carries
/// ([`FlatBuffers::scalars`]), else `step`'s ([`AdamStep::scalars`]) uploaded to `like`'s device.
///
/// # Panics
///
/// When `flat` carries a buffer that is not `[ADAM_SCALARS]` f32 (the kernels read all of them).
pub(crate) fn adam_scalars<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement>(
    step: &AdamStep,
    flat: &FlatBuffers<CubeBackend<R, F, I, BT>>,
    like: &CubeTensor<R>,
) -> CubeTensor<R> {
    crate::ops::adam::check_scalars(flat);
    if let Some(scalars) = &flat.scalars {
        return into_contiguous(scalars.clone());
    }
    let handle = like.client.create(cubecl::bytes::Bytes::from_elems(step.scalars().to_vec()));
    CubeTensor::new_contiguous(like.client.clone(), like.device.clone(), [ADAM_SCALARS].into(), handle, DType::F32)
}

/// [`portable::adam_update`] on each parameter in turn.
pub(crate) fn portable_update_each<R: RuntimeLibraries, F: FloatElement, I: IntElement, BT: BoolElement>(
    weights: Vec<CubeTensor<R>>,
    offsets: &[usize],
    flat: &mut FlatBuffers<CubeBackend<R, F, I, BT>>,
    scale: &CubeTensor<R>,
    step: &AdamStep,
) -> Vec<CubeTensor<R>> {
    weights
        .into_iter()
        .zip(offsets)
        .map(|(w, &offset)| portable::adam_update::<CubeBackend<R, F, I, BT>>(w, flat, offset, scale, step))
        .collect()
}

/// Whether [`adam_kernel`] takes these tensors, and copies in `copy`. It reads and writes
/// without bounds checks: every flat buffer must hold each parameter's range, in f32, and the
/// scale its one value; anything else takes the portable operations (and their errors), one
/// parameter at a time.
pub(crate) fn kernel_updates<R: RuntimeLibraries, F: FloatElement, I: IntElement, BT: BoolElement>(
    weights: &[CubeTensor<R>],
    offsets: &[usize],
    flat: &FlatBuffers<CubeBackend<R, F, I, BT>>,
    scale: &CubeTensor<R>,
    copy: Option<DType>,
) -> bool {
    assert_eq!(weights.len(), offsets.len(), "one offset per parameter");
    let ends: Vec<usize> = weights.iter().zip(offsets).map(|(w, &offset)| offset + w.meta.num_elements()).collect();
    let end = ends.iter().copied().max().unwrap_or(0);
    let holds_ranges = |t: &CubeTensor<R>| t.dtype == DType::F32 && t.meta.num_elements() >= end;
    // Each unit writes its element's moments: the ranges must come in order, apart.
    let apart = (1..offsets.len()).all(|k| ends[k - 1] <= offsets[k]);
    let fits = apart
        && weights.iter().all(|w| w.dtype == DType::F32 && w.meta.num_elements() > 0)
        && scale.dtype == DType::F32
        && scale.meta.num_elements() >= 1
        && [&flat.grads, &flat.moment_1, &flat.moment_2].into_iter().chain(flat.average.as_ref()).all(holds_ranges);
    let copies_fit = copy.is_none_or(|dtype| matches!(dtype, DType::F16 | DType::BF16));
    !weights.is_empty() && fits && copies_fit
}

/// The update of every parameter by [`adam_kernel`], in as few launches as the device's bindings
/// allow, with the new weights' copies in `copy` when one is asked for.
///
/// # Safety
/// [`kernel_updates`] holds for these tensors and `copy`: the kernel reads and writes them
/// without bounds checks.
pub(crate) unsafe fn update_all<R: RuntimeLibraries, F: FloatElement, I: IntElement, BT: BoolElement>(
    weights: Vec<CubeTensor<R>>,
    offsets: &[usize],
    flat: &mut FlatBuffers<CubeBackend<R, F, I, BT>>,
    scale: &CubeTensor<R>,
    step: &AdamStep,
    copy: Option<DType>,
) -> UpdatedWeights<CubeBackend<R, F, I, BT>> {
    let state = AdamState::take(flat, step);
    let grads = into_contiguous(flat.grads.clone());
    let scale = into_contiguous(scale.clone());
    // Written in place: the trainer hands over the model's only handles (a shared one is copied
    // first), so a step allocates no new weights.
    let weights: Vec<CubeTensor<R>> = weights.into_iter().map(|w| writable(into_contiguous(w))).collect();
    // Every parameter gets its copy (the norm layers' too, which the forward leaves in f32:
    // a few kilobytes, where leaving them out would split the launches).
    let copy_dtype = copy.unwrap_or(DType::F32);
    let copies: Vec<CubeTensor<R>> = match copy {
        Some(dtype) => weights.iter().map(|w| empty_like(w, w.shape(), dtype)).collect(),
        None => Vec::new(),
    };
    let client = grads.client.clone();
    let scalars = adam_scalars(step, flat, &grads);
    let bindings_per_part = if copy.is_some() { 2 } else { 1 };
    for range in crate::gather_plan::even_runs(weights.len(), launch_width(&client, bindings_per_part)) {
        let starts = &offsets[range.clone()];
        let lens: Vec<usize> = weights[range.clone()].iter().map(|w| w.meta.num_elements()).collect();
        let (cube_count, cube_dim) = grid(&lens);
        let tensors = |list: &[CubeTensor<R>]| {
            let mut sequence = SequenceArg::new();
            for tensor in &list[range.clone()] {
                sequence.push(tensor.clone().into_tensor_arg());
            }
            sequence
        };
        // Of another element type than `tensors`' (empty without copies).
        let mut copies_sequence = SequenceArg::new();
        for tensor in copies.get(range.clone()).unwrap_or_default() {
            copies_sequence.push(tensor.clone().into_tensor_arg());
        }
        // SAFETY: the units of row `t` read and write parameter `t` below `lens[t]`, its
        // element count (`weights` and, with copies, `copies` are contiguous, of the same
        // shapes), and the flat buffers in that parameter's range, which each holds, and `scale`
        // at 0 (the caller checked both: `kernel_updates`), and the step's scalars below their 8
        // (`adam_scalars`); `moment_2` standing in for a missing
        // average is never read; the buffers written are uniquely held ([`writable`], `copies`
        // new) and contiguous, no two units write one element (the ranges are apart,
        // `kernel_updates`), and each unit reads a weight before it writes it.
        unsafe {
            adam_kernel::launch_unchecked::<R>(
                &client,
                cube_count,
                cube_dim,
                tensors(&weights),
                copies_sequence,
                starts.iter().copied().collect(),
                lens.into_iter().collect(),
                grads.clone().into_tensor_arg(),
                state.moment_1.clone().into_tensor_arg(),
                state.moment_2.clone().into_tensor_arg(),
                state.average.clone().into_tensor_arg(),
                scale.clone().into_tensor_arg(),
                scalars.clone().into_tensor_arg(),
                step.constants().weight_decay != 0.0,
                state.has_average,
                copy.is_some(),
                [DType::F32.into(), copy_dtype.into()],
            );
        }
    }
    state.put_back(flat);
    UpdatedWeights { weights, copies }
}
