//! Kernels launched on burn's cubecl backends (wgpu, cuda), counted from cubecl's own launch
//! path. cubecl's profiling logger at level `minimal` writes one `Executing <kernel>` line per
//! launch (`ComputeClient::launch`) from a thread of its own, without synchronising the device;
//! [`LaunchLog`] points it at a file and reads the count back. For measurements (`bench
//! train-step --count-launches`): each line costs host time, so timings taken beside it are not
//! the step's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What starts a line of cubecl's log for one launch.
const LAUNCH_LINE: &str = "Executing ";

/// The launches of this process, logged by cubecl to a file.
#[derive(Debug, Clone)]
pub struct LaunchLog {
    path: PathBuf,
}

impl LaunchLog {
    /// Without a cubecl backend compiled in there are no kernels to count: an error that says
    /// which features count them.
    #[cfg(not(any(feature = "cuda-untuned", feature = "wgpu-untuned")))]
    pub fn start(_path: &Path) -> Result<Self, String> {
        Err("kernel launches are counted on burn's cubecl backends, and this build has none: \
             build with the `wgpu-untuned`, `wgpu`, `cuda-untuned` or `cuda` feature"
            .into())
    }

    /// Logs every kernel launch of this process to `path` (emptied first). cubecl reads its
    /// configuration once, when the first GPU device is made: call this before that, else it
    /// fails. The kernel cache keeps working as [`super::kernel_cache::configure`] sets it up.
    #[cfg(any(feature = "cuda-untuned", feature = "wgpu-untuned"))]
    pub fn start(path: &Path) -> Result<Self, String> {
        use burn::cubecl::config::profiling::ProfilingLogLevel;
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(format!("{}: cannot empty the launch log: {e}", path.display()));
            }
            _ => {}
        }
        let installed = super::kernel_cache::install(|config| {
            config.profiling.logger.level = ProfilingLogLevel::Minimal;
            config.profiling.logger.file = Some(path.to_path_buf());
        });
        if !installed {
            return Err("cubecl's configuration was already read: count launches before the first GPU device".into());
        }
        Ok(Self { path: path.to_path_buf() })
    }

    /// A log already written at `path` (to read it).
    pub fn at(path: &Path) -> Self {
        Self { path: path.to_path_buf() }
    }

    /// The launches logged so far, once cubecl's logging thread has written what it was sent:
    /// call it after synchronising the device (every launch before the synchronisation has been
    /// sent by then), and it waits until the count holds still for 100 ms.
    pub fn settled_count(&self) -> usize {
        let mut count = self.count();
        let mut still = 0;
        while still < 5 {
            std::thread::sleep(Duration::from_millis(20));
            let now = self.count();
            still = if now == count { still + 1 } else { 0 };
            count = now;
        }
        count
    }

    /// The launches in the file now.
    pub fn count(&self) -> usize {
        launched_kernels(&self.text()).count()
    }

    /// The launches in the file after the first `first`, by kernel (cubecl's name for it, with
    /// its element types): with `first` a count read before a step, the step's.
    pub fn by_kernel(&self, first: usize) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for kernel in launched_kernels(&self.text()).skip(first) {
            *counts.entry(kernel.to_string()).or_insert(0) += 1;
        }
        counts
    }

    /// Deletes the log. cubecl may still hold it open: what it writes afterwards is lost.
    pub fn remove(&self) {
        if let Err(e) = std::fs::remove_file(&self.path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!("{}: cannot delete the launch log: {e}", self.path.display());
        }
    }

    /// The file's text (none while it does not exist).
    fn text(&self) -> String {
        std::fs::read_to_string(&self.path).unwrap_or_default()
    }
}

/// The kernel of every launch line of `log`, in order.
fn launched_kernels(log: &str) -> impl Iterator<Item = &str> {
    log.lines().filter_map(|line| line.strip_prefix(LAUNCH_LINE)).map(str::trim)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launches_are_the_executing_lines_by_kernel() {
        let path = std::env::temp_dir().join(format!("lerobot-rs-launches-{}.log", std::process::id()));
        let log = LaunchLog::at(&path);
        assert_eq!(log.count(), 0, "no file yet");
        std::fs::write(&path, "Executing A | f32\nsomething else\nExecuting B\nExecuting A | f32\n").unwrap();
        assert_eq!(log.settled_count(), 3);
        assert_eq!(log.by_kernel(0), BTreeMap::from([("A | f32".to_string(), 2), ("B".to_string(), 1)]));
        assert_eq!(log.by_kernel(2), BTreeMap::from([("A | f32".to_string(), 1)]));
        std::fs::remove_file(&path).unwrap();
    }
}
