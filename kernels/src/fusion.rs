//! [`Kernels`] under burn's fusion (`gpu-fusion`): the backend is `Fusion<B>` over cubecl's, which
//! records operations and runs them later, fused where it can. The convolutions and the
//! transposed ones (cuDNN on cuda with the `cudnn` feature), GroupNorm with its activation and
//! FiLM, forward and backward, a channel bias's gradient, YUV 4:2:0 frames to RGB, the gradients'
//! gather, the optimiser update and the weights' views are registered as fusion's custom
//! operations that run the inner backend's own methods (for cubecl's backends, `cube.rs`: one
//! launch per GroupNorm, many parameters a launch), so fusion keeps joining the elementwise
//! chains around them. The other methods keep their portable versions, whose elementwise chains
//! fusion compiles into few kernels.

mod views;

use std::marker::PhantomData;

use burn::prelude::*;
use burn::tensor::Shape;
use burn::tensor::ops::{
    ConvOptions, ConvTransposeOptions, FloatTensor, FloatTensorOps, IntTensor, ModuleOps,
    conv::calculate_conv_output_sizes,
};
use burn::tensor::{DType, FloatDType, TensorMetadata};
use burn_fusion::stream::{Operation, OperationStreams};
use burn_fusion::{Fusion, FusionBackend, FusionRuntime};
use burn_ir::{CustomOpIr, HandleContainer, InitOperationIr, OperationIr, OperationOutput, TensorIr};

use crate::{
    Activation, AdamStep, FlatBuffers, Kernels, PartialSquares, UpdatedWeights, ViewPlaces, ViewTable, ViewsUpdate,
    Yuv420Terms,
};

/// Which convolution pass a custom operation runs, with its options.
#[derive(Debug, Clone)]
enum Pass {
    Output(ConvOptions<2>),
    InputGrad(ConvOptions<2>),
    WeightGrad(ConvOptions<2>),
    /// A transposed convolution's output (its gradients are the other passes of the
    /// convolution it transposes).
    Transposed(ConvTransposeOptions<2>),
}

/// One convolution pass as fusion's custom operation: inputs `[x, w]` or `[x, w, dy]`, one
/// output.
#[derive(Debug, Clone)]
struct ConvOp<B> {
    desc: CustomOpIr,
    pass: Pass,
    backend: PhantomData<B>,
}

impl<B: FusionBackend + Kernels> Operation<B::FusionRuntime> for ConvOp<B> {
    fn execute(&self, handles: &mut Handles<B>) {
        let inputs = inputs_of::<B>(&self.desc, handles);
        let output = match (self.pass.clone(), <[_; 3]>::try_from(inputs)) {
            (Pass::InputGrad(options), Ok([x, w, dy])) => B::conv2d_input_grad(x, w, dy, options),
            (Pass::WeightGrad(options), Ok([x, w, dy])) => B::conv2d_weight_grad(x, w, dy, options),
            (pass, Err(inputs)) => {
                let [x, w] = <[_; 2]>::try_from(inputs).unwrap_or_else(|_| unreachable!("two inputs registered"));
                match pass {
                    Pass::Output(options) => B::conv2d_no_bias(x, w, options),
                    Pass::Transposed(options) => B::conv_transpose2d_no_bias(x, w, options),
                    _ => unreachable!("the gradients are registered with three inputs"),
                }
            }
            _ => unreachable!("each pass is registered with its own inputs"),
        };
        register_outputs::<B>(&self.desc, handles, vec![output]);
    }
}

/// The handles fusion gives a custom operation to read its inputs from and write its outputs to.
type Handles<B> = HandleContainer<<<B as FusionBackend>::FusionRuntime as FusionRuntime>::FusionHandle>;

/// The inner backend's tensors of `desc`'s inputs, in order.
fn inputs_of<B: FusionBackend>(desc: &CustomOpIr, handles: &mut Handles<B>) -> Vec<FloatTensor<B>> {
    desc.inputs.iter().map(|t| handles.get_float_tensor::<B>(t)).collect()
}

