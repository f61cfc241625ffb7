//! [`NormKernels`] on burn's cubecl backends: GroupNorm and FiLM as our kernels.
#![expect(unsafe_code, reason = "cubecl launches a kernel without bounds checks only through unsafe")]

use burn::tensor::ops::FloatTensor;
use burn::tensor::{DType, TensorMetadata};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::{BoolElement, CubeBackend, FloatElement, IntElement};
use cubecl::CubeDim;
use cubecl::prelude::*;

use super::film::{film_backward_kernel, film_kernel};
use super::group_norm::{
    activation_code, affine_grad_blocks, affine_grad_total_kernel, group_norm_affine_grad_kernel,
    group_norm_input_grad_kernel, group_norm_kernel,
};
use super::launch::{UNITS_PER_CUBE, striding_cubes};
use super::tensors::{empty_f32, empty_in_layout, empty_like, into_layout, is_channels_last};
use crate::{Activation, NormKernels, RuntimeLibraries, portable};

impl<R: RuntimeLibraries, F: FloatElement, I: IntElement, BT: BoolElement> NormKernels for CubeBackend<R, F, I, BT> {
    fn has_group_norm_kernels() -> bool {
        true
    }

    fn group_norm_forward(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        groups: usize,
        epsilon: f64,
        activation: Activation,
    ) -> Option<(FloatTensor<Self>, FloatTensor<Self>)> {
        if !crate::group_norm_dtypes(x.dtype, &[gamma.dtype, beta.dtype]) {
            return None;
        }
        let [samples, channels, positions] =
            crate::group_norm_shape(x.shape().as_slice(), gamma.meta.num_elements(), beta.meta.num_elements(), groups)?;
        // A channels-last input (the encoder's, for cuDNN's tensor cores) is read as it lies and
        // gives a channels-last output; any other is read channels-first.
        let channels_last = is_channels_last(&x);
        let x = into_layout(x, channels_last);
        let (gamma, beta) = (into_contiguous(gamma), into_contiguous(beta));
        let y = empty_in_layout(&x, &[samples, channels, positions], x.dtype, channels_last);
        let stats = empty_f32(&x, [samples, groups, 2].into());
        let channels_per_group = channels / groups;
        // SAFETY: cube `k < samples·groups` reads `x` and writes `y` at the `group_len`
        // elements of its group (`group_element`: a bijection of the groups' elements onto
        // `0..samples·channels·positions`, in the one layout of `x` and `y`, both a contiguous
        // buffer of that many, `y` new), `gamma` and `beta` at channels below `channels` (their
        // lengths, checked), and writes `stats` at `2k` and `2k + 1`, within its
        // `samples·groups·2`; no two cubes write one element.
        unsafe {
            group_norm_kernel::launch_unchecked::<R>(
                &x.client,
                CubeCount::new_1d((samples * groups) as u32),
                CubeDim::new_1d(UNITS_PER_CUBE),
                x.clone().into_tensor_arg(),
                gamma.into_tensor_arg(),
                beta.into_tensor_arg(),
                y.clone().into_tensor_arg(),
                stats.clone().into_tensor_arg(),
                channels_per_group * positions,
                positions,
                channels_per_group,
                groups,
                epsilon as f32,
                activation_code(activation),
                channels_last,
                [x.dtype.into(), DType::F32.into()],
            );
        }
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
        let shape = x.shape();
        let sizes =
            crate::group_norm_shape(shape.as_slice(), gamma.meta.num_elements(), beta.meta.num_elements(), groups);
        let takes_dtypes =
            output_grad.dtype == x.dtype && crate::group_norm_dtypes(x.dtype, &[gamma.dtype, beta.dtype, stats.dtype]);
        let fits = |[samples, _, _]: &[usize; 3]| {
            stats.meta.num_elements() == samples * groups * 2 && output_grad.shape() == shape
        };
        let Some([samples, channels, positions]) = sizes.filter(|sizes| takes_dtypes && fits(sizes)) else {
            return portable::group_norm_backward::<Self>(x, [gamma, beta], stats, output_grad, groups, activation);
        };
        // In the forward pass's layout: channels-last where `x` is (the output's gradient brought
        // to it), else channels-first.
        let channels_last = is_channels_last(&x);
        let (x, output_grad) = (into_layout(x, channels_last), into_layout(output_grad, channels_last));
        let [gamma, beta, stats] = [gamma, beta, stats].map(into_contiguous);
        let input_grad = empty_in_layout(&x, &[samples, channels, positions], x.dtype, channels_last);
        let dtypes = [x.dtype.into(), DType::F32.into()];
        let gamma_grad = empty_f32(&x, [channels].into());
        let beta_grad = empty_f32(&x, [channels].into());
        let blocks = affine_grad_blocks(channels, samples * positions);
        // Each channel's partial sums where it has several cubes, else its gradients themselves.
        let (gamma_partials, beta_partials) = match blocks {
            1 => (gamma_grad.clone(), beta_grad.clone()),
            _ => (empty_f32(&x, [channels * blocks].into()), empty_f32(&x, [channels * blocks].into())),
        };
        let channels_per_group = channels / groups;
        let client = x.client.clone();
        let code = activation_code(activation);
        // SAFETY: as the forward pass's: cube `k < samples·groups` reads `x` and
        // `output_grad` (the same shape, checked) and writes `input_grad` at its group's
        // elements, all three a contiguous buffer in one layout; `stats` at `2k + 1` at most, within its
        // `samples·groups·2` (checked); `gamma` and `beta` below `channels`.
        unsafe {
            group_norm_input_grad_kernel::launch_unchecked::<R>(
                &client,
                CubeCount::new_1d((samples * groups) as u32),
                CubeDim::new_1d(UNITS_PER_CUBE),
                x.clone().into_tensor_arg(),
                gamma.clone().into_tensor_arg(),
                beta.clone().into_tensor_arg(),
                stats.clone().into_tensor_arg(),
                output_grad.clone().into_tensor_arg(),
                input_grad.clone().into_tensor_arg(),
                channels_per_group * positions,
                positions,
                channels_per_group,
                groups,
                code,
                channels_last,
                dtypes,
            );
        }
        // SAFETY: cube `(c, b)`, `c < channels`, `b < blocks`, reads channel `c` of every sample
        // of `x` and `output_grad`, `stats` of its groups, within their lengths, and writes
        // element `c·blocks + b` of `gamma_partials` and `beta_partials`, new, of
        // `channels·blocks` elements.
        unsafe {
            group_norm_affine_grad_kernel::launch_unchecked::<R>(
                &client,
                CubeCount::new_2d(channels as u32, blocks as u32),
                CubeDim::new_1d(UNITS_PER_CUBE),
                x.into_tensor_arg(),
                gamma.into_tensor_arg(),
                beta.into_tensor_arg(),
                stats.into_tensor_arg(),
                output_grad.into_tensor_arg(),
                gamma_partials.clone().into_tensor_arg(),
                beta_partials.clone().into_tensor_arg(),
                samples,
                channels,
                positions,
                channels_per_group,
                blocks,
                code,
                channels_last,
                dtypes,
            );
        }
        if blocks > 1 {
            // SAFETY: the units stride over `channels`, reading elements `c·blocks + b`,
            // `b < blocks`, of the partials (`channels·blocks` elements) and writing element `c`
            // of `gamma_grad` and `beta_grad` (`channels` elements).
            unsafe {
                affine_grad_total_kernel::launch_unchecked::<R>(
                    &client,
                    striding_cubes(channels),
                    CubeDim::new_1d(UNITS_PER_CUBE),
                    gamma_partials.into_tensor_arg(),
                    beta_partials.into_tensor_arg(),
                    gamma_grad.clone().into_tensor_arg(),
                    beta_grad.clone().into_tensor_arg(),
                    channels,
                    blocks,
                    DType::F32.into(),
                );
            }
        }
        [input_grad, gamma_grad, beta_grad]
    }

