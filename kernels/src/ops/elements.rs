//! Which element types our GPU kernels take, and where parts laid end to end start.

use burn::tensor::DType;

/// Whether our GPU kernels read and write `dtype`: f32, or the half precisions of a
/// mixed-precision step (f16, bf16).
pub(crate) fn kernel_float(dtype: DType) -> bool {
    matches!(dtype, DType::F32 | DType::F16 | DType::BF16)
}

/// Where each of parts of `lens` elements starts when they are laid end to end.
pub(crate) fn starts_of(lens: &[usize]) -> Vec<usize> {
    lens.iter().scan(0, |at, &n| Some(std::mem::replace(at, *at + n))).collect()
}
