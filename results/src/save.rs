//! Saving a finished run as a run directory (`run.json`, `plan.json`, `history.jsonl`,
//! `verdict.json`, and the reports: `timeline.html` and SVG plots), atomically, and
//! pointing the archive's `latest` at it.

use std::path::{Path, PathBuf};

use crate::{Archive, RunDirError, RunRecord, utc_stamp, write_run_dir};
use fencer_checkers::Verdict;
use fencer_harness::History;
use fencer_harness::history::sha256_hex;

use fencer_run::Plan;

/// A run ready to be written.
pub struct FinishedRun<'a> {
    /// The subcommand that produced it.
    pub command: &'a str,
    /// What ran.
    pub plan: &'a Plan,
    /// What happened.
    pub history: &'a History,
    /// What the checkers said.
    pub verdict: &'a Verdict,
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

/// Writes `run` into `dir` atomically; when `archive_root` is given, points its `latest` at
/// it.
pub fn save_run(
    run: &FinishedRun<'_>,
    dir: &Path,
    archive_root: Option<&Path>,
) -> Result<(), RunDirError> {
    let history = run.history.to_jsonl();
    let record = RunRecord {
        fencer_version: env!("CARGO_PKG_VERSION").to_string(),
        command: run.command.to_string(),
        settings: serde_json::to_value(&run.plan.settings).expect("settings always serialise"),
        events: run.history.events.len(),
        history_sha256: sha256_hex(&history),
        validity: run.verdict.validity.name().to_string(),
        written_at: utc_stamp(wall_clock_s()),
        left_out: run.plan.left_out.clone(),
    };
    let mut record_json = serde_json::to_vec_pretty(&record).expect("records always serialise");
    record_json.push(b'\n');
    let mut verdict_json =
        serde_json::to_vec_pretty(run.verdict).expect("verdicts always serialise");
    verdict_json.push(b'\n');
    let plan_json = run.plan.to_json();
    let reports = crate::report::report_files(run.history, &record.settings, run.verdict);
    let mut files: Vec<(&str, &[u8])> = vec![
        ("run.json", &record_json),
        ("plan.json", &plan_json),
        ("history.jsonl", &history),
        ("verdict.json", &verdict_json),
    ];
    files.extend(
        reports
            .iter()
            .map(|(name, bytes)| (*name, bytes.as_slice())),
    );
    write_run_dir(dir, &files)?;
    if let Some(root) = archive_root {
        Archive::new(root).point_latest_at(dir)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use fencer_run::{BackendName, Reach, Roles};
    use fencer_run::{Plan, Settings, simulate};

    use super::*;

    /// Saves a one-worker run of `plan` under a fresh directory and returns its `run.json`.
    fn saved_record(plan: &Plan) -> serde_json::Value {
        let history = simulate(plan).unwrap();
        let verdict = fencer_run::checking::judge(&plan.settings, &history, false);
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("run");
        let run = FinishedRun {
            command: "run",
            plan,
            history: &history,
            verdict: &verdict,
        };
        save_run(&run, &dir, None).unwrap();
        serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap()
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
