//! Fuzz target: `datasets::fuzzing::info_json` (see that module).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| datasets::fuzzing::info_json(data));
