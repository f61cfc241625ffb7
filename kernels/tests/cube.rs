//! The GPU backends' kernels (`kernels/src/cube.rs`: the gradients' gather with their squares, the
//! clipping factors, the optimiser pass, GroupNorm with its activation, FiLM, YUV to RGB) against the
//! CPU's, on burn's wgpu backend without fusion and, with `--features gpu-fusion`, with it too
//! (then through fusion's custom operations, `kernels/src/fusion.rs`): each check is a test on
//! each backend. Run where a wgpu adapter exists (a GPU, or Mesa's lavapipe on the CPU, Debian's
//! `mesa-vulkan-drivers`): `cargo test --release -p kernels --features wgpu-untuned,gpu-fusion
//! --test cube`, as `scripts/test.sh` does on lavapipe.

use burn::backend::Flex;
use burn::backend::wgpu::{CubeBackend, WgpuDevice, WgpuRuntime};
use burn::prelude::*;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{DType, FloatDType, TensorMetadata, TensorPrimitive};
use kernels::{
    AdamStep, FlatBuffers, FrameKernels, Kernels, MAX_PARTS_PER_LAUNCH, NormKernels, OptimiserKernels, PartialSquares,
    ViewPlaces, ViewTable, ViewsUpdate,
};

/// A wgpu backend our kernels serve: each check below runs on cubecl's own (`direct::*`) and,
/// with `gpu-fusion`, on burn's fusion over it (`fused::*`).
trait WgpuKernels: Kernels<Device = WgpuDevice> {}

impl<B: Kernels<Device = WgpuDevice>> WgpuKernels for B {}

/// burn's wgpu backend as cubecl gives it: our kernels launched directly (`kernels/src/cube.rs`).
type Direct = CubeBackend<WgpuRuntime, f32, i32, u32>;

/// burn's fusion over it: our kernels as fusion's custom operations (`kernels/src/fusion.rs`).
#[cfg(feature = "gpu-fusion")]
type Fused = burn_fusion::Fusion<Direct>;

/// Each check as a test on each backend.
macro_rules! tests_on_each_backend {
    ($($check:ident),* $(,)?) => {
        mod direct {
            $(#[test]
            fn $check() {
                super::$check::<super::Direct>();
            })*
        }

        #[cfg(feature = "gpu-fusion")]
        mod fused {
            $(#[test]
            fn $check() {
                super::$check::<super::Fused>();
            })*
        }
    };
}

tests_on_each_backend!(
    the_kernel_equals_the_cpu_update_over_twenty_steps,
    the_gather_equals_the_cpus_for_every_layout,
    the_clip_factors_equal_the_cpus,
    the_update_writes_the_half_copies_burns_cast_would,
    the_update_of_weights_kept_as_views_equals_the_update_of_each,
    the_gather_casts_half_precision_gradients_up,
    the_group_norm_kernels_equal_the_cpus,
    group_norm_in_half_precision_equals_casting_around_it,
    film_in_half_precision_equals_the_f32_kernels,
    the_film_kernels_equal_burns_operations_and_their_gradients,
    the_channel_bias_gradient_equals_burns_broadcast,
    the_transposed_convolution_equals_the_cpus,
    the_channel_bias_gradient_in_half_precision_is_the_f32_sum_rounded_once,
    the_yuv_kernel_gives_the_decoders_bytes_for_every_value,
);

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

