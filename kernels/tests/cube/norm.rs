//! GroupNorm with its activation and FiLM against the CPU and burn, forward and backward, in f32
//! and half precision.

use burn::backend::Flex;
use burn::backend::wgpu::WgpuDevice;
use burn::prelude::*;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{DType, FloatDType, TensorMetadata};
use kernels::{Kernels, NormKernels};

use super::WgpuKernels;
use super::support::{bytes, half_dtypes, max_error_relative_to_largest, primitive, primitive_3d, read_any, values};

/// `values` of `[N, C, S]` (in that order) as a GPU tensor of that shape lying channels-last in
/// memory: `[N, S, C]` contiguous, permuted.
fn channels_last<B: Backend>(values: &[f32], [n, c, s]: [usize; 3], device: &B::Device) -> FloatTensor<B> {
    let mut lying = vec![0.0; values.len()];
    for (at, value) in values.iter().enumerate() {
        let (sample, channel, position) = (at / (c * s), at / s % c, at % s);
        lying[(sample * s + position) * c + channel] = *value;
    }
    B::float_permute(primitive_3d::<B>(lying, [n, s, c], device), &[0, 2, 1])
}

/// GroupNorm with each activation, over groups smaller and larger than a cube's units and over
/// channels whose scale and shift gradients spread over several cubes each (four channels of
/// 16,384 values: eight cubes a channel, then their sums added): the kernels' output and
/// statistics (one launch), and input, scale and shift gradients (two launches, three where
/// the channels take several cubes, from each backend's own statistics), equal the CPU's fused
/// passes (sums in f64) to 1e-5 of the largest value; with the input and the output's gradient
/// channels-first, both channels-last (the encoder's layout for cuDNN's tensor cores), and the
/// input channels-last under a channels-first gradient.
pub(crate) fn the_group_norm_kernels_equal_the_cpus<Gpu: WgpuKernels>() {
    use kernels::Activation;
    let gpu = WgpuDevice::default();
    let cpu = Default::default();
    // ([N, C, S], groups)
    let shapes = [([3, 32, 50], 8), ([2, 64, 300], 8), ([4, 6, 3], 3), ([1, 2048, 4], 8), ([4, 4, 4096], 2)];
    // (the input channels-last, the output's gradient channels-last)
    let layouts = [(false, false), (true, true), (true, false)];
    for ((shape @ [n, c, s], groups), (x_last, dy_last)) in shapes.into_iter().flat_map(|s| layouts.map(|l| (s, l))) {
        let lying = |last: bool, values: &[f32]| match last {
            true => channels_last::<Gpu>(values, shape, &WgpuDevice::default()),
            false => primitive_3d::<Gpu>(values.to_vec(), shape, &WgpuDevice::default()),
        };
        for activation in [Activation::Identity, Activation::Relu, Activation::Mish] {
            let x: Vec<f32> = values(n * c * s, 5.0).iter().map(|v| v * 6.0 + 0.5).collect();
            let gamma: Vec<f32> = values(c, 6.0).iter().map(|v| 1.0 + v).collect();
            let beta = values(c, 7.0);
            let dy = values(n * c * s, 8.0);
            let cpu_inputs = || {
                [
                    primitive_3d::<Flex>(x.clone(), shape, &cpu),
                    primitive::<Flex>(gamma.clone(), &cpu),
                    primitive::<Flex>(beta.clone(), &cpu),
                ]
            };
            let gpu_inputs =
                || [lying(x_last, &x), primitive::<Gpu>(gamma.clone(), &gpu), primitive::<Gpu>(beta.clone(), &gpu)];
            let [x_cpu, gamma_cpu, beta_cpu] = cpu_inputs();
            let (y_cpu, stats_cpu) =
                Flex::group_norm_forward(x_cpu, gamma_cpu, beta_cpu, groups, 1e-5, activation).expect("Flex's pass");
            let [x_gpu, gamma_gpu, beta_gpu] = gpu_inputs();
            let (y_gpu, stats_gpu) = Gpu::group_norm_forward(x_gpu, gamma_gpu, beta_gpu, groups, 1e-5, activation)
                .expect("the kernel takes f32 GroupNorm");
            let [x_cpu, gamma_cpu, beta_cpu] = cpu_inputs();
            let expected = Flex::group_norm_backward(
                x_cpu,
                [gamma_cpu, beta_cpu],
                stats_cpu.clone(),
                primitive_3d::<Flex>(dy.clone(), shape, &cpu),
                groups,
                activation,
            );
            let [x_gpu, gamma_gpu, beta_gpu] = gpu_inputs();
            let got = Gpu::group_norm_backward(
                x_gpu,
                [gamma_gpu, beta_gpu],
                stats_gpu.clone(),
                lying(dy_last, &dy),
                groups,
                activation,
            );
            let case =
                format!("[{n}, {c}, {s}] in {groups} groups, {activation:?}, channels-last x {x_last} dy {dy_last}");
            let pairs = [("output", y_gpu, y_cpu), ("statistics", stats_gpu, stats_cpu)]
                .into_iter()
                .chain(["dx", "dγ", "dβ"].into_iter().zip(got).zip(expected).map(|((name, a), b)| (name, a, b)));
            for (name, on_gpu, on_cpu) in pairs {
                let error = max_error_relative_to_largest(&read_any::<Gpu>(on_gpu), &read_any::<Flex>(on_cpu));
                assert!(error < 1e-5, "{case}: {name} {error:e} apart");
            }
        }
    }
}

