//! `bench gpu-check`'s cuDNN checks (the `cudnn` feature): the convolutions of the step and the
//! U-Net's transposed ones, forward and both gradients, through cuDNN on cuda against Flex and
//! against burn's own cuda convolution, on fresh random inputs; and the stream ordering, a few
//! steps without host synchronisation against the same steps synchronised around every cuDNN
//! call.
//!
//! Tolerances, ‖a − b‖ / ‖b‖ against Flex: exact f32 (FMA kernels) 1e-5; TF32, as torch's
//! convolutions run by default, 3e-3; bf16 operands 2e-2.

use anyhow::{Result, ensure};
use burn::backend::Flex;
use burn::prelude::*;
use burn::tensor::module::{conv_transpose2d, conv2d};
use burn::tensor::ops::{ConvOptions, ConvTransposeOptions, ModuleOps};
use burn::tensor::{DType, Distribution, TensorPrimitive};
use kernels::ConvolutionKernels;

/// burn's untuned cuda backend, whose convolutions cuDNN runs.
type Cuda = burn::backend::Cuda<f32, i32>;

/// One convolution of the step: input shape, weight shape, options.
type Case = ([usize; 4], [usize; 4], ConvOptions<2>);

/// The ResNet-18 encoder's convolutions at PushT's 84x84 crops, batch 64, and the U-Net's 1-D
/// ones as height-1 2-D convolutions.
fn cases() -> Vec<Case> {
    let square = |stride, padding| ConvOptions::new([stride; 2], [padding; 2], [1, 1], 1);
    vec![
        ([64, 3, 84, 84], [64, 3, 7, 7], square(2, 3)),
        ([64, 64, 21, 21], [64, 64, 3, 3], square(1, 1)),
        ([64, 64, 21, 21], [128, 64, 3, 3], square(2, 1)),
        ([64, 64, 21, 21], [128, 64, 1, 1], square(2, 0)),
        ([64, 512, 3, 3], [512, 512, 3, 3], square(1, 1)),
        ([64, 2, 1, 16], [512, 2, 1, 5], ConvOptions::new([1, 1], [0, 2], [1, 1], 1)),
        ([64, 1024, 1, 8], [1024, 1024, 1, 5], ConvOptions::new([1, 1], [0, 2], [1, 1], 1)),
        ([64, 512, 1, 16], [512, 512, 1, 3], ConvOptions::new([1, 2], [0, 1], [1, 1], 1)),
    ]
}

/// The U-Net's transposed convolutions at PushT's horizon, batch 64, as height-1 2-D ones, and
/// a strided 2-D one with output padding: input shape, weight shape, options.
fn transposed_cases() -> Vec<([usize; 4], [usize; 4], ConvTransposeOptions<2>)> {
    let upsample = ConvTransposeOptions::new([1, 2], [0, 1], [0, 0], [1, 1], 1);
    vec![
        ([64, 1024, 1, 4], [1024, 1024, 1, 4], upsample.clone()),
        ([64, 512, 1, 8], [512, 512, 1, 4], upsample),
        ([8, 32, 9, 11], [32, 16, 3, 3], ConvTransposeOptions::new([2, 2], [1, 1], [1, 1], [1, 1], 1)),
    ]
}

fn relative(a: &[f32], b: &[f32]) -> f32 {
    let (mut diff, mut norm) = (0f64, 0f64);
    for (&x, &y) in a.iter().zip(b) {
        diff += f64::from(x - y).powi(2);
        norm += f64::from(y).powi(2);
    }
    if a.len() != b.len() || a.iter().any(|x| !x.is_finite()) {
        return f32::INFINITY;
    }
    (diff / norm.max(f64::MIN_POSITIVE)).sqrt() as f32
}

fn host<B: Backend>(tensor: FloatTensorOf<B>) -> Vec<f32> {
    Tensor::<B, 4>::from_primitive(TensorPrimitive::Float(tensor))
        .cast(DType::F32)
        .into_data()
        .to_vec()
        .unwrap_or_default()
}

type FloatTensorOf<B> = burn::tensor::ops::FloatTensor<B>;

fn on<B: Backend>(data: &TensorData, dtype: DType, device: &B::Device) -> FloatTensorOf<B> {
    Tensor::<B, 4>::from_data(data.clone(), device).cast(dtype).into_primitive().tensor()
}

