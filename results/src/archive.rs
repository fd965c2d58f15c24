//! The run archive: where saved runs live, `<archive>/<workload>/<seed>-<UTC time>/`, with
//! `<archive>/latest` pointing at the newest run, as Jepsen's `store/` does. ("Store" in fencer
//! means the system under test only; the saved runs are the archive.)

use std::path::{Path, PathBuf};

use crate::run_dir::RunDirError;

/// The archive's root directory and its naming rules.
#[derive(Clone, Debug)]
pub struct Archive {
    root: PathBuf,
}

impl Archive {
    /// An archive rooted at `root` (default `runs/`).
    pub fn new(root: impl Into<PathBuf>) -> Archive {
        Archive { root: root.into() }
    }

    /// A fresh run directory path for `workload` and `label` (usually the seed) at `stamp`.
    /// A counter is appended if two runs land in the same second.
    pub fn run_dir(&self, workload: &str, label: &str, stamp: &str) -> PathBuf {
        let base = self.root.join(workload).join(format!("{label}-{stamp}"));
        let mut candidate = base.clone();
        let mut n = 1;
        while candidate.exists() {
            n += 1;
            candidate = PathBuf::from(format!("{}-{n}", base.display()));
        }
        candidate
    }

    /// Points `<archive>/latest` at `dir` (a relative symlink, replaced atomically and
    /// flushed), sweeping links staged by writers that died long ago.
    pub fn point_latest_at(&self, dir: &Path) -> Result<(), RunDirError> {
        let target = dir.strip_prefix(&self.root).unwrap_or(dir).to_path_buf();
        let latest = self.root.join("latest");
        let staging = crate::staging::staging_dir(&self.root, "latest");
        let _ = std::fs::remove_file(&staging);
        let io = |action| {
            let path = latest.clone();
            move |source| RunDirError::Io {
                path,
                action,
                source,
            }
        };
        // An archive named by the empty path is the current directory.
        let root = match self.root.as_os_str().is_empty() {
            true => Path::new("."),
            false => self.root.as_path(),
        };
        crate::staging::sweep_abandoned(root);
        symlink(&target, &staging).map_err(io("creating symlink"))?;
        std::fs::rename(&staging, &latest).map_err(io("replacing symlink"))?;
        // The new link is durable only once the archive's directory is flushed.
        crate::staging::sync_dir(root).map_err(io("syncing the archive directory"))?;
        Ok(())
    }
}

#[cfg(unix)]
fn symlink(target: &Path, link: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}

#[cfg(not(unix))]
fn symlink(target: &Path, link: &Path) -> std::io::Result<()> {
    std::fs::write(link, target.display().to_string())
}

/// `YYYYMMDDTHHMMSSZ` for a UNIX time in seconds (UTC), for run directory names.
pub fn utc_stamp(unix_s: u64) -> String {
    let days = (unix_s / 86_400) as i64;
    let seconds = unix_s % 86_400;
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        seconds / 3_600,
        seconds % 3_600 / 60,
        seconds % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_stamp_matches_known_dates() {
        assert_eq!(utc_stamp(0), "19700101T000000Z");
        assert_eq!(utc_stamp(1_796_000_000), "20261130T005320Z");
        assert_eq!(utc_stamp(951_782_400), "20000229T000000Z");
    }

    #[test]
    fn latest_points_at_the_newest_run_and_names_do_not_collide() {
        let root = tempfile::tempdir().unwrap();
        let layout = Archive::new(root.path());
        let first = layout.run_dir("fenced-register", "7", "20260101T000000Z");
        std::fs::create_dir_all(&first).unwrap();
        let second = layout.run_dir("fenced-register", "7", "20260101T000000Z");
        assert_ne!(first, second);
        std::fs::create_dir_all(&second).unwrap();
        layout.point_latest_at(&first).unwrap();
        layout.point_latest_at(&second).unwrap();
        let latest = std::fs::canonicalize(root.path().join("latest")).unwrap();
        assert_eq!(latest, std::fs::canonicalize(&second).unwrap());
    }
}
