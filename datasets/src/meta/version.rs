//! The dataset format versions this crate reads.

use std::fmt;

/// A LeRobot dataset `codebase_version`, which decides the on-disk layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CodebaseVersion {
    /// v2.0: one parquet and one mp4 per episode, jsonl metadata, global `stats.json`.
    V2_0,
    /// v2.1: as v2.0, with per-episode stats in `episodes_stats.jsonl` (LeRobot <= 0.3).
    V2_1,
    /// v3.0: many episodes per file, parquet metadata (LeRobot >= 0.4).
    V3_0,
}

impl CodebaseVersion {
    /// Parses the `codebase_version` string of `info.json` (`"v2.1"`, `"v3.0"`, ...).
    ///
    /// Like LeRobot, a newer *minor* version of a known major reads with the layout of that
    /// major; other majors are refused.
    pub fn parse(text: &str) -> Option<Self> {
        let (major, minor) = text.strip_prefix('v')?.split_once('.')?;
        let major: u32 = major.parse().ok()?;
        let minor: u32 = minor.parse().ok()?;
        match (major, minor) {
            (2, 0) => Some(Self::V2_0),
            (2, _) => Some(Self::V2_1),
            (3, _) => Some(Self::V3_0),
            _ => None,
        }
    }

    /// Whether the layout is v3 (file-packed episodes, parquet metadata).
    pub fn is_v3(self) -> bool {
        self == Self::V3_0
    }

    /// The canonical string, as written in `info.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::V2_0 => "v2.0",
            Self::V2_1 => "v2.1",
            Self::V3_0 => "v3.0",
        }
    }
}

impl fmt::Display for CodebaseVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for CodebaseVersion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for CodebaseVersion {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::parse(&text)
            .ok_or_else(|| serde::de::Error::custom(format!("unsupported codebase_version {text:?} (v3.0, v2.1)")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_known_versions_and_refuses_others() {
        assert_eq!(CodebaseVersion::parse("v3.0"), Some(CodebaseVersion::V3_0));
        assert_eq!(CodebaseVersion::parse("v2.1"), Some(CodebaseVersion::V2_1));
        assert_eq!(CodebaseVersion::parse("v2.0"), Some(CodebaseVersion::V2_0));
        assert_eq!(CodebaseVersion::parse("v3.1"), Some(CodebaseVersion::V3_0));
        assert_eq!(CodebaseVersion::parse("v1.6"), None);
        assert_eq!(CodebaseVersion::parse("v4.0"), None);
        assert_eq!(CodebaseVersion::parse("3.0"), None);
        assert_eq!(CodebaseVersion::parse("v3"), None);
    }
}
