//! The high-throughput loader: episode-aware sampling with LeRobot's `delta_timestamps`
//! windows, batches assembled on a worker pool into reusable buffers, and a persistent bounded
//! prefetch channel (built in the loader issue; this crate is a placeholder until then).
