//! Writing and reading one run directory.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::staging::{Staging, parent_dir, staging_dir, sweep_abandoned};

/// What `run.json` records: enough to know what ran, with which fencer, and what came of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// fencer's version that produced the run.
    pub fencer_version: String,
    /// The subcommand (`run`, `demo`, `replay`).
    pub command: String,
    /// Every setting of the run (the plan's settings, as JSON).
    pub settings: serde_json::Value,
    /// Number of history events.
    pub events: usize,
    /// SHA-256 of `history.jsonl` as written.
    pub history_sha256: String,
    /// The verdict's validity (`valid`, `invalid`, `unknown`).
    pub validity: String,
    /// Wall-clock time the run directory was written (UTC), for listing runs; never used by
    /// the simulation.
    pub written_at: String,
    /// Faults the seed drew that the run's backends could not take, by family, target and
    /// reason (as in the plan): what the run did not test. Absent when nothing was left out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<fencer_run::LeftOut>,
    /// The race windows the history reached, by kind and width (absent from runs saved before
    /// coverage was counted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<fencer_checkers::coverage::Coverage>,
    /// When each worker began each of its cycles, in true nanoseconds as the history counts
    /// them (by worker number, then cycle): with the history, an anomaly's story, which a
    /// shrink of a real-time failure reads from here rather than running its plan again (it
    /// may not fail again). Absent when not known.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cycle_starts_ns: Vec<Vec<u64>>,
    /// When the run was interrupted, in true nanoseconds since its start: it did not finish,
    /// its history ends there and its validity judges only what was recorded until then.
    /// Absent for a run that finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted_at_ns: Option<u64>,
}

/// Why a run directory could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum RunDirError {
    /// The directory already exists and is not empty: fencer never overwrites a run.
    #[error("{0}: already exists and is not empty; choose another --out")]
    Exists(PathBuf),
    /// The place a run is to be saved cannot hold it (a file where a directory must be, a
    /// directory fencer may not write in). Found before the run, so nothing ran.
    #[error("{path}: fencer cannot write there: {source}")]
    Unusable {
        /// The path that cannot be used.
        path: PathBuf,
        /// What the OS said when fencer tried it.
        source: std::io::Error,
    },
    /// A filesystem operation failed.
    #[error("{path}: {action}: {source}")]
    Io {
        /// Where.
        path: PathBuf,
        /// What fencer was doing.
        action: &'static str,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A file of the run is missing.
    #[error("{0}: missing (is this a fencer run directory?)")]
    Missing(PathBuf),
    /// A file of the run is not a regular file (a device, a pipe): reading it might never end.
    #[error("{0}: not a regular file (fencer writes its run files as regular files)")]
    NotAFile(PathBuf),
    /// A JSON file does not hold what fencer wrote there.
    #[error("{path}:{line}: {message}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// What was expected.
        message: String,
    },
}

fn io_error(path: &Path, action: &'static str) -> impl FnOnce(std::io::Error) -> RunDirError {
    let path = path.to_path_buf();
    move |source| RunDirError::Io {
        path,
        action,
        source,
    }
}

/// Refuses `dir` as a new run directory if it holds anything: fencer never overwrites a run.
/// An empty directory (or none) is free. `fencer run` asks before it runs, so a run it could
/// not keep never runs; writing the run asks again.
pub fn refuse_existing(dir: &Path) -> Result<(), RunDirError> {
    let holds_anything = std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some());
    if holds_anything {
        return Err(RunDirError::Exists(dir.to_path_buf()));
    }
    Ok(())
}

/// Checks, before anything runs, that `dir` can become a new run directory: `dir` must hold
/// nothing (a file there is refused too), and its parent must take the staging directory the
/// run is written in ([`check_dir_writable`]). A run whose place is unusable is refused before it runs, naming the path and what
/// the OS said, instead of being lost after it.
pub fn check_run_place(dir: &Path) -> Result<(), RunDirError> {
    refuse_existing(dir)?;
    refuse_non_directory(dir)?;
    check_dir_writable(parent_dir(dir))
}

/// Checks that files can be written in `dir` once it is made: the nearest directory of it
/// or above it that exists must be a directory, and a directory is made and removed in it, as
/// saving makes its staging directory (and the missing ones below it). Nothing is left
/// behind, so a command refused later for another reason has made no directory.
pub fn check_dir_writable(dir: &Path) -> Result<(), RunDirError> {
    let existing = dir
        .ancestors()
        .map(|ancestor| match ancestor.as_os_str().is_empty() {
            true => Path::new("."),
            false => ancestor,
        })
        .find(|ancestor| std::fs::metadata(ancestor).is_ok())
        .unwrap_or(Path::new("."));
    refuse_non_directory(existing)?;
    let probe = staging_dir(existing, "probe");
    std::fs::create_dir(&probe).map_err(unusable(existing))?;
    std::fs::remove_dir(&probe).map_err(unusable(existing))
}