/// Registers `outputs` as `desc`'s outputs, in order.
fn register_outputs<B: FusionBackend>(
    desc: &CustomOpIr,
    handles: &mut Handles<B>,
    outputs: impl IntoIterator<Item = FloatTensor<B>>,
) {
    for (ir, tensor) in desc.outputs.iter().zip(outputs) {
        handles.register_float_tensor::<B>(&ir.id, tensor);
    }
}

/// Registers the custom operation `make` builds from its description, named `name`, over
/// `inputs` (on one device): its outputs, new tensors of `outputs`' shapes and dtypes.
fn register_custom<B: FusionBackend, O: Operation<B::FusionRuntime> + 'static>(
    name: &'static str,
    inputs: Vec<FloatTensor<Fusion<B>>>,
    outputs: Vec<(Shape, DType)>,
    make: impl FnOnce(CustomOpIr) -> O,
) -> Vec<FloatTensor<Fusion<B>>> {
    let client = inputs[0].client.clone();
    let streams = OperationStreams::with_inputs(inputs.iter());
    let outputs: Vec<TensorIr> = outputs
        .into_iter()
        .map(|(shape, dtype)| TensorIr::uninit(client.create_empty_handle(), shape, dtype))
        .collect();
    let inputs: Vec<TensorIr> = inputs.into_iter().map(burn_fusion::FusionTensor::into_ir).collect();
    let desc = CustomOpIr::new(name, &inputs, &outputs);
    client.register(streams, OperationIr::Custom(desc.clone()), make(desc))
}

/// Registers `pass` over `inputs` (whose first is `x`), giving a tensor of `shape` and `dtype`.
fn register<B: FusionBackend + Kernels>(
    pass: Pass,
    inputs: Vec<FloatTensor<Fusion<B>>>,
    shape: Shape,
    dtype: DType,
) -> FloatTensor<Fusion<B>> {
    let name = match pass {
        Pass::Output(_) => "lerobot_rs_conv2d",
        Pass::InputGrad(_) => "lerobot_rs_conv2d_input_grad",
        Pass::WeightGrad(_) => "lerobot_rs_conv2d_weight_grad",
        Pass::Transposed(_) => "lerobot_rs_conv_transpose2d",
    };
    let make = |desc| ConvOp::<B> { desc, pass, backend: PhantomData };
    register_custom::<B, _>(name, inputs, vec![(shape, dtype)], make).output()
}

/// GroupNorm with its activation as fusion's custom operation: forward, `[x, γ, β]` in, `[y,
/// stats]` out; backward, `[x, γ, β, stats, dy]` in, `[dx, dγ, dβ]` out.
#[derive(Debug, Clone)]
struct GroupNormOp<B> {
    desc: CustomOpIr,
    backward: bool,
    groups: usize,
    epsilon: f64,
    activation: Activation,
    backend: PhantomData<B>,
}

impl<B: FusionBackend + Kernels> Operation<B::FusionRuntime> for GroupNormOp<B> {
    fn execute(&self, handles: &mut Handles<B>) {
        let inputs = inputs_of::<B>(&self.desc, handles);
        let (groups, activation) = (self.groups, self.activation);
        let outputs: Vec<FloatTensor<B>> = match <[_; 5]>::try_from(inputs) {
            Ok([x, gamma, beta, stats, dy]) if self.backward => {
                B::group_norm_backward(x, [gamma, beta], stats, dy, groups, activation).into()
            }
            Err(inputs) if !self.backward => {
                let [x, gamma, beta] = <[_; 3]>::try_from(inputs).unwrap_or_else(|_| unreachable!("three inputs"));
                let (y, stats) = B::group_norm_forward(x, gamma, beta, groups, self.epsilon, activation)
                    .expect("the inner backend's kernel, checked when registered");
                vec![y, stats]
            }
            _ => unreachable!("each pass is registered with its own inputs"),
        };
        register_outputs::<B>(&self.desc, handles, outputs);
    }
}

