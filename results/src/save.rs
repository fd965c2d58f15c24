//! Saving a finished run as a run directory (`run.json`, `plan.json`, `history.jsonl`,
//! `verdict.json`, and the reports: `timeline.html` and SVG plots), atomically, and
//! pointing the archive's `latest` at it.

use std::path::{Path, PathBuf};

use crate::{Archive, RunDirError, RunRecord, StagedRunDir, utc_stamp};
use fencer_checkers::Verdict;
use fencer_harness::PackedHistory;
use fencer_harness::history::HashingWriter;
use fencer_harness::terminal::escape;

use fencer_run::checking::judge;
use fencer_run::{Plan, Unfinished};

/// A run ready to be written.
pub struct FinishedRun<'a> {
    /// The subcommand that produced it.
    pub command: &'a str,
    /// What ran.
    pub plan: &'a Plan,
    /// What happened, in the checking form it was recorded in.
    pub history: &'a PackedHistory,
    /// What the checkers said.
    pub verdict: &'a Verdict,
    /// When each worker began each cycle ([`fencer_run::Launched::cycle_starts_ns`]), or
    /// nothing when not known.
    pub cycle_starts_ns: &'a [Vec<u64>],
    /// When the run was interrupted ([`fencer_run::Unfinished::stopped_at_ns`]), for a run
    /// that did not finish.
    pub interrupted_at_ns: Option<u64>,
}

/// What an interrupted real-time run recorded, saved as a run directory of its own: judged on
/// those events alone (no verdict on its plan, which did not finish) and marked with when it
/// was stopped.
pub struct SavedUnfinished {
    /// The verdict on the recorded events alone.
    pub verdict: Verdict,
    /// Where the events are: the run directory, or where they were kept when it could not be
    /// written; `None` when nothing of them could be kept.
    pub place: Option<PathBuf>,
    /// Why the run directory could not be written, when it could not.
    pub error: Option<SaveError>,
    events: usize,
    stopped_at_ns: u64,
}

impl SavedUnfinished {
    /// `<heading> at 3.008 s, <state>: its 880 events are in <place>; judged on those alone:
    /// <verdict>`, or `None` when nothing was kept to point at.
    pub fn report(&self, heading: &str, state: &str) -> Option<String> {
        let place = self.place.as_ref()?;
        Some(format!(
            "{heading} at {:.3} s, {state}: its {} events are in {}; judged on those alone: {}",
            self.stopped_at_ns as f64 / 1e9,
            self.events,
            place.display(),
            escape(&self.verdict.summary_line())
        ))
    }
}

/// Judges what `unfinished` recorded and saves it in `dir` as [`save_run`] does (pointing
/// `archive_root`'s `latest` at it when given), with `interrupted_at_ns` in its `run.json`.
pub fn save_unfinished(
    command: &str,
    unfinished: &Unfinished,
    strict: bool,
    dir: &Path,
    archive_root: Option<&Path>,
) -> SavedUnfinished {
    let verdict = judge(&unfinished.plan.settings, &unfinished.history, strict);
    let run = FinishedRun {
        command,
        plan: &unfinished.plan,
        history: &unfinished.history,
        verdict: &verdict,
        cycle_starts_ns: &unfinished.cycle_starts_ns,
        interrupted_at_ns: Some(unfinished.stopped_at_ns),
    };
    let (place, error) = match save_run(&run, dir, archive_root) {
        Ok(()) => (Some(dir.to_path_buf()), None),
        Err(error) => (error.kept.clone(), Some(error)),
    };
    SavedUnfinished {
        verdict,
        place,
        error,
        events: unfinished.history.len(),
        stopped_at_ns: unfinished.stopped_at_ns,
    }
}

/// Wall-clock seconds since the UNIX epoch, for naming run directories only (never in the
/// simulation path).
fn wall_clock_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs())
        .unwrap_or(0)
}

/// The default run directory: `<archive>/<group>/<label>-<UTC time>`, where `group` is the
/// workload (or `demo`, or a `cargo test` harness's name) and `label` usually the seed.
pub fn default_run_dir(archive_root: &Path, group: &str, label: &str) -> PathBuf {
    Archive::new(archive_root).run_dir(group, label, &utc_stamp(wall_clock_s()))
}

