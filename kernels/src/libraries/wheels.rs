//! Where NVIDIA's pip wheels (what PyTorch installs) keep their libraries: the `site-packages`
//! of the active virtual or conda environment, and of the `python3` on the `PATH`, each holding
//! `nvidia/<library>/lib`, where no search path of the system looks.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The Python environments' `site-packages` to look in, first the ones named by
/// `VIRTUAL_ENV` and `CONDA_PREFIX`.
pub(crate) fn site_packages() -> Vec<PathBuf> {
    let mut found = Vec::new();
    for prefix in ["VIRTUAL_ENV", "CONDA_PREFIX"].into_iter().filter_map(std::env::var_os) {
        let lib = Path::new(&prefix).join("lib");
        let Ok(entries) = std::fs::read_dir(&lib) else { continue };
        found.extend(entries.flatten().map(|e| e.path().join("site-packages")).filter(|p| p.is_dir()));
    }
    let python =
        Command::new("python3").args(["-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).output();
    if let Some(output) = python.ok().filter(|o| o.status.success()) {
        found.push(PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()));
    }
    found
}
