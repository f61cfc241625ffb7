//! Fuzz target: `datasets::fuzzing::metadata` (see that module).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| datasets::fuzzing::metadata(data));
