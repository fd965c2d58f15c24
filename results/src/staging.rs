//! The hidden staging directory a run directory is built in, and the sweep of those a killed
//! process left behind.
//!
//! `runs/w/0-x` is built as `runs/w/.0-x.partial-<pid>`, renamed into place once complete. Its
//! writer holds an exclusive lock on the [`OWNER_LOCK`] file inside it while it writes; the
//! operating system drops that lock when the writer ends, however it ends (SIGKILL, a crash),
//! so a staging directory whose lock can be taken has no writer left and is removed by the
//! next writer into the same parent. The lock file is deleted just before the rename, and a
//! staging directory without one (just made, about to be renamed, or left by a fencer that did
//! not lock) is removed only once untouched for [`STALE_AFTER`], far longer than writing a run
//! takes. A staging directory of this process is never swept: on a network filesystem a
//! process's own locks may not exclude each other, and its other threads may be writing.

use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The file inside a staging directory whose lock its writer holds.
pub const OWNER_LOCK: &str = ".owner.lock";

/// A staging directory without an owner lock is swept once untouched this long.
pub const STALE_AFTER: Duration = Duration::from_secs(24 * 60 * 60);

/// What marks a staging directory's name, before the writer's pid.
const MARK: &str = ".partial-";

/// The staging directory of this process for the run directory named `name` in `parent`; a
/// staged file or link of that name (a regression file, `latest`) is named the same way, so the
/// sweep finds every kind.
pub fn staging_dir(parent: &Path, name: &str) -> PathBuf {
    parent.join(format!(".{name}{MARK}{}", std::process::id()))
}

/// The directory `path` is named in: a bare name's parent is the empty path, which is the
/// current directory.
pub fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

/// Flushes a directory's entries (the names created or renamed in it) to disk, so a rename in
/// it survives a power loss. Windows has no handle to a directory to flush: there the rename's
/// durability is the filesystem's.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    File::open(dir)?.sync_all()?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// A staging directory being written: its owner lock is held until this is dropped.
pub struct Staging {
    /// The directory.
    pub dir: PathBuf,
    /// The locked lock file; `None` on a filesystem that cannot lock, where the directory has
    /// no lock file and is judged by age alone.
    lock: Option<File>,
}

impl Staging {
    /// Creates the staging directory `dir` and takes its owner lock. A directory of that name
    /// left by a writer that is gone (an earlier process with this pid) is removed first; one
    /// whose lock is held (a process with this pid in another container sharing the
    /// directory) is left alone, and the error says so.
    pub fn create(dir: PathBuf) -> std::io::Result<Staging> {
        if dir.exists() {
            if owner(&dir) == Owner::Writing {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "another process is writing this staging directory",
                ));
            }
            std::fs::remove_dir_all(&dir)?;
        }
        std::fs::create_dir(&dir)?;
        let lock = lock_owner(&dir.join(OWNER_LOCK)).inspect_err(|_| {
            let _ = std::fs::remove_dir_all(&dir);
        })?;
        Ok(Staging { dir, lock })
    }

    /// Deletes the lock file, so the directory is renamed into place without it (the lock
    /// itself is held until this is dropped).
    pub fn remove_lock_file(&self) -> std::io::Result<()> {
        match self.lock {
            Some(_) => std::fs::remove_file(self.dir.join(OWNER_LOCK)),
            None => Ok(()),
        }
    }
}

/// Creates the lock file `path` and locks it; `None`, and no file, where the filesystem
/// cannot lock.
fn lock_owner(path: &Path) -> std::io::Result<Option<File>> {
    let lock = File::create(path)?;
    if lock.lock().is_ok() {
        return Ok(Some(lock));
    }
    drop(lock);
    // Left unlocked, the file would read as a writer that is gone.
    std::fs::remove_file(path)?;
    Ok(None)
}

