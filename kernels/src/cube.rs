//! The GPU backends' fused optimiser update: one cubecl kernel per parameter, where the portable
//! version is some twenty of burn's operations (three of them range assignments into the flat
//! buffers), each its own kernel launch without burn's fusion.
//!
//! It applies to burn's cubecl backends without fusion (the `cuda-untuned` and `wgpu-untuned`
//! builds); with fusion on, the backends are burn's `Fusion` over these and keep the portable
//! version, whose elementwise chain fusion compiles into few kernels.
#![expect(unsafe_code, reason = "cubecl launches a kernel without bounds checks only through unsafe")]

use burn::tensor::ops::FloatTensor;
use burn::tensor::{DType, TensorMetadata};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{BoolElement, CubeBackend, CubeRuntime, FloatElement, IntElement};
use cubecl::prelude::*;
use cubecl::{CubeDim, calculate_cube_count_elemwise};

use crate::{AdamStep, FlatBuffers, Kernels, portable};

/// The update's scalars ([`crate::AdamConstants`], the average's weight) and the parameter's offset in
/// the flat buffers.
#[derive(CubeLaunch, CubeType)]
struct AdamScalars {
    weight_decay: f32,
    one_minus_beta_1: f32,
    beta_2: f32,
    one_minus_beta_2: f32,
    bias_correction_2_sqrt: f32,
    epsilon: f32,
    step_size: f32,
    ema_weight: f32,
    offset: usize,
}

/// One weight per unit: `updated[i]` from `weights[i]` and the flat buffers' element
/// `offset + i`, in [`AdamStep`]'s (torch's) order of operations, the decay added only where
/// there is one (as the CPU's pass and the portable operations do); the moments and, when
/// `has_average`, the average are updated in place.
#[cube(launch_unchecked)]
#[expect(clippy::too_many_arguments, reason = "a kernel's buffers are its arguments")]
fn adam_kernel<F: Float>(
    weights: &Tensor<F>,
    grads: &Tensor<F>,
    moment_1: &mut Tensor<F>,
    moment_2: &mut Tensor<F>,
    average: &mut Tensor<F>,
    scale: &Tensor<F>,
    updated: &mut Tensor<F>,
    scalars: &AdamScalars,
    #[comptime] has_weight_decay: bool,
    #[comptime] has_average: bool,
    #[define(F)] _dtype: StorageType,
) {
    let i = ABSOLUTE_POS;
    if i >= updated.len() {
        terminate!();
    }
    let j = scalars.offset + i;
    let w = weights[i];
    let mut g = grads[j] * scale[0];
    if has_weight_decay {
        g += w * F::cast_from(scalars.weight_decay);
    }
    let m = moment_1[j] + (g - moment_1[j]) * F::cast_from(scalars.one_minus_beta_1);
    let v = moment_2[j] * F::cast_from(scalars.beta_2) + g * F::cast_from(scalars.one_minus_beta_2) * g;
    let denominator = F::sqrt(v) / F::cast_from(scalars.bias_correction_2_sqrt) + F::cast_from(scalars.epsilon);
    let w = w + m / denominator * -F::cast_from(scalars.step_size);
    moment_1[j] = m;
    moment_2[j] = v;
    updated[i] = w;
    if has_average {
        let ema = F::cast_from(scalars.ema_weight);
        if ema >= F::new(1.0) {
            average[j] = w;
        } else {
            average[j] = average[j] + (w - average[j]) * ema;
        }
    }
}

/// A tensor whose buffer this call may write: the tensor itself when no other handle shares it
/// and it is contiguous, else a contiguous copy.
fn writable<R: CubeRuntime>(tensor: CubeTensor<R>) -> CubeTensor<R> {
    if tensor.can_mut() && tensor.is_contiguous() { tensor } else { tensor.copy() }
}

