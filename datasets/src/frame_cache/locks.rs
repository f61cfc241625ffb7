//! The locks of one cache folder, which the kernel releases when their process ends however it
//! ends (`kill -9` included): a writer holds [`WRITER_LOCK`] exclusively while it builds the
//! cache, each reader holds [`READERS_LOCK`] shared while it maps the cache, and whoever removes
//! the folder holds both exclusively. What a killed process left (temporary files, a half-built
//! folder) is so told apart from what a live one is doing, without process ids, which the system
//! reuses.

use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use rustix::fs::FlockOperation;

use crate::error::{Error, Result};

/// Held exclusively by the process building the cache in its folder.
pub const WRITER_LOCK: &str = ".writer.lock";
/// Held shared by every process reading the cache in its folder.
pub const READERS_LOCK: &str = ".readers.lock";

/// How a lock is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockMode {
    /// With other shared holders (readers).
    Shared,
    /// Alone (a writer, or whoever removes the folder).
    Exclusive,
}

/// A held lock; dropping it (or the process ending) releases it.
#[derive(Debug)]
pub struct FolderLock {
    /// The locked file; none where the lock file could not exist (a read-only folder).
    _file: Option<File>,
}

impl FolderLock {
    /// Waits until lock `name` of `dir` can be held in `mode`, creating the folder and the lock
    /// file if missing.
    pub fn acquire(dir: &Path, name: &str, mode: LockMode) -> Result<Self> {
        loop {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
            let path = dir.join(name);
            let file = open_lock(&path, true)?.expect("created");
            rustix::fs::flock(&file, blocking(mode)).map_err(|e| Error::io(&path, e.into()))?;
            // The folder may have been removed while this waited: lock the new file then.
            if still_at(&file, &path) {
                return Ok(FolderLock { _file: Some(file) });
            }
        }
    }

    /// Waits until lock `name` of the existing folder `dir` can be held in `mode`. Where the
    /// lock file cannot be created (a read-only folder) nobody can hold it, and it is held at
    /// once; if the folder is removed meanwhile, what the caller opens next is missing.
    pub fn acquire_existing(dir: &Path, name: &str, mode: LockMode) -> Result<Self> {
        let path = dir.join(name);
        let Some(file) = open_lock(&path, false)? else { return Ok(FolderLock { _file: None }) };
        rustix::fs::flock(&file, blocking(mode)).map_err(|e| Error::io(&path, e.into()))?;
        Ok(FolderLock { _file: Some(file) })
    }

    /// Takes lock `name` of `dir` in `mode` if no other process holds it in a conflicting way;
    /// `Ok(None)` if one does. A missing lock file is created (in an existing folder) unless it
    /// cannot be (a read-only folder), in which case nobody can hold it and it is held at once.
    pub fn try_acquire(dir: &Path, name: &str, mode: LockMode) -> Result<Option<Self>> {
        let op = match mode {
            LockMode::Shared => FlockOperation::NonBlockingLockShared,
            LockMode::Exclusive => FlockOperation::NonBlockingLockExclusive,
        };
        let path = dir.join(name);
        let Some(file) = open_lock(&path, false)? else {
            return Ok(Some(FolderLock { _file: None }));
        };
        match rustix::fs::flock(&file, op) {
            Ok(()) if still_at(&file, &path) => Ok(Some(FolderLock { _file: Some(file) })),
            // Removed between the open and the lock: whoever removed it held it.
            Ok(()) => Ok(None),
            Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
            Err(e) => Err(Error::io(&path, e.into())),
        }
    }
}

/// The blocking `flock` operation for `mode`.
fn blocking(mode: LockMode) -> FlockOperation {
    match mode {
        LockMode::Shared => FlockOperation::LockShared,
        LockMode::Exclusive => FlockOperation::LockExclusive,
    }
}

/// Opens (creating it) the lock file at `path`. Where it cannot be created (a read-only folder)
/// and `must` is false, an existing one is opened read-only, and a missing one is `None`.
fn open_lock(path: &Path, must: bool) -> Result<Option<File>> {
    match OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path) {
        Ok(file) => Ok(Some(file)),
        Err(e) if !must && matches!(e.kind(), ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem) => {
            match File::open(path) {
                Ok(file) => Ok(Some(file)),
                Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
                Err(e) => Err(Error::io(path, e)),
            }
        }
        Err(e) => Err(Error::io(path, e)),
    }
}

/// Whether `file` is still the file at `path` (not unlinked, not replaced).
fn still_at(file: &File, path: &Path) -> bool {
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(held), Ok(now)) => held.dev() == now.dev() && held.ino() == now.ino(),
        _ => false,
    }
}

/// Both locks of `dir` held exclusively: no process writes or reads the cache there, and none
/// can start to until this is dropped.
#[derive(Debug)]
pub struct Unused {
    _writer: FolderLock,
    _readers: FolderLock,
}

impl Unused {
    /// Both locks of `dir`, if no other process holds either.
    pub fn try_acquire(dir: &Path) -> Result<Option<Self>> {
        let Some(writer) = FolderLock::try_acquire(dir, WRITER_LOCK, LockMode::Exclusive)? else { return Ok(None) };
        let Some(readers) = FolderLock::try_acquire(dir, READERS_LOCK, LockMode::Exclusive)? else { return Ok(None) };
        Ok(Some(Unused { _writer: writer, _readers: readers }))
    }

    /// Removes the folder and everything in it (the lock files last), tolerating what another
    /// process removed first.
    pub fn remove_folder(self, dir: &Path) -> Result<()> {
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(Error::io(dir, e)),
        };
        let mut locks: Vec<PathBuf> = Vec::new();
        for entry in entries {
            let path = entry.map_err(|e| Error::io(dir, e))?.path();
            if path.file_name().is_some_and(|n| n == WRITER_LOCK || n == READERS_LOCK) {
                locks.push(path);
            } else {
                remove_path(&path)?;
            }
        }
        for lock in locks {
            remove_path(&lock)?;
        }
        match std::fs::remove_dir(dir) {
            // A reader that came to look at this moment made a lock file again: the folder
            // holds no cache and the next reclaim removes it.
            Err(e) if e.kind() != ErrorKind::NotFound && e.kind() != ErrorKind::DirectoryNotEmpty => {
                Err(Error::io(dir, e))
            }
            _ => Ok(()),
        }
    }
}

/// Removes a file or folder, as already removed if it is gone.
pub fn remove_path(path: &Path) -> Result<()> {
    let removed = if path.is_dir() { std::fs::remove_dir_all(path) } else { std::fs::remove_file(path) };
    match removed {
        Err(e) if e.kind() != ErrorKind::NotFound => Err(Error::io(path, e)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_keeps_the_folder_from_being_removed_and_a_writer_excludes_writers() {
        let dir = tempfile::tempdir().unwrap();
        let reader = FolderLock::acquire(dir.path(), READERS_LOCK, LockMode::Shared).unwrap();
        assert!(FolderLock::try_acquire(dir.path(), READERS_LOCK, LockMode::Shared).unwrap().is_some());
        assert!(Unused::try_acquire(dir.path()).unwrap().is_none());
        let writer = FolderLock::acquire(dir.path(), WRITER_LOCK, LockMode::Exclusive).unwrap();
        assert!(FolderLock::try_acquire(dir.path(), WRITER_LOCK, LockMode::Exclusive).unwrap().is_none());
        drop((reader, writer));
        let unused = Unused::try_acquire(dir.path()).unwrap().expect("nobody holds it now");
        unused.remove_folder(dir.path()).unwrap();
        assert!(!dir.path().exists());
    }
}
