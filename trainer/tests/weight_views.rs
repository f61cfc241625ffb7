//! The optimiser on burn's cubecl backends keeps a model's weights as views of one buffer and
//! updates them in one launch (`trainer/src/optim/views.rs`): against the CPU's update of each
//! weight, on burn's wgpu backend over Mesa's lavapipe, without fusion and (in a build with
//! `kernels/gpu-fusion`, as `scripts/test.sh`'s) with it. Alone: `cargo test --release -p trainer
//! --no-default-features --features wgpu-untuned,kernels/gpu-fusion --test weight_views`.

use burn::backend::wgpu::{CubeBackend, WgpuDevice, WgpuRuntime};
use burn::backend::{Autodiff, Flex};
use burn::module::{AutodiffModule, Module, Param};
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::ops::{FloatTensor, FloatTensorOps};
use burn::tensor::{DType, FloatDType, TensorMetadata, TensorPrimitive};
use kernels::{Kernels, OptimiserKernels, PartialSquares};
use trainer::DiffusionConfig;
use trainer::optim::{ClipFactors, Clipping, FlatAdam, FlatLayout};

/// burn's wgpu backend as cubecl gives it.
type Direct = CubeBackend<WgpuRuntime, f32, i32, u32>;

/// Parameters of several ranks and sizes, one of a single weight, one a 2-D convolution's.
#[derive(Module, Debug)]
struct Weights<B: Backend> {
    matrix: Param<Tensor<B, 2>>,
    one: Param<Tensor<B, 1>>,
    kernel: Param<Tensor<B, 3>>,
    conv: Param<Tensor<B, 4>>,
    bias: Param<Tensor<B, 1>>,
}

fn values(n: usize, seed: f32) -> Vec<f32> {
    (0..n).map(|i| ((i as f32 * 0.7548 + seed).sin() * 43758.547).fract() - 0.5).collect()
}

fn param<B: Backend, const D: usize>(shape: [usize; D], seed: f32, device: &B::Device) -> Param<Tensor<B, D>> {
    let n = shape.iter().product();
    Param::from_tensor(Tensor::from_data(TensorData::new(values(n, seed), shape), device))
}

/// `param` with new weights, its id kept (as a broadcast or a loaded record leaves it).
fn replaced<B: Backend>(param: &Param<Tensor<B, 1>>, device: &B::Device) -> Param<Tensor<B, 1>> {
    let n = param.dims()[0];
    Param::initialized(param.id, Tensor::from_data(TensorData::new(values(n, 40.0), [n]), device).require_grad())
}

fn model<B: AutodiffBackend>(device: &B::Device, seed: f32) -> Weights<B> {
    Weights {
        matrix: param([5, 301], seed, device),
        one: param([1], seed + 1.0, device),
        kernel: param([3, 4, 70], seed + 2.0, device),
        conv: param([6, 8, 3, 2], seed + 4.0, device),
        bias: param([33], seed + 3.0, device),
    }
}

/// The model's weights, parameter by parameter.
fn read<B: Backend>(model: &Weights<B>) -> Vec<Vec<f32>> {
    let flat = |t: Tensor<B, 1>| t.into_data().to_vec::<f32>().unwrap();
    vec![
        flat(model.matrix.val().flatten(0, 1)),
        flat(model.one.val()),
        flat(model.kernel.val().flatten(0, 2)),
        flat(model.conv.val().flatten(0, 3)),
        flat(model.bias.val()),
    ]
}

/// The largest difference relative to the larger magnitude (or 1e-3 near zero).
fn max_relative(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    let pairs = a.iter().flatten().zip(b.iter().flatten());
    pairs.map(|(a, b)| (a - b).abs() / a.abs().max(b.abs()).max(1e-3)).fold(0.0, f32::max)
}

/// One optimiser: its model, its state, its average.
struct Run<AB: AutodiffBackend<InnerBackend: Kernels>> {
    model: Option<Weights<AB>>,
    adam: FlatAdam<AB::InnerBackend>,
    average: Tensor<AB::InnerBackend, 1>,
    device: AB::Device,
}

impl<AB: AutodiffBackend<InnerBackend: Kernels>> Run<AB> {
    /// With `channels_last`, the convolution's weights lie channels-last where they are views.
    fn new(device: AB::Device, channels_last: bool) -> Self {
        let model = model::<AB>(&device, 5.0);
        let layout = FlatLayout::of(&model);
        let config = DiffusionConfig { optimizer_weight_decay: 1e-3, ..DiffusionConfig::new() };
        let average = layout.gather_weights(&model.valid());
        let adam = FlatAdam::new(&config, layout, &device).with_channels_last_weights(channels_last);
        Self { adam, model: Some(model), average, device }
    }

