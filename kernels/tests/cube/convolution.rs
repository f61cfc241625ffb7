//! The channel bias's gradient, the transposed convolution through the backend's own, the 1-D
//! convolution unfolded for a matrix product, and the matrix product under autodiff, against
//! burn and the CPU.

use burn::backend::Flex;
use burn::backend::wgpu::{WgpuDevice, WgpuRuntime};
use burn::prelude::*;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{DType, FloatDType, TensorMetadata, TensorPrimitive};
use kernels::Kernels;

use super::support::{bytes, half_dtypes, max_error_relative_to_largest, values};
use super::{Direct, WgpuKernels};

/// A bias added along the second dimension through `kernels::add_channel_bias` under autodiff:
/// on the GPU its gradient one launch (a cube per channel), on the CPU burn's broadcast and
/// autodiff. The output and both gradients agree to 1e-5 of the largest value, for a U-Net's
/// `[B, C, T]` and a convolution's `[N, C, H, W]`.
pub(crate) fn the_channel_bias_gradient_equals_burns_broadcast<Gpu: WgpuKernels>() {
    use burn::backend::Autodiff;

    /// The output, and the gradients of `Σ y·dy` with respect to `y` and `bias`.
    fn run<B: Kernels, const D: usize>(
        shape: [usize; D],
        y: &[f32],
        bias: &[f32],
        dy: &[f32],
        device: &B::Device,
    ) -> [Vec<f32>; 3] {
        let n = y.len();
        let tensor = |values: &[f32]| {
            Tensor::<Autodiff<B>, 1>::from_data(TensorData::new(values.to_vec(), [values.len()]), device)
        };
        let y = tensor(y).reshape(shape).require_grad();
        let bias = tensor(bias).require_grad();
        let sum = kernels::add_channel_bias(y.clone(), bias.clone());
        let grads = (sum.clone() * tensor(dy).reshape(shape)).sum().backward();
        let flat = |t: Tensor<B, D>| t.reshape([n]).into_data().to_vec::<f32>().unwrap();
        let bias_grad = bias.grad(&grads).expect("the bias's gradient").into_data().to_vec().unwrap();
        [flat(sum.inner()), flat(y.grad(&grads).expect("y's gradient")), bias_grad]
    }

    fn check<Gpu: WgpuKernels, const D: usize>(shape: [usize; D]) {
        let (n, channels) = (shape.iter().product::<usize>(), shape[1]);
        let (y, bias, dy) = (values(n, 1.0), values(channels, 2.0), values(n, 3.0));
        let on_gpu = run::<Gpu, D>(shape, &y, &bias, &dy, &WgpuDevice::default());
        let on_cpu = run::<Flex, D>(shape, &y, &bias, &dy, &Default::default());
        for (name, (got, expected)) in ["output", "dy", "d_bias"].into_iter().zip(on_gpu.iter().zip(&on_cpu)) {
            let error = max_error_relative_to_largest(got, expected);
            assert!(error < 1e-5, "{shape:?}: {name} {error:e} apart");
        }
    }

    check::<Gpu, 3>([3, 5, 7]);
    check::<Gpu, 3>([2, 512, 300]);
    check::<Gpu, 4>([4, 3, 2, 5]);
}

