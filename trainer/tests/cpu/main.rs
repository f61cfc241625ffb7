//! The trainer's tests that train in this process, on the CPU (Flex), in one binary: each
//! instantiates burn's model and the training loop for Flex, which a test binary of its own would
//! compile again (a release build shares no generic code between crates). Each module was a test
//! binary of its own; those that need optional features say so. Every draw from burn's generator
//! here goes through `init_model`'s seeding, as the runs started at once rely on (tests that draw
//! otherwise, such as `model.rs`, keep binaries of their own). Run one module with `cargo test
//! --release -p trainer --test cpu -- training::`.

#[path = "../common/mod.rs"]
mod common;

#[cfg(feature = "video")]
mod concurrent_runs;
#[cfg(all(feature = "cli", feature = "video", feature = "multi-device"))]
mod data_parallel;
#[cfg(all(feature = "cli", feature = "video"))]
mod faults;
mod held_out_loss;
mod images;
#[cfg(all(feature = "cli", feature = "video", feature = "multi-device", feature = "mpi"))]
mod mpi;
#[cfg(feature = "cli")]
mod policy_path;
#[cfg(feature = "video")]
mod speedups;
#[cfg(all(feature = "cli", feature = "video"))]
mod training;