impl<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement> Kernels for CubeBackend<R, F, I, BT> {
    fn adam_update(
        weights: FloatTensor<Self>,
        flat: &mut FlatBuffers<Self>,
        offset: usize,
        scale: &FloatTensor<Self>,
        step: &AdamStep,
    ) -> FloatTensor<Self> {
        // The kernel reads and writes without bounds checks: every flat buffer must hold the
        // parameter's range, in f32, and the scale its one value; anything else takes the
        // portable operations (and their errors).
        let len = weights.meta.num_elements();
        let holds_range = |t: &CubeTensor<R>| t.dtype == DType::F32 && t.meta.num_elements() >= offset + len;
        let fits = len > 0
            && weights.dtype == DType::F32
            && scale.dtype == DType::F32
            && scale.meta.num_elements() >= 1
            && [&flat.grads, &flat.moment_1, &flat.moment_2].into_iter().chain(flat.average.as_ref()).all(holds_range);
        if !fits {
            return portable::adam_update::<Self>(weights, flat, offset, scale, step);
        }
        let take = |buffer: &mut CubeTensor<R>| {
            let empty = CubeTensor::new_contiguous(
                buffer.client.clone(),
                buffer.device.clone(),
                [0].into(),
                buffer.client.empty(0),
                DType::F32,
            );
            writable(std::mem::replace(buffer, empty))
        };
        let moment_1 = take(&mut flat.moment_1);
        let moment_2 = take(&mut flat.moment_2);
        let has_average = flat.average.is_some() && step.ema_weight.is_some();
        let average = match &mut flat.average {
            Some(average) if has_average => take(average),
            // Not read: any f32 buffer stands in.
            _ => moment_2.clone(),
        };
        let weights = into_contiguous(weights);
        let grads = into_contiguous(flat.grads.clone());
        let scale = into_contiguous(scale.clone());
        let client = weights.client.clone();
        let updated = CubeTensor::new_contiguous(
            client.clone(),
            weights.device.clone(),
            weights.shape(),
            client.empty(len * size_of::<f32>()),
            DType::F32,
        );
        let cube_dim = CubeDim::new(&client, len);
        let cube_count = calculate_cube_count_elemwise(&client, len, cube_dim);
        let c = step.constants();
        let scalars = AdamScalarsLaunch::new(
            c.weight_decay,
            c.one_minus_beta_1,
            c.beta_2,
            c.one_minus_beta_2,
            c.bias_correction_2_sqrt,
            c.epsilon,
            c.step_size,
            step.ema_weight.unwrap_or(0.0),
            offset,
        );
        // SAFETY: every index the kernel reads or writes is below `len` in `updated` and
        // `weights` (checked by the kernel), below `offset + len` in the flat buffers and 1 in
        // `scale` (checked above; `moment_2` standing in for a missing average is never read);
        // the buffers written are uniquely held ([`writable`]) and contiguous.
        unsafe {
            adam_kernel::launch_unchecked::<R>(
                &client,
                cube_count,
                cube_dim,
                weights.into_tensor_arg(),
                grads.into_tensor_arg(),
                moment_1.clone().into_tensor_arg(),
                moment_2.clone().into_tensor_arg(),
                average.clone().into_tensor_arg(),
                scale.into_tensor_arg(),
                updated.clone().into_tensor_arg(),
                scalars,
                c.weight_decay != 0.0,
                has_average,
                DType::F32.into(),
            );
        }
        flat.moment_1 = moment_1;
        flat.moment_2 = moment_2;
        if has_average {
            flat.average = Some(average);
        }
        updated
    }
}

/// Run by hand where a wgpu adapter exists (a GPU, or Mesa's lavapipe on the CPU, Debian's
/// `mesa-vulkan-drivers`): `cargo test --release -p kernels --features wgpu-untuned cube`. CI builds no
/// GPU backend for its tests.
#[cfg(all(test, feature = "wgpu-untuned"))]
mod tests {
    use burn::backend::Flex;
    use burn::prelude::*;
    use burn::tensor::TensorPrimitive;

    use super::{AdamStep, CubeBackend, FlatBuffers, FloatTensor, Kernels};

    /// cubecl's wgpu backend without fusion, which this module's kernel serves.
    type Gpu = CubeBackend<cubecl::wgpu::WgpuRuntime, f32, i32, u32>;

    fn values(n: usize, seed: f32) -> Vec<f32> {
        (0..n).map(|i| ((i as f32 * 0.7548 + seed).sin() * 43758.547).fract() - 0.5).collect()
    }

    fn primitive<B: Backend>(values: Vec<f32>, device: &B::Device) -> FloatTensor<B> {
        let n = values.len();
        Tensor::<B, 1>::from_data(TensorData::new(values, [n]), device).into_primitive().tensor()
    }

    fn read<B: Backend>(t: &FloatTensor<B>) -> Vec<f32> {
        Tensor::<B, 1>::from_primitive(TensorPrimitive::Float(t.clone())).into_data().to_vec().unwrap()
    }

