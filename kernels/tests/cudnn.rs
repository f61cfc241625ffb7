//! The cuDNN path's parts that need no GPU: burn's convolutions and transposed ones mapped to
//! cuDNN's descriptors (output shapes against Flex's own), the problems it refuses, the fallback
//! on a machine without cuDNN, and the file that keeps the algorithms chosen for later runs. The
//! convolutions themselves are checked on a GPU by `bench gpu-check` (bench/src/cudnn_check.rs).

use burn::backend::Flex;
use burn::prelude::*;
use burn::tensor::DType;
use burn::tensor::module::conv2d;
use burn::tensor::ops::ConvOptions;
use kernels::cudnn::{
    ConvDataType, ConvLayout, ConvProblem, KEPT_ALGORITHMS_FILE, KeptAlgorithm, KeptAlgorithms, ProblemError,
};

fn options(stride: usize, padding: usize, dilation: usize, groups: usize) -> ConvOptions<2> {
    ConvOptions::new([stride; 2], [padding; 2], [dilation; 2], groups)
}

/// The output shape is what Flex's convolution gives, for the encoder's convolutions and the
/// U-Net's 1-D ones (height 1), strided, dilated and grouped ones; the options reach cuDNN's
/// descriptors as given.
#[test]
fn problems_have_burns_shapes_and_options() {
    let device = Default::default();
    let cases = [
        ([2, 3, 96, 96], [64, 3, 7, 7], options(2, 3, 1, 1)),
        ([2, 64, 24, 24], [64, 64, 3, 3], options(1, 1, 1, 1)),
        ([2, 64, 24, 24], [128, 64, 1, 1], options(2, 0, 1, 1)),
        ([2, 64, 1, 16], [128, 64, 1, 5], ConvOptions::new([1, 1], [0, 2], [1, 1], 1)),
        ([1, 8, 9, 11], [4, 4, 3, 2], ConvOptions::new([2, 3], [1, 0], [2, 1], 2)),
    ];
    for (input, weight, options) in cases {
        let x = Tensor::<Flex, 4>::ones(input, &device);
        let w = Tensor::<Flex, 4>::ones(weight, &device);
        let expected = conv2d(x, w, None, options.clone()).dims();
        let problem = ConvProblem::new(input, weight, &options, [DType::F32; 2]).unwrap();
        assert_eq!(problem.output_shape(), expected, "{input:?} by {weight:?} with {options:?}");
        assert_eq!(problem.input, input.map(|d| d as i32));
        assert_eq!(problem.weight, weight.map(|d| d as i32));
        assert_eq!(problem.padding, options.padding.map(|p| p as i32));
        assert_eq!(problem.stride, options.stride.map(|s| s as i32));
        assert_eq!(problem.dilation, options.dilation.map(|d| d as i32));
        assert_eq!(problem.groups, options.groups as i32);
    }
}

