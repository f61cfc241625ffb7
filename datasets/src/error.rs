//! The crate's one error type: every variant that concerns a file names it, and every variant
//! that concerns a field of that file names the field.

use std::path::{Path, PathBuf};

/// Everything that can go wrong while reading, validating or writing a LeRobot dataset.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be opened, read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },

    /// A JSON file (or one line of a JSON-lines file) is not valid JSON.
    #[error("{}: malformed JSON: {source}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// What the parser said, with line and column.
        #[source]
        source: serde_json::Error,
    },

    /// A parquet file could not be decoded (or written).
    #[error("{}: parquet: {source}", path.display())]
    Parquet {
        /// The file.
        path: PathBuf,
        /// What the parquet or arrow crate said (or why the decoder gave up).
        #[source]
        source: BoxError,
    },

    /// A file is readable but one of its fields is missing, has the wrong type, or holds a
    /// value that breaks the format's rules.
    #[error("{}: `{field}`: {message}", path.display())]
    Field {
        /// The file.
        path: PathBuf,
        /// The field, column or key (e.g. `features.action.shape`, `episode_index`).
        field: String,
        /// What is wrong with it.
        message: String,
    },

    /// The dataset declares a `codebase_version` this crate does not read.
    #[error(
        "{}: `codebase_version` is {found:?}; supported: v3.0 and v2.1 (v2.0 is read as v2.1); \
         convert older datasets with LeRobot's converters",
        path.display()
    )]
    UnsupportedVersion {
        /// The `info.json` file.
        path: PathBuf,
        /// The version string found.
        found: String,
    },

    /// An MP4 could not be opened, decoded or written.
    #[error(
        "{}: video: {message}{}",
        path.display(),
        source.as_ref().map_or(String::new(), |s| format!(": {s}"))
    )]
    Video {
        /// The video file.
        path: PathBuf,
        /// What was being done, or what is wrong with the file.
        message: String,
        /// What FFmpeg said, when it was FFmpeg that failed.
        #[source]
        source: Option<BoxError>,
    },

    /// This build cannot decode or encode video: it was built without the `video` feature.
    #[error(
        "{}: cannot read or write video: this build has no FFmpeg (built without the `video` \
         feature); read the frames from a frame cache made by a build with video (`datasets cache`), \
         or use a dataset that stores its images in parquet",
        path.display()
    )]
    VideoUnsupported {
        /// The video file.
        path: PathBuf,
    },

    /// No decoded frame lies within `tolerance_s` of a query timestamp.
    #[error(
        "{}: no frame within tolerance_s={tolerance_s} of query timestamp {query_s:.6}s \
         (nearest decoded frame at {nearest}); the parquet timestamps and the video disagree",
        path.display(),
        nearest = nearest_s.map_or("none".to_string(), |s| format!("{s:.6}s"))
    )]
    FrameTimestamp {
        /// The video file.
        path: PathBuf,
        /// The timestamp asked for, in seconds from the start of the file.
        query_s: f64,
        /// The nearest timestamp that could be decoded, if any.
        nearest_s: Option<f64>,
        /// The tolerance in seconds.
        tolerance_s: f64,
    },

    /// An embedded image (images stored in parquet) could not be decoded.
    #[error("{}: `{field}` row {row}: image: {message}", path.display())]
    Image {
        /// The parquet file holding the image.
        path: PathBuf,
        /// The image column.
        field: String,
        /// The row within the dataset (global `index`).
        row: usize,
        /// What the decoder said.
        message: String,
    },

    /// A dataset or policy named by its Hub id (`--dataset.repo_id`, `--policy.path`) could not
    /// be found or downloaded.
    #[error(
        "{kind} {repo_id}: {message}{}",
        source.as_ref().map_or(String::new(), |s| format!(": {s}"))
    )]
    Hub {
        /// Whether it is a dataset or a model.
        kind: crate::hub::RepoKind,
        /// The repository's Hub id, `OWNER/NAME`.
        repo_id: String,
        /// What was being done, or what is wrong (the file named where it is one file).
        message: String,
        /// What the HTTP client said, when it was the transfer that failed.
        #[source]
        source: Option<BoxError>,
    },

    /// Files could not be uploaded to a Hub repository.
    #[error("uploading to {repo_id} on the Hub: {message}")]
    HubUpload {
        /// The repository's id, `OWNER/NAME`.
        repo_id: String,
        /// What was being done and what went wrong.
        message: String,
    },

    /// A file of a streamed dataset could not be read, or changed on the server.
    #[error("{url}: {message}{}", source.as_ref().map_or(String::new(), |s| format!(": {}", error_message(s.as_ref()))))]
    Remote {
        /// The file's (or the root's) URL, without credentials.
        url: String,
        /// What was being done, or what is wrong.
        message: String,
        /// What the store's client said, when it was the transfer that failed.
        #[source]
        source: Option<BoxError>,
    },

    /// A request made of the dataset is invalid (an index out of range, bad `delta_timestamps`,
    /// an unknown key).
    #[error("{0}")]
    Request(String),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The error of a library underneath (parquet, arrow, FFmpeg), kept as the source of ours.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