/// More parameters than one launch takes (so two launches, the second of a different
/// width), of sizes from one weight to 9,000 (a row of 36 cubes), through twenty updates with
/// new gradients each step and a clipping scale, with decay and an average (copied at the first
/// step, blended after), without either (the kernel's placeholder for the average), and with an
/// average buffer no weight moves: the kernel's weights (written in place, but never under a
/// handle someone else holds), moments and average, all parameters updated at once, equal the
/// CPU's fused pass one parameter at a time (itself equal to the portable operations) to 1e-6
/// relative. (On lavapipe, to the bit; a GPU compiler may fuse a multiply and an add.) Every
/// row of a launch has as many cubes as its longest, which lavapipe runs one by one, empty or
/// not: a larger parameter costs its time, not coverage.
fn the_kernel_equals_the_cpu_update_over_twenty_steps<Gpu: WgpuKernels>() {
    // (case, weight decay, an average buffer, the average moved)
    let cases =
        [("decay, average", 1e-6, true, true), ("neither", 0.0, false, false), ("average kept", 1e-6, true, false)];
    for (case, weight_decay, average, moved) in cases {
        let sizes: Vec<usize> =
            [9_000, 37].into_iter().chain((0..MAX_PARTS_PER_LAUNCH + 6).map(|i| 1 + i * 37 % 500)).collect();
        let len: usize = sizes.iter().sum();
        let (cpu, gpu) = (Default::default(), WgpuDevice::default());
        let (mut on_cpu, mut on_gpu) = (buffers::<Flex>(len, &cpu), buffers::<Gpu>(len, &gpu));
        if !average {
            (on_cpu.average, on_gpu.average) = (None, None);
        }
        let (scale_cpu, scale_gpu) = (primitive::<Flex>(vec![0.37], &cpu), primitive::<Gpu>(vec![0.37], &gpu));
        let initial = |i: usize| values(sizes[i], 5.0 + i as f32);
        let mut weights_cpu: Vec<_> = (0..sizes.len()).map(|i| primitive::<Flex>(initial(i), &cpu)).collect();
        let mut weights_gpu: Vec<_> = (0..sizes.len()).map(|i| primitive::<Gpu>(initial(i), &gpu)).collect();
        let offsets = sizes.iter().scan(0, |at, &n| Some(std::mem::replace(at, *at + n))).collect::<Vec<_>>();
        // A second handle to a weight, as a caller may keep: the update writes the weights in
        // place only where it holds their only handles.
        let kept = weights_gpu[1].clone();
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
            for (w_cpu, &offset) in weights_cpu.iter_mut().zip(&offsets) {
                *w_cpu = Flex::adam_update(w_cpu.clone(), &mut on_cpu, offset, &scale_cpu, &step);
            }
            weights_gpu = Gpu::adam_update_all(weights_gpu, &offsets, &mut on_gpu, &scale_gpu, &step);
        }
        assert_eq!(read::<Gpu>(&kept), initial(1), "{case}: a weight another handle holds is left as it was");
        for (i, (a, b)) in weights_cpu.iter().zip(&weights_gpu).enumerate() {
            assert!(max_relative(&read::<Flex>(a), &read::<Gpu>(b)) <= 1e-6, "{case}: weights of parameter {i}");
            assert!(max_relative(&read::<Gpu>(b), &initial(i)) > 1e-3, "{case}: the weights of parameter {i} moved");
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

/// Gradients as burn hands them over: contiguous, permuted views (a convolution's weight
/// gradient), a transposed matrix, a slice of a larger buffer, an empty one, more of them
/// than one launch takes: gathered into the flat buffer equal to the bit what the CPU
/// gathers, written into a reused buffer the same.
fn the_gather_equals_the_cpus_for_every_layout<Gpu: WgpuKernels>() {
    fn parts<B: Backend>(device: &B::Device) -> Vec<FloatTensor<B>> {
        let tensor = |shape: [usize; 3], seed: f32| {
            Tensor::<B, 1>::from_data(
                TensorData::new(values(shape.iter().product(), seed), [shape.iter().product::<usize>()]),
                device,
            )
            .reshape(shape)
        };
        let mut parts = vec![
            tensor([4, 3, 5], 1.0),
            tensor([4, 3, 5], 2.0).permute([2, 0, 1]),
            tensor([1, 7, 6], 3.0).swap_dims(1, 2),
            tensor([2, 9, 4], 4.0).slice([0..2, 3..8, 1..3]),
            tensor([0, 3, 2], 5.0),
        ];
        parts.extend((0..MAX_PARTS_PER_LAUNCH).map(|i| tensor([1 + i % 3, 2, 1 + i % 5], 6.0 + i as f32)));
        parts.into_iter().map(|t| t.into_primitive().tensor()).collect()
    }
    let (cpu, gpu) = (Default::default(), WgpuDevice::default());
    let expected = read::<Flex>(&Flex::concat_flat(parts::<Flex>(&cpu), None, &cpu));
    let gathered = Gpu::concat_flat(parts::<Gpu>(&gpu), None, &gpu);
    assert_eq!(read::<Gpu>(&gathered), expected, "a new buffer");
    let reused = Gpu::concat_flat(parts::<Gpu>(&gpu), Some(primitive::<Gpu>(vec![7.0; expected.len()], &gpu)), &gpu);
    assert_eq!(read::<Gpu>(&reused), expected, "a reused buffer");

    // With the squares read as the parts are copied: the same buffer, and their sum within
    // f32's rounding of the exact one, the same at every call. One part longer than a launch's
    // cubes cover (units striding over several of its elements).
    let with_long = |device: &WgpuDevice| {
        let mut all = parts::<Gpu>(device);
        all.push(primitive::<Gpu>(values(400_000, 9.0), device));
        all
    };
    let mut expected = expected;
    expected.extend(values(400_000, 9.0));
    let exact: f64 = expected.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
    let [flat, squares] = Gpu::concat_flat_with_squares(with_long(&gpu), None, &gpu);
    assert_eq!(read::<Gpu>(&flat), expected, "the buffer gathered with its squares");
    let sum = read::<Gpu>(&squares);
    assert_eq!(sum.len(), 1);
    assert!((f64::from(sum[0]) - exact).abs() <= 1e-5 * exact, "Σ x² {} against {exact}", sum[0]);
    let [_, again] = Gpu::concat_flat_with_squares(with_long(&gpu), None, &gpu);
    assert_eq!(read::<Gpu>(&again), sum, "a fixed order: the same sum again");

    // The squares left as partial sums, for an update that totals them itself, and clipped by
    // them in one launch.
    check_partial_squares::<Gpu>(with_long, &expected, &sum, "f32");
}

/// [`OptimiserKernels::concat_flat_with_partial_squares`](kernels::OptimiserKernels::concat_flat_with_partial_squares) of `parts`: the buffer `expected`, as many
/// partial sums as `partial_squares_len` says (more than one, each written: every cube copies
/// some of the longest part), their total the exact `Σ x²`; and
/// [`OptimiserKernels::clip_partial_squares`](kernels::OptimiserKernels::clip_partial_squares) of them, to the bit, the factors of their total `squares` in
/// a launch of its own, clipped or not, with a factor the gradients carry or without.
fn check_partial_squares<Gpu: WgpuKernels>(
    parts: impl Fn(&WgpuDevice) -> Vec<FloatTensor<Gpu>>,
    expected: &[f32],
    squares: &[f32],
    case: &str,
) {
    let gpu = WgpuDevice::default();
    let [flat, partials] = Gpu::concat_flat_with_partial_squares(parts(&gpu), None, &gpu);
    assert_eq!(read::<Gpu>(&flat), expected, "{case}: the buffer gathered with its partial squares");
    let sizes: Vec<(usize, DType)> = parts(&gpu).iter().map(|p| (p.shape().num_elements(), p.dtype())).collect();
    let partial = read::<Gpu>(&partials);
    assert_eq!(partial.len(), Gpu::partial_squares_len(&sizes, &gpu), "{case}: the partial sums' count, told ahead");
    assert!(partial.len() > 1, "{case}: a sum per cube, {} of them", partial.len());
    assert!(partial.iter().all(|&p| p > 0.0), "{case}: every cube's sum written");
    let exact: f64 = expected.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
    let total: f64 = partial.iter().map(|&v| f64::from(v)).sum();
    assert!((total - exact).abs() <= 1e-5 * exact, "{case}: Σ of the partial squares {total} against {exact}");
    for (max_norm, grad_scale) in [(1.0, 1.0), (1.0e4, 1.0), (1.0, 3.0 * 1024.0), (0.0, 2.0)] {
        let what = format!("{case}, max {max_norm}, carried {grad_scale}");
        let [apart_norm, apart_scale] =
            Gpu::clip_factors(primitive::<Gpu>(squares.to_vec(), &gpu), max_norm, grad_scale);
        let clipping = PartialSquares { partials: partials.clone(), max_norm, grad_scale };
        let [norm, scale] = Gpu::clip_partial_squares(&clipping);
        assert_eq!(read::<Gpu>(&norm), read::<Gpu>(&apart_norm), "the norm of the partial squares, {what}");
        assert_eq!(read::<Gpu>(&scale), read::<Gpu>(&apart_scale), "the scale of the partial squares, {what}");
    }
}

/// The clipping factors from a sum of squares, in one launch, equal the composed operations'
/// on the CPU: clipped or not, with and without a factor the gradients carry, and with
/// clipping off.
fn the_clip_factors_equal_the_cpus<Gpu: WgpuKernels>() {
    let (cpu, gpu) = (Default::default(), WgpuDevice::default());
    for squares in [0.0, 0.25, 4.0, 1.0e6] {
        for (max_norm, grad_scale) in [(10.0, 1.0), (1.0, 1.0), (1.0, 3.0 * 1024.0), (0.0, 2.0), (0.0, 1.0)] {
            let expected = Flex::clip_factors(primitive::<Flex>(vec![squares], &cpu), max_norm, grad_scale);
            let got = Gpu::clip_factors(primitive::<Gpu>(vec![squares], &gpu), max_norm, grad_scale);
            for (name, e, g) in [("norm", &expected[0], &got[0]), ("scale", &expected[1], &got[1])] {
                let (e, g) = (read::<Flex>(e), read::<Gpu>(g));
                assert!(
                    max_relative(&e, &g) <= 1e-6,
                    "{name} of Σ g² {squares}, max {max_norm}, carried {grad_scale}: {g:?}, CPU {e:?}"
                );
            }
        }
    }
}

/// The bytes of a tensor of any dtype.
fn bytes<B: Backend>(t: &FloatTensor<B>) -> Vec<u8> {
    Tensor::<B, 1>::from_primitive(TensorPrimitive::Float(t.clone())).into_data().as_bytes().to_vec()
}

/// The half precisions the device computes in (f16 at least: lavapipe has it).
fn half_dtypes<Gpu: WgpuKernels>(device: &WgpuDevice) -> Vec<FloatDType> {
    let supported: Vec<FloatDType> =
        [FloatDType::F16, FloatDType::BF16].into_iter().filter(|&d| Gpu::supports_dtype(device, d.into())).collect();
    assert!(supported.contains(&FloatDType::F16), "the wgpu device computes in f16");
    supported
}

/// The update that also writes the new weights' half-precision copies (for a mixed-precision
/// forward), over more parameters than one launch takes: the weights, moments and average
/// equal the plain update's to the bit, and each copy equals burn's cast of the new weights to
/// the bit.
fn the_update_writes_the_half_copies_burns_cast_would<Gpu: WgpuKernels>() {
    let gpu = WgpuDevice::default();
    for copy in half_dtypes::<Gpu>(&gpu) {
        let sizes: Vec<usize> =
            [5_000].into_iter().chain((0..MAX_PARTS_PER_LAUNCH + 3).map(|i| 1 + i * 37 % 300)).collect();
        let len: usize = sizes.iter().sum();
        let offsets = sizes.iter().scan(0, |at, &n| Some(std::mem::replace(at, *at + n))).collect::<Vec<_>>();
        let weights = || (0..sizes.len()).map(|i| primitive::<Gpu>(values(sizes[i], 5.0 + i as f32), &gpu)).collect();
        let scale = primitive::<Gpu>(vec![0.37], &gpu);
        let step = AdamStep {
            lr: 1e-3,
            beta_1: 0.95,
            beta_2: 0.999,
            epsilon: 1e-8,
            weight_decay: 1e-6,
            time: 3,
            ema_weight: Some(0.25),
        };
        let mut plain_buffers = buffers::<Gpu>(len, &gpu);
        let plain = Gpu::adam_update_all(weights(), &offsets, &mut plain_buffers, &scale, &step);
        let mut with_buffers = buffers::<Gpu>(len, &gpu);
        let with = Gpu::adam_update_all_with_copies(weights(), &offsets, &mut with_buffers, &scale, &step, copy);
        assert_eq!(with.copies.len(), sizes.len(), "{copy:?}: a copy per parameter");
        for (i, ((p, w), c)) in plain.iter().zip(&with.weights).zip(&with.copies).enumerate() {
            assert_eq!(read::<Gpu>(w), read::<Gpu>(p), "{copy:?}: the weights of parameter {i}");
            assert_eq!(c.dtype(), DType::from(copy), "{copy:?}: parameter {i}'s copy's dtype");
            let cast = Gpu::float_cast(w.clone(), copy);
            assert_eq!(bytes::<Gpu>(c), bytes::<Gpu>(&cast), "{copy:?}: parameter {i}'s copy");
        }
        let pairs = [
            ("first moment", &plain_buffers.moment_1, &with_buffers.moment_1),
            ("second moment", &plain_buffers.moment_2, &with_buffers.moment_2),
            ("average", plain_buffers.average.as_ref().unwrap(), with_buffers.average.as_ref().unwrap()),
        ];
        for (name, a, b) in pairs {
            assert_eq!(read::<Gpu>(a), read::<Gpu>(b), "{copy:?}: {name}");
        }
    }
}

/// Weights kept as views of one buffer, at aligned places with padding between (or none, where a
/// parameter fills its place), more of them than the launch has units, updated in one launch over
/// seven steps (the last five clipped by partial squares, which the update totals itself, or, past
/// what every cube should total, has totalled apart first), with and
/// without half-precision copies (themselves views of a second buffer):
/// every view, made before the updates, reads the same weights (and copies) as the update of each
/// weight gives, to the bit, and a read of a view asked for before an update (still queued under
/// fusion) sees the weights before it, one asked for after, after; the moments and the average
/// are the same; the padding is left as it was.
fn the_update_of_weights_kept_as_views_equals_the_update_of_each<Gpu: WgpuKernels>() {
    let gpu = WgpuDevice::default();
    let alignment = Gpu::weight_view_alignment(&gpu).expect("cubecl's backends keep weight views");
    let step_of = |time| AdamStep {
        lr: 1e-3,
        beta_1: 0.95,
        beta_2: 0.999,
        epsilon: 1e-8,
        weight_decay: 1e-6,
        time,
        ema_weight: Some(if time == 1 { 1.0 } else { 0.25 }),
    };
    let copies = [None].into_iter().chain(half_dtypes::<Gpu>(&gpu).into_iter().map(Some));
    for copy in copies {
        // More weights than the launch has units (so a unit walks on to a later parameter),
        // lengths that fill their places exactly (no padding after them, the last
        // one ending at the buffer's end) and odd ones.
        let place = (alignment / 2).max(2);
        let sizes: Vec<usize> = [300_000, 1, 4 * place]
            .into_iter()
            .chain((0..MAX_PARTS_PER_LAUNCH + 3).map(|i| 1 + i * 37 % 300))
            .chain([place])
            .collect();
        let len: usize = sizes.iter().sum();
        let offsets = sizes.iter().scan(0, |at, &n| Some(std::mem::replace(at, *at + n))).collect::<Vec<_>>();
        let initial = |i: usize| values(sizes[i], 5.0 + i as f32);
        let places = ViewPlaces::new(&sizes, alignment);
        let starts = places.starts();
        assert_eq!(places.extent(), starts.last().unwrap() + place, "the last parameter ends the buffer");
        let mut padded = vec![-7.0; places.extent()];
        for (i, &start) in starts.iter().enumerate() {
            padded[start..start + sizes[i]].copy_from_slice(&initial(i));
        }
        let mut weights = primitive::<Gpu>(padded.clone(), &gpu);
        let views = Gpu::weight_views(weights.clone(), &places);
        let mut copies = copy.map(|dtype| Gpu::float_cast(weights.clone(), dtype));
        let copy_views = copies.as_ref().map(|c| Gpu::weight_views(c.clone(), &places));
        let table = ViewTable::<Gpu>::new(&places, &gpu);
        let scale = primitive::<Gpu>(vec![0.37], &gpu);
        let (mut each, mut all) = (buffers::<Gpu>(len, &gpu), buffers::<Gpu>(len, &gpu));
        let mut separate: Vec<_> = (0..sizes.len()).map(|i| primitive::<Gpu>(initial(i), &gpu)).collect();
        let mut separate_copies = Vec::new();
        // Reads of a view asked for just before and just after the second update, read back only
        // at the end (under fusion they wait in its queue), with what each should see.
        let doubled = |t: &FloatTensor<Gpu>| Gpu::float_mul_scalar(t.clone(), 2.0.into());
        let mut queued = Vec::new();
        for time in 1..=7 {
            if time == 2 {
                queued.push((doubled(&views[2]), doubled(&separate[2])));
            }
            let grads = values(len, 10.0 + time as f32);
            each.grads = primitive::<Gpu>(grads.clone(), &gpu);
            all.grads = primitive::<Gpu>(grads, &gpu);
            let step = step_of(time);
            if time < 3 {
                let updated = kernels::adam_update_all_copying(separate, &offsets, &mut each, &scale, &step, copy);
                (separate, separate_copies) = (updated.weights, updated.copies);
                (weights, copies) = Gpu::adam_update_views(weights, copies, &table, &mut all, &scale, &step);
            } else {
                // Clipped by partial squares, more than a cube has units (their norm about 11),
                // clipped or not, with a factor the gradients carry or without, and clipping off:
                // the update totals them and clips in its own launch, to the bit as the factors
                // computed apart; the last time more than every cube should total (computed
                // apart first, then), to the same bits.
                let (max_norm, grad_scale) = [(1.0, 1.0), (1.0e4, 1.0), (1.0, 3.0 * 1024.0), (0.0, 2.0), (1.0, 1.0)]
                    [usize::try_from(time - 3).unwrap()];
                let count = if time == 7 { 20_000 } else { 1_500 };
                let partials: Vec<f32> = values(count, 3.0).iter().map(|v| v * v).collect();
                let squares = PartialSquares { partials: primitive::<Gpu>(partials, &gpu), max_norm, grad_scale };
                let [norm, scale] = Gpu::clip_partial_squares(&squares);
                if max_norm == 1.0 && grad_scale == 1.0 {
                    assert!(read::<Gpu>(&scale)[0] < 0.5, "{copy:?}: a norm of about 11 clipped to 1");
                }
                let updated = kernels::adam_update_all_copying(separate, &offsets, &mut each, &scale, &step, copy);
                (separate, separate_copies) = (updated.weights, updated.copies);
                let ViewsUpdate { weights: w, copies: c, norm: in_update_norm, scale: in_update_scale } =
                    Gpu::adam_update_views_clipping(weights, copies, &table, &mut all, &squares, &step);
                (weights, copies) = (w, c);
                let what = format!("{copy:?}, max {max_norm}, carried {grad_scale}");
                assert_eq!(read::<Gpu>(&in_update_norm), read::<Gpu>(&norm), "{what}: the norm the update computed");
                assert_eq!(read::<Gpu>(&in_update_scale), read::<Gpu>(&scale), "{what}: the scale the update computed");
            }
            if time == 2 {
                queued.push((doubled(&views[2]), doubled(&separate[2])));
            }
        }
        for ((read_view, expected), when) in queued.iter().zip(["before", "after"]) {
            assert_eq!(read::<Gpu>(read_view), read::<Gpu>(expected), "a read of a view asked for {when} an update");
        }
        let case = format!("copies in {copy:?}");
        for (i, (view, weight)) in views.iter().zip(&separate).enumerate() {
            assert_eq!(read::<Gpu>(view), read::<Gpu>(weight), "{case}: the view of parameter {i}");
        }
        for (i, (view, copy)) in copy_views.iter().flatten().zip(&separate_copies).enumerate() {
            assert_eq!(bytes::<Gpu>(view), bytes::<Gpu>(copy), "{case}: the copy's view of parameter {i}");
        }
        let after = read::<Gpu>(&weights);
        let inside = |k: usize| starts.iter().zip(&sizes).any(|(&s, &n)| (s..s + n).contains(&k));
        let untouched = (0..places.extent()).filter(|&k| !inside(k)).all(|k| after[k] == padded[k]);
        assert!(untouched, "{case}: the padding is left alone");
        let pairs = [
            ("first moment", &each.moment_1, &all.moment_1),
            ("second moment", &each.moment_2, &all.moment_2),
            ("average", each.average.as_ref().unwrap(), all.average.as_ref().unwrap()),
        ];
        for (name, a, b) in pairs {
            assert_eq!(read::<Gpu>(a), read::<Gpu>(b), "{case}: {name}");
        }
    }
}

/// Gradients of a half-precision forward (half-precision parts, some of them views, among f32
/// ones, more than one launch takes) gather into the f32 buffer as burn's cast to f32 then
/// concatenation gathers them, to the bit, with the squares of the f32 values, in as many
/// launches as f32 parts alone would take.
fn the_gather_casts_half_precision_gradients_up<Gpu: WgpuKernels>() {
    let gpu = WgpuDevice::default();
    for half in half_dtypes::<Gpu>(&gpu) {
        let parts = || -> Vec<FloatTensor<Gpu>> {
            (0..MAX_PARTS_PER_LAUNCH + 4)
                .map(|i| {
                    let t = Tensor::<Gpu, 1>::from_data(TensorData::new(values(12 + i, i as f32), [12 + i]), &gpu);
                    let t = if i % 25 == 0 { t } else { t.cast(half) };
                    let t = t.reshape([1, 12 + i]);
                    let t = if i % 4 == 1 { t.swap_dims(0, 1) } else { t };
                    t.into_primitive().tensor()
                })
                .collect()
        };
        let expected = read::<Gpu>(&kernels::portable::concat_flat::<Gpu>(parts(), &gpu));
        let [flat, squares] = Gpu::concat_flat_with_squares(parts(), None, &gpu);
        assert_eq!(read::<Gpu>(&flat), expected, "{half:?}");
        let exact: f64 = expected.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
        let sum = f64::from(read::<Gpu>(&squares)[0]);
        assert!((sum - exact).abs() <= 1e-5 * exact, "{half:?}: Σ x² {sum} against {exact}");
        assert_eq!(read::<Gpu>(&Gpu::concat_flat(parts(), None, &gpu)), expected, "{half:?}, without squares");
        // Left as partial sums, and clipped by them.
        check_partial_squares::<Gpu>(|_| parts(), &expected, &read::<Gpu>(&squares), &format!("{half:?}"));
        // A launch reads two dtypes: as many launches as parts all of f32 take (each of these
        // parts is shorter than a cube, so a launch leaves one partial sum).
        let sizes: Vec<(usize, DType)> = parts().iter().map(|p| (p.shape().num_elements(), p.dtype())).collect();
        let all_f32: Vec<(usize, DType)> = sizes.iter().map(|&(n, _)| (n, DType::F32)).collect();
        assert_eq!(
            Gpu::partial_squares_len(&sizes, &gpu),
            Gpu::partial_squares_len(&all_f32, &gpu),
            "{half:?}: the launches of a mixed-precision gather"
        );
    }
}

/// The largest difference between `a` and `b` relative to the largest magnitude in `b`.
fn max_error_relative_to_largest(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    let largest = b.iter().fold(0f32, |m, v| m.max(v.abs())).max(f32::MIN_POSITIVE);
    a.iter().zip(b).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max) / largest
}

/// `values` as a `[N, C, S]` tensor's primitive.
fn primitive_3d<B: Backend>(values: Vec<f32>, [n, c, s]: [usize; 3], device: &B::Device) -> FloatTensor<B> {
    Tensor::<B, 1>::from_data(TensorData::new(values, [n * c * s]), device).reshape([n, c, s]).into_primitive().tensor()
}

/// The values of a tensor of any rank, in order.
fn read_any<B: Backend>(t: FloatTensor<B>) -> Vec<f32> {
    let n = t.shape().num_elements();
    read::<B>(&Tensor::<B, 1>::from_primitive(TensorPrimitive::Float(t)).reshape([n]).into_primitive().tensor())
}

/// GroupNorm with each activation, over groups smaller and larger than a cube's units: the
/// kernels' output and statistics (one launch), and input, scale and shift gradients (two
/// launches, from each backend's own statistics), equal the CPU's fused passes (sums in f64)
/// to 1e-5 of the largest value.
fn the_group_norm_kernels_equal_the_cpus<Gpu: WgpuKernels>() {
    use kernels::Activation;
    let gpu = WgpuDevice::default();
    let cpu = Default::default();
    // ([N, C, S], groups)
    let shapes = [([3, 32, 50], 8), ([2, 64, 300], 8), ([4, 6, 3], 3), ([1, 2048, 4], 8)];
    for (shape @ [n, c, s], groups) in shapes {
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
            let gpu_inputs = || {
                [
                    primitive_3d::<Gpu>(x.clone(), shape, &gpu),
                    primitive::<Gpu>(gamma.clone(), &gpu),
                    primitive::<Gpu>(beta.clone(), &gpu),
                ]
            };
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
                primitive_3d::<Gpu>(dy.clone(), shape, &gpu),
                groups,
                activation,
            );
            let case = format!("[{n}, {c}, {s}] in {groups} groups, {activation:?}");
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
fn group_norm_in_half_precision_equals_casting_around_it<Gpu: WgpuKernels>() {
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
fn film_in_half_precision_equals_the_f32_kernels<Gpu: WgpuKernels>() {
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
fn the_film_kernels_equal_burns_operations_and_their_gradients<Gpu: WgpuKernels>() {
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

/// A bias added along the second dimension through `kernels::add_channel_bias` under autodiff:
/// on the GPU its gradient one launch (a cube per channel), on the CPU burn's broadcast and
/// autodiff. The output and both gradients agree to 1e-5 of the largest value, for a U-Net's
/// `[B, C, T]` and a convolution's `[N, C, H, W]`.
fn the_channel_bias_gradient_equals_burns_broadcast<Gpu: WgpuKernels>() {
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
fn the_transposed_convolution_equals_the_cpus<Gpu: WgpuKernels>() {
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
fn the_channel_bias_gradient_in_half_precision_is_the_f32_sum_rounded_once<Gpu: WgpuKernels>() {
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

/// Two YUV 4:2:0 frames a launch (`bt601::check_frames`: every luma value under every (U, V)
/// pair at the even width, most of them at the odd one), uploaded as the trainer uploads them
/// (`transforms::frames_to_int`): the kernel's RGB levels are the bytes of the decoder's own
/// converter (`bt601::planes_to_chw`, swscale's arithmetic), every one.
fn the_yuv_kernel_gives_the_decoders_bytes_for_every_value<Gpu: WgpuKernels>() {
    let device = WgpuDevice::default();
    assert!(<Gpu as FrameKernels>::has_yuv420_kernel());
    for (h, w) in [(512usize, 512usize), (512, 509)] {
        let (planes, expected) = datasets::video::bt601::check_frames(h, w);
        let frame_len = kernels::yuv420_frame_len(h, w);
        let ints = transforms::frames_to_int::<Gpu>(&planes, [2, 1, 1, frame_len], &device);
        let terms = transforms::decoder_terms();
        let rgb =
            <Gpu as FrameKernels>::yuv420_to_rgb(ints.into_primitive(), 2, (h, w), &terms, FloatDType::F32).unwrap();
        let rgb = Tensor::<Gpu, 4>::from_primitive(TensorPrimitive::Float(rgb));
        assert_eq!(rgb.dims(), [2, 3, h, w]);
        let levels: Vec<f32> = rgb.into_data().to_vec().unwrap();
        let differing = levels.iter().zip(&expected).filter(|(l, e)| (*l * 255.0).round() != f32::from(**e)).count();
        assert_eq!(differing, 0, "{h}x{w}: of {} values", levels.len());
    }
}

/// burn's matrix product (cubecl's) as the unfolded convolution's products, where cuda takes
/// cuBLAS's.
struct BurnProducts;

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
fn the_unfolded_1d_convolution_equals_the_cpus() {
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
