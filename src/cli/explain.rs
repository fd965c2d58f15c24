//! `fencer explain`: tell a stored run's verdict as a numbered story.

use std::path::Path;

use crate::{History, Verdict};
use fencer_results::{RunRecord, parse_run_json};

use super::output::{out, outln};
use super::{Failure, Outcome};

/// How many anomalies are told unless `--all` is given.
pub(super) const TOLD_ANOMALIES: usize = 5;

/// Reads the run in `dir` and prints the story of its verdict; exits with the verdict's code.
pub fn explain(dir: &Path, all: bool) -> Outcome {
    if !dir.is_dir() {
        return Err(Failure::BadInput(format!(
            "{}: not a run directory (expected a directory with run.json, verdict.json, history.jsonl)",
            dir.display()
        )));
    }
    let bad = |error: fencer_results::RunDirError| Failure::BadInput(error.to_string());
    let record: RunRecord = parse_run_json(dir, "run.json").map_err(bad)?;
    let verdict: Verdict = parse_run_json(dir, "verdict.json").map_err(bad)?;
    let history = History::read_jsonl_file(&dir.join("history.jsonl"))
        .map_err(|error| Failure::BadInput(error.to_string()))?;
    let policy = record
        .settings
        .get("on_renew_failure")
        .and_then(|value| value.as_str())
        .unwrap_or("stop");
    outln!("run: {}", dir.display());
    let limit = if all { usize::MAX } else { TOLD_ANOMALIES };
    out!(
        "{}",
        fencer_checkers::story::tell(&history, &verdict, policy, limit)
    );
    if !record.left_out.is_empty() {
        outln!("\nNot tested: faults the seed drew that the run's backends could not take.");
        for left in &record.left_out {
            outln!("  left out: {left}");
        }
    }
    Ok(verdict.validity.exit_code())
}