/// Whether the inner backend's GroupNorm kernels take these tensors (`[x, γ, β, ..]`, then the
/// backward's statistics and `dy`): of [`crate::group_norm_dtypes`] (`dy` in `x`'s), of a shape
/// [`crate::group_norm_shape`] accepts.
fn takes_group_norm<B: FusionBackend + Kernels>(tensors: &[&FloatTensor<Fusion<B>>], groups: usize) -> bool {
    let [x, gamma, beta] = [tensors[0], tensors[1], tensors[2]];
    let others: Vec<DType> = tensors[1..tensors.len().min(4)].iter().map(|t| t.dtype).collect();
    let output_grad_dtype = tensors.get(4).is_none_or(|dy| dy.dtype == x.dtype);
    B::has_group_norm_kernels()
        && crate::group_norm_dtypes(x.dtype, &others)
        && output_grad_dtype
        && crate::group_norm_shape(x.shape.as_slice(), gamma.shape.num_elements(), beta.shape.num_elements(), groups)
            .is_some()
}

/// FiLM as fusion's custom operation: forward, `[x, embedding]` in, `[y]` out; backward,
/// `[x, embedding, dy]` in, `[dx, d_embedding]` out.
#[derive(Debug, Clone)]
struct FilmOp<B> {
    desc: CustomOpIr,
    backend: PhantomData<B>,
}

impl<B: FusionBackend + Kernels> Operation<B::FusionRuntime> for FilmOp<B> {
    fn execute(&self, handles: &mut Handles<B>) {
        let inputs = inputs_of::<B>(&self.desc, handles);
        let outputs: Vec<FloatTensor<B>> = match <[_; 3]>::try_from(inputs) {
            Ok([x, embedding, dy]) => B::film_backward(x, embedding, dy).into(),
            Err(inputs) => {
                let [x, embedding] = <[_; 2]>::try_from(inputs).unwrap_or_else(|_| unreachable!("two inputs"));
                vec![B::film_forward(x, embedding).expect("the inner backend's kernel, checked when registered")]
            }
        };
        register_outputs::<B>(&self.desc, handles, outputs);
    }
}

/// YUV 4:2:0 frames to RGB as fusion's custom operation: `[planes]` (an integer tensor) in,
/// `[rgb]` out.
#[derive(Debug, Clone)]
struct Yuv420Op<B> {
    desc: CustomOpIr,
    frames: usize,
    size: (usize, usize),
    terms: Yuv420Terms,
    dtype: FloatDType,
    backend: PhantomData<B>,
}

impl<B: FusionBackend + Kernels> Operation<B::FusionRuntime> for Yuv420Op<B> {
    fn execute(&self, handles: &mut Handles<B>) {
        let planes = handles.get_int_tensor::<B>(&self.desc.inputs[0]);
        let rgb = B::yuv420_to_rgb(planes, self.frames, self.size, &self.terms, self.dtype)
            .expect("the inner backend's kernel, checked when registered");
        register_outputs::<B>(&self.desc, handles, vec![rgb]);
    }
}

/// A channel bias's gradient as fusion's custom operation: `[dy]` in, `[db]` out.
#[derive(Debug, Clone)]
struct ChannelBiasGradOp<B> {
    desc: CustomOpIr,
    backend: PhantomData<B>,
}

impl<B: FusionBackend + Kernels> Operation<B::FusionRuntime> for ChannelBiasGradOp<B> {
    fn execute(&self, handles: &mut Handles<B>) {
        let [output_grad] =
            <[_; 1]>::try_from(inputs_of::<B>(&self.desc, handles)).unwrap_or_else(|_| unreachable!("one input"));
        register_outputs::<B>(&self.desc, handles, vec![B::channel_bias_grad(output_grad)]);
    }
}

/// Whether the inner backend's FiLM kernels take these tensors (`[x, embedding, ..]`): of
/// [`crate::film_dtypes`], of shapes [`crate::film_shape`] accepts.
fn takes_film<B: FusionBackend + Kernels>(tensors: &[&FloatTensor<Fusion<B>>]) -> bool {
    B::has_film_kernels()
        && crate::film_dtypes(&tensors.iter().map(|t| t.dtype).collect::<Vec<_>>())
        && crate::film_shape(tensors[0].shape.as_slice(), tensors[1].shape.as_slice()).is_some()
}

/// What [`GatherOp`] gives beside the flat buffer.
#[derive(Debug, Clone, Copy)]
enum GatherOutputs {
    /// The flat buffer alone.
    Flat,
    /// Its `Σ x²` too.
    Squares,
    /// Its squares' `len` partial sums too ([`Kernels::concat_flat_with_partial_squares`]).
    PartialSquares { len: usize },
}

