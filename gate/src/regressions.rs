//! The regressions folder (default `fencer-regressions/`): every plan a gate found failing is
//! saved there as JSON, to be committed, and every later gate replays the saved plans first —
//! as proptest's `proptest-regressions` files do — so a fixed bug stays fixed.
//!
//! A saved plan replays with its own settings. Only plans for the system the gate is testing
//! (same workload, lock service and store) are replayed: a regression found against a mutant
//! says nothing about the reference backend.

use std::path::{Path, PathBuf};

use fencer_harness::history::sha256_hex;
use fencer_results::staging;

use fencer_run::plan::{Plan, PlanError, read_plan_bytes};
use fencer_run::settings::Settings;

/// A saved plan and the file it came from.
#[derive(Clone, Debug)]
pub struct Regression {
    /// The file (`fencer-regressions/<name>.json`).
    pub path: PathBuf,
    /// The plan.
    pub plan: Plan,
}

/// Why the folder could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum RegressionError {
    /// A saved plan does not parse or cannot run.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The filesystem refused.
    #[error("{path}: {action}: {source}")]
    Io {
        /// Where.
        path: String,
        /// What fencer was doing.
        action: &'static str,
        /// What the OS said.
        source: std::io::Error,
    },
}

fn io(path: &Path, action: &'static str) -> impl FnOnce(std::io::Error) -> RegressionError {
    let path = path.display().to_string();
    move |source| RegressionError::Io {
        path,
        action,
        source,
    }
}

/// Every saved plan in `dir` (`*.json`, by file name) that tests the same system as `base`.
/// A missing folder holds no regressions.
pub fn load(dir: &Path, base: &Settings) -> Result<Vec<Regression>, RegressionError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(io(dir, "reading directory")(error)),
    };
    let mut paths = Vec::new();
    for entry in entries {
        let path = entry.map_err(io(dir, "reading directory"))?.path();
        if path.extension().is_some_and(|ext| ext == "json") {
            paths.push(path);
        }
    }
    paths.sort();
    let mut regressions = Vec::new();
    for path in paths {
        let bytes = read_plan_bytes(&path).map_err(io(&path, "reading"))?;
        let plan = Plan::from_json(&bytes, &path.display().to_string())?;
        if same_system(&plan.settings, base) {
            regressions.push(Regression { path, plan });
        }
    }
    Ok(regressions)
}

/// Whether two settings test the same system (workload, worker code, lock service, store).
pub fn same_system(a: &Settings, b: &Settings) -> bool {
    a.workload == b.workload && a.client == b.client && a.lock == b.lock && a.store == b.store
}

/// `name` as part of a file name: letters, digits and `-` only (a URL or a command line
/// becomes a readable slug), at most 40 characters.
fn file_word(name: &str) -> String {
    let slug: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let slug = slug
        .split('-')
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    slug.chars().take(40).collect()
}

/// Saves `plan` (failing with `class`) in `dir`, named after the class, backends, seed and
/// content hash so the same plan is saved once. Returns the path; writes atomically.
pub fn save(dir: &Path, plan: &Plan, class: &str) -> Result<PathBuf, RegressionError> {
    let bytes = plan.to_json();
    let name = format!(
        "{class}-{}-{}-seed{}-{}.json",
        file_word(plan.settings.lock.as_str()),
        file_word(plan.settings.store.as_str()),
        plan.settings.seed,
        &sha256_hex(&bytes)[..12]
    );
    let path = dir.join(name);
    if path.exists() {
        return Ok(path);
    }
    std::fs::create_dir_all(dir).map_err(io(dir, "creating directory"))?;
    write_atomically(&path, &bytes).map_err(io(&path, "writing"))?;
    Ok(path)
}

/// The shrunk plan a gate wrote at `path`, read within the plan reader's bounds; `None` when it
/// cannot be read back (the regression is then saved from the full plan).
pub fn load_shrunk(path: &str) -> Option<Plan> {
    let bytes = read_plan_bytes(Path::new(path)).ok()?;
    Plan::from_json(&bytes, path).ok()
}

/// Writes `bytes` to `path` through a hidden sibling and a rename, so a reader never sees half
/// a file, and flushes the directory so the new name survives a power loss. Siblings staged by
/// writers that died long ago are swept first.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let parent = staging::parent_dir(path);
    staging::sweep_abandoned(parent);
    let staged = staging::staging_dir(parent, &name);
    std::fs::write(&staged, bytes)?;
    std::fs::File::open(&staged)?.sync_all()?;
    std::fs::rename(&staged, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&staged);
    })?;
    staging::sync_dir(parent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencer_run::settings::StoreBackend;

    #[test]
    fn saved_plans_load_back_once_and_only_for_the_same_system() {
        let dir = tempfile::tempdir().unwrap();
        let mutant = Settings {
            seed: 4,
            ops_per_worker: 2,
            store: StoreBackend::SqliteUnfenced.into(),
            ..Settings::default()
        };
        let plan = Plan::generate(&mutant);
        let path = save(dir.path(), &plan, "stale-write-accepted").unwrap();
        assert_eq!(
            save(dir.path(), &plan, "stale-write-accepted").unwrap(),
            path
        );
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with("stale-write-accepted-sim-sqlite-unfenced-seed4-"),
            "{name}"
        );
        let loaded = load(dir.path(), &mutant).unwrap();
        assert_eq!(loaded.len(), 1);
        assert_eq!(loaded[0].plan, plan);
        assert!(load(dir.path(), &Settings::default()).unwrap().is_empty());
        assert!(
            load(&dir.path().join("absent"), &mutant)
                .unwrap()
                .is_empty()
        );

        std::fs::write(dir.path().join("broken.json"), b"{\n  oops").unwrap();
        let error = load(dir.path(), &mutant).unwrap_err().to_string();
        assert!(error.contains("broken.json:2:"), "{error}");
    }
}
