//! The algorithms cuDNN's legacy search chose, kept in a file beside the compiled kernels
//! ([`crate::kernel_cache::configure`]'s folder), so that a later run on the same GPU model and
//! cuDNN version takes them without timing every algorithm again (torch's `cudnn.benchmark`
//! searches in every process). Each is kept under a key naming all it was chosen for
//! (`earlier_runs.rs` writes it: the GPU, cuDNN's version, the problem, the search's constraints, the
//! pass); a problem or setting not in the file is searched as before and added to it.
//!
//! The file is JSON, rewritten whole at each change under an advisory lock (a file beside it):
//! what is on disk then, with the one change, through a temporary file renamed over it. A killed
//! or concurrent run never leaves it half written, and no run undoes another's changes. One that
//! cannot be read, or of another format, is said once and then replaced.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// The file's path under the kernel cache's folder; the format is in its name, so builds that
/// write another one keep theirs apart. Version 2: choices of the search in two rounds (version
/// 1's were timed with their kernels' loading, and are searched again).
pub const KEPT_ALGORITHMS_FILE: &str = "cudnn/algorithms-v2.json";

/// The format written, and the only one read.
const FORMAT: u32 = 2;

/// One pass's algorithm as the legacy API names it: the algorithm's and the math type's names
/// in cuDNN's enums (`CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM`, `CUDNN_DEFAULT_MATH`),
/// and the workspace it asked for, in bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptAlgorithm {
    /// The algorithm's name.
    pub algorithm: String,
    /// The math type's name.
    pub math: String,
    /// Workspace bytes.
    pub workspace: usize,
}

/// What the file holds.
#[derive(Serialize, Deserialize)]
struct Contents {
    format: u32,
    algorithms: BTreeMap<String, KeptAlgorithm>,
}

/// The algorithms of one file: read once, changed as searches end.
#[derive(Debug)]
pub struct KeptAlgorithms {
    path: PathBuf,
    /// The file as last read or written.
    seen: Mutex<BTreeMap<String, KeptAlgorithm>>,
}

impl KeptAlgorithms {
    /// The algorithms kept in `path`: none where it does not exist yet; none, said once, where
    /// it cannot be read or is of another format (the next change replaces it). Temporary files
    /// that killed runs left beside it are removed.
    pub fn load(path: PathBuf) -> Self {
        reclaim_temporaries(&path);
        let seen = match read(&path) {
            Ok(algorithms) => {
                if !algorithms.is_empty() {
                    tracing::info!(
                        "cuDNN: {} algorithms kept by earlier runs in {}; those of this GPU and these \
                         problems are taken without searching",
                        algorithms.len(),
                        path.display()
                    );
                }
                algorithms
            }
            Err(why) => {
                tracing::warn!("cuDNN's kept algorithms not read ({why}): searching again, then replacing the file");
                BTreeMap::new()
            }
        };
        Self { path, seen: Mutex::new(seen) }
    }

    /// How many algorithms are kept.
    pub fn len(&self) -> usize {
        self.seen().len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The algorithm kept under `key`, if any.
    pub fn get(&self, key: &str) -> Option<KeptAlgorithm> {
        self.seen().get(key).cloned()
    }

    /// Keeps `algorithm` under `key`, in place of any other: the file is rewritten with it.
    pub fn keep(&self, key: String, algorithm: KeptAlgorithm) -> Result<(), String> {
        self.change(|algorithms| _ = algorithms.insert(key, algorithm))
    }

    /// Takes the algorithm under `key` out of the file (one that failed).
    pub fn forget(&self, key: &str) -> Result<(), String> {
        self.change(|algorithms| _ = algorithms.remove(key))
    }

    /// Rewrites the file under its lock: what is on disk now (nothing where it cannot be read),
    /// changed by `change`.
    fn change(&self, change: impl FnOnce(&mut BTreeMap<String, KeptAlgorithm>)) -> Result<(), String> {
        let mut seen = self.seen();
        let said = |e: std::io::Error| format!("{}: {e}", self.path.display());
        let _lock = lock_file(&self.path).map_err(said)?;
        let mut algorithms = read(&self.path).unwrap_or_default();
        change(&mut algorithms);
        write(&self.path, &algorithms).map_err(said)?;
        *seen = algorithms;
        Ok(())
    }

    /// The file as last read or written, locked.
    fn seen(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, KeptAlgorithm>> {
        self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The algorithms in `path`, none where it does not exist.
fn read(path: &Path) -> Result<BTreeMap<String, KeptAlgorithm>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let contents: Contents = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    if contents.format != FORMAT {
        return Err(format!("{}: format {}, where this build reads {FORMAT}", path.display(), contents.format));
    }
    Ok(contents.algorithms)
}

/// `path`'s name with `suffix` added, in its folder.
fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

/// The temporary file `path` is written through (under the lock, so one at a time).
fn temporary(path: &Path) -> PathBuf {
    beside(path, ".tmp")
}

/// Holds the advisory lock of `path`, on the `.lock` file beside it (made with its folder where
/// missing), until dropped.
fn lock_file(path: &Path) -> std::io::Result<File> {
    if let Some(folder) = path.parent() {
        std::fs::create_dir_all(folder)?;
    }
    let file = File::options().create(true).truncate(false).write(true).open(beside(path, ".lock"))?;
    file.lock()?;
    Ok(file)
}

/// Writes `algorithms` to `path` through its temporary file, renamed over it; the caller holds
/// the lock.
fn write(path: &Path, algorithms: &BTreeMap<String, KeptAlgorithm>) -> std::io::Result<()> {
    let contents = Contents { format: FORMAT, algorithms: algorithms.clone() };
    let text = serde_json::to_string_pretty(&contents).map_err(std::io::Error::other)?;
    let temporary = temporary(path);
    std::fs::write(&temporary, text)
        .and_then(|()| std::fs::rename(&temporary, path))
        .inspect_err(|_| _ = std::fs::remove_file(&temporary))
}

/// Removes the temporary file a run killed between writing and renaming left: under the lock,
/// no live run is writing it.
fn reclaim_temporaries(path: &Path) {
    if temporary(path).exists()
        && let Ok(_lock) = lock_file(path)
    {
        _ = std::fs::remove_file(temporary(path));
    }
}
