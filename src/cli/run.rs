//! `fencer run`: simulate one seed, check it, save it.

use std::path::Path;

use fencer::save::{FinishedRun, default_run_dir, save_run};
use fencer::{CheckOptions, Plan, Settings, SimError, Workload, check_with, simulate};

use super::{Failure, Outcome, describe, report};

/// Runs `settings`, writes the run directory (`out`, or a fresh one under `store_dir`);
/// `strict` makes warnings fail the verdict.
pub fn run(settings: &Settings, out: Option<&Path>, store_dir: &Path, strict: bool) -> Outcome {
    let warnings = settings.validate().map_err(Failure::BadInput)?;
    for warning in warnings {
        eprintln!("warning: {warning}");
    }
    let dir = match out {
        Some(dir) => dir.to_path_buf(),
        None => default_run_dir(store_dir, &settings.workload, &settings.seed.to_string()),
    };
    println!("fencer run: {}", describe(settings));
    let plan = Plan::generate(settings);
    let started = std::time::Instant::now();
    let history = simulate(&plan).map_err(|error| match error {
        SimError::Plan(message) => Failure::BadInput(message),
        SimError::Internal(message) => Failure::Internal(message),
    })?;
    let options = CheckOptions {
        workload: settings
            .workload
            .parse::<Workload>()
            .map_err(|error| Failure::BadInput(error.to_string()))?,
        strict,
        ..CheckOptions::default()
    };
    let verdict = check_with(&history, &options);
    let wall_s = started.elapsed().as_secs_f64();
    report::print_summary(&history, &verdict, wall_s);
    let finished = FinishedRun {
        command: "run",
        plan: &plan,
        history: &history,
        verdict: &verdict,
    };
    // `latest` only tracks runs inside the store.
    let store_root = out.is_none().then_some(store_dir);
    save_run(&finished, &dir, store_root)
        .map_err(|error| Failure::BadInput(format!("cannot save the run: {error}")))?;
    println!("run directory: {}", dir.display());
    Ok(verdict.validity.exit_code() as u8)
}