/// Why a finished run could not be saved where it was to go, and where it is instead.
#[derive(Debug, thiserror::Error)]
#[error("cannot save the run: {error}; {}", kept_words(.kept.as_deref()))]
pub struct SaveError {
    /// What went wrong.
    pub error: RunDirError,
    /// Where the run is kept instead (possibly incomplete, when writing it failed), or
    /// `None` when nothing of it could be kept anywhere.
    pub kept: Option<PathBuf>,
}

fn kept_words(kept: Option<&Path>) -> String {
    match kept {
        Some(kept) => format!("the run is kept in {}", kept.display()),
        None => "nothing of it could be kept".to_string(),
    }
}

/// Writes `run` into `dir` atomically; when `archive_root` is given, points its `latest` at
/// it.
///
/// `history.jsonl` is written first, straight from the packed rows and hashed as it goes, so
/// its bytes are never held whole; `run.json`, which names its hash, follows (the directory
/// appears only once every file is in it, so the order is invisible).
///
/// A run is never dropped: when writing or moving it into place fails, what was staged is
/// kept ([`StagedRunDir::keep`]); when not even its staging directory can be made beside
/// `dir`, the run is saved in the system's temporary directory instead. The error names
/// where it is.
pub fn save_run(
    run: &FinishedRun<'_>,
    dir: &Path,
    archive_root: Option<&Path>,
) -> Result<(), SaveError> {
    let mut staged = match StagedRunDir::create(dir) {
        Ok(staged) => staged,
        Err(error) => {
            return Err(SaveError {
                kept: save_elsewhere(run, dir),
                error,
            });
        }
    };
    if let Err(error) = write_files(run, &staged).and_then(|()| staged.move_into_place()) {
        return Err(SaveError {
            error,
            kept: Some(staged.keep()),
        });
    }
    if let Some(root) = archive_root {
        Archive::new(root)
            .point_latest_at(dir)
            .map_err(|error| SaveError {
                error,
                kept: Some(dir.to_path_buf()),
            })?;
    }
    Ok(())
}

/// Saves `run` in the system's temporary directory, in a directory named after `dir`:
/// where a run goes whose own place could not take it.
fn save_elsewhere(run: &FinishedRun<'_>, dir: &Path) -> Option<PathBuf> {
    let name = dir.file_name()?.to_string_lossy();
    let elsewhere =
        std::env::temp_dir().join(format!("fencer-unsaved-{}-{name}", std::process::id()));
    let mut staged = StagedRunDir::create(&elsewhere).ok()?;
    match write_files(run, &staged).and_then(|()| staged.move_into_place()) {
        Ok(()) => Some(elsewhere),
        Err(_) => Some(staged.keep()),
    }
}

/// Writes every file of `run` into `staged`.
fn write_files(run: &FinishedRun<'_>, staged: &StagedRunDir) -> Result<(), RunDirError> {
    let history_sha256 = staged.write_with("history.jsonl", |out| {
        let mut hashing = HashingWriter::new(out);
        run.history.write_jsonl(&mut hashing)?;
        Ok(hashing.finish().1)
    })?;
    let record = RunRecord {
        fencer_version: env!("CARGO_PKG_VERSION").to_string(),
        command: run.command.to_string(),
        settings: serde_json::to_value(&run.plan.settings).expect("settings always serialise"),
        events: run.history.len(),
        history_sha256,
        validity: run.verdict.validity.name().to_string(),
        written_at: utc_stamp(wall_clock_s()),
        left_out: run.plan.left_out.clone(),
        coverage: Some(fencer_checkers::coverage::coverage(
            run.history,
            run.plan.settings.ttl_ns,
        )),
        cycle_starts_ns: run.cycle_starts_ns.to_vec(),
        interrupted_at_ns: run.interrupted_at_ns,
    };
    let mut record_json = serde_json::to_vec_pretty(&record).expect("records always serialise");
    record_json.push(b'\n');
    staged.write("run.json", &record_json)?;
    staged.write("plan.json", &run.plan.to_json())?;
    staged.write_with("verdict.json", |out| {
        serde_json::to_writer_pretty(&mut *out, run.verdict)?;
        out.write_all(b"\n")
    })?;
    crate::report::for_each_report_file(run.history, &record.settings, run.verdict, |file| {
        staged.write_with(file.name(), |out| file.write_to(out))
    })
}

#[cfg(test)]
mod tests {
    use fencer_run::{BackendName, Reach, Roles};
    use fencer_run::{Plan, Settings, simulate_packed};

    use super::*;