impl GatherOutputs {
    /// The custom operation's name, and the lengths of the 1-D outputs that follow the flat
    /// buffer.
    fn name_and_totals(self) -> (&'static str, Vec<usize>) {
        match self {
            Self::Flat => ("lerobot_rs_gather", vec![]),
            Self::Squares => ("lerobot_rs_gather_squares", vec![1]),
            Self::PartialSquares { len } => ("lerobot_rs_gather_partial_squares", vec![len]),
        }
    }
}

/// Whether the inner backend's gather reads every one of `parts` (at least one).
fn gathers_all<B: FusionBackend>(parts: &[FloatTensor<Fusion<B>>]) -> bool {
    !parts.is_empty() && parts.iter().all(|p| crate::kernel_float(p.dtype))
}

/// `parts` ([`gathers_all`]) registered as one [`GatherOp`]: the flat buffer, then the totals
/// `outputs` names.
fn register_gather<B: FusionBackend + Kernels>(
    parts: Vec<FloatTensor<Fusion<B>>>,
    outputs: GatherOutputs,
) -> Vec<FloatTensor<Fusion<B>>> {
    let (name, totals) = outputs.name_and_totals();
    let total = parts.iter().map(|p| p.shape.num_elements()).sum::<usize>();
    let mut shapes = vec![(Shape::from(vec![total]), DType::F32)];
    shapes.extend(totals.into_iter().map(|len| (Shape::from(vec![len]), DType::F32)));
    let make = |desc| GatherOp::<B> { desc, outputs, backend: PhantomData };
    register_custom::<B, _>(name, parts, shapes, make)
}

/// The gradients' gather as fusion's custom operation: the parts in, the flat buffer out, with
/// what `outputs` names.
#[derive(Debug, Clone)]
struct GatherOp<B> {
    desc: CustomOpIr,
    outputs: GatherOutputs,
    backend: PhantomData<B>,
}

impl<B: FusionBackend + Kernels> Operation<B::FusionRuntime> for GatherOp<B> {
    fn execute(&self, handles: &mut Handles<B>) {
        let parts = inputs_of::<B>(&self.desc, handles);
        let device = B::float_device(&parts[0]);
        let outputs: Vec<FloatTensor<B>> = match self.outputs {
            GatherOutputs::Flat => vec![B::concat_flat(parts, None, &device)],
            GatherOutputs::Squares => B::concat_flat_with_squares(parts, None, &device).into(),
            GatherOutputs::PartialSquares { len } => {
                let [flat, partials] = B::concat_flat_with_partial_squares(parts, None, &device);
                assert_eq!(partials.shape().num_elements(), len, "the partial squares the gather was registered with");
                vec![flat, partials]
            }
        };
        register_outputs::<B>(&self.desc, handles, outputs);
    }
}

/// [`Kernels::clip_partial_squares`] as fusion's custom operation: `[partials]` in, `[norm,
/// scale]` out.
#[derive(Debug, Clone)]
struct ClipPartialsOp<B> {
    desc: CustomOpIr,
    max_norm: f64,
    grad_scale: f64,
    backend: PhantomData<B>,
}

impl<B: FusionBackend + Kernels> Operation<B::FusionRuntime> for ClipPartialsOp<B> {
    fn execute(&self, handles: &mut Handles<B>) {
        let [partials] =
            <[_; 1]>::try_from(inputs_of::<B>(&self.desc, handles)).unwrap_or_else(|_| unreachable!("one input"));
        let squares = PartialSquares { partials, max_norm: self.max_norm, grad_scale: self.grad_scale };
        register_outputs::<B>(&self.desc, handles, B::clip_partial_squares(&squares));
    }
}

/// The fused update as fusion's custom operation: in, the weights, the gradients, the two
/// moments, the average where one is kept, and the scale; out, the new weights, moments and
/// average, then the new weights' copies in `copy` where one is asked for.
#[derive(Debug, Clone)]
struct AdamOp<B> {
    desc: CustomOpIr,
    offsets: Vec<usize>,
    step: AdamStep,
    copy: Option<FloatDType>,
    backend: PhantomData<B>,
}

