//! The optimiser's kernels against the CPU's: the gather with its squares, the clipping factors,
//! Adam's update (of weights kept as views too), in f32 and with half-precision copies.

use burn::backend::Flex;
use burn::backend::wgpu::WgpuDevice;
use burn::prelude::*;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{DType, TensorMetadata};
use kernels::{
    AdamStep, MAX_PARTS_PER_LAUNCH, OptimiserKernels, PartialSquares, ViewPlaces, ViewTable, ViewedWeight, ViewsUpdate,
};

use super::WgpuKernels;
use super::support::{buffers, bytes, half_dtypes, max_relative, primitive, read, values};

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
pub(crate) fn the_kernel_equals_the_cpu_update_over_twenty_steps<Gpu: WgpuKernels>() {
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
pub(crate) fn the_gather_equals_the_cpus_for_every_layout<Gpu: WgpuKernels>() {
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
pub(crate) fn check_partial_squares<Gpu: WgpuKernels>(
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
pub(crate) fn the_clip_factors_equal_the_cpus<Gpu: WgpuKernels>() {
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

/// The update that also writes the new weights' half-precision copies (for a mixed-precision
/// forward), over more parameters than one launch takes: the weights, moments and average
/// equal the plain update's to the bit, and each copy equals burn's cast of the new weights to
/// the bit.
pub(crate) fn the_update_writes_the_half_copies_burns_cast_would<Gpu: WgpuKernels>() {
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
/// weight gives, to the bit (those lying channels-last too, in their shapes' order), and a read of a view asked for before an update (still queued under
/// fusion) sees the weights before it, one asked for after, after; the moments and the average
/// are the same; the padding is left as it was; an update reading its scalars from a buffer
/// given ([`kernels::FlatBuffers::scalars`]) gives what one uploading its own gives.
pub(crate) fn the_update_of_weights_kept_as_views_equals_the_update_of_each<Gpu: WgpuKernels>() {
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
        // one ending at the buffer's end) and odd ones; convolution weights lying channels-last
        // (`[O, kh, kw, C]`), one of a single channel (which lies as its shape says).
        let place = (alignment / 2).max(2);
        let viewed: Vec<ViewedWeight> = [vec![300_000], vec![1], vec![4 * place], vec![16, 5, 3, 3], vec![6, 7, 1, 2]]
            .into_iter()
            .chain([vec![4, 1, 3, 3]])
            .map(|shape| ViewedWeight::new(shape, true))
            .chain((0..MAX_PARTS_PER_LAUNCH + 3).map(|i| ViewedWeight::new(vec![1 + i * 37 % 300], false)))
            .chain([ViewedWeight::new(vec![place], false)])
            .collect();
        assert_eq!(viewed.iter().filter(|w| w.is_channels_last()).count(), 2, "two weights lie channels-last");
        let sizes: Vec<usize> = viewed.iter().map(ViewedWeight::len).collect();
        let len: usize = sizes.iter().sum();
        let offsets = sizes.iter().scan(0, |at, &n| Some(std::mem::replace(at, *at + n))).collect::<Vec<_>>();
        let initial = |i: usize| values(sizes[i], 5.0 + i as f32);
        let places = ViewPlaces::new(viewed.clone(), alignment);
        let starts = places.starts();
        assert_eq!(places.extent(), starts.last().unwrap() + place, "the last parameter ends the buffer");
        let mut padded = vec![-7.0; places.extent()];
        for (i, &start) in starts.iter().enumerate() {
            for (index, value) in initial(i).into_iter().enumerate() {
                padded[start + viewed[i].lying_index(index)] = value;
            }
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
            // The update's scalars from a buffer the caller wrote (as a captured step's update
            // reads them), at odd times for the views' update and at times 2 and 5 for each
            // weight's: the same bits as the scalars the update uploads itself.
            all.scalars = (time % 2 == 1).then(|| primitive::<Gpu>(step.scalars().to_vec(), &gpu));
            each.scalars = matches!(time, 2 | 5).then(|| primitive::<Gpu>(step.scalars().to_vec(), &gpu));
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
        for (i, weight) in viewed.iter().enumerate().filter(|(_, w)| w.is_channels_last()) {
            let lies = read::<Gpu>(&separate[i])
                .into_iter()
                .enumerate()
                .all(|(index, value)| after[starts[i] + weight.lying_index(index)].to_bits() == value.to_bits());
            assert!(lies, "{case}: parameter {i}'s weights lie channels-last in the buffer");
        }
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
pub(crate) fn the_gather_casts_half_precision_gradients_up<Gpu: WgpuKernels>() {
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
