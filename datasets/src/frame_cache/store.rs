//! The folder of automatic frame caches (`/dev/shm/lerobot-rs-frames` by default), one cache
//! folder per dataset state: what it holds ([`entries`]), removing what dead processes left
//! ([`reclaim`]), and keeping it within a size budget by removing the least recently used
//! caches first ([`make_room`]). A cache some process reads or writes is never removed: the
//! folders' [`super::locks`] say which.

use std::fmt;
use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::format::{CacheRecord, RECORD, TEMPORARY};
use super::locks::{LockMode, Unused, WRITER_LOCK};
use crate::error::{Error, Result};

/// What a cache folder is doing now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryState {
    /// Complete, and no process reads it.
    Idle,
    /// Complete, and some process reads it.
    InUse,
    /// A live process is writing it.
    Building,
    /// Not complete, and no process writes it: a writer died.
    Abandoned,
}

impl fmt::Display for EntryState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Idle => "idle",
            Self::InUse => "in use",
            Self::Building => "building",
            Self::Abandoned => "abandoned",
        })
    }
}

/// One cache folder of the store.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The folder.
    pub dir: PathBuf,
    /// What its files take (their allocated blocks).
    pub bytes: u64,
    /// When its cache was last opened (or its folder last changed).
    pub last_used: SystemTime,
    /// Its record, when complete.
    pub record: Option<CacheRecord>,
    /// What it is doing.
    pub state: EntryState,
}

impl Entry {
    /// Reads the folder `dir` and, from its locks, what it is doing.
    fn read(dir: PathBuf) -> Result<Self> {
        let record = CacheRecord::read(&dir);
        let complete = record.is_some();
        let state = match Unused::try_acquire(&dir)? {
            Some(_) => {
                if complete {
                    EntryState::Idle
                } else {
                    EntryState::Abandoned
                }
            }
            None if super::locks::FolderLock::try_acquire(&dir, WRITER_LOCK, LockMode::Exclusive)?.is_none() => {
                EntryState::Building
            }
            // Read (if not complete, a cache whose rewriting stopped: removed once unread).
            None => EntryState::InUse,
        };
        let marker = if complete { dir.join(RECORD) } else { dir.clone() };
        let last_used = std::fs::metadata(&marker).and_then(|m| m.modified()).unwrap_or(SystemTime::UNIX_EPOCH);
        Ok(Entry { bytes: folder_bytes(&dir)?, last_used, record, state, dir })
    }
}

/// Every cache folder in `root` (none if `root` does not exist or is not a folder: then no
/// cache can be built there either, which the build reports), least recently used first.
pub fn entries(root: &Path) -> Result<Vec<Entry>> {
    let listing = match std::fs::read_dir(root) {
        Ok(listing) => listing,
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(root, e)),
    };
    let mut entries = Vec::new();
    for item in listing {
        let item = item.map_err(|e| Error::io(root, e))?;
        if item.file_type().map_err(|e| Error::io(item.path(), e))?.is_dir() {
            entries.push(Entry::read(item.path())?);
        }
    }
    entries.sort_by_key(|e| e.last_used);
    Ok(entries)
}

/// Why the store removed something.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// A temporary file of a writer that ended.
    DeadWriter,
    /// A folder whose writer ended before the cache was complete.
    Abandoned,
    /// The least recently used cache, removed to make room.
    LeastRecentlyUsed,
    /// Asked for (`datasets cache --clear`).
    Cleared,
}

/// Something the store removed, with what it freed.
#[derive(Debug, Clone)]
pub struct Removal {
    /// The file or folder.
    pub path: PathBuf,
    /// Whose frames it held, when known.
    pub dataset: Option<PathBuf>,
    /// What it took.
    pub bytes: u64,
    /// Why it went.
    pub reason: Reason,
}

impl fmt::Display for Removal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "frame cache: removed {} ({:.2} GB", self.path.display(), self.bytes as f64 / 1e9)?;
        if let Some(dataset) = &self.dataset {
            write!(f, ", frames of {}", dataset.display())?;
        }
        f.write_str(match self.reason {
            Reason::DeadWriter => "), left by a writer that ended before it finished",
            Reason::Abandoned => "), a cache whose writer ended before it was complete",
            Reason::LeastRecentlyUsed => "), the least recently used cache, to make room",
            Reason::Cleared => ")",
        })
    }
}

