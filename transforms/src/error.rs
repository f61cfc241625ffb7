//! The transforms' error type.

/// What can go wrong when configuring transforms or normalisation.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A feature's statistics are missing, malformed or not finite.
    #[error("statistics of `{feature}`: {message}")]
    Stats {
        /// The feature key.
        feature: String,
        /// What is wrong.
        message: String,
    },
    /// A transform configuration is invalid.
    #[error("image transforms: {0}")]
    Config(String),
}

/// The transforms' result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
