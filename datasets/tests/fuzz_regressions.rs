//! Replays every input the fuzz targets (`fuzz/`) ever crashed on, kept in
//! `fuzz/regressions/<target>/`, through the same entry points: each must now return.

use std::path::Path;

fn replay(target: &str, run: fn(&[u8])) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/regressions").join(target);
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_file() && path.file_name().is_some_and(|n| n != ".gitkeep") {
            run(&std::fs::read(&path).unwrap());
            count += 1;
        }
    }
    count
}

#[test]
fn past_fuzz_crashes_now_return() {
    use datasets::fuzzing::{frame_cache, info_json, metadata, parquet_table};
    let replayed = replay("info_json", info_json)
        + replay("metadata", metadata)
        + replay("parquet_table", parquet_table)
        + replay("frame_cache", frame_cache);
    eprintln!("replayed {replayed} inputs");
    // And the edge inputs every target must take.
    for run in [info_json, metadata, parquet_table, frame_cache] {
        for input in [&b""[..], b"\0", b"{}", b"PAR1", b"PAR1\0\0\0\0PAR1", &[0xFF; 64]] {
            run(input);
        }
    }
}