impl<B: FusionBackend + Kernels> Operation<B::FusionRuntime> for AdamOp<B> {
    fn execute(&self, handles: &mut Handles<B>) {
        let count = self.offsets.len();
        let mut inputs = inputs_of::<B>(&self.desc, handles);
        let scale = inputs.pop().expect("the scale is the last input");
        let mut rest = inputs.split_off(count).into_iter();
        let weights = inputs;
        let (grads, moment_1, moment_2) =
            (rest.next().expect("grads"), rest.next().expect("moment 1"), rest.next().expect("moment 2"));
        let mut flat = FlatBuffers::<B> { grads, moment_1, moment_2, average: rest.next() };
        let UpdatedWeights { weights, copies } =
            crate::adam_update_all_copying::<B>(weights, &self.offsets, &mut flat, &scale, &self.step, self.copy);
        let outputs = weights.into_iter().chain([flat.moment_1, flat.moment_2]).chain(flat.average).chain(copies);
        register_outputs::<B>(&self.desc, handles, outputs);
    }
}

impl<B: FusionBackend + Kernels> Kernels for Fusion<B> {
    fn sum_of_squares(x: FloatTensor<Self>) -> FloatTensor<Self> {
        // In a fixed order, as on cubecl without fusion (burn's whole-tensor sum adds with atomics).
        crate::portable::sum_of_squares_by_rows::<Self>(x)
    }

    fn concat_flat(
        parts: Vec<FloatTensor<Self>>,
        reuse: Option<FloatTensor<Self>>,
        device: &Self::Device,
    ) -> FloatTensor<Self> {
        // Fusion's allocator keeps freed buffers: a new flat buffer costs no page faults here.
        drop(reuse);
        if !gathers_all::<B>(&parts) {
            return crate::portable::concat_flat::<Self>(parts, device);
        }
        register_gather::<B>(parts, GatherOutputs::Flat).output()
    }

    fn concat_flat_with_squares(
        parts: Vec<FloatTensor<Self>>,
        reuse: Option<FloatTensor<Self>>,
        device: &Self::Device,
    ) -> [FloatTensor<Self>; 2] {
        if !gathers_all::<B>(&parts) {
            return crate::concat_flat_then_squares::<Self>(parts, reuse, device);
        }
        drop(reuse);
        let outputs = register_gather::<B>(parts, GatherOutputs::Squares);
        outputs.try_into().unwrap_or_else(|_| unreachable!("two outputs registered"))
    }

    fn concat_flat_with_partial_squares(
        parts: Vec<FloatTensor<Self>>,
        reuse: Option<FloatTensor<Self>>,
        device: &Self::Device,
    ) -> [FloatTensor<Self>; 2] {
        if !gathers_all::<B>(&parts) {
            return crate::concat_flat_then_squares::<Self>(parts, reuse, device);
        }
        drop(reuse);
        let sizes: Vec<(usize, DType)> = parts.iter().map(|p| (p.shape.num_elements(), p.dtype)).collect();
        let len = B::partial_squares_len(&sizes, device);
        let outputs = register_gather::<B>(parts, GatherOutputs::PartialSquares { len });
        outputs.try_into().unwrap_or_else(|_| unreachable!("two outputs registered"))
    }

    fn partial_squares_len(parts: &[(usize, DType)], device: &Self::Device) -> usize {
        B::partial_squares_len(parts, device)
    }

    fn clip_partial_squares(squares: &PartialSquares<Self>) -> [FloatTensor<Self>; 2] {
        let PartialSquares { partials, max_norm, grad_scale } = squares.clone();
        let outputs = vec![(Shape::from(vec![1]), DType::F32); 2];
        let make = |desc| ClipPartialsOp::<B> { desc, max_norm, grad_scale, backend: PhantomData };
        register_custom::<B, _>("lerobot_rs_clip_partial_squares", vec![partials], outputs, make).outputs()
    }

    fn adam_update_all(
        weights: Vec<FloatTensor<Self>>,
        offsets: &[usize],
        flat: &mut FlatBuffers<Self>,
        scale: &FloatTensor<Self>,
        step: &AdamStep,
    ) -> Vec<FloatTensor<Self>> {
        register_adam::<B>(weights, offsets, flat, scale, step, None).weights
    }

