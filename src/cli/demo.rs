//! `fencer demo`: the stale-holder experiment, computed from two recorded runs.

use std::path::Path;

use crate::{StoreBackend, check, simulate};
use fencer_harness::PackedHistory;
use fencer_results::run_dir::{check_dir_writable, check_run_place};
use fencer_results::save::{FinishedRun, default_run_dir, save_run};
use fencer_run::demo::{plan, report_lines};

use super::output::outln;
use super::{Failure, Outcome};

/// Runs the scripted scenario against the unfenced and the fenced store and prints the report.
pub fn demo(archive: &Path) -> Outcome {
    // Both runs go into the archive: refused before they run if it cannot take them.
    check_run_place(&default_run_dir(archive, "demo", "place")).map_err(Failure::bad_input)?;
    check_dir_writable(archive).map_err(Failure::bad_input)?;
    let mut runs = Vec::new();
    for (label, store) in [
        ("unfenced", StoreBackend::SqliteUnfenced),
        ("fenced", StoreBackend::Sqlite),
    ] {
        let plan = plan(store);
        // The scripted plan is fencer's own: any failure to run it is fencer's.
        let history = simulate(&plan).map_err(Failure::internal)?;
        let verdict = check(&history);
        let dir = default_run_dir(archive, "demo", label);
        let finished = FinishedRun {
            command: "demo",
            plan: &plan,
            history: &PackedHistory::pack(&history),
            verdict: &verdict,
            cycle_starts_ns: &[],
            interrupted_at_ns: None,
        };
        save_run(&finished, &dir, Some(archive)).map_err(Failure::from)?;
        runs.push((history, verdict, dir));
    }
    for line in report_lines(&runs[0].0, &runs[1].0) {
        outln!("{line}");
    }
    for (label, (_, verdict, dir)) in ["unfenced", "fenced"].iter().zip(&runs) {
        outln!(
            "{label} run: {} ({})",
            dir.display(),
            verdict.summary_line()
        );
    }
    Ok(0)
}
