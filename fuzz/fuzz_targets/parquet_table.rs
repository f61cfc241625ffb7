//! Fuzz target: `datasets::fuzzing::parquet_table` (see that module).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| datasets::fuzzing::parquet_table(data));