/// A transposed convolution is posed as the convolution it transposes: its input the
/// transposed output, of the shape burn's `conv_transpose2d` gives (the U-Net's upsampling,
/// strided, padded, dilated and grouped ones), its output the transposed input, its weight the
/// same tensor. One whose output padding reaches the stride has no such convolution.
#[test]
fn transposed_problems_are_the_convolutions_they_transpose() {
    use burn::tensor::module::conv_transpose2d;
    use burn::tensor::ops::ConvTransposeOptions;
    let device = Default::default();
    let cases = [
        ([64, 1024, 1, 4], [1024, 1024, 1, 4], ConvTransposeOptions::new([1, 2], [0, 1], [0, 0], [1, 1], 1)),
        ([2, 6, 5, 7], [6, 3, 3, 3], ConvTransposeOptions::new([2, 2], [1, 1], [1, 1], [1, 1], 1)),
        ([2, 4, 5, 6], [4, 3, 3, 2], ConvTransposeOptions::new([3, 2], [1, 0], [2, 1], [2, 1], 2)),
        ([1, 3, 4, 4], [3, 2, 1, 1], ConvTransposeOptions::new([1, 1], [0, 0], [0, 0], [1, 1], 1)),
    ];
    for (input, weight, options) in cases {
        let x = Tensor::<Flex, 4>::ones(input, &device);
        let w = Tensor::<Flex, 4>::ones(weight, &device);
        let expected = conv_transpose2d(x, w, None, options.clone()).dims();
        let problem = ConvProblem::transposed(input, weight, &options, [DType::F32; 2]).unwrap();
        assert_eq!(problem.input.map(|d| d as usize), expected, "{input:?} by {weight:?} with {options:?}");
        assert_eq!(problem.output_shape(), input);
        assert_eq!(problem.weight, weight.map(|d| d as i32));
        assert_eq!(problem.stride, options.stride.map(|s| s as i32));
        assert_eq!(problem.padding, options.padding.map(|p| p as i32));
        assert_eq!(problem.dilation, options.dilation.map(|d| d as i32));
        assert_eq!(problem.groups, options.groups as i32);
    }
    let refused = |input, weight, options: ConvTransposeOptions<2>| {
        let error = ConvProblem::transposed(input, weight, &options, [DType::F32; 2]).unwrap_err();
        assert!(matches!(error, ProblemError::Shapes { .. }), "{error}");
    };
    // Output padding 1 at stride 1 (allowed by the dilation of 2): longer than any convolution's.
    refused([1, 4, 5, 5], [4, 4, 3, 3], ConvTransposeOptions::new([1, 1], [0, 0], [1, 1], [2, 2], 1));
    // The weight's first dimension is the input's channels.
    refused([1, 4, 5, 5], [3, 4, 3, 3], ConvTransposeOptions::new([1, 1], [0, 0], [0, 0], [1, 1], 1));
    // Padding that leaves nothing.
    refused([1, 4, 1, 1], [4, 4, 1, 1], ConvTransposeOptions::new([1, 1], [1, 1], [0, 0], [1, 1], 1));
}

#[test]
fn a_channels_last_problem_keeps_burns_shapes_and_lies_nhwc_with_krsc_weights() {
    // The encoder's maps held channels-last (`LEROBOT_RS_CHANNELS_LAST=1`): the same shapes and
    // work, keyed apart from the channels-first problem, every tensor's channels innermost.
    let first = ConvProblem::new([2, 64, 21, 17], [128, 64, 3, 3], &options(2, 1, 1, 1), [DType::BF16; 2]).unwrap();
    assert_eq!(first.layout, ConvLayout::Nchw);
    let last = first.in_layout(ConvLayout::Nhwc);
    assert_eq!((last.output_shape(), last.multiply_adds()), (first.output_shape(), first.multiply_adds()));
    assert_ne!(last, first, "the algorithms found for one layout are not the other's");
    assert_eq!(ConvLayout::Nchw.strides(first.input), [64 * 21 * 17, 21 * 17, 17, 1]);
    assert_eq!(ConvLayout::Nhwc.strides(last.input), [21 * 17 * 64, 1, 17 * 64, 64]);
    // The weight KRSC, [O, kh, kw, C]; the output [N, H', W', O].
    assert_eq!(ConvLayout::Nhwc.strides(last.weight), [3 * 3 * 64, 1, 3 * 64, 64]);
    assert_eq!(ConvLayout::Nhwc.strides(last.output), [11 * 9 * 128, 1, 9 * 128, 128]);
}

#[test]
fn element_types() {
    let new = |types| ConvProblem::new([1, 4, 8, 8], [4, 4, 3, 3], &options(1, 1, 1, 1), types);
    assert_eq!(new([DType::F32; 2]).unwrap().data_type, ConvDataType::F32);
    assert_eq!(new([DType::BF16; 2]).unwrap().data_type, ConvDataType::Bf16);
    assert_eq!(new([DType::F16; 2]).unwrap().data_type, ConvDataType::F16);
    assert_eq!(new([DType::F64; 2]), Err(ProblemError::DataType(DType::F64)));
    assert_eq!(
        new([DType::F32, DType::BF16]),
        Err(ProblemError::MixedTypes { input: DType::F32, weight: DType::BF16 })
    );
}

