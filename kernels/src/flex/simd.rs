//! Our own loops compiled for the widest SIMD instructions the CPU has, chosen at run time.
//!
//! The workspace builds for baseline x86-64, where the compiler vectorizes a loop two f64 lanes
//! wide; gemm and burn-flex pick AVX2 or AVX-512 kernels at run time, and [`widest`] lets a loop
//! of ours do the same (through pulp, gemm's dispatch). The instructions change, not the
//! arithmetic: each value goes through the same operations in the same order (no multiply-add
//! is fused, no sum reordered), so the results are the same bits. Worth it where a loop is
//! bound by arithmetic rather than memory: the f64 sums ([`super::sums`]).

/// `work()`, compiled for AVX-512, for AVX2 + FMA and for the baseline, and run as the first
/// this CPU has. Only code inlined into `work` is compiled for the wider instructions.
#[inline(always)]
pub(crate) fn widest<R>(work: impl FnOnce() -> R) -> R {
    pulp::Arch::new().dispatch(work)
}
