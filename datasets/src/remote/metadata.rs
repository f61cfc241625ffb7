//! A streamed dataset's `meta/` mirrored into a local folder, read by the same code as a local
//! dataset's: fetched the first time, kept while the server's versions of its files stay the
//! same, each file written atomically (a killed run's partial files are removed by the next).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::location::StoreKind;
use super::store::{FileVersion, RemoteFiles};
use crate::error::{Error, Result};
use crate::meta::episodes::{EPISODES_DIR, EPISODES_JSONL};
use crate::meta::info::{DatasetInfo, INFO_PATH};
use crate::meta::tasks::{TASKS_JSONL, TASKS_PARQUET};
use crate::stats::{EPISODES_STATS_JSONL, STATS_JSON};

/// The record of the versions mirrored, beside `meta/`.
const VERSIONS: &str = "versions.json";

/// Where streamed datasets' metadata is mirrored: `$LEROBOT_RS_STREAM_CACHE`, else
/// `$XDG_CACHE_HOME/lerobot-rs/streams` or `$HOME/.cache/lerobot-rs/streams`, else
/// `lerobot-rs-streams` in the working folder.
pub fn default_mirror_dir() -> PathBuf {
    let set = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    set("LEROBOT_RS_STREAM_CACHE")
        .or_else(|| crate::cache_home::user_cache_dir(|name| std::env::var_os(name), "streams"))
        .unwrap_or_else(|| PathBuf::from("lerobot-rs-streams"))
}

/// Mirrors `files`' `meta/` under `mirror_dir` (a folder per root URL) and returns the local
/// root that holds it.
pub fn mirror(files: &RemoteFiles, mirror_dir: &Path) -> Result<PathBuf> {
    let root = mirror_dir.join(folder_name(files.root().url()));
    std::fs::create_dir_all(root.join("meta")).map_err(|e| Error::io(&root, e))?;
    remove_partial_files(&root)?;
    let versions_path = root.join(VERSIONS);
    let mut kept: BTreeMap<String, FileVersion> = match std::fs::read(&versions_path) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_default(),
        Err(_) => BTreeMap::new(),
    };
    let mut mirrored = BTreeMap::new();
    let mut fetch = |relative: &str, version: FileVersion| -> Result<()> {
        let local = root.join(relative);
        // Without an entity tag, a file of the same size may still differ: fetched again.
        if kept.get(relative) != Some(&version) || version.e_tag.is_none() || !local.is_file() {
            let bytes = files.read_all(relative)?;
            write_atomically(&local, &bytes)?;
        }
        kept.remove(relative);
        mirrored.insert(relative.to_string(), version);
        Ok(())
    };
    fetch(INFO_PATH, files.version(INFO_PATH)?)?;
    for (relative, version) in meta_files(files, &root)? {
        fetch(&relative, version)?;
    }
    // Files of an older version of the dataset that the server no longer has.
    for gone in kept.keys() {
        let _ = std::fs::remove_file(root.join(gone));
    }
    let record = serde_json::to_vec_pretty(&mirrored).expect("versions serialise");
    write_atomically(&versions_path, &record)?;
    Ok(root)
}

/// The files of `meta/` besides `info.json`, with their versions: listed where the store lists,
/// else (a plain HTTP server, the Hub) the files LeRobot's layout names, looked for one by one.
fn meta_files(files: &RemoteFiles, root: &Path) -> Result<Vec<(String, FileVersion)>> {
    if files.root().kind() != StoreKind::Http {
        return Ok(files
            .list("meta")?
            .into_iter()
            .filter(|(relative, _, _)| relative != INFO_PATH)
            .map(|(relative, size, e_tag)| (relative, FileVersion { size, e_tag }))
            .collect());
    }
    let info = DatasetInfo::read(root)?;
    let mut found = Vec::new();
    for relative in [STATS_JSON, TASKS_PARQUET, TASKS_JSONL, EPISODES_JSONL, EPISODES_STATS_JSONL] {
        if files.exists(relative)? {
            found.push((relative.to_string(), files.version(relative)?));
        }
    }
    if info.codebase_version.starts_with("v3") {
        // meta/episodes/chunk-CCC/file-FFF.parquet, numbered from 0 without gaps, each chunk
        // `chunks_size` files at most (LeRobot v3.0's writer).
        // No more files than episodes: a server that answers every path ends the search too.
        'chunks: for chunk in 0..=info.total_episodes / info.chunks_size {
            for file in 0..info.chunks_size {
                if found.len() > info.total_episodes + 5 {
                    break 'chunks;
                }
                let relative = format!("{EPISODES_DIR}/chunk-{chunk:03}/file-{file:03}.parquet");
                if !files.exists(&relative)? {
                    if file == 0 {
                        break 'chunks;
                    }
                    continue 'chunks;
                }
                found.push((relative.clone(), files.version(&relative)?));
            }
        }
    }
    Ok(found)
}

/// A folder name for `url`: readable, and unique by a hash of the whole URL.
fn folder_name(url: &str) -> String {
    let readable: String = url
        .split("://")
        .last()
        .unwrap_or(url)
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' { c } else { '_' })
        .rev()
        .take(48)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    format!("{readable}-{:016x}", twox_hash::XxHash64::oneshot(0, url.as_bytes()))
}

/// The suffix of a file being written, before its process id.
const PARTIAL: &str = ".partial-";

/// Writes `bytes` to `path` through a temporary file renamed into place.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    }
    let mut partial = path.as_os_str().to_owned();
    partial.push(format!("{PARTIAL}{}", std::process::id()));
    let partial = PathBuf::from(partial);
    std::fs::write(&partial, bytes).map_err(|e| Error::io(&partial, e))?;
    std::fs::rename(&partial, path).map_err(|e| Error::io(path, e))
}

/// Removes the partial files under `dir` that a process no longer running left.
fn remove_partial_files(dir: &Path) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            remove_partial_files(&path)?;
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let writer = name.rsplit_once(PARTIAL).and_then(|(_, pid)| pid.parse::<u32>().ok());
        if writer.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()) {
            let _ = std::fs::remove_file(&path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_folders_readably_and_uniquely() {
        let a = folder_name("s3://robots/lerobot/droid");
        assert!(a.starts_with("robots_lerobot_droid-"), "{a}");
        assert_ne!(a, folder_name("gs://robots/lerobot/droid"));
    }

    #[test]
    fn removes_what_dead_writers_left_only() {
        let dir = tempfile::tempdir().unwrap();
        let dead = dir.path().join("meta/info.json.partial-4294967295");
        let alive = dir.path().join(format!("meta/stats.json{PARTIAL}{}", std::process::id()));
        std::fs::create_dir_all(dir.path().join("meta")).unwrap();
        std::fs::write(&dead, b"x").unwrap();
        std::fs::write(&alive, b"x").unwrap();
        remove_partial_files(dir.path()).unwrap();
        assert!(!dead.exists() && alive.exists());
    }
}
