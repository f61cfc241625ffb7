//! Finding cuDNN 9 at run time, once per process.
//!
//! cudarc opens `libcudnn.so.9` by name: from `LD_LIBRARY_PATH`, the system's library cache, or a
//! library already loaded under that name. PyTorch's pip wheels keep it in the Python
//! environment's `site-packages/nvidia/cudnn/lib` (with cuBLAS, which cuDNN opens itself, in
//! `nvidia/cu13/lib` or `nvidia/cublas/lib`), where no search path looks: when the name alone does not load, the
//! libraries there are loaded first, globally, from the directories of `LEROBOT_RS_CUDNN_DIR`,
//! the active virtual or conda environment, or the `python3` on the `PATH`.

#![expect(unsafe_code, reason = "opening a shared library runs its initialisers")]

use std::path::PathBuf;
use std::sync::OnceLock;

/// The cuDNN this process convolves with: its version, or why there is none (said once).
pub fn status() -> &'static Result<usize, String> {
    static STATUS: OnceLock<Result<usize, String>> = OnceLock::new();
    STATUS.get_or_init(|| {
        let status = load();
        match &status {
            Ok(version) => tracing::info!("convolutions on cuda through cuDNN {version}"),
            Err(why) => tracing::warn!("{why}"),
        }
        status
    })
}

/// Whether `LEROBOT_RS_CUDNN` turns cuDNN off (`0`, `off` or `false`).
fn switched_off() -> bool {
    std::env::var("LEROBOT_RS_CUDNN").is_ok_and(|v| matches!(v.to_ascii_lowercase().as_str(), "0" | "off" | "false"))
}

fn load() -> Result<usize, String> {
    if switched_off() {
        return Err("cuDNN is off (LEROBOT_RS_CUDNN): burn's own convolutions on cuda".into());
    }
    // SAFETY: opening a library runs its initialisers; cuDNN's and cuBLAS's are sound to run.
    let present = || unsafe { cudarc::cudnn::sys::is_culib_present() };
    if !present() && (preload_from_python().is_none() || !present()) {
        return Err("cuDNN 9 not found (libcudnn.so.9): burn's own convolutions on cuda, far slower. \
                    Install it with `pip install nvidia-cudnn-cu13` (PyTorch's CUDA wheels bring it), or put \
                    its lib directory in LD_LIBRARY_PATH or LEROBOT_RS_CUDNN_DIR"
            .into());
    }
    let version = cudarc::cudnn::result::get_version();
    if !(90000..100000).contains(&version) {
        return Err(format!("cuDNN {version} found, cuDNN 9 needed: burn's own convolutions on cuda"));
    }
    cudarc::cudnn::result::version_check().map_err(|e| {
        format!("cuDNN {version} found but its parts disagree ({e:?}): burn's own convolutions on cuda")
    })?;
    Ok(version)
}

/// Loads cuDNN and the cuBLAS it opens from the first directory that holds them, globally, so
/// that opening them by name finds them. Returns the cuDNN directory used.
fn preload_from_python() -> Option<PathBuf> {
    let named = std::env::var_os("LEROBOT_RS_CUDNN_DIR").map(PathBuf::from);
    let candidates = named
        .into_iter()
        .chain(crate::libraries::wheels::site_packages().into_iter().map(|p| p.join("nvidia/cudnn/lib")));
    let cudnn_dir = candidates.into_iter().find(|dir| dir.join("libcudnn.so.9").is_file())?;
    // cuBLAS first (CUDA 13's wheels keep it in `nvidia/cu13/lib`, CUDA 12's in
    // `nvidia/cublas/lib`), then cuDNN's parts in the order they need one another, cuDNN last.
    let cublas = ["libcublasLt.so.13", "libcublas.so.13", "libcublasLt.so.12", "libcublas.so.12"];
    let mut libraries: Vec<PathBuf> = ["../../cu13/lib", "../../cublas/lib"]
        .iter()
        .flat_map(|dir| {
            let dir = cudnn_dir.join(dir);
            cublas.iter().map(move |name| dir.join(name))
        })
        .collect();
    libraries.extend(
        [
            "libcudnn_graph.so.9",
            "libcudnn_engines_runtime_compiled.so.9",
            "libcudnn_engines_precompiled.so.9",
            "libcudnn_heuristic.so.9",
            "libcudnn_ops.so.9",
            "libcudnn_cnn.so.9",
            "libcudnn_adv.so.9",
            "libcudnn.so.9",
        ]
        .iter()
        .map(|name| cudnn_dir.join(name)),
    );
    for library in libraries.iter().filter(|path| path.is_file()) {
        // SAFETY: as in `load`; the handle is kept open for the life of the process.
        let opened = unsafe {
            libloading::os::unix::Library::open(
                Some(library),
                libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_GLOBAL,
            )
        };
        match opened {
            Ok(handle) => std::mem::forget(handle),
            Err(e) => tracing::debug!("could not load {}: {e}", library.display()),
        }
    }
    Some(cudnn_dir)
}
