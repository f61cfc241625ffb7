//! torchvision's pretrained weights by the names LeRobot gives them
//! (`pretrained_backbone_weights = "ResNet18_Weights.IMAGENET1K_V1"`), found where torch keeps
//! them (`$TORCH_HOME/hub/checkpoints/`) and, when missing, downloaded from torchvision's address
//! and checked against the hash prefix in the file's name, as
//! `torch.hub.load_state_dict_from_url(check_hash=True)` does for torchvision.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The weights names LeRobot's Diffusion Policy may give, and torchvision's file for each.
const KNOWN: &[(&str, &str)] = &[
    ("ResNet18_Weights.IMAGENET1K_V1", "resnet18-f37072fd.pth"),
    ("ResNet18_Weights.DEFAULT", "resnet18-f37072fd.pth"),
];

/// Where torchvision's weights are downloaded from.
pub const TORCHVISION_MODELS_URL: &str = "https://download.pytorch.org/models";

/// Where torch keeps downloaded weights, and where they are fetched from.
#[derive(Debug, Clone)]
pub struct TorchHub {
    /// `$TORCH_HOME/hub/checkpoints`.
    pub checkpoints: PathBuf,
    /// torchvision's address, or a mirror of it.
    pub models_url: String,
}

impl TorchHub {
    /// From the process's environment ([`TorchHub::from_vars`]).
    pub fn from_env() -> Self {
        Self::from_vars(|name| std::env::var(name).ok().filter(|value| !value.is_empty()))
    }

    /// As torch finds its hub: `$TORCH_HOME`, else `$XDG_CACHE_HOME/torch`, else
    /// `~/.cache/torch`; `LEROBOT_RS_TORCHVISION_MODELS_URL` names a mirror of
    /// [`TORCHVISION_MODELS_URL`] (for machines that reach only a mirror).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Self {
        let home = var("TORCH_HOME").map(PathBuf::from).unwrap_or_else(|| {
            let cache = var("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(var("HOME").unwrap_or_else(|| "~".into())).join(".cache"));
            cache.join("torch")
        });
        let models_url = var("LEROBOT_RS_TORCHVISION_MODELS_URL").unwrap_or_else(|| TORCHVISION_MODELS_URL.into());
        Self { checkpoints: home.join("hub").join("checkpoints"), models_url }
    }
}

/// The file `pretrained_backbone_weights` designates: for a torchvision name, its file in torch's
/// hub, downloaded first when missing (`on_download(url, path)` is told before); anything else
/// is a path, returned as it is.
pub fn backbone_weights_file(value: &str, hub: &TorchHub, on_download: &mut dyn FnMut(&str, &Path)) -> Result<PathBuf> {
    let Some(file) = torchvision_file(value)? else {
        return Ok(PathBuf::from(value));
    };
    let path = hub.checkpoints.join(file);
    if !path.is_file() {
        let url = format!("{}/{file}", hub.models_url.trim_end_matches('/'));
        on_download(&url, &path);
        download_checked(&url, &path).map_err(|message| Error::PretrainedWeights {
            name: value.to_string(),
            message: format!(
                "{message}; without a network, copy torchvision's {file} (from {url}) to {}, or set TORCH_HOME to \
                 a folder whose hub/checkpoints holds it",
                path.display()
            ),
        })?;
    }
    Ok(path)
}

/// torchvision's file for a weights name; `None` for what is not a weights name (a path), an
/// error for a weights name this policy cannot use.
fn torchvision_file(value: &str) -> Result<Option<&'static str>> {
    if let Some((_, file)) = KNOWN.iter().find(|(name, _)| *name == value) {
        return Ok(Some(file));
    }
    let looks_like_a_name = value.split_once("_Weights.").is_some_and(|(model, _)| !model.contains(['/', '.']));
    if looks_like_a_name && !Path::new(value).exists() {
        let known: Vec<&str> = KNOWN.iter().map(|(name, _)| *name).collect();
        return Err(Error::PretrainedWeights {
            name: value.to_string(),
            message: format!("not weights of a ResNet-18, the policy's backbone (known: {})", known.join(", ")),
        });
    }
    Ok(None)
}

/// The hash prefix torch expects of a file named `name`: the hex digits between the first `-`
/// that is followed by hex digits and a `.` (torch's `-([a-f0-9]*)\.`).
pub fn hash_prefix(name: &str) -> Option<&str> {
    name.match_indices('-').find_map(|(at, _)| {
        let rest = &name[at + 1..];
        let digits = rest.find(|c: char| !matches!(c, '0'..='9' | 'a'..='f')).unwrap_or(rest.len());
        rest[digits..].starts_with('.').then(|| &rest[..digits])
    })
}