/// The worst relative errors of each pass, against Flex and against burn's cuda convolution.
#[derive(Default)]
struct Worst {
    flex: [f32; 3],
    burn: [f32; 3],
}

impl Worst {
    /// Adds one case's three passes (`ours`, Flex's `reference`, burn's cuda `burns`), failing
    /// where one is beyond `tolerance` from Flex's.
    fn add(&mut self, case: &str, [ours, reference, burns]: [[Vec<f32>; 3]; 3], tolerance: f32) -> Result<()> {
        for pass in 0..3 {
            let error = relative(&ours[pass], &reference[pass]);
            ensure!(error <= tolerance, "{case}, pass {pass}: {error:.2e} from Flex (tolerance {tolerance:.0e})");
            self.flex[pass] = self.flex[pass].max(error);
            self.burn[pass] = self.burn[pass].max(relative(&ours[pass], &burns[pass]));
        }
        Ok(())
    }

    fn said(&self) -> String {
        let [flex, burn] = [self.flex, self.burn];
        format!(
            "worst relative error vs Flex {:.2e}, {:.2e}, {:.2e}; vs burn's cuda {:.2e}, {:.2e}, {:.2e}",
            flex[0], flex[1], flex[2], burn[0], burn[1], burn[2]
        )
    }
}

/// Random normal tensors of `input`'s and `weight`'s shapes, the weight scaled to keep outputs
/// near unit size over `fan_in` terms.
fn operands(input: [usize; 4], weight: [usize; 4], fan_in: usize) -> [Tensor<Flex, 4>; 2] {
    let normal = Distribution::Normal(0.0, 1.0);
    let cpu = Default::default();
    let x = Tensor::<Flex, 4>::random(input, normal, &cpu);
    let w = Tensor::<Flex, 4>::random(weight, normal, &cpu) / (fan_in as f64).sqrt();
    [x, w]
}

/// A case's operands (`x`, `w` and an output gradient `dy`) and Flex's three passes of them.
fn with_reference(
    input: [usize; 4],
    weight: [usize; 4],
    options: &ConvOptions<2>,
) -> ([Tensor<Flex, 4>; 3], [Vec<f32>; 3]) {
    let [x, w] = operands(input, weight, weight[1] * weight[2] * weight[3]);
    let y = conv2d(x.clone(), w.clone(), None, options.clone());
    let dy = Tensor::<Flex, 4>::random(y.dims(), Distribution::Normal(0.0, 1.0), &Default::default());
    let [xp, wp, dyp] = [&x, &w, &dy].map(|t| t.clone().into_primitive().tensor());
    let reference = [
        host::<Flex>(y.into_primitive().tensor()),
        host::<Flex>(Flex::conv2d_x_backward(xp.clone(), wp.clone(), dyp.clone(), options.clone())),
        host::<Flex>(Flex::conv2d_weight_backward(xp, wp, dyp, options.clone())),
    ];
    ([x, w, dy], reference)
}

/// `t` on cuda in `dtype`, lying channels-last in memory (a weight KRSC): the `[N, C, H, W]`
/// view of `[N, H, W, C]` values, as the encoder's maps are held with `LEROBOT_RS_CHANNELS_LAST=1`.
fn on_channels_last(t: Tensor<Flex, 4>, dtype: DType, device: &Device<Cuda>) -> FloatTensorOf<Cuda> {
    let lying = t.permute([0, 2, 3, 1]).into_data();
    Tensor::<Cuda, 4>::from_data(lying, device).cast(dtype).permute([0, 3, 1, 2]).into_primitive().tensor()
}

/// The 2-D cases' three passes through cuDNN on channels-last operands (cuDNN's NHWC and KRSC
/// descriptors, `kernels::cudnn::ConvLayout::Nhwc`) against Flex's f32: the worst relative error
/// of each pass.
pub fn check_channels_last(dtype: DType, tf32: bool) -> Result<String> {
    kernels::cudnn::status().as_ref().map_err(|why| anyhow::anyhow!("{why}"))?;
    let switched = kernels::channels_last_on();
    kernels::use_channels_last(true);
    let checked = channels_last_passes(dtype, tf32);
    kernels::use_channels_last(switched);
    checked
}