/// Removes the staging directories in `parent` whose writer is gone; errors are ignored (a
/// sweep is housekeeping, never a reason to fail a run).
pub fn sweep_abandoned(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    let own = std::process::id().to_string();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|name| name.starts_with('.'))
            .and_then(|name| name.rsplit_once(MARK))
            .map(|(_, pid)| pid)
        else {
            continue;
        };
        let is_pid = !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit());
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if !is_pid || pid == own {
            continue;
        }
        // A staged file or symlink (a regression file, `latest`) has no lock: it goes once
        // stale. A symlink is judged as itself, never by what it points at.
        if !kind.is_dir() {
            if untouched_for(&entry.path(), STALE_AFTER) {
                let _ = std::fs::remove_file(entry.path());
            }
            continue;
        }
        let dir = entry.path();
        let abandoned = match owner(&dir) {
            Owner::Gone => true,
            Owner::Writing => false,
            Owner::Unknown => untouched_for(&dir, STALE_AFTER),
        };
        if abandoned {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

/// What a staging directory's owner lock says about its writer.
#[derive(Debug, PartialEq, Eq)]
enum Owner {
    /// The lock is held: a writer is at work.
    Writing,
    /// The lock could be taken: its writer ended without renaming the directory.
    Gone,
    /// No lock file (just made, about to be renamed, or never locked), or one whose lock
    /// cannot be tried here.
    Unknown,
}

fn owner(dir: &Path) -> Owner {
    match File::open(dir.join(OWNER_LOCK)).map(|lock| lock.try_lock()) {
        Ok(Ok(())) => Owner::Gone,
        Ok(Err(TryLockError::WouldBlock)) => Owner::Writing,
        Ok(Err(TryLockError::Error(_))) | Err(_) => Owner::Unknown,
    }
}

fn untouched_for(path: &Path, bound: Duration) -> bool {
    std::fs::symlink_metadata(path)
        .and_then(|meta| meta.modified())
        .is_ok_and(|modified| {
            SystemTime::now()
                .duration_since(modified)
                .is_ok_and(|age| age > bound)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A staging directory as a writer with `pid` leaves it when killed: its lock file (no one
    /// holds the lock) and a half-written run.
    fn left_behind(parent: &Path, name: &str, pid: u32) -> PathBuf {
        let dir = parent.join(format!(".{name}{MARK}{pid}"));
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join(OWNER_LOCK), b"").unwrap();
        std::fs::write(dir.join("history.jsonl"), b"{\"index\":0").unwrap();
        dir
    }

    /// Sets `dir`'s modification time `by` into the past.
    fn age(dir: &Path, by: Duration) {
        File::open(dir)
            .unwrap()
            .set_modified(SystemTime::now() - by)
            .unwrap();
    }

    /// A pid that is not this process's (the lock, not the pid, tells whether its writer runs).
    fn other_pid(n: u32) -> u32 {
        if n == std::process::id() { n + 1 } else { n }
    }

    #[test]
    fn a_staging_dir_whose_writer_ended_is_swept_and_one_being_written_is_kept() {
        let root = tempfile::tempdir().unwrap();
        let gone = left_behind(root.path(), "0-a", other_pid(7));
        let writing = left_behind(root.path(), "0-b", other_pid(8));
        let held = File::open(writing.join(OWNER_LOCK)).unwrap();
        held.lock().unwrap();
        // However old, a directory whose writer still holds its lock stays.
        age(&writing, 2 * STALE_AFTER);
        sweep_abandoned(root.path());
        assert!(
            !gone.exists(),
            "the killed writer's staging dir is still there"
        );
        assert!(writing.exists(), "a live writer's staging dir was removed");
        drop(held);
        sweep_abandoned(root.path());
        assert!(!writing.exists());
    }

    #[test]
    fn staged_files_of_other_writers_are_swept_only_once_stale() {
        let root = tempfile::tempdir().unwrap();
        let stale = root.path().join(format!(".r.json{MARK}{}", other_pid(11)));
        let fresh = root.path().join(format!(".s.json{MARK}{}", other_pid(12)));
        let own = root
            .path()
            .join(format!(".t.json{MARK}{}", std::process::id()));
        for file in [&stale, &fresh, &own] {
            std::fs::write(file, b"{").unwrap();
        }
        for file in [&stale, &own] {
            age(file, 2 * STALE_AFTER);
        }
        sweep_abandoned(root.path());
        assert!(!stale.exists(), "a stale staged file was kept");
        assert!(fresh.exists(), "a fresh staged file was removed");
        assert!(own.exists(), "this process's own staged file was removed");
    }

    #[test]
    fn a_staging_dir_without_a_lock_file_is_swept_only_once_stale() {
        let root = tempfile::tempdir().unwrap();
        let unlocked = |name: &str, pid: u32| {
            let dir = left_behind(root.path(), name, pid);
            std::fs::remove_file(dir.join(OWNER_LOCK)).unwrap();
            dir
        };
        let fresh = unlocked("0-a", other_pid(7));
        let stale = unlocked("0-b", other_pid(8));
        age(&stale, STALE_AFTER + Duration::from_secs(60));
        let own = unlocked("0-c", std::process::id());
        age(&own, 2 * STALE_AFTER);
        // Only hidden `.NAME.partial-PID` directories are staging directories.
        let run = root.path().join("0-d.partial-9");
        let hidden = root.path().join(".cache.partial-x");
        for dir in [&run, &hidden] {
            std::fs::create_dir(dir).unwrap();
            age(dir, 2 * STALE_AFTER);
        }
        sweep_abandoned(root.path());
        assert!(!stale.exists(), "a day-old unlocked staging dir was kept");
        for kept in [&fresh, &own, &run, &hidden] {
            assert!(kept.exists(), "{} was removed", kept.display());
        }
    }

    #[test]
    fn a_writer_takes_over_its_own_staging_name_only_from_a_writer_that_is_gone() {
        let root = tempfile::tempdir().unwrap();
        let dir = staging_dir(root.path(), "0-x");
        let earlier = left_behind(root.path(), "0-x", std::process::id());
        assert_eq!(earlier, dir);
        let staging = Staging::create(dir.clone()).unwrap();
        assert!(!dir.join("history.jsonl").exists(), "the leftover was kept");
        let error = Staging::create(dir.clone())
            .err()
            .expect("a held lock refuses");
        assert_eq!(error.kind(), std::io::ErrorKind::AlreadyExists);
        assert!(dir.join(OWNER_LOCK).exists());
        drop(staging);
    }
}
