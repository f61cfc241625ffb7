//! Small helpers to read fields out of parsed JSON with errors that name the file and the field.

use std::path::Path;

use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// Reads and parses a JSON file.
pub(crate) fn read_json(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    parse_json(path, &text)
}

/// Parses JSON text that came from `path`. Python's `json` writes the non-standard tokens
/// `NaN`, `Infinity` and `-Infinity`; they are accepted here and become the corresponding
/// floats, so that a non-finite statistic is reported by the check that reads it, with its
/// field, rather than as a syntax error.
pub(crate) fn parse_json(path: &Path, text: &str) -> Result<Value> {
    let patched = quote_non_finite(text);
    let value: Value =
        serde_json::from_str(&patched).map_err(|source| Error::Json { path: path.to_path_buf(), source })?;
    Ok(value)
}

/// The strings that stand for Python's non-finite float tokens after [`quote_non_finite`].
const NON_FINITE: [(&str, f64); 3] =
    [("\u{0}NaN", f64::NAN), ("\u{0}Infinity", f64::INFINITY), ("\u{0}-Infinity", f64::NEG_INFINITY)];

/// Rewrites bare `NaN`, `Infinity` and `-Infinity` tokens (outside strings) as strings
/// carrying a NUL marker, which no real JSON string from LeRobot contains.
fn quote_non_finite(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains("NaN") && !text.contains("Infinity") {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut in_string = false;
    let mut escaped = false;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            rest = &rest[c.len_utf8()..];
            continue;
        }
        if c == '"' {
            in_string = true;
            out.push(c);
            rest = &rest[1..];
            continue;
        }
        let token = ["-Infinity", "Infinity", "NaN"].into_iter().find(|t| rest.starts_with(t));
        match token {
            Some(t) => {
                out.push_str("\"\\u0000");
                out.push_str(t);
                out.push('"');
                rest = &rest[t.len()..];
            }
            None => {
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    std::borrow::Cow::Owned(out)
}

/// A number, including the non-finite markers written by [`parse_json`].
pub(crate) fn as_f64(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => NON_FINITE.iter().find(|(marker, _)| marker == s).map(|&(_, v)| v),
        _ => None,
    }
}

/// A short description of a JSON value for error messages.
pub(crate) fn describe(value: &Value) -> String {
    let text = value.to_string();
    if text.len() > 60 { format!("{}...", &text[..57]) } else { text }
}

/// A JSON object together with where it came from, for field-naming errors.
pub(crate) struct Obj<'a> {
    path: &'a Path,
    prefix: String,
    map: &'a Map<String, Value>,
}

impl<'a> Obj<'a> {
    /// Wraps `value`, which must be an object; `prefix` names it (empty at the top level).
    pub(crate) fn new(path: &'a Path, prefix: &str, value: &'a Value) -> Result<Self> {
        match value {
            Value::Object(map) => Ok(Obj { path, prefix: prefix.to_string(), map }),
            other => Err(Error::field(
                path,
                if prefix.is_empty() { "(top level)" } else { prefix },
                format!("expected a JSON object, found {}", describe(other)),
            )),
        }
    }

    /// The dotted name of `key` inside this object.
    pub(crate) fn name(&self, key: &str) -> String {
        if self.prefix.is_empty() { key.to_string() } else { format!("{}.{key}", self.prefix) }
    }

    /// An error about `key` of this object.
    pub(crate) fn error(&self, key: &str, message: impl Into<String>) -> Error {
        Error::field(self.path, self.name(key), message)
    }

    /// The underlying map.
    pub(crate) fn map(&self) -> &'a Map<String, Value> {
        self.map
    }

    /// The value of `key`, if present and not null.
    pub(crate) fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    /// The value of `key`, which must be present.
    pub(crate) fn req(&self, key: &str) -> Result<&'a Value> {
        self.get(key).ok_or_else(|| self.error(key, "missing"))
    }

    /// A required non-negative integer.
    pub(crate) fn req_usize(&self, key: &str) -> Result<usize> {
        let v = self.req(key)?;
        v.as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| self.error(key, format!("expected a non-negative integer, found {}", describe(v))))
    }

    /// An optional non-negative integer.
    pub(crate) fn opt_usize(&self, key: &str) -> Result<Option<usize>> {
        if self.get(key).is_none() {
            return Ok(None);
        }
        self.req_usize(key).map(Some)
    }

    /// A required integer, possibly negative.
    pub(crate) fn req_i64(&self, key: &str) -> Result<i64> {
        let v = self.req(key)?;
        v.as_i64().ok_or_else(|| self.error(key, format!("expected an integer, found {}", describe(v))))
    }

    /// A required number (integers accepted).
    pub(crate) fn req_f64(&self, key: &str) -> Result<f64> {
        let v = self.req(key)?;
        as_f64(v).ok_or_else(|| self.error(key, format!("expected a number, found {}", describe(v))))
    }

    /// A required string.
    pub(crate) fn req_str(&self, key: &str) -> Result<&'a str> {
        let v = self.req(key)?;
        v.as_str().ok_or_else(|| self.error(key, format!("expected a string, found {}", describe(v))))
    }

    /// An optional string.
    pub(crate) fn opt_str(&self, key: &str) -> Result<Option<&'a str>> {
        if self.get(key).is_none() {
            return Ok(None);
        }
        self.req_str(key).map(Some)
    }

    /// A required array.
    pub(crate) fn req_array(&self, key: &str) -> Result<&'a Vec<Value>> {
        let v = self.req(key)?;
        v.as_array().ok_or_else(|| self.error(key, format!("expected a list, found {}", describe(v))))
    }

    /// A required nested object.
    pub(crate) fn req_obj(&self, key: &str) -> Result<Obj<'a>> {
        Obj::new(self.path, &self.name(key), self.req(key)?)
    }

    /// An optional nested object.
    pub(crate) fn opt_obj(&self, key: &str) -> Result<Option<Obj<'a>>> {
        self.get(key).map(|v| Obj::new(self.path, &self.name(key), v)).transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_non_finite_tokens_parse_as_floats() {
        let v = parse_json(Path::new("x.json"), r#"{"a": [NaN, -Infinity, 1.5], "s": "NaN stays"}"#).unwrap();
        let a = v["a"].as_array().unwrap();
        assert!(as_f64(&a[0]).unwrap().is_nan());
        assert_eq!(as_f64(&a[1]), Some(f64::NEG_INFINITY));
        assert_eq!(as_f64(&a[2]), Some(1.5));
        assert_eq!(v["s"], "NaN stays");
    }

    #[test]
    fn errors_name_the_dotted_field() {
        let v: Value = serde_json::json!({"features": {"action": {"shape": "two"}}});
        let path = Path::new("meta/info.json");
        let top = Obj::new(path, "", &v).unwrap();
        let action = top.req_obj("features").unwrap().req_obj("action").unwrap();
        let err = action.req_usize("shape").unwrap_err().to_string();
        assert!(err.contains("meta/info.json"), "{err}");
        assert!(err.contains("features.action.shape"), "{err}");
        let err = action.req_str("dtype").unwrap_err().to_string();
        assert!(err.contains("features.action.dtype") && err.contains("missing"), "{err}");
    }
}
