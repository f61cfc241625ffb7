//! A Hub repository id, `OWNER/NAME`, checked before it names a folder or a URL, and the kind
//! of repository it names.

use std::fmt;
use std::str::FromStr;

use super::repo_kind::RepoKind;
use crate::Error;

/// A dataset's Hub id, `OWNER/NAME` (e.g. `lerobot/pusht`): two non-empty parts of ASCII
/// letters, digits, `-`, `_` and `.`, as the Hub allows, so that it is safe as a path under
/// `HF_LEROBOT_HOME` and in a URL.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RepoId(String);

impl RepoId {
    /// `OWNER/NAME`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The folder the Hub's cache keeps the repository in: `datasets--OWNER--NAME` for a
    /// dataset, `models--OWNER--NAME` for a model.
    pub fn cache_folder(&self, kind: RepoKind) -> String {
        format!("{}--{}", kind.plural(), self.0.replace('/', "--"))
    }
}

impl FromStr for RepoId {
    type Err = Error;

    fn from_str(id: &str) -> Result<Self, Error> {
        let bad = |why: &str| {
            Error::Request(format!("--dataset.repo_id {id:?}: {why} (expected OWNER/NAME, e.g. lerobot/pusht)"))
        };
        let parts: Vec<&str> = id.split('/').collect();
        if parts.len() != 2 {
            return Err(bad("not two parts separated by one '/'"));
        }
        for part in parts {
            if part.is_empty() {
                return Err(bad("an empty part"));
            }
            if part.starts_with('.') || part.contains("..") || part.contains("--") {
                return Err(bad("a part that starts with '.' or holds '..' or '--'"));
            }
            if !part.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)) {
                return Err(bad("characters other than letters, digits, '-', '_' and '.'"));
            }
        }
        Ok(RepoId(id.to_string()))
    }
}

impl fmt::Display for RepoId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_hub_ids_and_refuses_paths() {
        let id: RepoId = "lerobot/pusht_image".parse().unwrap();
        assert_eq!(id.cache_folder(RepoKind::Dataset), "datasets--lerobot--pusht_image");
        assert_eq!(id.cache_folder(RepoKind::Model), "models--lerobot--pusht_image");
        for bad in ["pusht", "a/b/c", "/pusht", "lerobot/", "../etc", "lerobot/..", "a/.hidden", "a/b c", "a--b/c"] {
            assert!(bad.parse::<RepoId>().is_err(), "{bad:?} was taken");
        }
    }
}
