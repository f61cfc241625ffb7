//! Path templates (`data_path`, `video_path`) and joining them under the dataset root without
//! ever leaving it.

use std::fmt;
use std::path::{Component, Path, PathBuf};

/// One piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Literal(String),
    /// `{name}` or `{name:0Nd}`.
    Field {
        name: String,
        zero_pad_width: Option<usize>,
    },
}

/// A value substituted into a template.
#[derive(Debug, Clone, Copy)]
pub enum TemplateArg<'a> {
    /// An integer (`{episode_index:06d}`).
    Int(usize),
    /// A string (`{video_key}`).
    Str(&'a str),
}

/// A Python `str.format` template as LeRobot writes them, e.g.
/// `data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet`. Only `{name}` and
/// `{name:0Nd}` (with `{{`/`}}` escapes) are understood, which is all LeRobot uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathTemplate {
    text: String,
    pieces: Vec<Piece>,
}

impl PathTemplate {
    /// Parses a template.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut pieces = Vec::new();
        let mut literal = String::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '{' if chars.peek() == Some(&'{') => {
                    chars.next();
                    literal.push('{');
                }
                '}' if chars.peek() == Some(&'}') => {
                    chars.next();
                    literal.push('}');
                }
                '{' => {
                    let mut field = String::new();
                    loop {
                        match chars.next() {
                            Some('}') => break,
                            Some(c) => field.push(c),
                            None => return Err(format!("unclosed '{{' in template {text:?}")),
                        }
                    }
                    if !literal.is_empty() {
                        pieces.push(Piece::Literal(std::mem::take(&mut literal)));
                    }
                    pieces.push(parse_field(&field).map_err(|m| format!("{m} in template {text:?}"))?);
                }
                '}' => return Err(format!("single '}}' in template {text:?}")),
                c => literal.push(c),
            }
        }
        if !literal.is_empty() {
            pieces.push(Piece::Literal(literal));
        }
        Ok(Self { text: text.to_string(), pieces })
    }

    /// The template as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Substitutes `args` and checks that the result is a relative path that stays inside the
    /// dataset root (no `..`, no absolute path).
    pub fn render(&self, args: &[(&str, TemplateArg<'_>)]) -> Result<PathBuf, String> {
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Literal(s) => out.push_str(s),
                Piece::Field { name, zero_pad_width } => {
                    let (_, value) = args
                        .iter()
                        .find(|(n, _)| n == name)
                        .ok_or_else(|| format!("unknown field {{{name}}} in template {:?}", self.text))?;
                    match (value, zero_pad_width) {
                        (TemplateArg::Int(v), Some(w)) => out.push_str(&format!("{v:0w$}")),
                        (TemplateArg::Int(v), None) => out.push_str(&v.to_string()),
                        (TemplateArg::Str(s), None) => out.push_str(s),
                        (TemplateArg::Str(_), Some(_)) => {
                            return Err(format!("field {{{name}}} is a string but is formatted as an integer"));
                        }
                    }
                }
            }
        }
        check_relative(&out)?;
        Ok(PathBuf::from(out))
    }
}

impl fmt::Display for PathTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

fn parse_field(field: &str) -> Result<Piece, String> {
    let (name, spec) = match field.split_once(':') {
        Some((n, s)) => (n, Some(s)),
        None => (field, None),
    };
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!("bad field name {name:?}"));
    }
    let zero_pad_width = match spec {
        None => None,
        Some(spec) => {
            let digits = spec
                .strip_suffix('d')
                .ok_or_else(|| format!("unsupported format spec {spec:?} (only '0Nd' and 'd')"))?;
            let digits = digits.strip_prefix('0').unwrap_or(digits);
            if digits.is_empty() {
                Some(0)
            } else {
                Some(digits.parse::<usize>().map_err(|_| format!("unsupported format spec {spec:?}"))?.min(32))
            }
        }
    };
    Ok(Piece::Field { name: name.to_string(), zero_pad_width })
}

/// Refuses absolute paths and `..`: a dataset must not make us touch files outside its root.
fn check_relative(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("the path is empty".into());
    }
    if path.contains('\0') {
        return Err(format!("{path:?} contains NUL"));
    }
    for component in Path::new(path).components() {
        match component {
            Component::Normal(_) | Component::CurDir => {}
            Component::ParentDir => return Err(format!("{path:?} contains '..' and would leave the dataset root")),
            Component::RootDir | Component::Prefix(_) => {
                return Err(format!("{path:?} is absolute and would leave the dataset root"));
            }
        }
    }
    Ok(())
}

/// Joins a relative path below `root`, refusing anything that would leave it.
pub fn join_under(root: &Path, relative: &Path) -> Result<PathBuf, String> {
    check_relative(&relative.to_string_lossy())?;
    Ok(root.join(relative))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_lerobot_templates() {
        let t = PathTemplate::parse("videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4").unwrap();
        let p = t
            .render(&[
                ("video_key", TemplateArg::Str("observation.image")),
                ("chunk_index", TemplateArg::Int(2)),
                ("file_index", TemplateArg::Int(17)),
            ])
            .unwrap();
        assert_eq!(p, PathBuf::from("videos/observation.image/chunk-002/file-017.mp4"));
        let t = PathTemplate::parse("data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet").unwrap();
        let p = t.render(&[("episode_chunk", TemplateArg::Int(0)), ("episode_index", TemplateArg::Int(42))]).unwrap();
        assert_eq!(p, PathBuf::from("data/chunk-000/episode_000042.parquet"));
    }

    #[test]
    fn refuses_escapes_and_unknown_fields() {
        let t = PathTemplate::parse("../outside/{episode_index}.parquet").unwrap();
        assert!(t.render(&[("episode_index", TemplateArg::Int(1))]).unwrap_err().contains(".."));
        let t = PathTemplate::parse("/etc/{episode_index}").unwrap();
        assert!(t.render(&[("episode_index", TemplateArg::Int(1))]).unwrap_err().contains("absolute"));
        let t = PathTemplate::parse("videos/{video_key}/x.mp4").unwrap();
        assert!(t.render(&[("video_key", TemplateArg::Str(".."))]).is_err());
        let t = PathTemplate::parse("data/{nope:03d}.parquet").unwrap();
        assert!(t.render(&[]).unwrap_err().contains("unknown field"));
        assert!(PathTemplate::parse("data/{x:>5}").is_err());
        assert!(PathTemplate::parse("data/{x").is_err());
        assert!(join_under(Path::new("/data/ds"), Path::new("../x")).is_err());
    }
}