    /// One update from the gradients `grads` (flat), clipped as step `time` is ([`clipping`]),
    /// keeping the average; returns the half-precision copies' bytes by parameter (with `copy`)
    /// and the clipping's norm and scale.
    fn step(&mut self, time: usize, grads: &[f32], copy: Option<FloatDType>) -> (Vec<Vec<u8>>, [f32; 2]) {
        let device = &self.device;
        let grads = Tensor::from_data(TensorData::new(grads.to_vec(), [grads.len()]), device);
        let model = self.model.take().unwrap();
        let clipping = clipping(time, device);
        let (model, copies, factors) =
            self.adam.step(model, grads, clipping, 1e-3, Some((&mut self.average, 0.25)), copy);
        let factors = [factors.norm, factors.scale].map(|t| t.into_scalar().elem::<f32>());
        let ids = [model.matrix.id, model.one.id, model.kernel.id, model.conv.id, model.bias.id];
        self.model = Some(model);
        let bytes = |id| {
            // In the parameter's shape where the copies are views (the convolution's lying
            // channels-last): read in that shape's order.
            let copy: FloatTensor<AB::InnerBackend> = copies[id].clone();
            let n = copy.shape().num_elements();
            let copy = Tensor::<AB::InnerBackend, 1>::from_primitive(TensorPrimitive::Float(
                <AB::InnerBackend as FloatTensorOps<AB::InnerBackend>>::float_reshape(copy, [n].into()),
            ));
            copy.into_data().as_bytes().to_vec()
        };
        (if copies.is_empty() { Vec::new() } else { ids.iter().map(bytes).collect() }, factors)
    }

    fn weights(&self) -> Vec<Vec<f32>> {
        read(&self.model.as_ref().unwrap().valid())
    }
}

/// The clipping of step `time`: a factor on odd steps; on even ones, partial squares that the
/// update totals and clips by itself where the weights are views (`Σ g² = 3.75`, carried twice,
/// clipped to 0.5: a norm of 0.968 and a scale of 0.258).
fn clipping<B: Kernels>(time: usize, device: &B::Device) -> Clipping<B> {
    let tensor = |values: Vec<f32>| Tensor::<B, 1>::from_data(TensorData::new(values.clone(), [values.len()]), device);
    if time % 2 == 1 {
        // The update reads the scale alone.
        ClipFactors { norm: tensor(vec![0.0]), scale: tensor(vec![0.37]) }.into()
    } else {
        let partials = tensor(vec![0.5, 1.25, 2.0]).into_primitive().tensor();
        Clipping::Squares(PartialSquares { partials, max_norm: 0.5, grad_scale: 2.0 })
    }
}

