//! The environment variables LeRobot and `huggingface_hub` read, in one place.

use std::path::PathBuf;

/// The Hub's address unless `HF_ENDPOINT` says otherwise.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// Where datasets live and how the Hub is reached, from the environment as LeRobot 0.6.1 and
/// `huggingface_hub` read it.
#[derive(Debug, Clone, PartialEq)]
pub struct HubEnv {
    /// `HF_LEROBOT_HOME`, else `$HF_HOME/lerobot`.
    pub lerobot_home: PathBuf,
    /// `huggingface_hub`'s own cache, where LeRobot's policies are downloaded: `HF_HUB_CACHE`,
    /// else `$HF_HOME/hub`.
    pub hf_hub_cache: PathBuf,
    /// `HF_ENDPOINT`, else [`DEFAULT_ENDPOINT`] (no trailing `/`).
    pub endpoint: String,
    /// `HF_TOKEN`, else the token file (`HF_TOKEN_PATH`, else `$HF_HOME/token`).
    pub token: Option<String>,
    /// `HF_HUB_OFFLINE` is 1, on, yes or true: the Hub is never asked.
    pub offline: bool,
}

impl HubEnv {
    /// From this process's environment.
    pub fn from_env() -> Self {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// From `var`, which answers a variable's value (unset and empty are alike).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Self {
        let var = |name: &str| var(name).filter(|value| !value.is_empty());
        let home = || std::env::home_dir().unwrap_or_else(|| PathBuf::from("/"));
        let expand = |value: String| match value.strip_prefix("~/") {
            Some(rest) => home().join(rest),
            None if value == "~" => home(),
            None => PathBuf::from(value),
        };
        let hf_home = var("HF_HOME").map(expand).unwrap_or_else(|| {
            var("XDG_CACHE_HOME").map(expand).unwrap_or_else(|| home().join(".cache")).join("huggingface")
        });
        let lerobot_home = var("HF_LEROBOT_HOME").map(expand).unwrap_or_else(|| hf_home.join("lerobot"));
        let hf_hub_cache = var("HF_HUB_CACHE").map(expand).unwrap_or_else(|| hf_home.join("hub"));
        let endpoint =
            var("HF_ENDPOINT").unwrap_or_else(|| DEFAULT_ENDPOINT.to_string()).trim_end_matches('/').to_string();
        let token = var("HF_TOKEN").map(|t| t.trim().to_string()).filter(|t| !t.is_empty()).or_else(|| {
            let path = var("HF_TOKEN_PATH").map(expand).unwrap_or_else(|| hf_home.join("token"));
            std::fs::read_to_string(path).ok().map(|t| t.trim().to_string()).filter(|t| !t.is_empty())
        });
        let offline =
            var("HF_HUB_OFFLINE").is_some_and(|v| ["1", "ON", "YES", "TRUE"].contains(&v.to_uppercase().as_str()));
        HubEnv { lerobot_home, hf_hub_cache, endpoint, token, offline }
    }

    /// LeRobot's own Hub cache, `$HF_LEROBOT_HOME/hub`: downloads made without a root.
    pub fn hub_cache(&self) -> PathBuf {
        self.lerobot_home.join("hub")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> HubEnv {
        HubEnv::from_vars(|name| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string()))
    }

    #[test]
    fn lerobot_home_follows_hf_home_unless_set() {
        let home = std::env::home_dir().unwrap();
        assert_eq!(env(&[]).lerobot_home, home.join(".cache/huggingface/lerobot"));
        assert_eq!(env(&[("XDG_CACHE_HOME", "/x")]).lerobot_home, PathBuf::from("/x/huggingface/lerobot"));
        assert_eq!(env(&[("HF_HOME", "/h"), ("XDG_CACHE_HOME", "/x")]).lerobot_home, PathBuf::from("/h/lerobot"));
        assert_eq!(env(&[("HF_HOME", "/h"), ("HF_LEROBOT_HOME", "~/lr")]).lerobot_home, home.join("lr"));
        assert_eq!(env(&[("HF_LEROBOT_HOME", "/l")]).hub_cache(), PathBuf::from("/l/hub"));
        assert_eq!(env(&[("HF_HOME", "/h")]).hf_hub_cache, PathBuf::from("/h/hub"));
        assert_eq!(env(&[("HF_HOME", "/h"), ("HF_HUB_CACHE", "/c")]).hf_hub_cache, PathBuf::from("/c"));
    }

    #[test]
    fn endpoint_token_and_offline() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), "hf_file\n").unwrap();
        let hf_home = dir.path().to_str().unwrap();
        let e = env(&[("HF_HOME", hf_home), ("HF_ENDPOINT", "http://127.0.0.1:9/")]);
        assert_eq!(
            (e.endpoint.as_str(), e.token.as_deref(), e.offline),
            ("http://127.0.0.1:9", Some("hf_file"), false)
        );
        let e = env(&[("HF_HOME", hf_home), ("HF_TOKEN", "hf_var"), ("HF_HUB_OFFLINE", "yes")]);
        assert_eq!((e.endpoint.as_str(), e.token.as_deref(), e.offline), (DEFAULT_ENDPOINT, Some("hf_var"), true));
        assert!(!env(&[("HF_HUB_OFFLINE", "0")]).offline);
        assert_eq!(env(&[("HF_HOME", "/nonexistent")]).token, None);
    }
}
