//! `bench gpu-check`'s cuDNN checks (the `cudnn` feature): the convolutions of the step, forward
//! and both gradients, through cuDNN on cuda against Flex and against burn's own cuda
//! convolution, on fresh random inputs; and the stream ordering, a few steps without host
//! synchronisation against the same steps synchronised around every cuDNN call.
//!
//! Tolerances, ‖a − b‖ / ‖b‖ against Flex: exact f32 (FMA kernels) 1e-5; TF32, as torch's
//! convolutions run by default, 3e-3; bf16 operands 2e-2.

use anyhow::{Result, ensure};
use burn::backend::Flex;
use burn::prelude::*;
use burn::tensor::module::conv2d;
use burn::tensor::ops::{ConvOptions, ModuleOps};
use burn::tensor::{DType, Distribution, TensorPrimitive};
use kernels::Kernels;

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

/// Each case's three passes through cuDNN (`dtype`, TF32 allowed or not) against Flex's f32 and
/// burn's own cuda convolution; the worst relative error of each pass.
pub fn check_convolutions(dtype: DType, tf32: bool) -> Result<String> {
    kernels::cudnn::status().as_ref().map_err(|why| anyhow::anyhow!("{why}"))?;
    kernels::cudnn::allow_tf32(tf32);
    let tolerance = match (dtype, tf32) {
        (DType::F32, false) => 1e-5,
        (DType::F32, true) => 3e-3,
        _ => 2e-2,
    };
    let cuda = Default::default();
    let cpu = Default::default();
    let mut worst = [0f32; 3];
    let mut worst_burn = [0f32; 3];
    for (input, weight, options) in cases() {
        let normal = Distribution::Normal(0.0, 1.0);
        let x = Tensor::<Flex, 4>::random(input, normal, &cpu);
        let w = Tensor::<Flex, 4>::random(weight, normal, &cpu) / ((weight[1] * weight[2] * weight[3]) as f64).sqrt();
        let y = conv2d(x.clone(), w.clone(), None, options.clone());
        let dy = Tensor::<Flex, 4>::random(y.dims(), normal, &cpu);
        let (xp, wp, dyp) = (
            x.clone().into_primitive().tensor(),
            w.clone().into_primitive().tensor(),
            dy.clone().into_primitive().tensor(),
        );
        let reference = [
            host::<Flex>(y.into_primitive().tensor()),
            host::<Flex>(<Flex as ModuleOps<Flex>>::conv2d_x_backward(
                xp.clone(),
                wp.clone(),
                dyp.clone(),
                options.clone(),
            )),
            host::<Flex>(<Flex as ModuleOps<Flex>>::conv2d_weight_backward(xp, wp, dyp, options.clone())),
        ];
        let (x, w, dy) = (x.into_data(), w.into_data(), dy.into_data());
        let (xc, wc, dyc) = (on::<Cuda>(&x, dtype, &cuda), on::<Cuda>(&w, dtype, &cuda), on::<Cuda>(&dy, dtype, &cuda));
        let calls = kernels::cudnn::calls();
        let ours = [
            host::<Cuda>(Cuda::conv2d_no_bias(xc.clone(), wc.clone(), options.clone())),
            host::<Cuda>(Cuda::conv2d_input_grad(xc.clone(), wc.clone(), dyc.clone(), options.clone())),
            host::<Cuda>(Cuda::conv2d_weight_grad(xc.clone(), wc.clone(), dyc.clone(), options.clone())),
        ];
        let ran = kernels::cudnn::calls() - calls;
        ensure!(ran == 3, "{input:?} by {weight:?}: cuDNN ran {ran} of the 3 passes (see the log for why)");
        let burns = [
            host::<Cuda>(<Cuda as ModuleOps<Cuda>>::conv2d(xc.clone(), wc.clone(), None, options.clone())),
            host::<Cuda>(<Cuda as ModuleOps<Cuda>>::conv2d_x_backward(
                xc.clone(),
                wc.clone(),
                dyc.clone(),
                options.clone(),
            )),
            host::<Cuda>(<Cuda as ModuleOps<Cuda>>::conv2d_weight_backward(xc, wc, dyc, options.clone())),
        ];
        for pass in 0..3 {
            let error = relative(&ours[pass], &reference[pass]);
            ensure!(
                error <= tolerance,
                "{input:?} by {weight:?} {options:?}, pass {pass}: {error:.2e} from Flex (tolerance {tolerance:.0e})"
            );
            worst[pass] = worst[pass].max(error);
            worst_burn[pass] = worst_burn[pass].max(relative(&ours[pass], &burns[pass]));
        }
    }
    kernels::cudnn::allow_tf32(true);
    Ok(format!(
        "cuDNN {dtype:?}{} convolutions ({} cases): worst relative error vs Flex output {:.2e}, input grad {:.2e}, \
         weight grad {:.2e} (tolerance {tolerance:.0e}); vs burn's cuda convolution {:.2e}, {:.2e}, {:.2e}",
        if dtype == DType::F32 { if tf32 { " (TF32)" } else { " (exact)" } } else { "" },
        cases().len(),
        worst[0],
        worst[1],
        worst[2],
        worst_burn[0],
        worst_burn[1],
        worst_burn[2],
    ))
}