/// Removes what processes that ended left in `root`: temporary files in folders nobody writes,
/// and folders whose cache nobody completed, reads or writes.
pub fn reclaim(root: &Path) -> Result<Vec<Removal>> {
    let mut removed = Vec::new();
    for entry in entries(root)? {
        match entry.state {
            EntryState::Abandoned => removed.extend(remove(entry, Reason::Abandoned)?),
            EntryState::Idle | EntryState::InUse => {
                // No writer: a temporary file is a dead one's (the lock keeps a new one out).
                let Some(_writing) =
                    super::locks::FolderLock::try_acquire(&entry.dir, WRITER_LOCK, LockMode::Exclusive)?
                else {
                    continue;
                };
                for path in temporary_files(&entry.dir)? {
                    let bytes = file_bytes(&path);
                    super::locks::remove_path(&path)?;
                    removed.push(Removal { path, dataset: None, bytes, reason: Reason::DeadWriter });
                }
            }
            EntryState::Building => {}
        }
    }
    Ok(removed)
}

/// What `entries` take together.
pub fn held_bytes(entries: &[Entry]) -> u64 {
    entries.iter().map(|e| e.bytes).sum()
}

/// Removes idle caches among `entries` (a store's, least recently used first), in that order,
/// until the caches and `needed` more bytes fit in `budget`, never one in `keep`; returns what
/// it removed and what the caches left take. Removes nothing if even all of them would not make
/// room.
pub fn make_room(entries: Vec<Entry>, needed: u64, budget: u64, keep: &[PathBuf]) -> Result<(Vec<Removal>, u64)> {
    let held = held_bytes(&entries);
    let removable: Vec<Entry> =
        entries.into_iter().filter(|e| e.state == EntryState::Idle && !keep.contains(&e.dir)).collect();
    let freeable: u64 = removable.iter().map(|e| e.bytes).sum();
    if held.saturating_sub(freeable) + needed > budget {
        return Ok((Vec::new(), held));
    }
    let mut held = held;
    let mut removed = Vec::new();
    for entry in removable {
        if held + needed <= budget {
            break;
        }
        if let Some(removal) = remove(entry, Reason::LeastRecentlyUsed)? {
            held -= removal.bytes;
            removed.push(removal);
        }
    }
    Ok((removed, held))
}

/// Removes every idle or abandoned cache of `root` (`datasets cache --clear`); those some
/// process reads or writes stay.
pub fn clear(root: &Path) -> Result<Vec<Removal>> {
    let mut removed = reclaim(root)?;
    for entry in entries(root)? {
        if entry.state == EntryState::Idle {
            removed.extend(remove(entry, Reason::Cleared)?);
        }
    }
    Ok(removed)
}

/// Removes `entry`'s folder if it is still unused (`None` if a process took it meanwhile).
fn remove(entry: Entry, reason: Reason) -> Result<Option<Removal>> {
    let Some(unused) = Unused::try_acquire(&entry.dir)? else { return Ok(None) };
    unused.remove_folder(&entry.dir)?;
    let dataset = entry.record.map(|r| r.dataset);
    Ok(Some(Removal { path: entry.dir, dataset, bytes: entry.bytes, reason }))
}

/// The temporary files in `dir`.
pub(super) fn temporary_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for item in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let path = item.map_err(|e| Error::io(dir, e))?.path();
        if path.file_name().is_some_and(|n| n.to_string_lossy().contains(TEMPORARY)) {
            found.push(path);
        }
    }
    Ok(found)
}

/// What the files directly in `dir` take on disk.
fn folder_bytes(dir: &Path) -> Result<u64> {
    let listing = match std::fs::read_dir(dir) {
        Ok(listing) => listing,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(Error::io(dir, e)),
    };
    Ok(listing.filter_map(Result::ok).map(|item| file_bytes(&item.path())).sum())
}

/// What the file at `path` takes on disk (its allocated blocks), 0 if it is gone.
fn file_bytes(path: &Path) -> u64 {
    std::fs::symlink_metadata(path).map_or(0, |m| m.blocks() * 512)
}
