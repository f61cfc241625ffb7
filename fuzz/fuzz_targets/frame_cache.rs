//! Fuzz target: `datasets::fuzzing::frame_cache` (see that module).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| datasets::fuzzing::frame_cache(data));
