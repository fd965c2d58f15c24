//! `fencer check`: judge a stored history again, as Jepsen's `analyze` does, so improved
//! checkers can be re-run on old failures.

use std::path::Path;

use fencer_checkers::check_packed;
use fencer_harness::PackedHistory;

use crate::{CheckOptions, Workload};

use super::output::outln;
use super::{Failure, Outcome, summary};

/// Reads `path`, checks it with the checkers for `workload` (else the one named by `run.json`
/// beside the history, else `fenced-register`) and the rest of `options`, prints the verdict
/// (every finding in full when `verbose`). Nothing is written: the verdict is the output.
pub fn check(
    path: &Path,
    workload: Option<Workload>,
    options: CheckOptions,
    verbose: bool,
) -> Outcome {
    // Read straight into checking form: a stored history is only checked here, never
    // replayed or rendered, so its events are never built.
    let history = PackedHistory::read_jsonl_file(path)
        .map_err(|error| Failure::BadInput(error.to_string()))?;
    let workload = match workload {
        Some(workload) => workload,
        None => workload_beside(path)?.unwrap_or_default(),
    };
    let options = CheckOptions {
        workload,
        ..options
    };
    outln!(
        "fencer check: {} ({workload}{})",
        path.display(),
        if options.strict { ", strict" } else { "" }
    );
    let verdict = check_packed(&history, &options);
    let detail = summary::Detail {
        verbose,
        explain: None,
        takes_verbose: true,
    };
    summary::print_summary(
        &summary::Shape::of_packed(&history),
        &verdict,
        summary::Took::Untimed,
        &detail,
    );
    Ok(verdict.validity.exit_code())
}

/// The workload recorded in the `run.json` next to `history`, if there is one; a `run.json`
/// that names no known workload is bad input.
fn workload_beside(history: &Path) -> Result<Option<Workload>, Failure> {
    let record = history.with_file_name("run.json");
    let Ok(text) = std::fs::read_to_string(&record) else {
        return Ok(None);
    };
    let bad = |what: String| Failure::BadInput(format!("{}: {what}", record.display()));
    let json: serde_json::Value = serde_json::from_str(&text)
        .map_err(|error| bad(format!("expected a run record as JSON: {error}")))?;
    match json.pointer("/settings/workload") {
        None => Ok(None),
        Some(serde_json::Value::String(name)) => name
            .parse::<Workload>()
            .map(Some)
            .map_err(|error| bad(format!("settings.workload: {error}"))),
        Some(other) => Err(bad(format!(
            "expected settings.workload to be a string, found {other}"
        ))),
    }
}
