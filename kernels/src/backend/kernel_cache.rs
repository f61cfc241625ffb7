//! Where the GPU backends keep the kernels they compile.
//!
//! cubecl, under burn's cuda and wgpu backends, compiles every kernel at its first use and
//! autotunes matrix products and convolutions per shape, compiling each candidate. On an H100
//! (bench/RESULTS.md, 2026-11-23) PushT's model needed more than 740 compilations, about one a
//! second, before its first training step ended. cubecl keeps its autotune results on disk by
//! default but not the compiled kernels; `configure` (in builds with a GPU backend) turns that
//! cache on, in one folder per user, so that only a machine's first run pays for them. A
//! `cubecl.toml` (or `burn.toml`) in the working folder or above it still decides, as cubecl
//! documents.

use std::ffi::OsString;
use std::path::PathBuf;

/// The variable that names the kernel cache's folder.
pub const KERNEL_CACHE_VAR: &str = "LEROBOT_RS_KERNEL_CACHE";

/// The folder, inside the kernel cache's, that this build's compiled kernels are kept in: named
/// by a hash of our cubecl kernels' code (`build.rs`). cubecl keys a compiled kernel by its name
/// and compile-time arguments, not by its code, so a cache filled by a build whose kernels
/// differ would otherwise be read as this one's, their old code run in place of the new.
pub const KERNELS_CODE_FOLDER: &str = concat!("code-", env!("LEROBOT_RS_KERNELS_CODE"));

/// The kernel cache's folder, from the environment `var` gives: [`KERNEL_CACHE_VAR`], else
/// `$XDG_CACHE_HOME/lerobot-rs/kernels`, else `$HOME/.cache/lerobot-rs/kernels`; `None` when
/// none of them is set (then compiled kernels are not kept).
pub fn kernel_cache_dir(var: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let set = |name: &str| var(name).filter(|value| !value.is_empty()).map(PathBuf::from);
    set(KERNEL_CACHE_VAR)
        .or_else(|| set("XDG_CACHE_HOME").map(|dir| dir.join("lerobot-rs").join("kernels")))
        .or_else(|| set("HOME").map(|dir| dir.join(".cache").join("lerobot-rs").join("kernels")))
}

/// cubecl's configuration as this crate sets it: cubecl's own (`cubecl.toml` and its
/// environment variables), with the compiled-kernel cache in [`kernel_cache_dir`] where that
/// configuration names none; either way in its [`KERNELS_CODE_FOLDER`].
#[cfg(any(feature = "cuda-untuned", feature = "wgpu-untuned"))]
fn default_config() -> burn::cubecl::config::CubeClRuntimeConfig {
    use burn::cubecl::config::cache::CacheConfig;
    use burn::cubecl::config::{CubeClRuntimeConfig, RuntimeConfig};
    let mut config = CubeClRuntimeConfig::from_current_dir().override_from_env();
    let named = config.compilation.cache.as_ref().map(CacheConfig::root);
    config.compilation.cache = compiled_kernels_dir(named, |name| std::env::var_os(name)).map(CacheConfig::File);
    config
}

/// Where this build's compiled kernels are kept: the folder cubecl's configuration `named`, else
/// [`kernel_cache_dir`]'s, in either case its [`KERNELS_CODE_FOLDER`].
pub fn compiled_kernels_dir(named: Option<PathBuf>, var: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    named.or_else(|| kernel_cache_dir(var)).map(|dir| dir.join(KERNELS_CODE_FOLDER))
}

/// Sets cubecl's configuration to [`default_config`] changed by `adjust`, unless something read
/// or set it already (cubecl reads it once, when the first GPU device is made); whether it did.
#[cfg(any(feature = "cuda-untuned", feature = "wgpu-untuned"))]
pub(crate) fn install(adjust: impl FnOnce(&mut burn::cubecl::config::CubeClRuntimeConfig)) -> bool {
    use burn::cubecl::config::{CubeClRuntimeConfig, RuntimeConfig};
    let mut storage = CubeClRuntimeConfig::storage().lock();
    if storage.is_some() {
        return false;
    }
    let mut config = default_config();
    adjust(&mut config);
    *storage = Some(std::sync::Arc::new(config));
    true
}

