//! A dataset's metadata: `meta/info.json` (version, frame rate, path templates, features), the
//! episode and task tables, and the path rules that keep every file inside the dataset root.

pub(crate) mod episodes;
pub(crate) mod features;
pub(crate) mod info;
pub(crate) mod json;
pub(crate) mod paths;
pub(crate) mod tasks;
pub(crate) mod version;
