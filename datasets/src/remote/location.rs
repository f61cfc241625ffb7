//! Where a streamed dataset lives: a URL, parsed once into the store that serves it and the
//! prefix under which the dataset's files are.

use crate::error::{Error, Result};

/// The kind of store a root names, by its scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    /// Amazon S3 or an S3-compatible server (`s3://BUCKET/PREFIX`; `AWS_ENDPOINT_URL` for
    /// another server).
    S3,
    /// Google Cloud Storage (`gs://BUCKET/PREFIX`).
    Gcs,
    /// Azure Blob Storage (`az://CONTAINER/PREFIX`, `abfs://`, `abfss://`).
    Azure,
    /// Any HTTP server that answers ranged `GET`s (`http://`, `https://`), the Hub among them.
    Http,
    /// A folder of this machine (`file:///PATH`), for tests and for mounted network storage.
    File,
}

/// A dataset's root URL: the store that serves it and the prefix of its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteRoot {
    kind: StoreKind,
    /// The URL as given, without a trailing `/` (one with user information or a query is refused).
    url: String,
    /// The store's own URL: the bucket or container, or the HTTP base, or the folder.
    store_url: String,
    /// The dataset's folder inside the store, without leading or trailing `/`.
    prefix: String,
}

impl RemoteRoot {
    /// Parses `text`, refusing schemes other than those of [`StoreKind`] and URLs that carry
    /// credentials (those come from the environment, never from a URL that may be logged).
    pub fn parse(text: &str) -> Result<Self> {
        let shown = redacted(text);
        let refuse = |why: &str| Error::request(format!("dataset root {shown:?}: {why}"));
        let (scheme, rest) = text.split_once("://").ok_or_else(|| {
            refuse("not a URL; streaming takes s3://, gs://, az://, https://, http:// or file:// roots (a folder: file:///its/absolute/path)")
        })?;
        let kind = match scheme.to_ascii_lowercase().as_str() {
            "s3" | "s3a" => StoreKind::S3,
            "gs" => StoreKind::Gcs,
            "az" | "abfs" | "abfss" | "azure" => StoreKind::Azure,
            "http" | "https" => StoreKind::Http,
            "file" => StoreKind::File,
            other => {
                return Err(refuse(&format!(
                    "scheme {other:?} is not one streaming reads (s3, gs, az, abfs, abfss, http, https, file)"
                )));
            }
        };
        let (authority, path) = match rest.split_once('/') {
            Some((authority, path)) => (authority, path),
            None => (rest, ""),
        };
        if authority.contains('@') {
            return Err(refuse("credentials in the URL are refused; give them through the environment"));
        }
        if path.contains('?') || authority.contains('?') {
            return Err(refuse(
                "a query string (a signed URL's, a SAS token) is refused; give credentials through the environment",
            ));
        }
        let path = path.trim_matches('/');
        let (store_url, prefix) = match kind {
            StoreKind::File => {
                if !authority.is_empty() && authority != "localhost" {
                    return Err(refuse("a file:// URL names a folder of this machine (file:///PATH)"));
                }
                (format!("/{path}"), String::new())
            }
            StoreKind::Http => (format!("{scheme}://{authority}/{path}"), String::new()),
            _ => {
                if authority.is_empty() {
                    return Err(refuse("the URL names no bucket or container"));
                }
                (format!("{scheme}://{authority}"), path.to_string())
            }
        };
        Ok(Self { kind, url: text.trim_end_matches('/').to_string(), store_url, prefix })
    }

    /// The Hub's files of dataset `repo_id` at `revision`, through its `resolve` URLs.
    pub fn hub(endpoint: &str, repo_id: &str, revision: &str) -> Result<Self> {
        Self::parse(&format!("{}/datasets/{repo_id}/resolve/{revision}", endpoint.trim_end_matches('/')))
    }

    /// Whether `text` is a URL that streaming reads (`s3://...`), not a local path.
    pub fn is_url(text: &str) -> bool {
        text.split_once("://").is_some_and(|(scheme, _)| {
            matches!(
                scheme.to_ascii_lowercase().as_str(),
                "s3" | "s3a" | "gs" | "az" | "abfs" | "abfss" | "azure" | "http" | "https" | "file"
            )
        })
    }

    /// The store's kind.
    pub fn kind(&self) -> StoreKind {
        self.kind
    }

    /// The root as given (never with credentials).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The store's own URL (bucket, container, HTTP base or folder).
    pub(crate) fn store_url(&self) -> &str {
        &self.store_url
    }

    /// The object path of `relative` (a dataset file, `/`-separated) inside the store.
    pub(crate) fn object_path(&self, relative: &str) -> String {
        if self.prefix.is_empty() { relative.to_string() } else { format!("{}/{relative}", self.prefix) }
    }

    /// The URL of `relative`, for messages.
    pub fn file_url(&self, relative: &str) -> String {
        format!("{}/{relative}", self.url)
    }
}

/// `text` with the user information of its authority (`user:password@`) replaced by `***`.
fn redacted(text: &str) -> String {
    let Some((scheme, rest)) = text.split_once("://") else { return text.to_string() };
    let (rest, query) = match rest.split_once('?') {
        Some((before, _)) => (before, "?***"),
        None => (rest, ""),
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://***{}{query}", &rest[at..]),
        None => format!("{scheme}://{rest}{query}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_buckets_from_prefixes() {
        let root = RemoteRoot::parse("s3://robots/lerobot/droid/").unwrap();
        assert_eq!(
            (root.kind(), root.store_url(), root.url()),
            (StoreKind::S3, "s3://robots", "s3://robots/lerobot/droid")
        );
        assert_eq!(root.object_path("meta/info.json"), "lerobot/droid/meta/info.json");
        let bare = RemoteRoot::parse("gs://robots").unwrap();
        assert_eq!(bare.object_path("meta/info.json"), "meta/info.json");
        let http = RemoteRoot::hub("http://127.0.0.1:9/", "lerobot/pusht", "main").unwrap();
        assert_eq!(http.kind(), StoreKind::Http);
        assert_eq!(http.store_url(), "http://127.0.0.1:9/datasets/lerobot/pusht/resolve/main");
        assert_eq!(http.object_path("meta/info.json"), "meta/info.json");
        assert_eq!(RemoteRoot::parse("file:///data/pusht").unwrap().store_url(), "/data/pusht");
    }

    #[test]
    fn refuses_what_it_cannot_read_and_credentials() {
        for (text, says) in [
            ("/data/pusht", "not a URL"),
            ("ftp://host/x", "\"ftp\""),
            ("s3://", "no bucket"),
            ("https://user:secret@host/x", "credentials"),
            ("file://otherhost/x", "this machine"),
            ("az://container/x?sig=secret", "query string"),
        ] {
            let message = RemoteRoot::parse(text).unwrap_err().to_string();
            assert!(message.contains(says), "{text}: {message}");
            assert!(!message.contains("secret"), "{message}");
        }
        assert!(RemoteRoot::is_url("S3://a/b") && RemoteRoot::is_url("file:///x"));
        assert!(!RemoteRoot::is_url("/x/y") && !RemoteRoot::is_url("lerobot/pusht"));
    }
}
