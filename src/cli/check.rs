//! `fencer check`: judge a stored history again.

use std::path::Path;

use fencer::{History, check as check_history};

use super::{Failure, Outcome, report};

/// Reads `path`, checks it, prints the verdict.
pub fn check(path: &Path) -> Outcome {
    let history =
        History::read_jsonl_file(path).map_err(|error| Failure::BadInput(error.to_string()))?;
    let verdict = check_history(&history);
    report::print_summary(&history, &verdict, 0.0);
    Ok(verdict.validity.exit_code() as u8)
}