/// Sets cubecl's configuration once, before the first GPU device is made: cubecl's own
/// (`cubecl.toml` and its environment variables), with the compiled-kernel cache in
/// [`kernel_cache_dir`] where that configuration names none (either way in its
/// [`KERNELS_CODE_FOLDER`]), unless something set it already (as [`crate::LaunchLog::start`]
/// does). Returns the kernel cache's folder, if any: the compiled kernels are in its
/// [`KERNELS_CODE_FOLDER`], and what does not depend on our kernels' code (cuDNN's kept
/// algorithms) in the folder itself, kept when the kernels change.
#[cfg(any(feature = "cuda-untuned", feature = "wgpu-untuned"))]
pub fn configure() -> Option<PathBuf> {
    use burn::cubecl::config::cache::CacheConfig;
    use burn::cubecl::config::{CubeClRuntimeConfig, RuntimeConfig};
    use std::sync::OnceLock;

    static KEPT_IN: OnceLock<Option<PathBuf>> = OnceLock::new();
    KEPT_IN
        .get_or_init(|| {
            // Already set (or read): it stays as it is.
            install(|_| {});
            let compiled_in = CubeClRuntimeConfig::get().compilation.cache.as_ref().map(CacheConfig::root);
            let kept_in = compiled_in.map(|dir| match dir.file_name() {
                Some(name) if name == KERNELS_CODE_FOLDER => {
                    dir.parent().map_or(dir.clone(), std::path::Path::to_path_buf)
                }
                _ => dir,
            });
            match &kept_in {
                Some(dir) => tracing::info!(
                    "GPU kernels compile at their first use (minutes for PushT's model on a fresh machine) \
                     and are kept in {} for the next runs",
                    dir.display()
                ),
                None => tracing::warn!(
                    "GPU kernels compile at their first use (minutes for PushT's model) and are not kept: \
                     set {KERNEL_CACHE_VAR} or HOME to keep them"
                ),
            }
            kept_in
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |name| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| OsString::from(v))
    }

    #[test]
    fn the_variable_wins_then_xdg_then_home() {
        let all = [(KERNEL_CACHE_VAR, "/k"), ("XDG_CACHE_HOME", "/x"), ("HOME", "/h")];
        assert_eq!(kernel_cache_dir(env(&all)), Some(PathBuf::from("/k")));
        assert_eq!(kernel_cache_dir(env(&all[1..])), Some(PathBuf::from("/x/lerobot-rs/kernels")));
        assert_eq!(kernel_cache_dir(env(&all[2..])), Some(PathBuf::from("/h/.cache/lerobot-rs/kernels")));
    }

    #[test]
    fn each_version_of_our_kernels_has_a_folder_of_its_own() {
        let hash = KERNELS_CODE_FOLDER.strip_prefix("code-").expect("named code-<hash>");
        assert!(hash.len() == 16 && hash.chars().all(|c| c.is_ascii_hexdigit()), "{KERNELS_CODE_FOLDER}");
        let home = [("HOME", "/h")];
        assert_eq!(
            compiled_kernels_dir(None, env(&home)),
            Some(PathBuf::from("/h/.cache/lerobot-rs/kernels").join(KERNELS_CODE_FOLDER))
        );
        // A folder cubecl's own configuration names wins, keyed the same way.
        assert_eq!(
            compiled_kernels_dir(Some(PathBuf::from("/named")), env(&home)),
            Some(PathBuf::from("/named").join(KERNELS_CODE_FOLDER))
        );
        assert_eq!(compiled_kernels_dir(None, env(&[])), None);
    }

    #[test]
    fn empty_variables_count_as_unset_and_none_keeps_nothing() {
        assert_eq!(
            kernel_cache_dir(env(&[(KERNEL_CACHE_VAR, ""), ("HOME", "/h")])),
            Some(PathBuf::from("/h/.cache/lerobot-rs/kernels"))
        );
        assert_eq!(kernel_cache_dir(env(&[])), None);
    }
}
