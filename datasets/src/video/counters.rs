//! Counts of a decoder's work.

/// Counters of the work a decoder did, for benchmarks and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DecodeCounters {
    /// Frames decoded.
    pub frames_decoded: u64,
    /// Seeks performed.
    pub seeks: u64,
    /// Frames written out: converted to RGB, or copied as YUV planes.
    pub frames_converted: u64,
}