    /// The largest difference between `a` and `b` relative to the larger magnitude (or 1e-3 for
    /// values near zero).
    fn max_relative(a: &[f32], b: &[f32]) -> f32 {
        assert_eq!(a.len(), b.len());
        a.iter().zip(b).map(|(a, b)| (a - b).abs() / a.abs().max(b.abs()).max(1e-3)).fold(0.0, f32::max)
    }

    /// The buffers of `len` weights, the same on both backends.
    fn buffers<B: Backend>(len: usize, device: &B::Device) -> FlatBuffers<B> {
        FlatBuffers {
            grads: primitive::<B>(values(len, 1.0), device),
            moment_1: primitive::<B>(values(len, 2.0).iter().map(|v| v * 1e-2).collect(), device),
            moment_2: primitive::<B>(values(len, 3.0).iter().map(|v| v * v * 1e-3).collect(), device),
            average: Some(primitive::<B>(values(len, 4.0), device)),
        }
    }

    /// Two parameters through twenty updates, with new gradients each step and a clipping
    /// scale, with decay and an average (copied at the first step, blended after), without
    /// either (the kernel's placeholder for the average), and with an average buffer no weight
    /// moves: the kernel's weights, moments and average equal the CPU's fused pass (itself equal
    /// to the portable operations) to 1e-6 relative. (On lavapipe, to the bit; a GPU compiler
    /// may fuse a multiply and an add.)
    #[test]
    fn the_kernel_equals_the_cpu_update_over_twenty_steps() {
        // (case, weight decay, an average buffer, the average moved)
        let cases =
            [("decay, average", 1e-6, true, true), ("neither", 0.0, false, false), ("average kept", 1e-6, true, false)];
        for (case, weight_decay, average, moved) in cases {
            let sizes = [70_000, 37];
            let len: usize = sizes.iter().sum();
            let (cpu, gpu) = (Default::default(), cubecl::wgpu::WgpuDevice::default());
            let (mut on_cpu, mut on_gpu) = (buffers::<Flex>(len, &cpu), buffers::<Gpu>(len, &gpu));
            if !average {
                (on_cpu.average, on_gpu.average) = (None, None);
            }
            let (scale_cpu, scale_gpu) = (primitive::<Flex>(vec![0.37], &cpu), primitive::<Gpu>(vec![0.37], &gpu));
            let initial = |i: usize| values(sizes[i], 5.0 + i as f32);
            let mut weights_cpu: Vec<_> = (0..2).map(|i| primitive::<Flex>(initial(i), &cpu)).collect();
            let mut weights_gpu: Vec<_> = (0..2).map(|i| primitive::<Gpu>(initial(i), &gpu)).collect();
            for time in 1..=20 {
                let grads = values(len, 10.0 + time as f32);
                on_cpu.grads = primitive::<Flex>(grads.clone(), &cpu);
                on_gpu.grads = primitive::<Gpu>(grads, &gpu);
                let step = AdamStep {
                    lr: 1e-3,
                    beta_1: 0.95,
                    beta_2: 0.999,
                    epsilon: 1e-8,
                    weight_decay,
                    time,
                    ema_weight: moved.then_some(if time == 1 { 1.0 } else { 0.25 }),
                };
                let mut offset = 0;
                for (w_cpu, w_gpu) in weights_cpu.iter_mut().zip(&mut weights_gpu) {
                    *w_cpu = Flex::adam_update(w_cpu.clone(), &mut on_cpu, offset, &scale_cpu, &step);
                    *w_gpu = Gpu::adam_update(w_gpu.clone(), &mut on_gpu, offset, &scale_gpu, &step);
                    offset += w_cpu.layout().num_elements();
                }
            }
            for (i, (a, b)) in weights_cpu.iter().zip(&weights_gpu).enumerate() {
                assert!(max_relative(&read::<Flex>(a), &read::<Gpu>(b)) <= 1e-6, "{case}: weights of parameter {i}");
                assert!(
                    max_relative(&read::<Gpu>(b), &initial(i)) > 1e-3,
                    "{case}: the weights of parameter {i} moved"
                );
            }
            let mut pairs = vec![
                ("first moment", &on_cpu.moment_1, &on_gpu.moment_1),
                ("second moment", &on_cpu.moment_2, &on_gpu.moment_2),
            ];
            if let (Some(a), Some(b)) = (&on_cpu.average, &on_gpu.average) {
                pairs.push(("average", a, b));
            }
            for (name, a, b) in pairs {
                assert!(max_relative(&read::<Flex>(a), &read::<Gpu>(b)) <= 1e-6, "{case}: {name}");
            }
        }
    }
}