/// Refuses `path` when something other than a directory is there, in the OS's own words
/// for reading it as one.
fn refuse_non_directory(path: &Path) -> Result<(), RunDirError> {
    match std::fs::metadata(path) {
        Ok(meta) if !meta.is_dir() => {
            let source = std::fs::read_dir(path).err().unwrap_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory")
            });
            Err(unusable(path)(source))
        }
        _ => Ok(()),
    }
}

fn unusable(path: &Path) -> impl FnOnce(std::io::Error) -> RunDirError {
    let path = path.to_path_buf();
    move |source| RunDirError::Unusable { path, source }
}

/// Writes `files` (name, bytes) as the run directory `dir`, atomically: into a hidden sibling
/// first ([`staging`](crate::staging)), renamed into place once every file and the directory
/// itself are synced; the parent is synced after the rename, so once this returns the run
/// survives a power loss. Staging directories in the parent whose writer is gone are swept
/// first.
pub fn write_run_dir(dir: &Path, files: &[(&str, &[u8])]) -> Result<(), RunDirError> {
    let staged = StagedRunDir::create(dir)?;
    for (file_name, bytes) in files {
        staged.write(file_name, bytes)?;
    }
    staged.finish()
}

/// A run directory being written, file by file, as [`write_run_dir`] writes one: in its
/// staging directory until [`StagedRunDir::finish`] moves it into place. A file may be written
/// as it is produced ([`StagedRunDir::write_with`]), so a history of millions of events is
/// never held in memory whole to be saved. Dropped unfinished, it leaves nothing behind.
pub struct StagedRunDir {
    dir: PathBuf,
    parent: PathBuf,
    /// The run directory's own name, for naming a run kept elsewhere.
    name: String,
    staging: Staging,
    /// Moved into place (or kept by [`StagedRunDir::keep`]): dropping it removes nothing.
    finished: bool,
}

impl StagedRunDir {
    /// Refuses `dir` if it holds anything, sweeps abandoned staging directories beside it and
    /// creates this run's own.
    pub fn create(dir: &Path) -> Result<StagedRunDir, RunDirError> {
        refuse_existing(dir)?;
        if dir.is_dir() {
            std::fs::remove_dir(dir).map_err(io_error(dir, "replacing empty directory"))?;
        }
        let parent = parent_dir(dir).to_path_buf();
        std::fs::create_dir_all(&parent).map_err(io_error(&parent, "creating directory"))?;
        let name = dir
            .file_name()
            .ok_or_else(|| RunDirError::Io {
                path: dir.to_path_buf(),
                action: "naming run directory",
                source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "no final component"),
            })?
            .to_string_lossy()
            .into_owned();
        sweep_abandoned(&parent);
        let staging_path = staging_dir(&parent, &name);
        let staging = Staging::create(staging_path.clone())
            .map_err(io_error(&staging_path, "creating directory"))?;
        Ok(StagedRunDir {
            dir: dir.to_path_buf(),
            parent,
            name,
            staging,
            finished: false,
        })
    }

    /// Writes the file `file_name` holding `bytes`, synced.
    pub fn write(&self, file_name: &str, bytes: &[u8]) -> Result<(), RunDirError> {
        self.write_with(file_name, |out| out.write_all(bytes))
    }

    /// Writes the file `file_name` with what `fill` writes to it (buffered), synced; returns
    /// what `fill` returned.
    pub fn write_with<T>(
        &self,
        file_name: &str,
        fill: impl FnOnce(&mut dyn Write) -> std::io::Result<T>,
    ) -> Result<T, RunDirError> {
        let path = self.staging.dir.join(file_name);
        let file = std::fs::File::create(&path).map_err(io_error(&path, "creating file"))?;
        let mut out = std::io::BufWriter::with_capacity(1 << 16, file);
        let filled = fill(&mut out).map_err(io_error(&path, "writing"))?;
        let file = out
            .into_inner()
            .map_err(|error| io_error(&path, "writing")(error.into_error()))?;
        file.sync_all().map_err(io_error(&path, "syncing"))?;
        Ok(filled)
    }

    /// Moves the run directory into place: the lock file removed, the staging directory
    /// synced and renamed, the parent synced.
    pub fn finish(mut self) -> Result<(), RunDirError> {
        self.move_into_place()
    }

    /// [`StagedRunDir::finish`], leaving the staged run to [`StagedRunDir::keep`] when it
    /// fails.
    pub(crate) fn move_into_place(&mut self) -> Result<(), RunDirError> {
        self.staging
            .remove_lock_file()
            .map_err(io_error(&self.staging.dir, "removing the owner lock"))?;
        sync_dir(&self.staging.dir)?;
        std::fs::rename(&self.staging.dir, &self.dir)
            .map_err(io_error(&self.dir, "moving run into place"))?;
        self.finished = true;
        sync_dir(&self.parent)
    }

    /// Gives up on moving the run into place and keeps what was staged for a person to pick
    /// up, returning where it is: the run directory itself when it was moved there already,
    /// else the staging directory renamed to `<name>.unsaved-<pid>` beside it (a name no later
    /// sweep removes), or left where it is when even that rename fails (without its owner
    /// lock, a sweep then leaves it for a day).
    pub fn keep(mut self) -> PathBuf {
        if self.finished {
            return self.dir.clone();
        }
        self.finished = true;
        let _ = self.staging.remove_lock_file();
        let kept = self
            .parent
            .join(format!("{}.unsaved-{}", self.name, std::process::id()));
        match std::fs::rename(&self.staging.dir, &kept) {
            Ok(()) => kept,
            Err(_) => self.staging.dir.clone(),
        }
    }
}

