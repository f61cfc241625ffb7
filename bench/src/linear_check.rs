//! `bench gpu-check`'s check of the Linear layers' products in cuBLAS (`LEROBOT_RS_LINEAR=cublas`,
//! `kernels::cudnn::LinearPath`): PushT's Linear shapes at batch 64 (the U-Net's FiLM
//! conditions, its step embedding, the encoder's keypoint projection), forward and the three
//! gradients through autodiff ([`kernels::linear`]), against Flex's f32 and burn's own product
//! on cuda. Tolerances as the convolutions' (`cudnn_check.rs`): exact f32 1e-5, TF32 3e-3, bf16
//! 2e-2.

use anyhow::{Result, anyhow, ensure};
use burn::backend::{Autodiff, Flex};
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{DType, Distribution};
use kernels::ConvolutionKernels;
use kernels::cudnn::{LinearPath, linear_path, product_calls, use_linear};

/// burn's untuned cuda backend, whose products cuBLAS runs here.
type Cuda = burn::backend::Cuda<f32, i32>;

/// `[rows, inputs, outputs]`: PushT's FiLM conditions (260 = the step's 128-wide embedding and
/// two observations' 66 features) to 2 × 512, 1024 and 2048 channels, the step embedding's two
/// layers, the encoder's 64 keypoint coordinates for 2 × 64 images.
const CASES: [[usize; 3]; 6] =
    [[64, 260, 1024], [64, 260, 2048], [64, 260, 4096], [64, 128, 512], [64, 512, 128], [128, 64, 64]];

/// `linear(x, w, b)`'s output and its gradients for `x`, `w` and `b` under the loss `Σ y·g`, on
/// `B` in `dtype`, read back as f32.
fn passes<B: AutodiffBackend + ConvolutionKernels>(
    [x, w, b, g]: &[TensorData; 4],
    dtype: DType,
    device: &B::Device,
) -> Result<[Vec<f32>; 4]> {
    let leaf = |data: &TensorData| Tensor::<B, 2>::from_data(data.clone(), device).cast(dtype).require_grad();
    let (x, w) = (leaf(x), leaf(w));
    let b = Tensor::<B, 1>::from_data(b.clone(), device).cast(dtype).require_grad();
    let y = kernels::linear(x.clone(), w.clone(), Some(b.clone()));
    let g = Tensor::<B, 2>::from_data(g.clone(), device).cast(dtype);
    let grads = (y.clone() * g).sum().backward();
    let host = |t: Tensor<B::InnerBackend, 2>| t.cast(DType::F32).into_data().to_vec::<f32>().unwrap_or_default();
    let gradient =
        |t: Option<Tensor<B::InnerBackend, 2>>, of: &str| t.map(host).ok_or_else(|| anyhow!("no gradient for {of}"));
    Ok([
        host(y.inner()),
        gradient(x.grad(&grads), "the input")?,
        gradient(w.grad(&grads), "the weight")?,
        gradient(b.grad(&grads).map(Tensor::unsqueeze), "the bias")?,
    ])
}

/// ‖a − b‖ / ‖b‖ (infinite where they differ in length or `a` is not finite).
fn relative(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() || a.iter().any(|x| !x.is_finite()) {
        return f32::INFINITY;
    }
    let (mut diff, mut norm) = (0f64, 0f64);
    for (&x, &y) in a.iter().zip(b) {
        diff += f64::from(x - y).powi(2);
        norm += f64::from(y).powi(2);
    }
    (diff / norm.max(f64::MIN_POSITIVE)).sqrt() as f32
}

/// Each case's output and gradients with the products in cuBLAS (`dtype`, TF32 allowed or not),
/// synchronised around every call, against Flex's f32 and burn's cuda product: the worst
/// relative error of each, and that cuBLAS ran the three products of every case.
pub fn check_linear(dtype: DType, tf32: bool) -> Result<String> {
    kernels::cudnn::status().as_ref().map_err(|why| anyhow!("{why}"))?;
    let before = linear_path();
    kernels::cudnn::allow_tf32(tf32);
    kernels::cudnn::synchronise_every_call(true);
    let checked = linear_cases(dtype, tf32);
    kernels::cudnn::synchronise_every_call(false);
    kernels::cudnn::allow_tf32(true);
    use_linear(before);
    checked
}

/// [`check_linear`]'s cases.
fn linear_cases(dtype: DType, tf32: bool) -> Result<String> {
    let tolerance = match (dtype, tf32) {
        (DType::F32, false) => 1e-5,
        (DType::F32, true) => 3e-3,
        _ => 2e-2,
    };
    let (cpu, cuda) = (Default::default(), Default::default());
    let normal = Distribution::Normal(0.0, 1.0);
    let (mut worst, mut worst_burn) = ([0f32; 4], [0f32; 4]);
    for [rows, inputs, outputs] in CASES {
        let random =
            |shape: Vec<usize>, scale: f64| (Tensor::<Flex, 2>::random(shape, normal, &cpu) * scale).into_data();
        let data = [
            random(vec![rows, inputs], 1.0),
            random(vec![inputs, outputs], 1.0 / (inputs as f64).sqrt()),
            Tensor::<Flex, 1>::random([outputs], normal, &cpu).into_data(),
            random(vec![rows, outputs], 1.0),
        ];
        let reference = passes::<Autodiff<Flex>>(&data, DType::F32, &cpu)?;
        use_linear(LinearPath::Burn);
        let burns = passes::<Autodiff<Cuda>>(&data, dtype, &cuda)?;
        use_linear(LinearPath::Cublas);
        ensure!(Cuda::has_matrix_products(dtype), "cuBLAS does not take {dtype:?} products (see the log)");
        let calls = product_calls();
        let ours = passes::<Autodiff<Cuda>>(&data, dtype, &cuda)?;
        let ran = product_calls() - calls;
        ensure!(ran == 3, "[{rows}, {inputs}] by [{inputs}, {outputs}]: cuBLAS ran {ran} of the 3 products");
        for (pass, name) in ["output", "input gradient", "weight gradient", "bias gradient"].iter().enumerate() {
            let error = relative(&ours[pass], &reference[pass]);
            ensure!(
                error <= tolerance,
                "[{rows}, {inputs}] by [{inputs}, {outputs}], {name}: {error:.2e} from Flex (tolerance {tolerance:.0e})"
            );
            worst[pass] = worst[pass].max(error);
            worst_burn[pass] = worst_burn[pass].max(relative(&ours[pass], &burns[pass]));
        }
    }
    let said = |errors: [f32; 4]| errors.map(|e| format!("{e:.2e}")).join(", ");
    Ok(format!(
        "cuBLAS Linear products {dtype:?}{}: worst relative error (output, input, weight, bias gradients) vs Flex {}; \
         vs burn's cuda {} (tolerance {tolerance:.0e})",
        if tf32 { " (TF32 allowed)" } else { "" },
        said(worst),
        said(worst_burn)
    ))
}