/// The U-Net's upsampling (`ConvTranspose1d(c, c, 4, stride 2, padding 1)` as a height-1 2-D
/// one) and a 2-D transposed convolution with output padding, through `kernels::conv_transpose2d`
/// under autodiff: on wgpu burn's transposed convolution (under fusion, as our custom
/// operation), on the CPU the passes of the convolution it transposes. The output and both
/// gradients agree to 1e-5 of the largest value.
pub(crate) fn the_transposed_convolution_equals_the_cpus<Gpu: WgpuKernels>() {
    use burn::backend::Autodiff;
    use burn::tensor::ops::ConvTransposeOptions;

    /// The output, and the gradients of `Σ y·dy` with respect to `x` and the weight.
    fn run<B: Kernels>(
        [x, w, dy]: [&TensorData; 3],
        options: &ConvTransposeOptions<2>,
        device: &B::Device,
    ) -> [Vec<f32>; 3] {
        let x = Tensor::<Autodiff<B>, 4>::from_data(x.clone(), device).require_grad();
        let w = Tensor::<Autodiff<B>, 4>::from_data(w.clone(), device).require_grad();
        let y = kernels::conv_transpose2d(x.clone(), w.clone(), None, options.clone());
        let dy = Tensor::<Autodiff<B>, 4>::from_data(dy.clone(), device);
        let grads = (y.clone() * dy).sum().backward();
        let values = |t: Tensor<B, 4>| t.into_data().to_vec::<f32>().unwrap();
        [values(y.inner()), values(x.grad(&grads).expect("x's gradient")), values(w.grad(&grads).expect("w's"))]
    }

    let cases = [
        ([4, 16, 1, 8], [16, 16, 1, 4], ConvTransposeOptions::new([1, 2], [0, 1], [0, 0], [1, 1], 1)),
        ([2, 6, 5, 7], [6, 4, 3, 3], ConvTransposeOptions::new([2, 2], [1, 1], [1, 1], [1, 1], 1)),
    ];
    for (input, weight, options) in cases {
        let shape = kernels::conv_transpose2d_output_shape(input, weight, &options).expect("a transposed convolution");
        let data = |shape: [usize; 4], seed| TensorData::new(values(shape.iter().product(), seed), shape);
        let (x, w, dy) = (data(input, 1.0), data(weight, 2.0), data(shape, 3.0));
        let on_gpu = run::<Gpu>([&x, &w, &dy], &options, &WgpuDevice::default());
        let on_cpu = run::<Flex>([&x, &w, &dy], &options, &Default::default());
        for (name, (got, expected)) in ["output", "dx", "dw"].into_iter().zip(on_gpu.iter().zip(&on_cpu)) {
            assert_eq!(got.len(), expected.len(), "{input:?} by {weight:?}: {name}");
            let error = max_error_relative_to_largest(got, expected);
            assert!(error < 1e-5, "{input:?} by {weight:?}: {name} {error:e} apart");
        }
    }
}

/// A half-precision step's bias gradient (a bias added to f16 or bf16 activations): the kernel
/// takes the dtype, answers in it, and gives the f32 kernel's sum of the same values rounded
/// once, to the bit (a half-precision value is exact in f32, and the sum runs in f32 in the
/// same order), where burn's reductions would have run instead.
pub(crate) fn the_channel_bias_gradient_in_half_precision_is_the_f32_sum_rounded_once<Gpu: WgpuKernels>() {
    let gpu = WgpuDevice::default();
    let shape = [4, 96, 300];
    let n = shape.iter().product();
    for dtype in half_dtypes::<Gpu>(&gpu) {
        let half = Tensor::<Gpu, 1>::from_data(TensorData::new(values(n, 3.0), [n]), &gpu).cast(dtype);
        let half = Gpu::float_reshape(half.into_primitive().tensor(), shape.to_vec().into());
        let got = Gpu::channel_bias_grad(half.clone());
        assert_eq!(got.dtype(), DType::from(dtype));
        let f32_sum = Gpu::channel_bias_grad(Gpu::float_cast(half, FloatDType::F32));
        assert_eq!(bytes::<Gpu>(&got), bytes::<Gpu>(&Gpu::float_cast(f32_sum, dtype)), "{dtype:?}");
    }
}

/// burn's matrix product (cubecl's) as the unfolded convolution's products, where cuda takes
/// cuBLAS's.
pub(crate) struct BurnProducts;

impl kernels::unfold::Product<WgpuRuntime> for BurnProducts {
    fn product(
        &self,
        a: &FloatTensor<Direct>,
        a_transposed: bool,
        b: &FloatTensor<Direct>,
        b_transposed: bool,
    ) -> Result<FloatTensor<Direct>, String> {
        use burn_cubecl::kernel::into_contiguous;
        use burn_cubecl::kernel::matmul::{MatmulStrategy, matmul};
        let op = |t: &FloatTensor<Direct>, transposed: bool| {
            if transposed { into_contiguous(burn_cubecl::ops::permute(t.clone(), &[1, 0])) } else { t.clone() }
        };
        matmul(op(a, a_transposed), op(b, b_transposed), None, MatmulStrategy::default(), a.dtype)
            .map_err(|e| format!("{e:?}"))
    }
}