    fn has_film_kernels() -> bool {
        true
    }

    fn film_forward(x: FloatTensor<Self>, embedding: FloatTensor<Self>) -> Option<FloatTensor<Self>> {
        let takes_dtypes = crate::film_dtypes(&[x.dtype, embedding.dtype]);
        let [_, channels, positions] =
            crate::film_shape(x.shape().as_slice(), embedding.shape().as_slice()).filter(|_| takes_dtypes)?;
        let [x, embedding] = [x, embedding].map(into_contiguous);
        let total = x.meta.num_elements();
        let y = empty_like(&x, x.shape(), x.dtype);
        // SAFETY: unit `i < total` reads `x` at `i` and `embedding` at `b·2C + c` and
        // `b·2C + C + c` (`b < B`, `c < C`: within `[B, 2C]`, checked by `film_shape`), and writes
        // `y` at `i`; all contiguous, `y` new, of `x`'s shape.
        unsafe {
            film_kernel::launch_unchecked::<R>(
                &x.client,
                striding_cubes(total),
                CubeDim::new_1d(UNITS_PER_CUBE),
                x.clone().into_tensor_arg(),
                embedding.into_tensor_arg(),
                y.clone().into_tensor_arg(),
                total,
                channels,
                positions,
                y.dtype.into(),
            );
        }
        Some(y)
    }

    fn film_backward(
        x: FloatTensor<Self>,
        embedding: FloatTensor<Self>,
        output_grad: FloatTensor<Self>,
    ) -> [FloatTensor<Self>; 2] {
        let takes_dtypes = crate::film_dtypes(&[x.dtype, embedding.dtype, output_grad.dtype]);
        let sizes = crate::film_shape(x.shape().as_slice(), embedding.shape().as_slice());
        let Some([samples, channels, positions]) = sizes.filter(|_| takes_dtypes && output_grad.shape() == x.shape())
        else {
            return portable::film_backward::<Self>(x, embedding, output_grad);
        };
        let [x, embedding, output_grad] = [x, embedding, output_grad].map(into_contiguous);
        let input_grad = empty_like(&x, x.shape(), x.dtype);
        let embedding_grad = empty_like(&x, embedding.shape(), x.dtype);
        let dtypes = [x.dtype.into(), DType::F32.into()];
        let rows = samples * channels;
        // SAFETY: unit `row < B·C` reads and writes its row's `T` elements of `x`,
        // `output_grad` and `input_grad` (all `[B, C, T]`, contiguous; checked), and reads and
        // writes `embedding` and `embedding_grad` (`[B, 2C]`) at `b·2C + c` and `b·2C + C + c`.
        unsafe {
            film_backward_kernel::launch_unchecked::<R>(
                &x.client,
                striding_cubes(rows),
                CubeDim::new_1d(UNITS_PER_CUBE),
                x.clone().into_tensor_arg(),
                embedding.into_tensor_arg(),
                output_grad.into_tensor_arg(),
                input_grad.clone().into_tensor_arg(),
                embedding_grad.clone().into_tensor_arg(),
                rows,
                channels,
                positions,
                dtypes,
            );
        }
        [input_grad, embedding_grad]
    }
}
