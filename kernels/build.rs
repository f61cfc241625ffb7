//! The key of this build's compiled GPU kernels: a hash of every source file of this crate that
//! defines cubecl code (`#[cube`), given to the crate as `LEROBOT_RS_KERNELS_CODE`. cubecl keys a
//! compiled kernel by its name and compile-time arguments, not by its code, so a kernel cache
//! filled by another version of these kernels would otherwise be read as if it were this one's
//! (`src/backend/kernel_cache.rs` keeps each version's kernels in a folder of their own).

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo::rerun-if-changed=src");
    let mut files = Vec::new();
    rust_sources(Path::new("src"), &mut files);
    files.sort();
    let mut hasher = DefaultHasher::new();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if text.contains("#[cube") {
            path.hash(&mut hasher);
            text.hash(&mut hasher);
        }
    }
    println!("cargo::rustc-env=LEROBOT_RS_KERNELS_CODE={:016x}", hasher.finish());
}

/// Every `.rs` file under `dir`, its subfolders included.
fn rust_sources(dir: &Path, files: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.unwrap_or_else(|e| panic!("{}: {e}", dir.display())).path();
        if path.is_dir() {
            rust_sources(&path, files);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
}