impl Error {
    /// An [`Error::Io`] for `path`.
    pub fn io(path: impl AsRef<Path>, source: std::io::Error) -> Self {
        Error::Io { path: path.as_ref().to_path_buf(), source }
    }

    /// An [`Error::Field`] for `field` of `path`.
    pub fn field(path: impl AsRef<Path>, field: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Field { path: path.as_ref().to_path_buf(), field: field.into(), message: message.into() }
    }

    /// An [`Error::Parquet`] for `path`, caused by `source` (an error of the parquet or arrow
    /// crate, or a message).
    pub fn parquet(path: impl AsRef<Path>, source: impl Into<BoxError>) -> Self {
        Error::Parquet { path: path.as_ref().to_path_buf(), source: source.into() }
    }

    /// An [`Error::Video`] for `path`: what is wrong with the file.
    pub fn video(path: impl AsRef<Path>, message: impl std::fmt::Display) -> Self {
        Error::Video { path: path.as_ref().to_path_buf(), message: message.to_string(), source: None }
    }

    /// An [`Error::Video`] for `path`: doing `what` failed because of `source` (FFmpeg's error).
    pub fn video_failed(path: impl AsRef<Path>, what: impl std::fmt::Display, source: impl Into<BoxError>) -> Self {
        Error::Video { path: path.as_ref().to_path_buf(), message: what.to_string(), source: Some(source.into()) }
    }

    /// An [`Error::Remote`] for `url`: what went wrong, and the client's error if it was one.
    pub fn remote(url: impl Into<String>, message: impl Into<String>, source: Option<BoxError>) -> Self {
        Error::Remote { url: url.into(), message: message.into(), source }
    }

    /// An [`Error::Request`].
    pub fn request(message: impl Into<String>) -> Self {
        Error::Request(message.into())
    }
}

/// The message a binary prints for `error`: its text, then each cause's that the text does not
/// already hold. This crate's errors (and the trainer's and loader's) include their source's
/// message; anyhow's contexts do not; printing the whole chain would repeat the former.
pub fn error_message(error: &(dyn std::error::Error + 'static)) -> String {
    let mut message = error.to_string();
    let mut cause = error.source();
    while let Some(current) = cause {
        let text = current.to_string();
        if !message.contains(&text) {
            message = format!("{message}: {text}");
        }
        cause = current.source();
    }
    message
}

/// The message a panic was raised with (`panic!("...")`, `expect`, an assert), if it has one:
/// the payload `catch_unwind` returns, as text.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> Option<String> {
    payload.downcast_ref::<&str>().map(ToString::to_string).or_else(|| payload.downcast_ref::<String>().cloned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_message_names_each_cause_once() {
        let io = std::io::Error::new(std::io::ErrorKind::StorageFull, "No space left on device");
        let ours = Error::io("ckpt/model.mpk", io);
        assert_eq!(error_message(&ours), "ckpt/model.mpk: No space left on device");
        let wrapped = std::io::Error::other(ours);
        let message = error_message(&wrapped);
        assert_eq!(message.matches("No space left on device").count(), 1, "{message}");
    }
}