/// [`check_channels_last`]'s passes, with the switch on.
fn channels_last_passes(dtype: DType, tf32: bool) -> Result<String> {
    kernels::cudnn::allow_tf32(tf32);
    let tolerance = if dtype == DType::F32 && !tf32 {
        1e-5
    } else if dtype == DType::F32 {
        3e-3
    } else {
        2e-2
    };
    let cuda = Default::default();
    let mut worst = [0f32; 3];
    let two_d = cases().into_iter().filter(|(input, ..)| input[2] > 1);
    for (input, weight, options) in two_d {
        let ([x, w, dy], reference) = with_reference(input, weight, &options);
        let [xc, wc, dyc] = [x, w, dy].map(|t| on_channels_last(t, dtype, &cuda));
        let calls = kernels::cudnn::channels_last_calls();
        let ours = [
            host::<Cuda>(Cuda::conv2d_no_bias(xc.clone(), wc.clone(), options.clone())),
            host::<Cuda>(Cuda::conv2d_input_grad(xc.clone(), wc.clone(), dyc.clone(), options.clone())),
            host::<Cuda>(Cuda::conv2d_weight_grad(xc, wc, dyc, options.clone())),
        ];
        let ran = kernels::cudnn::channels_last_calls() - calls;
        ensure!(
            ran == 3,
            "channels-last {input:?} by {weight:?}: cuDNN ran {ran} of the 3 passes channels-last (see the log)"
        );
        for pass in 0..3 {
            let error = relative(&ours[pass], &reference[pass]);
            ensure!(error <= tolerance, "channels-last {input:?} by {weight:?}, pass {pass}: {error:.2e} from Flex");
            worst[pass] = worst[pass].max(error);
        }
    }
    kernels::cudnn::allow_tf32(true);
    Ok(format!(
        "cuDNN channels-last {dtype:?}{}: worst relative error vs Flex {:.2e}, {:.2e}, {:.2e} (tolerance {tolerance:.0e})",
        if tf32 { " (TF32 allowed)" } else { "" },
        worst[0],
        worst[1],
        worst[2]
    ))
}

/// What must have run the passes of [`check_convolutions`], beside any cuDNN algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expected {
    /// Any of cuDNN's algorithms.
    Cudnn,
    /// A plan of cuDNN's graph API, every pass (the search set to the graph API only).
    GraphPlans,
    /// cuBLAS's products for every pass of a 1-D convolution (height 1), cuDNN for the others
    /// (`kernels::cudnn::Conv1dPath::Cublas`).
    CublasFor1d,
}

