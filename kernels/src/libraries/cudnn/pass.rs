//! The convolution's three passes.

/// One of the convolution's passes (the legacy API's and the graph API's alike).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pass {
    /// `[x, w]` to `y`.
    Output,
    /// `[w, dy]` to `dx`.
    InputGrad,
    /// `[x, dy]` to `dw`.
    WeightGrad,
}