/// A 1-D convolution as one matrix product over its unfolded input (`kernels::unfold`: the
/// unfolding, the folding and the swaps in cubecl kernels, the products burn's here): output,
/// input gradient and weight gradient equal the CPU's convolution and its gradients to 1e-5, for
/// the U-Net's kinds (kernel 5 padded 2, the strided downsampling, the transposed upsampling's
/// kernel 4 at stride 2), a dilated one, a kernel of one tap, and a length the kernel outreaches;
/// 2-D convolutions, grouped ones and padding along the height are not taken.
#[test]
pub(crate) fn the_unfolded_1d_convolution_equals_the_cpus() {
    use burn::backend::Autodiff;
    use burn::tensor::ops::ConvOptions;
    use kernels::unfold::{self, Conv1d};

    /// The output, and the gradients of `Σ y·dy` with respect to `x` and the weight, by burn's
    /// convolution on the CPU.
    fn on_cpu([x, w, dy]: [&TensorData; 3], options: &ConvOptions<2>) -> [Vec<f32>; 3] {
        let device = Default::default();
        let x = Tensor::<Autodiff<Flex>, 4>::from_data(x.clone(), &device).require_grad();
        let w = Tensor::<Autodiff<Flex>, 4>::from_data(w.clone(), &device).require_grad();
        let y = burn::tensor::module::conv2d(x.clone(), w.clone(), None, options.clone());
        let dy = Tensor::<Autodiff<Flex>, 4>::from_data(dy.clone(), &device);
        let grads = (y.clone() * dy).sum().backward();
        let values = |t: Tensor<Flex, 4>| t.into_data().to_vec::<f32>().unwrap();
        [values(y.inner()), values(x.grad(&grads).expect("x's gradient")), values(w.grad(&grads).expect("w's"))]
    }

    let gpu = WgpuDevice::default();
    let on_gpu = |data: &TensorData| Tensor::<Direct, 4>::from_data(data.clone(), &gpu).into_primitive().tensor();
    // (N, C, L, K, S, stride, padding, dilation)
    let cases = [
        (3, 5, 16, 4, 5, 1, 2, 1),
        (2, 3, 16, 6, 3, 2, 1, 1),
        (2, 4, 9, 3, 4, 2, 1, 1),
        (2, 3, 11, 2, 3, 1, 2, 2),
        (1, 7, 5, 3, 1, 1, 0, 1),
        (2, 3, 2, 2, 5, 1, 2, 1),
    ];
    for (n, c, l, k, s, stride, padding, dilation) in cases {
        let options = ConvOptions::new([1, stride], [0, padding], [1, dilation], 1);
        let conv = Conv1d::of_2d([n, c, 1, l], [k, c, 1, s], [0, padding], [1, stride], [1, dilation], 1)
            .expect("a 1-D convolution");
        let data = |shape: [usize; 4], seed| TensorData::new(values(shape.iter().product(), seed), shape);
        let (x, w) = (data([n, c, 1, l], 1.0), data([k, c, 1, s], 2.0));
        let dy = data([n, k, 1, conv.out_length], 3.0);
        let expected = on_cpu([&x, &w, &dy], &options);
        let got = [
            unfold::output(on_gpu(&x), on_gpu(&w), &conv, &BurnProducts),
            unfold::input_grad(on_gpu(&w), on_gpu(&dy), &conv, &BurnProducts),
            unfold::weight_grad(on_gpu(&x), on_gpu(&dy), &conv, &BurnProducts),
        ];
        for ((name, got), expected) in ["output", "dx", "dw"].into_iter().zip(got).zip(&expected) {
            let got = got.expect("burn's product runs");
            let got = Tensor::<Direct, 4>::from_primitive(TensorPrimitive::Float(got));
            let shape = got.dims();
            let got = got.into_data().to_vec::<f32>().unwrap();
            assert_eq!(got.len(), expected.len(), "{conv:?}: {name} of shape {shape:?}");
            let error = max_error_relative_to_largest(&got, expected);
            assert!(error < 1e-5, "{conv:?}: {name} {error:e} apart");
        }
    }
    let one_row = |input, weight, padding, groups| Conv1d::of_2d(input, weight, padding, [1, 1], [1, 1], groups);
    assert!(one_row([1, 4, 2, 8], [3, 4, 2, 3], [0, 1], 1).is_none(), "a 2-D convolution");
    assert!(one_row([1, 4, 1, 8], [4, 2, 1, 3], [0, 1], 2).is_none(), "a grouped convolution");
    assert!(one_row([1, 4, 1, 8], [3, 4, 1, 3], [1, 1], 1).is_none(), "padding along the height");
    assert!(one_row([1, 4, 1, 2], [3, 4, 1, 5], [0, 1], 1).is_none(), "a kernel beyond the padded length");
}