    fn adam_update_all_with_copies(
        weights: Vec<FloatTensor<Self>>,
        offsets: &[usize],
        flat: &mut FlatBuffers<Self>,
        scale: &FloatTensor<Self>,
        step: &AdamStep,
        copy: FloatDType,
    ) -> UpdatedWeights<Self> {
        register_adam::<B>(weights, offsets, flat, scale, step, Some(copy))
    }

    fn weight_view_alignment(device: &Self::Device) -> Option<usize> {
        B::weight_view_alignment(device)
    }

    fn largest_allocation(device: &Self::Device) -> Option<u64> {
        B::largest_allocation(device)
    }

    fn weight_views(flat: FloatTensor<Self>, places: &ViewPlaces) -> Vec<FloatTensor<Self>> {
        views::register_weight_views::<B>(flat, places)
    }

    fn adam_update_views(
        weights: FloatTensor<Self>,
        copies: Option<FloatTensor<Self>>,
        table: &ViewTable<Self>,
        flat: &mut FlatBuffers<Self>,
        scale: &FloatTensor<Self>,
        step: &AdamStep,
    ) -> (FloatTensor<Self>, Option<FloatTensor<Self>>) {
        let (weights, copies, _) =
            views::register_adam_views::<B>(weights, copies, table, flat, views::Scaling::Factor(scale), step);
        (weights, copies)
    }

    fn adam_update_views_clipping(
        weights: FloatTensor<Self>,
        copies: Option<FloatTensor<Self>>,
        table: &ViewTable<Self>,
        flat: &mut FlatBuffers<Self>,
        squares: &PartialSquares<Self>,
        step: &AdamStep,
    ) -> ViewsUpdate<Self> {
        let (weights, copies, factors) =
            views::register_adam_views::<B>(weights, copies, table, flat, views::Scaling::Clip(squares), step);
        let [norm, scale] = factors.expect("the clipping's factors, asked for");
        ViewsUpdate { weights, copies, norm, scale }
    }

    fn has_group_norm_kernels() -> bool {
        B::has_group_norm_kernels()
    }

    fn group_norm_forward(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        groups: usize,
        epsilon: f64,
        activation: Activation,
    ) -> Option<(FloatTensor<Self>, FloatTensor<Self>)> {
        if !takes_group_norm::<B>(&[&x, &gamma, &beta], groups) {
            return None;
        }
        let outputs = vec![(x.shape.clone(), x.dtype), (Shape::from(vec![x.shape[0], groups, 2]), DType::F32)];
        let make = |desc| GroupNormOp::<B> { desc, backward: false, groups, epsilon, activation, backend: PhantomData };
        let [y, stats] =
            register_custom::<B, _>("lerobot_rs_group_norm", vec![x, gamma, beta], outputs, make).outputs();
        Some((y, stats))
    }

    fn group_norm_backward(
        x: FloatTensor<Self>,
        [gamma, beta]: [FloatTensor<Self>; 2],
        stats: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        groups: usize,
        activation: Activation,
    ) -> [FloatTensor<Self>; 3] {
        let takes = takes_group_norm::<B>(&[&x, &gamma, &beta, &stats, &output_grad], groups)
            && output_grad.shape == x.shape
            && stats.shape.num_elements() == x.shape[0] * groups * 2;
        if !takes {
            return crate::portable::group_norm_backward::<Self>(
                x,
                [gamma, beta],
                stats,
                output_grad,
                groups,
                activation,
            );
        }
        let outputs = [&x, &gamma, &beta].map(|t| (t.shape.clone(), t.dtype)).to_vec();
        let make =
            |desc| GroupNormOp::<B> { desc, backward: true, groups, epsilon: 0.0, activation, backend: PhantomData };
        let inputs = vec![x, gamma, beta, stats, output_grad];
        register_custom::<B, _>("lerobot_rs_group_norm_backward", inputs, outputs, make).outputs()
    }

    fn channel_bias_grad(output_grad: FloatTensor<Self>) -> FloatTensor<Self> {
        if output_grad.shape.num_dims() < 2 {
            return crate::portable::channel_bias_grad::<Self>(output_grad);
        }
        let outputs = vec![(Shape::from(vec![output_grad.shape[1]]), output_grad.dtype)];
        let make = |desc| ChannelBiasGradOp::<B> { desc, backend: PhantomData };
        register_custom::<B, _>("lerobot_rs_channel_bias_grad", vec![output_grad], outputs, make).output()
    }