/// Downloads `url` to `path`: into a temporary file beside it, checked against the hash prefix in
/// `path`'s name, then renamed into place, so that `path` is whole or absent. Temporary files that
/// dead processes left beside it are removed first.
#[cfg(feature = "hub")]
pub fn download_checked(url: &str, path: &Path) -> std::result::Result<(), String> {
    use sha2::{Digest, Sha256};
    use std::io::{Read, Write};

    let folder = path.parent().ok_or_else(|| format!("{} has no folder", path.display()))?;
    std::fs::create_dir_all(folder).map_err(|e| format!("creating {}: {e}", folder.display()))?;
    let name = path
        .file_name()
        .and_then(|name| name.to_str())
        .ok_or_else(|| format!("{}: not a file name", path.display()))?;
    remove_dead_partials(folder, name);
    let partial = folder.join(format!("{}{}", partial_prefix(name), std::process::id()));
    let fetched = (|| {
        let response = ureq::AgentBuilder::new()
            .try_proxy_from_env(true)
            .build()
            .get(url)
            .call()
            .map_err(|e| format!("could not download {url}: {e}"))?;
        let mut body = response.into_reader();
        let mut file = std::fs::File::create(&partial).map_err(|e| format!("creating {}: {e}", partial.display()))?;
        let mut hasher = Sha256::new();
        let mut buffer = vec![0; 1 << 16];
        loop {
            let n = body.read(&mut buffer).map_err(|e| format!("downloading {url}: {e}"))?;
            if n == 0 {
                break;
            }
            hasher.update(&buffer[..n]);
            file.write_all(&buffer[..n]).map_err(|e| format!("writing {}: {e}", partial.display()))?;
        }
        file.sync_all().map_err(|e| format!("writing {}: {e}", partial.display()))?;
        let digest: String = hasher.finalize().iter().map(|byte| format!("{byte:02x}")).collect();
        if let Some(prefix) = hash_prefix(name).filter(|prefix| !digest.starts_with(prefix)) {
            return Err(format!(
                "the file downloaded from {url} has SHA-256 {digest}, which does not start with {prefix} as its \
                 name says: refused"
            ));
        }
        std::fs::rename(&partial, path).map_err(|e| format!("moving {} into place: {e}", partial.display()))
    })();
    if fetched.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    fetched
}

/// Without an HTTP client (the `hub` feature off), a missing file is an error.
#[cfg(not(feature = "hub"))]
pub fn download_checked(url: &str, _path: &Path) -> std::result::Result<(), String> {
    Err(format!("this build cannot download {url} (built without the `hub` feature)"))
}

/// The start of the temporary files `name` is downloaded into (the downloading process's id
/// follows).
#[cfg_attr(not(feature = "hub"), allow(dead_code))]
fn partial_prefix(name: &str) -> String {
    format!(".{name}.partial-")
}

/// Removes the temporary files of `name` whose downloading process is gone.
#[cfg_attr(not(feature = "hub"), allow(dead_code))]
fn remove_dead_partials(folder: &Path, name: &str) {
    let Ok(entries) = std::fs::read_dir(folder) else { return };
    let prefix = partial_prefix(name);
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(pid) =
            file_name.to_str().and_then(|f| f.strip_prefix(&prefix)).and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_torchs_hub_as_torch_does() {
        let hub = |vars: &[(&str, &str)]| {
            let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            TorchHub::from_vars(|name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
        };
        assert_eq!(hub(&[("HOME", "/home/u")]).checkpoints, Path::new("/home/u/.cache/torch/hub/checkpoints"));
        assert_eq!(
            hub(&[("HOME", "/home/u"), ("XDG_CACHE_HOME", "/c")]).checkpoints,
            Path::new("/c/torch/hub/checkpoints")
        );
        let set = hub(&[("HOME", "/home/u"), ("XDG_CACHE_HOME", "/c"), ("TORCH_HOME", "/t")]);
        assert_eq!(set.checkpoints, Path::new("/t/hub/checkpoints"));
        assert_eq!(set.models_url, TORCHVISION_MODELS_URL);
    }

    #[test]
    fn reads_the_hash_prefix_as_torchs_pattern() {
        assert_eq!(hash_prefix("resnet18-f37072fd.pth"), Some("f37072fd"));
        assert_eq!(hash_prefix("efficientnet_b0_rwightman-7f5810bc.pth"), Some("7f5810bc"));
        assert_eq!(hash_prefix("my-model-0a1b.safetensors"), Some("0a1b"));
        assert_eq!(hash_prefix("weights.pth"), None);
    }

    #[test]
    fn names_are_torchvisions_and_paths_stay_paths() {
        assert_eq!(torchvision_file("ResNet18_Weights.IMAGENET1K_V1").unwrap(), Some("resnet18-f37072fd.pth"));
        assert_eq!(torchvision_file("/data/resnet18.safetensors").unwrap(), None);
        assert_eq!(torchvision_file("weights/resnet18-f37072fd.pth").unwrap(), None);
        let err = torchvision_file("ResNet50_Weights.IMAGENET1K_V2").unwrap_err().to_string();
        assert!(
            err.contains("ResNet50_Weights.IMAGENET1K_V2") && err.contains("ResNet18_Weights.IMAGENET1K_V1"),
            "{err}"
        );
    }
}