/// Each case's three passes through cuDNN (`dtype`, TF32 allowed or not) against Flex's f32 and
/// burn's own cuda convolution, then the U-Net's transposed convolutions the same way; the
/// worst relative error of each pass, and that what was `expected` ran them.
pub fn check_convolutions(dtype: DType, tf32: bool, expected: Expected) -> Result<String> {
    kernels::cudnn::status().as_ref().map_err(|why| anyhow::anyhow!("{why}"))?;
    kernels::cudnn::allow_tf32(tf32);
    let tolerance = match (dtype, tf32) {
        (DType::F32, false) => 1e-5,
        (DType::F32, true) => 3e-3,
        _ => 2e-2,
    };
    let cuda = Default::default();
    let graph_calls = kernels::cudnn::graph_calls();
    let blas_calls = kernels::cudnn::blas_calls();
    let ran = || kernels::cudnn::calls() + kernels::cudnn::blas_calls();
    let (mut worst, mut worst_transposed) = (Worst::default(), Worst::default());
    for (input, weight, options) in cases() {
        let ([x, w, dy], reference) = with_reference(input, weight, &options);
        let [xc, wc, dyc] = [x, w, dy].map(|t| on::<Cuda>(&t.into_data(), dtype, &cuda));
        let calls = ran();
        let ours = [
            host::<Cuda>(Cuda::conv2d_no_bias(xc.clone(), wc.clone(), options.clone())),
            host::<Cuda>(Cuda::conv2d_input_grad(xc.clone(), wc.clone(), dyc.clone(), options.clone())),
            host::<Cuda>(Cuda::conv2d_weight_grad(xc.clone(), wc.clone(), dyc.clone(), options.clone())),
        ];
        let ran = ran() - calls;
        ensure!(ran == 3, "{input:?} by {weight:?}: cuDNN or cuBLAS ran {ran} of the 3 passes (see the log for why)");
        let burns = [
            host::<Cuda>(Cuda::conv2d(xc.clone(), wc.clone(), None, options.clone())),
            host::<Cuda>(Cuda::conv2d_x_backward(xc.clone(), wc.clone(), dyc.clone(), options.clone())),
            host::<Cuda>(Cuda::conv2d_weight_backward(xc, wc, dyc, options.clone())),
        ];
        worst.add(&format!("{input:?} by {weight:?} {options:?}"), [ours, reference, burns], tolerance)?;
    }
    for (input, weight, options) in transposed_cases() {
        let [x, w] = operands(input, weight, weight[0] * weight[2] * weight[3]);
        let y = conv_transpose2d(x.clone(), w.clone(), None, options.clone());
        let dy = Tensor::<Flex, 4>::random(y.dims(), Distribution::Normal(0.0, 1.0), &Default::default());
        let [xp, wp, dyp] = [&x, &w, &dy].map(|t| t.clone().into_primitive().tensor());
        let reference = [
            host::<Flex>(y.into_primitive().tensor()),
            host::<Flex>(Flex::conv_transpose2d_x_backward(wp.clone(), dyp.clone(), options.clone())),
            host::<Flex>(Flex::conv_transpose2d_weight_backward(xp, wp, dyp, options.clone())),
        ];
        let [xc, wc, dyc] = [x, w, dy].map(|t| on::<Cuda>(&t.into_data(), dtype, &cuda));
        let calls = ran();
        let ours = [
            host::<Cuda>(Cuda::conv_transpose2d_no_bias(xc.clone(), wc.clone(), options.clone())),
            host::<Cuda>(Cuda::conv_transpose2d_input_grad(wc.clone(), dyc.clone(), options.clone())),
            host::<Cuda>(Cuda::conv_transpose2d_weight_grad(xc.clone(), wc.clone(), dyc.clone(), options.clone())),
        ];
        let ran = ran() - calls;
        ensure!(
            ran == 3,
            "transposed {input:?} by {weight:?}: cuDNN or cuBLAS ran {ran} of the 3 passes (see the log)"
        );
        let burns = [
            host::<Cuda>(Cuda::conv_transpose2d(xc.clone(), wc.clone(), None, options.clone())),
            host::<Cuda>(Cuda::conv_transpose2d_x_backward(wc.clone(), dyc.clone(), options.clone())),
            host::<Cuda>(Cuda::conv_transpose2d_weight_backward(xc, wc, dyc, options.clone())),
        ];
        let case = format!("transposed {input:?} by {weight:?} {options:?}");
        worst_transposed.add(&case, [ours, reference, burns], tolerance)?;
    }
    kernels::cudnn::allow_tf32(true);
    let passes = 3 * (cases().len() + transposed_cases().len());
    let by_graph = kernels::cudnn::graph_calls() - graph_calls;
    ensure!(
        expected != Expected::GraphPlans || by_graph == passes as u64,
        "the graph API's plans ran {by_graph} of the {passes} passes (the log says why not the others)"
    );
    let one_d = cases().iter().filter(|(input, ..)| input[2] == 1).count()
        + transposed_cases().iter().filter(|(input, ..)| input[2] == 1).count();
    let by_blas = kernels::cudnn::blas_calls() - blas_calls;
    ensure!(
        expected != Expected::CublasFor1d || by_blas == 3 * one_d as u64,
        "cuBLAS's products ran {by_blas} of the {} passes of 1-D convolutions (the log says why not the others)",
        3 * one_d
    );
    Ok(format!(
        "cuDNN {dtype:?}{} (tolerance {tolerance:.0e} vs Flex; output, input grad, weight grad): {} convolutions, {}; \
         {} transposed, {}; {} of the {passes} passes by the graph API's plans, {by_blas} by cuBLAS's products",
        if dtype == DType::F32 { if tf32 { " (TF32)" } else { " (exact)" } } else { "" },
        cases().len(),
        worst.said(),
        transposed_cases().len(),
        worst_transposed.said(),
        by_graph,
    ))
}