/// The matrix product under autodiff (`ConvolutionKernels::matrix_product`, one node whose
/// gradients are two more products; under fusion a custom operation), each operand transposed
/// or not: on wgpu, where the backend's product is burn's, against the CPU's product and
/// gradients through burn's `matmul` and autodiff, to 1e-5 of the largest value. (cuBLAS's
/// products, which replace burn's on cuda with `LEROBOT_RS_LINEAR=cublas`, only `bench
/// gpu-check` can run: `cudnn cublas linear ...`.)
pub(crate) fn the_matrix_product_and_its_gradients_equal_burns_matmul<Gpu: WgpuKernels>() {
    use burn::backend::Autodiff;

    /// `op(a)·op(b)` and the gradients of `Σ c·g` for `a` and `b`, through the backend's product
    /// (`ours`) or burn's `matmul` of the transposed views.
    fn run<B: Kernels>(
        [a, b, g]: [(&[f32], [usize; 2]); 3],
        transposed: [bool; 2],
        ours: bool,
        device: &B::Device,
    ) -> [Vec<f32>; 3] {
        let tensor = |(values, shape): (&[f32], [usize; 2])| {
            Tensor::<Autodiff<B>, 2>::from_data(TensorData::new(values.to_vec(), shape), device)
        };
        let (a, b) = (tensor(a).require_grad(), tensor(b).require_grad());
        let op = |t: Tensor<Autodiff<B>, 2>, transposed: bool| if transposed { t.transpose() } else { t };
        let c = if ours {
            let [a_t, b_t] = transposed;
            let c = <Autodiff<B> as kernels::ConvolutionKernels>::matrix_product(
                a.clone().into_primitive().tensor(),
                a_t,
                b.clone().into_primitive().tensor(),
                b_t,
            );
            Tensor::<Autodiff<B>, 2>::from_primitive(TensorPrimitive::Float(c))
        } else {
            op(a.clone(), transposed[0]).matmul(op(b.clone(), transposed[1]))
        };
        let grads = (c.clone() * tensor(g)).sum().backward();
        let flat = |t: Tensor<B, 2>| t.into_data().to_vec::<f32>().unwrap();
        [flat(c.inner()), flat(a.grad(&grads).expect("a's gradient")), flat(b.grad(&grads).expect("b's gradient"))]
    }

    let (rows, inner, columns) = (37, 70, 19);
    for transposed in [[false, false], [false, true], [true, false], [true, true]] {
        let a_shape = if transposed[0] { [inner, rows] } else { [rows, inner] };
        let b_shape = if transposed[1] { [columns, inner] } else { [inner, columns] };
        let (a, b, g) = (values(rows * inner, 1.0), values(inner * columns, 2.0), values(rows * columns, 3.0));
        let operands = [(&a[..], a_shape), (&b[..], b_shape), (&g[..], [rows, columns])];
        let on_gpu = run::<Gpu>(operands, transposed, true, &WgpuDevice::default());
        let on_cpu = run::<Flex>(operands, transposed, false, &Default::default());
        for (name, (got, expected)) in
            ["product", "a's gradient", "b's gradient"].into_iter().zip(on_gpu.iter().zip(&on_cpu))
        {
            let error = max_error_relative_to_largest(got, expected);
            assert!(error < 1e-5, "transposed {transposed:?}: the {name} {error:e} apart");
        }
    }
}