    fn has_film_kernels() -> bool {
        B::has_film_kernels()
    }

    fn has_yuv420_kernel() -> bool {
        B::has_yuv420_kernel()
    }

    fn upload_u8(bytes: &[u8], shape: Shape, device: &Self::Device) -> Option<IntTensor<Self>> {
        // As fusion's own `int_from_data`: the inner backend's tensor, registered as a new one.
        let tensor = B::upload_u8(bytes, shape, device)?;
        let (shape, dtype) = (tensor.shape(), tensor.dtype());
        let client = burn_fusion::get_client::<B>(device);
        let handle = B::int_tensor_handle(tensor);
        let init = InitOperationIr::create(shape, dtype, || client.register_tensor_handle(handle));
        let op = burn_fusion::NoOp::<B>::new();
        Some(client.register(OperationStreams::default(), OperationIr::Init(init), op).output())
    }

    fn yuv420_to_rgb(
        planes: IntTensor<Self>,
        frames: usize,
        (height, width): (usize, usize),
        terms: &Yuv420Terms,
        dtype: FloatDType,
    ) -> Option<FloatTensor<Self>> {
        let takes = crate::yuv::yuv420_kernel_takes(planes.shape.num_elements(), frames, (height, width));
        if !(takes && B::has_yuv420_kernel()) {
            return None;
        }
        let output = (Shape::new([frames, 3, height, width]), DType::from(dtype));
        let make =
            |desc| Yuv420Op::<B> { desc, frames, size: (height, width), terms: *terms, dtype, backend: PhantomData };
        Some(register_custom::<B, _>("lerobot_rs_yuv420_to_rgb", vec![planes], vec![output], make).output())
    }

    fn film_forward(x: FloatTensor<Self>, embedding: FloatTensor<Self>) -> Option<FloatTensor<Self>> {
        if !takes_film::<B>(&[&x, &embedding]) {
            return None;
        }
        let outputs = vec![(x.shape.clone(), x.dtype)];
        let make = |desc| FilmOp::<B> { desc, backend: PhantomData };
        Some(register_custom::<B, _>("lerobot_rs_film", vec![x, embedding], outputs, make).output())
    }

    fn film_backward(
        x: FloatTensor<Self>,
        embedding: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
    ) -> [FloatTensor<Self>; 2] {
        if !(takes_film::<B>(&[&x, &embedding, &output_grad]) && output_grad.shape == x.shape) {
            return crate::portable::film_backward::<Self>(x, embedding, output_grad);
        }
        let outputs = [&x, &embedding].map(|t| (t.shape.clone(), t.dtype)).to_vec();
        let make = |desc| FilmOp::<B> { desc, backend: PhantomData };
        register_custom::<B, _>("lerobot_rs_film_backward", vec![x, embedding, output_grad], outputs, make).outputs()
    }

    fn has_conv2d_products(dtype: DType) -> bool {
        B::has_conv2d_products(dtype)
    }

    fn has_conv1d_products(dtype: DType) -> bool {
        B::has_conv1d_products(dtype)
    }

    fn conv2d_no_bias(x: FloatTensor<Self>, weight: FloatTensor<Self>, options: ConvOptions<2>) -> FloatTensor<Self> {
        let (x_shape, w_shape) = (x.shape.clone(), weight.shape.clone());
        let sizes = calculate_conv_output_sizes(
            &[w_shape[2], w_shape[3]],
            &options.stride,
            &options.padding,
            &options.dilation,
            &[x_shape[2], x_shape[3]],
        );
        let shape = Shape::from(vec![x_shape[0], w_shape[0], sizes[0], sizes[1]]);
        let dtype = x.dtype;
        register::<B>(Pass::Output(options), vec![x, weight], shape, dtype)
    }

