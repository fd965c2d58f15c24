//! `fencer replay`: run a saved plan again and prove the history is byte-identical.

use std::path::Path;

use crate::{Plan, simulate};
use fencer_harness::history::sha256_hex;
use fencer_results::{RunRecord, parse_run_json, read_run_file};
use fencer_run::checking::judge;

use fencer_servers::PRIVATE_SCHEME;

use super::{Failure, Outcome, real_run, summary};

/// Replays the run in `dir`.
pub fn replay(dir: &Path) -> Outcome {
    if !dir.is_dir() {
        return Err(Failure::BadInput(format!(
            "{}: not a run directory (expected a directory with run.json, plan.json, history.jsonl)",
            dir.display()
        )));
    }
    let bad = |error: fencer_results::RunDirError| Failure::BadInput(error.to_string());
    let record: RunRecord = parse_run_json(dir, "run.json").map_err(bad)?;
    let plan_bytes = read_run_file(dir, "plan.json").map_err(bad)?;
    let plan = Plan::from_json(&plan_bytes, &dir.join("plan.json").display().to_string())
        .map_err(|error| Failure::BadInput(error.to_string()))?;
    if let (Some(lock_url), Some(store_url)) = (&plan.settings.lock_url, &plan.settings.store_url) {
        if lock_url.starts_with(PRIVATE_SCHEME) && store_url.starts_with(PRIVATE_SCHEME) {
            // Servers fencer starts itself can be started afresh: the same plan runs again
            // against new ones, and the new history is the artifact.
            println!(
                "{}: a real-tier run on servers fencer starts: running its plan again against \
                 fresh ones",
                dir.display()
            );
            let plan_path = dir.join("plan.json");
            // Saved like a `fencer run` with the default --archive.
            return real_run::run(
                &plan.settings,
                &real_run::RealTargets {
                    lock_url,
                    store_url,
                },
                Some(&plan_path),
                None,
                Path::new("store"),
            );
        }
        return Err(Failure::BadInput(format!(
            "{}: a real-tier run cannot be replayed byte for byte (the servers' timing is not \
             fencer's); run its plan again with: fencer run --plan {} --lock {lock_url} --store \
             {store_url} (put the passwords back)",
            dir.display(),
            dir.join("plan.json").display()
        )));
    }
    let stored_bytes = read_run_file(dir, "history.jsonl").map_err(bad)?;
    let stored_hash = sha256_hex(&stored_bytes);
    if stored_hash != record.history_sha256 {
        return Err(Failure::BadInput(format!(
            "{}: sha256 {stored_hash} does not match run.json's {}: the run directory was modified",
            dir.join("history.jsonl").display(),
            record.history_sha256
        )));
    }
    let history = simulate(&plan).map_err(Failure::from)?;
    let replayed = history.to_jsonl();
    let replayed_hash = sha256_hex(&replayed);
    println!("stored   history sha256 {stored_hash}");
    println!("replayed history sha256 {replayed_hash}");
    if replayed != stored_bytes {
        return Err(Failure::Internal(format!(
            "replay diverged from the stored history at line {}: the simulation is not \
             deterministic for this plan (please report it with the run directory)",
            first_difference(&stored_bytes, &replayed)
        )));
    }
    println!("identical: {} events", history.events.len());
    let verdict = judge(&plan.settings, &history, false);
    summary::print_summary(&summary::Shape::of_history(&history), &verdict, 0.0);
    Ok(verdict.validity.exit_code())
}

/// 1-based line of the first difference between two JSONL texts.
fn first_difference(stored: &[u8], replayed: &[u8]) -> usize {
    let mut stored_lines = stored.split(|&b| b == b'\n');
    let mut replayed_lines = replayed.split(|&b| b == b'\n');
    let mut line = 1;
    loop {
        match (stored_lines.next(), replayed_lines.next()) {
            (Some(a), Some(b)) if a == b => line += 1,
            _ => return line,
        }
    }
}