#[test]
fn impossible_convolutions_are_refused() {
    let refuse = |input, weight, options: ConvOptions<2>| {
        let error = ConvProblem::new(input, weight, &options, [DType::F32; 2]).unwrap_err();
        assert!(matches!(error, ProblemError::Shapes { .. }), "{error}");
    };
    refuse([1, 4, 8, 8], [4, 3, 3, 3], options(1, 1, 1, 1));
    refuse([1, 4, 8, 8], [6, 1, 3, 3], options(1, 1, 1, 4));
    refuse([1, 4, 2, 2], [4, 4, 5, 5], options(1, 0, 1, 1));
    refuse([1, 4, 8, 8], [4, 4, 3, 3], ConvOptions { stride: [0, 1], ..options(1, 1, 1, 1) });
    refuse([0, 4, 8, 8], [4, 4, 3, 3], options(1, 1, 1, 1));
    let huge = ConvProblem::new([1 << 16, 64, 256, 256], [64, 64, 3, 3], &options(1, 1, 1, 1), [DType::F32; 2]);
    assert!(matches!(huge, Err(ProblemError::TooLarge(_))), "{huge:?}");
}

/// Without cuDNN (CI's machines), the status says so in one line, naming the library and how
/// to get it, and nothing goes to cuDNN; with it, it is cuDNN 9.
#[test]
fn without_cudnn_the_status_says_what_to_install() {
    match kernels::cudnn::status() {
        Ok(version) => assert!((90000..100000).contains(version), "cuDNN {version}"),
        Err(why) => {
            assert!(why.contains("libcudnn.so.9") && why.contains("pip install nvidia-cudnn-cu13"), "{why}");
            assert!(!why.contains('\n'), "one line: {why}");
            assert!(!kernels::cudnn::takes(DType::F32));
        }
    }
}

fn algorithm(name: &str, workspace: usize) -> KeptAlgorithm {
    KeptAlgorithm { algorithm: name.into(), math: "CUDNN_DEFAULT_MATH".into(), workspace }
}