/// GroupNorm on a half-precision input (a mixed-precision forward's), read and written in its
/// dtype: the output, statistics and gradients equal, to the bit, those of the same kernels on
/// the input cast up to f32, with the output and the input's gradient cast back down (what the
/// model computed before, with a cast launch on each side forward and backward).
pub(crate) fn group_norm_in_half_precision_equals_casting_around_it<Gpu: WgpuKernels>() {
    use kernels::Activation;
    let gpu = WgpuDevice::default();
    let half = |t: FloatTensor<Gpu>, dtype: FloatDType| Gpu::float_cast(t, dtype);
    let up = |t: FloatTensor<Gpu>| Gpu::float_cast(t, FloatDType::F32);
    for dtype in half_dtypes::<Gpu>(&gpu) {
        for (shape @ [n, c, s], groups) in [([3, 32, 50], 8), ([2, 64, 300], 8)] {
            for activation in [Activation::Identity, Activation::Mish] {
                let x = || half(primitive_3d::<Gpu>(values(n * c * s, 5.0), shape, &gpu), dtype);
                let dy = || half(primitive_3d::<Gpu>(values(n * c * s, 8.0), shape, &gpu), dtype);
                let gamma = || primitive::<Gpu>(values(c, 6.0).iter().map(|v| 1.0 + v).collect(), &gpu);
                let beta = || primitive::<Gpu>(values(c, 7.0), &gpu);
                let case = format!("{dtype:?} [{n}, {c}, {s}], {activation:?}");

                let (y, stats) = Gpu::group_norm_forward(x(), gamma(), beta(), groups, 1e-5, activation)
                    .unwrap_or_else(|| panic!("{case}: the kernel takes a half-precision input"));
                assert_eq!(y.dtype(), DType::from(dtype), "{case}: the output's dtype");
                let (y_f32, stats_f32) =
                    Gpu::group_norm_forward(up(x()), gamma(), beta(), groups, 1e-5, activation).expect("f32");
                assert_eq!(bytes::<Gpu>(&y), bytes::<Gpu>(&half(y_f32, dtype)), "{case}: output");
                assert_eq!(read_any::<Gpu>(stats.clone()), read_any::<Gpu>(stats_f32.clone()), "{case}: statistics");

                let [dx, dgamma, dbeta] =
                    Gpu::group_norm_backward(x(), [gamma(), beta()], stats, dy(), groups, activation);
                let [dx_f32, dgamma_f32, dbeta_f32] =
                    Gpu::group_norm_backward(up(x()), [gamma(), beta()], stats_f32, up(dy()), groups, activation);
                assert_eq!(dx.dtype(), DType::from(dtype), "{case}: dx's dtype");
                assert_eq!(bytes::<Gpu>(&dx), bytes::<Gpu>(&half(dx_f32, dtype)), "{case}: dx");
                assert_eq!(read_any::<Gpu>(dgamma), read_any::<Gpu>(dgamma_f32), "{case}: dγ");
                assert_eq!(read_any::<Gpu>(dbeta), read_any::<Gpu>(dbeta_f32), "{case}: dβ");
            }
        }
    }
}