    fn conv2d_input_grad(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self> {
        let (shape, dtype) = (x.shape.clone(), x.dtype);
        register::<B>(Pass::InputGrad(options), vec![x, weight, output_grad], shape, dtype)
    }

    fn conv2d_weight_grad(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
        options: ConvOptions<2>,
    ) -> FloatTensor<Self> {
        let (shape, dtype) = (weight.shape.clone(), weight.dtype);
        register::<B>(Pass::WeightGrad(options), vec![x, weight, output_grad], shape, dtype)
    }

    fn conv_transpose2d_no_bias(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        options: ConvTransposeOptions<2>,
    ) -> FloatTensor<Self> {
        let dims = |shape: &Shape| <[usize; 4]>::try_from(shape.as_slice()).ok();
        let output = dims(&x.shape)
            .zip(dims(&weight.shape))
            .and_then(|(x_shape, weight_shape)| crate::conv_transpose2d_output_shape(x_shape, weight_shape, &options));
        let Some(output) = output else {
            // Shapes with no transposed convolution: burn's own operation says what is wrong.
            return <Self as ModuleOps<Self>>::conv_transpose2d(x, weight, None, options);
        };
        let dtype = x.dtype;
        register::<B>(Pass::Transposed(options), vec![x, weight], Shape::from(output.to_vec()), dtype)
    }
}

/// [`AdamOp`] registered for the update of `weights` (and their copies in `copy`, where asked).
fn register_adam<B: FusionBackend + Kernels>(
    weights: Vec<FloatTensor<Fusion<B>>>,
    offsets: &[usize],
    flat: &mut FlatBuffers<Fusion<B>>,
    scale: &FloatTensor<Fusion<B>>,
    step: &AdamStep,
    copy: Option<FloatDType>,
) -> UpdatedWeights<Fusion<B>> {
    assert_eq!(weights.len(), offsets.len(), "one offset per parameter");
    if weights.is_empty() {
        return UpdatedWeights { weights, copies: Vec::new() };
    }
    let count = weights.len();
    let state = take_state::<B>(flat);
    let mut outputs: Vec<(Shape, DType)> = weights.iter().chain(&state).map(shape_and_dtype::<B>).collect();
    if let Some(copy) = copy {
        outputs.extend(weights.iter().map(|w| (w.shape.clone(), DType::from(copy))));
    }
    let mut inputs = weights;
    inputs.push(flat.grads.clone());
    inputs.extend(state);
    inputs.push(scale.clone());
    let make = |desc| AdamOp::<B> { desc, offsets: offsets.to_vec(), step: *step, copy, backend: PhantomData };
    let mut results = register_custom::<B, _>("lerobot_rs_adam", inputs, outputs, make).into_iter();
    let weights = results.by_ref().take(count).collect();
    put_state::<B>(flat, &mut results);
    UpdatedWeights { weights, copies: results.collect() }
}

/// A tensor's shape and dtype: what an operation that writes it in place gives back.
fn shape_and_dtype<B: FusionBackend>(tensor: &FloatTensor<Fusion<B>>) -> (Shape, DType) {
    (tensor.shape.clone(), tensor.dtype)
}

/// The moments and, where one is kept, the average, taken out of `flat` for an update that
/// writes them in place (so that it holds them once), in that order; empty tensors hold their
/// places until [`put_state`] puts the update's outputs back.
fn take_state<B: FusionBackend>(flat: &mut FlatBuffers<Fusion<B>>) -> Vec<FloatTensor<Fusion<B>>> {
    let take = |buffer: &mut FloatTensor<Fusion<B>>| {
        let device = Fusion::<B>::float_device(buffer);
        let empty = Tensor::<Fusion<B>, 1>::empty([0], &device).into_primitive().tensor();
        std::mem::replace(buffer, empty)
    };
    let mut state = vec![take(&mut flat.moment_1), take(&mut flat.moment_2)];
    state.extend(flat.average.as_mut().map(take));
    state
}

/// The update's new moments and average, the next of `outputs` in [`take_state`]'s order, put
/// back into `flat`.
fn put_state<B: FusionBackend>(
    flat: &mut FlatBuffers<Fusion<B>>,
    outputs: &mut impl Iterator<Item = FloatTensor<Fusion<B>>>,
) {
    flat.moment_1 = outputs.next().expect("moment 1 out");
    flat.moment_2 = outputs.next().expect("moment 2 out");
    if flat.average.is_some() {
        flat.average = Some(outputs.next().expect("the average out"));
    }
}
