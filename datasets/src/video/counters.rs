//! Counts of a decoder's work.

/// Counters of the work a decoder did, for benchmarks and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DecodeCounters {
    /// Frames decoded.
    pub frames_decoded: u64,
    /// Seeks performed.
    pub seeks: u64,
    /// Frames converted to RGB.
    pub frames_converted: u64,
}