impl Drop for StagedRunDir {
    fn drop(&mut self) {
        if !self.finished {
            let _ = std::fs::remove_dir_all(&self.staging.dir);
        }
    }
}

/// [`staging::sync_dir`](crate::staging::sync_dir), its failure naming the directory.
fn sync_dir(dir: &Path) -> Result<(), RunDirError> {
    crate::staging::sync_dir(dir).map_err(io_error(dir, "syncing directory"))
}

/// Reads one file of a run directory, saying which file is missing or unreadable. Only a
/// regular file is read: a run file linked to a device or a pipe would be read for ever.
pub fn read_run_file(dir: &Path, name: &str) -> Result<Vec<u8>, RunDirError> {
    let path = dir.join(name);
    match std::fs::metadata(&path) {
        Ok(meta) if !meta.is_file() => return Err(RunDirError::NotAFile(path)),
        _ => {}
    }
    match std::fs::read(&path) {
        Ok(bytes) => Ok(bytes),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            Err(RunDirError::Missing(path))
        }
        Err(error) => Err(io_error(&path, "reading")(error)),
    }
}

/// Parses a JSON file of a run directory into `T`, with `file:line` on failure.
pub fn parse_run_json<T: serde::de::DeserializeOwned>(
    dir: &Path,
    name: &str,
) -> Result<T, RunDirError> {
    let bytes = read_run_file(dir, name)?;
    serde_json::from_slice(&bytes).map_err(|error| RunDirError::Malformed {
        path: dir.join(name),
        line: error.line(),
        message: format!("expected {name} as fencer writes it: {error}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_dir_is_written_whole_and_never_overwritten() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("runs").join("0-x");
        write_run_dir(&dir, &[("a.json", b"{}"), ("b.txt", b"hi")]).unwrap();
        assert_eq!(std::fs::read(dir.join("b.txt")).unwrap(), b"hi");
        let leftovers: Vec<_> = std::fs::read_dir(dir.parent().unwrap())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(leftovers, ["0-x"]);
        let error = write_run_dir(&dir, &[("a.json", b"{}")]).unwrap_err();
        assert!(matches!(error, RunDirError::Exists(_)), "{error}");
    }

    #[test]
    fn writing_a_run_sweeps_the_staging_dirs_killed_writers_left_beside_it() {
        let root = tempfile::tempdir().unwrap();
        // What a writer killed before its rename leaves: nobody holds the owner lock.
        let pid = std::process::id().wrapping_add(1);
        let left = root.path().join(format!(".0-killed.partial-{pid}"));
        std::fs::create_dir(&left).unwrap();
        std::fs::write(left.join(crate::staging::OWNER_LOCK), b"").unwrap();
        std::fs::write(left.join("history.jsonl"), b"{\"ind").unwrap();
        let run = root.path().join("0-x");
        write_run_dir(&run, &[("a.json", b"{}")]).unwrap();
        let names: Vec<_> = std::fs::read_dir(root.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(names, ["0-x"]);
        // The run itself holds only its files, not the writer's lock.
        let files: Vec<_> = std::fs::read_dir(&run)
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(files, ["a.json"]);
    }

    #[test]
    fn failed_write_leaves_nothing_behind() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("run");
        // A file name with a directory separator cannot be created inside the staging dir.
        let error = write_run_dir(&dir, &[("ok.json", b"{}"), ("no/such.json", b"{}")]);
        assert!(error.is_err());
        assert!(!dir.exists());
        assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 0);
    }

    #[test]
    fn parent_that_is_a_file_gives_an_io_error_naming_it() {
        let root = tempfile::tempdir().unwrap();
        let file = root.path().join("plain-file");
        std::fs::write(&file, b"x").unwrap();
        let error = write_run_dir(&file.join("run"), &[("a", b"")]).unwrap_err();
        assert!(error.to_string().contains("plain-file"), "{error}");
    }

    /// A directory no one may create anything in: a read-only one, or, for a user whose
    /// permissions are not checked (root), sysfs, which refuses every new entry.
    fn read_only_dir(root: &Path) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let dir = root.join("read-only");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o555)).unwrap();
        if std::fs::create_dir(dir.join("probe")).is_ok() {
            return PathBuf::from("/sys");
        }
        dir
    }

    #[cfg(unix)]
    #[test]
    fn a_place_that_cannot_hold_a_run_is_refused_naming_the_path_and_the_os_error() {
        let root = tempfile::tempdir().unwrap();
        let file = root.path().join("plain-file");
        std::fs::write(&file, b"x").unwrap();
        let read_only = read_only_dir(root.path());
        for (dir, named, said) in [
            (file.clone(), &file, "Not a directory"),
            (file.join("run"), &file, "Not a directory"),
            (file.join("archive").join("run"), &file, "Not a directory"),
            (read_only.join("run"), &read_only, "os error"),
        ] {
            let error = check_run_place(&dir).unwrap_err();
            let text = error.to_string();
            assert!(matches!(error, RunDirError::Unusable { .. }), "{text}");
            assert!(
                text.starts_with(&format!("{}: fencer cannot write there: ", named.display())),
                "{text}"
            );
            assert!(text.contains(said), "{text}");
        }
        // A usable place is left as it was found.
        let fresh = root.path().join("archive").join("w").join("run");
        check_run_place(&fresh).unwrap();
        assert!(!root.path().join("archive").exists());
        std::fs::create_dir_all(&fresh).unwrap();
        std::fs::write(fresh.join("a"), b"").unwrap();
        assert!(matches!(
            check_run_place(&fresh),
            Err(RunDirError::Exists(_))
        ));
    }

    #[test]
    fn a_staged_run_that_cannot_move_into_place_is_kept_beside_it_and_named() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("0-x");
        let mut staged = StagedRunDir::create(&dir).unwrap();
        staged.write("history.jsonl", b"{}\n").unwrap();
        // Someone else's run takes the place while this one is staged.
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("theirs"), b"").unwrap();
        assert!(staged.move_into_place().is_err());
        let kept = staged.keep();
        assert_eq!(
            kept,
            root.path()
                .join(format!("0-x.unsaved-{}", std::process::id()))
        );
        assert_eq!(std::fs::read(kept.join("history.jsonl")).unwrap(), b"{}\n");
        // Neither its owner lock nor a hidden staging directory is left, and the next writer
        // into the same parent leaves it alone.
        assert!(!kept.join(crate::staging::OWNER_LOCK).exists());
        write_run_dir(&root.path().join("1-y"), &[("a", b"")]).unwrap();
        let mut names: Vec<_> = std::fs::read_dir(root.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["0-x", &format!("0-x.unsaved-{}", std::process::id()), "1-y"]
        );
    }

    #[test]
    fn malformed_json_names_file_and_line() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("run.json"), b"{\n  \"a\": oops\n}").unwrap();
        let error = parse_run_json::<serde_json::Value>(root.path(), "run.json").unwrap_err();
        let text = error.to_string();
        assert!(text.contains("run.json:2: expected run.json"), "{text}");
        let missing = parse_run_json::<serde_json::Value>(root.path(), "plan.json").unwrap_err();
        assert!(
            missing.to_string().contains("plan.json: missing"),
            "{missing}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_run_file_that_is_a_device_is_refused_unread() {
        let root = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/dev/zero", root.path().join("plan.json")).unwrap();
        let error = read_run_file(root.path(), "plan.json").unwrap_err();
        assert!(matches!(error, RunDirError::NotAFile(_)), "{error}");
        assert!(error.to_string().contains("not a regular file"), "{error}");
    }
}