/// FiLM in half precision (a mixed-precision forward's): the kernels take f16 (and bf16 where
/// the device has it) and answer in that dtype. The gradients equal, to the bit, the f32
/// kernels' on the same values cast back down (products of two half-precision values are exact
/// in f32, and the sums accumulate in f32 in the same order); the output, computed in the half
/// precision as torch's autocast computes it, within one rounding of it.
pub(crate) fn film_in_half_precision_equals_the_f32_kernels<Gpu: WgpuKernels>() {
    let gpu = WgpuDevice::default();
    let [b, c, t] = [3, 40, 16];
    let up = |t: FloatTensor<Gpu>| Gpu::float_cast(t, FloatDType::F32);
    for dtype in half_dtypes::<Gpu>(&gpu) {
        let half = |values: Vec<f32>, shape: &[usize]| {
            let n = values.len();
            let t = Tensor::<Gpu, 1>::from_data(TensorData::new(values, [n]), &gpu).cast(dtype);
            Gpu::float_reshape(t.into_primitive().tensor(), shape.to_vec().into())
        };
        let x = || half(values(b * c * t, 1.0), &[b, c, t]);
        let embedding = || half(values(b * 2 * c, 2.0).iter().map(|v| 2.0 * v).collect(), &[b, 2 * c]);
        let dy = || half(values(b * c * t, 3.0), &[b, c, t]);

        let y = Gpu::film_forward(x(), embedding()).unwrap_or_else(|| panic!("{dtype:?}: the kernel takes it"));
        assert_eq!(y.dtype(), DType::from(dtype));
        let y_f32 = Gpu::film_forward(up(x()), up(embedding())).expect("f32");
        let error = max_error_relative_to_largest(&read_any::<Gpu>(up(y)), &read_any::<Gpu>(y_f32));
        let one_rounding = if dtype == FloatDType::F16 { 1e-3 } else { 8e-3 };
        assert!(error <= one_rounding, "{dtype:?}: output {error:e} apart");

        let [dx, de] = Gpu::film_backward(x(), embedding(), dy());
        let [dx_f32, de_f32] = Gpu::film_backward(up(x()), up(embedding()), up(dy()));
        for (name, got, f32s) in [("dx", dx, dx_f32), ("d_embedding", de, de_f32)] {
            assert_eq!(got.dtype(), DType::from(dtype), "{dtype:?}: {name}'s dtype");
            assert_eq!(bytes::<Gpu>(&got), bytes::<Gpu>(&Gpu::float_cast(f32s, dtype)), "{dtype:?}: {name}");
        }
    }
}

/// FiLM (`[B, C, T]` scaled and shifted by `[B, 2C]`) through `kernels::film` under autodiff:
/// on the GPU its kernels (one launch forward, one backward), on the CPU burn's operations and
/// burn's autodiff. The output and both gradients agree to 1e-6 of the largest value.
pub(crate) fn the_film_kernels_equal_burns_operations_and_their_gradients<Gpu: WgpuKernels>() {
    use burn::backend::Autodiff;

    /// The output, and the gradients of `Σ y·dy` with respect to `x` and `embedding`.
    fn run<B: Kernels>(
        x: &[f32],
        embedding: &[f32],
        dy: &[f32],
        [b, c, t]: [usize; 3],
        device: &B::Device,
    ) -> [Vec<f32>; 3] {
        let x = Tensor::<Autodiff<B>, 1>::from_data(TensorData::new(x.to_vec(), [b * c * t]), device)
            .reshape([b, c, t])
            .require_grad();
        let embedding = Tensor::<Autodiff<B>, 1>::from_data(TensorData::new(embedding.to_vec(), [b * 2 * c]), device)
            .reshape([b, 2 * c])
            .require_grad();
        let dy =
            Tensor::<Autodiff<B>, 1>::from_data(TensorData::new(dy.to_vec(), [b * c * t]), device).reshape([b, c, t]);
        let y = kernels::film(x.clone(), embedding.clone());
        let grads = (y.clone() * dy).sum().backward();
        let flat = |tensor: Tensor<B, 3>| tensor.reshape([b * c * t]).into_data().to_vec::<f32>().unwrap();
        let dx = x.grad(&grads).expect("x's gradient");
        let de = embedding.grad(&grads).expect("the embedding's gradient").reshape([b * 2 * c]);
        [flat(y.inner()), flat(dx), de.into_data().to_vec().unwrap()]
    }

    let gpu = WgpuDevice::default();
    for shape @ [b, c, t] in [[2, 8, 16], [3, 512, 4], [1, 5, 1]] {
        let x = values(b * c * t, 1.0);
        let embedding: Vec<f32> = values(b * 2 * c, 2.0).iter().map(|v| v * 3.0).collect();
        let dy = values(b * c * t, 3.0);
        let on_gpu = run::<Gpu>(&x, &embedding, &dy, shape, &gpu);
        let on_cpu = run::<Flex>(&x, &embedding, &dy, shape, &Default::default());
        for (name, (got, expected)) in ["output", "dx", "d_embedding"].into_iter().zip(on_gpu.iter().zip(&on_cpu)) {
            let error = max_error_relative_to_largest(got, expected);
            assert!(error < 1e-6, "[{b}, {c}, {t}]: {name} {error:e} apart");
        }
    }
}