/// Four updates with an average, the second and fourth clipped by partial squares (in the
/// update's own launch on wgpu), the third with f16 copies: the wgpu model's weights (views of
/// one buffer, the convolution's lying channels-last or not) equal the CPU's after each to 1e-6, its copies are its weights cast, and a clone
/// of it bound by another optimiser before the update keeps the weights it had; then the
/// wgpu model's weights are replaced (as a broadcast from another replica replaces them): after
/// `bind` the next update starts from them, as the CPU's does.
fn weights_kept_as_views_are_updated_as_the_cpu_updates_each<Gpu: Kernels<Device = WgpuDevice>>(channels_last: bool) {
    let mut cpu = Run::<Autodiff<Flex>>::new(Default::default(), false);
    let mut gpu = Run::<Autodiff<Gpu>>::new(WgpuDevice::default(), channels_last);
    let len = cpu.adam.layout().len();
    assert_eq!(gpu.weights(), cpu.weights(), "the same model on both");
    for time in 1..=4 {
        let grads = values(len, 10.0 + time as f32);
        let copy = (time == 3).then_some(FloatDType::F16);
        // A clone of the bound model shares its weights; bound by another optimiser, it has its
        // own, which this step leaves alone.
        let before = gpu.weights();
        let clone = gpu.model.clone().unwrap();
        let clone = FlatAdam::new(&DiffusionConfig::new(), FlatLayout::of(&clone), &gpu.device).bind(clone);
        let (_, cpu_factors) = cpu.step(time, &grads, copy);
        let (copies, factors) = gpu.step(time, &grads, copy);
        for (name, ours, theirs) in [("norm", factors[0], cpu_factors[0]), ("scale", factors[1], cpu_factors[1])] {
            assert!(
                (ours - theirs).abs() <= 1e-6 * theirs.abs(),
                "step {time}, channels-last {channels_last}: the {name}, {ours} against {theirs}"
            );
        }
        if time % 2 == 0 {
            let expected = [3.75f32.sqrt() / 2.0, 0.5 / (3.75f32.sqrt() / 2.0 + 1e-6) / 2.0];
            assert!(
                factors.iter().zip(expected).all(|(a, b)| (a - b).abs() <= 1e-6 * b),
                "step {time}, channels-last {channels_last}: the factors {factors:?} computed by the update, against {expected:?}"
            );
        }
        assert_eq!(
            read(&clone.valid()),
            before,
            "step {time}, channels-last {channels_last}: a clone bound apart keeps its weights"
        );
        let (ours, theirs) = (gpu.weights(), cpu.weights());
        assert!(max_relative(&ours, &theirs) <= 1e-6, "step {time}, channels-last {channels_last}: the weights");
        assert!(max_relative(&ours, &read(&model::<Autodiff<Flex>>(&Default::default(), 5.0))) > 1e-3, "they moved");
        if copy.is_some() {
            let model = gpu.model.as_ref().unwrap().valid();
            let weights = [
                model.matrix.val().flatten(0, 1),
                model.one.val(),
                model.kernel.val().flatten(0, 2),
                model.conv.val().flatten(0, 3),
                model.bias.val(),
            ];
            for (i, (weights, copy)) in weights.into_iter().zip(&copies).enumerate() {
                let cast = weights.cast(FloatDType::F16);
                assert_eq!(cast.dtype(), DType::F16);
                assert_eq!(
                    &cast.into_data().as_bytes().to_vec(),
                    copy,
                    "step {time}, channels-last {channels_last}: parameter {i}'s copy"
                );
            }
        }
        if time == 3 {
            // One weight of each model replaced by new values (its parameter's id kept).
            let cpu_model = cpu.model.take().unwrap();
            cpu.model = Some(Weights { bias: replaced(&cpu_model.bias, &cpu.device), ..cpu_model });
            let gpu_model = gpu.model.take().unwrap();
            let gpu_model = Weights { bias: replaced(&gpu_model.bias, &gpu.device), ..gpu_model };
            gpu.model = Some(gpu.adam.bind(gpu_model));
        }
    }
}

#[test]
fn weights_kept_as_views_are_updated_as_the_cpu_updates_each_on_wgpu() {
    assert!(Direct::weight_view_alignment(&WgpuDevice::default()).is_some(), "cubecl's backends keep views");
    for channels_last in [false, true] {
        weights_kept_as_views_are_updated_as_the_cpu_updates_each::<Direct>(channels_last);
    }
}

#[test]
fn weights_kept_as_views_are_updated_as_the_cpu_updates_each_on_wgpu_with_fusion() {
    // burn's wgpu backend: fusion over cubecl's where the build has `kernels/gpu-fusion`.
    for channels_last in [false, true] {
        weights_kept_as_views_are_updated_as_the_cpu_updates_each::<burn::backend::Wgpu>(channels_last);
    }
}

#[test]
fn a_convolutions_weights_bound_channels_last_lie_as_cudnns_channels_last_kernels_read_them() {
    // `[6, 8, 3, 2]` lying `[6, 3, 2, 8]` (KRSC): strides `[48, 1, 16, 8]`, where in its own
    // order `[48, 6, 2, 1]`; its values, and every other parameter's, the same either way.
    let device = WgpuDevice::default();
    let model = model::<Autodiff<Direct>>(&device, 5.0);
    let before = read(&model.valid());
    for (channels_last, expected) in [(false, [48, 6, 2, 1]), (true, [48, 1, 16, 8])] {
        let adam = FlatAdam::new(&DiffusionConfig::new(), FlatLayout::of(&model), &device);
        let bound = adam.with_channels_last_weights(channels_last).bind(model.clone());
        let conv = bound.conv.val().inner().into_primitive().tensor();
        assert_eq!(&conv.meta.strides()[..], expected, "channels-last {channels_last}: the convolution's strides");
        let kernel = bound.kernel.val().inner().into_primitive().tensor();
        assert!(kernel.is_contiguous(), "channels-last {channels_last}: a 1-D convolution's weights lie as given");
        assert_eq!(read(&bound.valid()), before, "channels-last {channels_last}: the values");
    }
}