    /// Saves a one-worker run of `plan` under a fresh directory and returns its `run.json`.
    fn saved_record(plan: &Plan) -> serde_json::Value {
        let history = simulate_packed(plan).unwrap();
        let verdict = fencer_run::checking::judge(&plan.settings, &history, false);
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("run");
        let run = FinishedRun {
            command: "run",
            plan,
            history: &history,
            verdict: &verdict,
            cycle_starts_ns: &[],
            interrupted_at_ns: None,
        };
        save_run(&run, &dir, None).unwrap();
        serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap()
    }

    #[test]
    fn a_run_whose_place_is_taken_when_it_is_saved_is_kept_elsewhere_and_named() {
        let settings = Settings {
            workers: 1,
            ops_per_worker: 2,
            ..Settings::default()
        };
        let plan = Plan::generate(&settings);
        let history = simulate_packed(&plan).unwrap();
        let verdict = fencer_run::checking::judge(&plan.settings, &history, false);
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("0-x");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("theirs"), b"").unwrap();
        let run = FinishedRun {
            command: "run",
            plan: &plan,
            history: &history,
            verdict: &verdict,
            cycle_starts_ns: &[],
            interrupted_at_ns: None,
        };
        let error = save_run(&run, &dir, None).unwrap_err();
        let kept = error.kept.clone().expect("the run is kept");
        assert!(kept.starts_with(std::env::temp_dir()), "{}", kept.display());
        let text = error.to_string();
        assert!(
            text.starts_with(&format!(
                "cannot save the run: {}: already exists",
                dir.display()
            )),
            "{text}"
        );
        assert!(
            text.ends_with(&format!("the run is kept in {}", kept.display())),
            "{text}"
        );
        // The kept run is whole: its history is the run's, byte for byte.
        let mut bytes = Vec::new();
        history.write_jsonl(&mut bytes).unwrap();
        assert_eq!(std::fs::read(kept.join("history.jsonl")).unwrap(), bytes);
        assert!(kept.join("run.json").is_file() && kept.join("verdict.json").is_file());
        std::fs::remove_dir_all(&kept).unwrap();
    }

    #[test]
    fn an_unfinished_run_is_saved_with_its_stop_and_reported_where_its_events_went() {
        let plan = Plan::generate(&Settings {
            workers: 1,
            ops_per_worker: 2,
            ..Settings::default()
        });
        let history = simulate_packed(&plan).unwrap();
        let events = history.len();
        let unfinished = Unfinished {
            plan,
            history,
            cycle_starts_ns: Vec::new(),
            stopped_at_ns: 3_008_000_000,
        };
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("seed-0-interrupted");
        let saved = save_unfinished("gate", &unfinished, false, &dir, None);
        assert!(saved.error.is_none());
        let record: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
        assert_eq!(record["interrupted_at_ns"], 3_008_000_000u64);
        let line = saved.report("interrupted seed 0", "unfinished").unwrap();
        assert_eq!(
            line,
            format!(
                "interrupted seed 0 at 3.008 s, unfinished: its {events} events are in {}; \
                 judged on those alone: {}",
                dir.display(),
                saved.verdict.summary_line()
            )
        );
        // Its place taken, the events are kept elsewhere, and the report points there.
        let again = save_unfinished("gate", &unfinished, false, &dir, None);
        let kept = again.place.clone().expect("the events are kept");
        assert_ne!(kept, dir);
        assert!(again.error.is_some());
        assert!(
            again
                .report("interrupted", "unfinished")
                .unwrap()
                .contains(&format!("are in {}", kept.display()))
        );
        std::fs::remove_dir_all(&kept).unwrap();
    }

    #[test]
    fn run_json_names_the_faults_the_plan_left_out_and_omits_the_field_otherwise() {
        let settings = Settings {
            workers: 1,
            ops_per_worker: 3,
            mean_fault_gap_ns: 1_000_000_000,
            ..Settings::default()
        };
        let plan = Plan::generate(&settings);
        assert!(saved_record(&plan).get("left_out").is_none());
        let user = BackendName::new("user-lock");
        let roles = Roles {
            lock: (&user, Reach::default()),
            store: (&user, Reach::default()),
        };
        let fitted = roles.fit(&plan);
        assert!(!fitted.left_out.is_empty(), "lock faults were drawn");
        let record = saved_record(&fitted);
        assert_eq!(
            record["left_out"],
            serde_json::to_value(&fitted.left_out).unwrap()
        );
        let back: RunRecord = serde_json::from_value(record).unwrap();
        assert_eq!(back.left_out, fitted.left_out);
    }
}