/// The files in `path`'s folder, by name.
fn files_beside(path: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// What one run keeps, the next reads. Two runs that read the file before either wrote keep
/// both their algorithms; a run's later choice under a key replaces an earlier one, and an older
/// run's later writes do not undo it; a forgotten one is gone from the file.
#[test]
fn kept_algorithms_reach_the_next_run_and_concurrent_ones_merge() {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join(KEPT_ALGORITHMS_FILE);
    let (gemm, data_1) =
        (algorithm("CUDNN_CONVOLUTION_FWD_ALGO_GEMM", 0), algorithm("CUDNN_CONVOLUTION_BWD_DATA_ALGO_1", 1 << 20));
    let first = KeptAlgorithms::load(path.clone());
    assert!(first.is_empty(), "no file yet: none kept");
    let second = KeptAlgorithms::load(path.clone());
    first.keep("a".into(), gemm.clone()).unwrap();
    second.keep("b".into(), data_1.clone()).unwrap();
    let next = KeptAlgorithms::load(path.clone());
    assert_eq!(
        (next.len(), next.get("a"), next.get("b"), next.get("c")),
        (2, Some(gemm.clone()), Some(data_1.clone()), None)
    );

    // `second` searched "a" again (its kept one failed); `first`, which read the old "a", then
    // keeps another key.
    let direct = algorithm("CUDNN_CONVOLUTION_FWD_ALGO_DIRECT", 64);
    second.keep("a".into(), direct.clone()).unwrap();
    first.keep("c".into(), gemm.clone()).unwrap();
    let next = KeptAlgorithms::load(path.clone());
    assert_eq!(next.get("a"), Some(direct), "the later choice stays");
    assert_eq!(next.len(), 3);

    next.forget("b").unwrap();
    let after = KeptAlgorithms::load(path.clone());
    assert_eq!((after.len(), after.get("b")), (2, None), "forgotten");
    let file = path.file_name().unwrap().to_str().unwrap();
    assert_eq!(files_beside(&path), [file.to_owned(), format!("{file}.lock")], "nothing else left beside it");
}

/// A file cut short, of another format, or not JSON, is read as none kept (the run searches)
/// and replaced by the next addition; the temporary file a killed run left beside it is removed.
#[test]
fn a_damaged_kept_file_is_searched_past_and_replaced() {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join(KEPT_ALGORITHMS_FILE);
    let good = KeptAlgorithms::load(path.clone());
    good.keep("a".into(), algorithm("CUDNN_CONVOLUTION_FWD_ALGO_GEMM", 0)).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let mut other_format: serde_json::Value = serde_json::from_str(&text).unwrap();
    other_format["format"] = 99.into();
    let other_format = other_format.to_string();
    let left_by_a_killed_run = path.with_file_name(format!("{}.tmp", path.file_name().unwrap().to_str().unwrap()));
    let filter_1 = algorithm("CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1", 8);
    for damaged in [&text[..text.len() / 2], &other_format, "not json"] {
        std::fs::write(&path, damaged).unwrap();
        std::fs::write(&left_by_a_killed_run, "{").unwrap();
        let kept = KeptAlgorithms::load(path.clone());
        assert!(kept.is_empty(), "{damaged:?} is read as none kept");
        assert!(!left_by_a_killed_run.exists(), "the killed run's temporary file is removed");
        kept.keep("b".into(), filter_1.clone()).unwrap();
        let next = KeptAlgorithms::load(path.clone());
        assert_eq!((next.len(), next.get("b")), (1, Some(filter_1.clone())), "after {damaged:?}");
    }
}

/// The 1-D convolutions' path is the environment's (`LEROBOT_RS_CONV1D`, cuDNN where unset) until
/// the program sets one, which then holds; without cuDNN no path takes them from burn's
/// operations.
#[test]
fn the_1d_path_is_the_environments_until_the_program_sets_one() {
    use kernels::cudnn::{Conv1dPath, conv1d_path, takes_conv1d, use_conv1d};
    let from_environment = match std::env::var("LEROBOT_RS_CONV1D").as_deref() {
        Ok("burn") => Conv1dPath::Burn,
        Ok("cublas") => Conv1dPath::Cublas,
        _ => Conv1dPath::Cudnn,
    };
    assert_eq!(conv1d_path(), from_environment);
    for path in [Conv1dPath::Cublas, Conv1dPath::Burn, Conv1dPath::Cudnn] {
        use_conv1d(path);
        assert_eq!((conv1d_path(), conv1d_path()), (path, path));
        if kernels::cudnn::status().is_err() {
            assert!(!takes_conv1d(DType::F32), "{path:?} without cuDNN");
        }
    }
}

/// BLAS's column-major product as the reference implementation defines it: `C (m × n, ldc) =
/// op(first) (m × k) · op(second) (k × n)`, each operand read through its leading dimension, and
/// the call refused where a leading dimension is shorter than BLAS allows (cuBLAS's
/// `CUBLAS_STATUS_INVALID_VALUE`).
fn column_major_product(call: &kernels::cudnn::ColumnMajorGemm, first: &[i64], second: &[i64]) -> Vec<i64> {
    let size = |v: i32| usize::try_from(v).unwrap();
    let (m, n, k) = (size(call.m), size(call.n), size(call.k));
    let (first_ld, second_ld, product_ld) = (size(call.first_ld), size(call.second_ld), size(call.product_ld));
    let first_rows = if call.first_transposed { k } else { m };
    let second_rows = if call.second_transposed { n } else { k };
    assert!(first_ld >= first_rows.max(1), "lda {first_ld} under {first_rows}: {call:?}");
    assert!(second_ld >= second_rows.max(1), "ldb {second_ld} under {second_rows}: {call:?}");
    assert!(product_ld >= m.max(1), "ldc {product_ld} under {m}: {call:?}");
    let first_at = |i: usize, p: usize| {
        if call.first_transposed { first[p + i * first_ld] } else { first[i + p * first_ld] }
    };
    let second_at = |p: usize, j: usize| {
        if call.second_transposed { second[j + p * second_ld] } else { second[p + j * second_ld] }
    };
    let mut product = vec![0; product_ld * n];
    for j in 0..n {
        for i in 0..m {
            product[i + j * product_ld] = (0..k).map(|p| first_at(i, p) * second_at(p, j)).sum();
        }
    }
    product
}

/// The row-major `op(a)·op(b)` of `a` stored `[rows, columns]`, and `b` likewise.
fn row_major_product(a: &[i64], a_shape: [usize; 2], a_t: bool, b: &[i64], b_shape: [usize; 2], b_t: bool) -> Vec<i64> {
    let at = |x: &[i64], [_, columns]: [usize; 2], t: bool, r: usize, c: usize| {
        if t { x[c * columns + r] } else { x[r * columns + c] }
    };
    let (rows, inner) = if a_t { (a_shape[1], a_shape[0]) } else { (a_shape[0], a_shape[1]) };
    let columns = if b_t { b_shape[0] } else { b_shape[1] };
    (0..rows * columns)
        .map(|e| (0..inner).map(|p| at(a, a_shape, a_t, e / columns, p) * at(b, b_shape, b_t, p, e % columns)).sum())
        .collect()
}

/// The arguments the 1-D convolutions' products hand cuBLAS compute the row-major products they
/// stand for, as BLAS defines its column-major product: the output pass's `W·cols`, the input
/// gradient's `Wᵀ·dY`, the weight gradient's `dY·colsᵀ` (kernels/src/cube/unfold.rs), the fourth
/// combination, and sizes of 1; mismatched inner sizes are refused.
#[test]
fn cublas_arguments_compute_the_row_major_products() {
    use kernels::cudnn::ColumnMajorGemm;
    let values = |len: usize, seed: i64| (0..len as i64).map(|i| (i * 7 + seed) % 11 - 5).collect::<Vec<_>>();
    // (a's stored shape, a transposed, b's stored shape, b transposed)
    let cases = [
        ([6, 15], false, [15, 8], false), // the output pass: W [K, C·S] by cols [C·S, N·L']
        ([6, 15], true, [6, 8], false),   // the input gradient: Wᵀ by dY [K, N·L']
        ([6, 8], false, [15, 8], true),   // the weight gradient: dY by colsᵀ
        ([5, 3], true, [4, 5], true),
        ([1, 4], false, [4, 1], false),
        ([4, 1], false, [1, 3], false),
        ([1, 1], true, [1, 7], false),
        ([9, 2], true, [3, 9], true),
    ];
    for (a_shape, a_t, b_shape, b_t) in cases {
        let (a, b) = (values(a_shape[0] * a_shape[1], 3), values(b_shape[0] * b_shape[1], 8));
        let call = ColumnMajorGemm::of_row_major(a_shape, a_t, b_shape, b_t).unwrap();
        let expected = row_major_product(&a, a_shape, a_t, &b, b_shape, b_t);
        let [rows, columns] = call.product_shape();
        assert_eq!(rows * columns, expected.len(), "{a_shape:?} {a_t} by {b_shape:?} {b_t}");
        // The call passes `b` as the first operand and `a` as the second; `C`'s rows are
        // `product_ld` apart.
        let product = column_major_product(&call, &b, &a);
        assert_eq!(product, expected, "{a_shape:?} {a_t} by {b_shape:?} {b_t}: {call:?}");
    }
    let refused = ColumnMajorGemm::of_row_major([6, 15], false, [14, 8], false).unwrap_err();
    assert!(refused.contains("[6, 15] by [14, 8]"), "{refused}");
    let too_long = ColumnMajorGemm::of_row_major([1, 1 << 31], false, [1 << 31, 1], false).unwrap_err();
    assert!(too_long.contains("beyond 32 bits"), "{too_long}");
}
