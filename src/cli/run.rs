//! `fencer run`: simulate one seed (or one plan file), check it, save it.

use std::path::Path;

use crate::{Plan, RunError, Settings, simulate};
use fencer_results::save::{FinishedRun, default_run_dir, save_run};
use fencer_run::checking::judge;

use super::{Failure, Outcome, describe, print_left_out, report};

/// Runs `settings`, writes the run directory (`out`, or a fresh one under `archive`);
/// `strict` makes warnings fail the verdict.
pub fn run(settings: &Settings, out: Option<&Path>, archive: &Path, strict: bool) -> Outcome {
    let warnings = settings.validate().map_err(Failure::BadInput)?;
    for warning in warnings {
        eprintln!("warning: {warning}");
    }
    run_plan(&Plan::generate(settings), out, archive, strict)
}

/// Runs the plan in `path` (`--plan`): a saved, shrunk or hand-written plan. A plan that does
/// not parse or cannot run is refused with `file:line: what was expected`; `strict` makes
/// warnings fail the verdict.
pub fn run_plan_file(path: &Path, out: Option<&Path>, archive: &Path, strict: bool) -> Outcome {
    let bytes = std::fs::read(path)
        .map_err(|error| Failure::BadInput(format!("{}: {error}", path.display())))?;
    let plan = Plan::from_json(&bytes, &path.display().to_string())
        .map_err(|error| Failure::BadInput(error.to_string()))?;
    for warning in plan.settings.validate().map_err(Failure::BadInput)? {
        eprintln!("warning: {warning}");
    }
    run_plan(&plan, out, archive, strict)
}

fn run_plan(plan: &Plan, out: Option<&Path>, archive: &Path, strict: bool) -> Outcome {
    let settings = &plan.settings;
    let dir = match out {
        Some(dir) => dir.to_path_buf(),
        None => default_run_dir(
            archive,
            settings.workload.name(),
            &settings.seed.to_string(),
        ),
    };
    println!("fencer run: {}", describe(settings));
    print_left_out(plan);
    let started = std::time::Instant::now();
    let history = simulate(plan).map_err(|error| match error {
        RunError::Plan(message) => Failure::BadInput(message),
        RunError::Internal(message) => Failure::Internal(message),
    })?;
    let verdict = judge(settings, &history, strict);
    let wall_s = started.elapsed().as_secs_f64();
    report::print_summary(&report::Shape::of_history(&history), &verdict, wall_s);
    let finished = FinishedRun {
        command: "run",
        plan,
        history: &history,
        verdict: &verdict,
    };
    // `latest` only tracks runs inside the store.
    let archive_root = out.is_none().then_some(archive);
    save_run(&finished, &dir, archive_root)
        .map_err(|error| Failure::BadInput(format!("cannot save the run: {error}")))?;
    println!("run directory: {}", dir.display());
    Ok(verdict.validity.exit_code())
}
