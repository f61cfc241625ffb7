//! This project's folder in the user's cache, where the XDG convention puts it.

use std::ffi::OsString;
use std::path::PathBuf;

/// `$XDG_CACHE_HOME/lerobot-rs/{leaf}`, else `$HOME/.cache/lerobot-rs/{leaf}`, from the
/// environment `var` answers (an empty value as an unset one); none without either variable.
pub(crate) fn user_cache_dir(var: impl Fn(&str) -> Option<OsString>, leaf: &str) -> Option<PathBuf> {
    let set = |name: &str| var(name).filter(|value| !value.is_empty()).map(PathBuf::from);
    set("XDG_CACHE_HOME")
        .map(|dir| dir.join("lerobot-rs"))
        .or_else(|| set("HOME").map(|dir| dir.join(".cache").join("lerobot-rs")))
        .map(|dir| dir.join(leaf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xdg_first_then_home_and_empty_is_unset() {
        let env = |vars: &'static [(&str, &str)]| {
            move |name: &str| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| OsString::from(v))
        };
        let both = env(&[("XDG_CACHE_HOME", "/x"), ("HOME", "/h")]);
        assert_eq!(user_cache_dir(both, "streams"), Some(PathBuf::from("/x/lerobot-rs/streams")));
        let empty_xdg = env(&[("XDG_CACHE_HOME", ""), ("HOME", "/h")]);
        assert_eq!(user_cache_dir(empty_xdg, "frames"), Some(PathBuf::from("/h/.cache/lerobot-rs/frames")));
        assert_eq!(user_cache_dir(env(&[]), "frames"), None);
    }
}
