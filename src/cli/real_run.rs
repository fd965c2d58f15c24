//! `fencer run --lock URL --store URL`: the real tier from the command line.
//!
//! The servers are checked first (a clear error and exit 254 if one is unreachable or refuses
//! the login), then the plan runs in real time, is checked and saved like a simulated run. The
//! saved settings carry the URLs with their passwords hidden; `--plan` re-runs a saved plan.

use std::path::Path;

use fencer::connect::{lock_from_url, store_from_url};
use fencer::drive::{RunNames, drive};
use fencer::real::{real_plan, unique_tag};
use fencer::save::{FinishedRun, default_run_dir, save_run};
use fencer::{Plan, Settings, SimError, check};
use fencer_backends::redact_url;
use fencer_harness::runtime::real_runtime;

use super::{Failure, Outcome, describe, report};

/// Where the lock service and store live.
pub struct RealTargets<'a> {
    /// The lock server's URL (may carry a password).
    pub lock_url: &'a str,
    /// The store server's URL (may carry a password).
    pub store_url: &'a str,
}

/// Runs `settings` (or the saved plan at `plan_path`) against real servers.
pub fn run(
    settings: &Settings,
    targets: &RealTargets<'_>,
    plan_path: Option<&Path>,
    out: Option<&Path>,
    store_dir: &Path,
) -> Outcome {
    let lock = lock_from_url(targets.lock_url).map_err(Failure::BadInput)?;
    let store = store_from_url(targets.store_url).map_err(Failure::BadInput)?;
    let plan = match plan_path {
        Some(path) => {
            let bytes = std::fs::read(path).map_err(|error| {
                Failure::BadInput(format!("{}: cannot read the plan: {error}", path.display()))
            })?;
            Plan::from_json(&bytes, &path.display().to_string())
                .map_err(|error| Failure::BadInput(error.to_string()))?
        }
        None => {
            for warning in settings.validate().map_err(Failure::BadInput)? {
                eprintln!("warning: {warning}");
            }
            real_plan(&Settings {
                lock_url: Some(redact_url(targets.lock_url)),
                store_url: Some(redact_url(targets.store_url)),
                ..settings.clone()
            })
        }
    };
    println!("fencer run (real time): {}", describe(&plan.settings));
    let runtime = real_runtime()
        .map_err(|error| Failure::Internal(format!("cannot start a tokio runtime: {error}")))?;
    runtime
        .block_on(async {
            lock.ping().await?;
            store.ping().await
        })
        .map_err(Failure::BadInput)?;
    let started = std::time::Instant::now();
    let names = RunNames::tagged(&unique_tag(plan.settings.seed));
    let history = runtime
        .block_on(drive(
            std::sync::Arc::new(plan.clone()),
            lock.adapter,
            store.adapter,
            names,
        ))
        .map_err(|error| match error {
            SimError::Plan(message) => Failure::BadInput(message),
            SimError::Internal(message) => Failure::Internal(message),
        })?;
    let verdict = check(&history);
    report::print_summary(&history, &verdict, started.elapsed().as_secs_f64());
    let dir = match out {
        Some(dir) => dir.to_path_buf(),
        None => default_run_dir(
            store_dir,
            &plan.settings.workload,
            &format!("real-{}", plan.settings.seed),
        ),
    };
    let finished = FinishedRun {
        command: "run",
        plan: &plan,
        history: &history,
        verdict: &verdict,
    };
    save_run(&finished, &dir, out.is_none().then_some(store_dir))
        .map_err(|error| Failure::BadInput(format!("cannot save the run: {error}")))?;
    println!("run directory: {}", dir.display());
    println!(
        "run the same plan again: fencer run --plan {} --lock {} --store {}",
        dir.join("plan.json").display(),
        lock.shown_url,
        store.shown_url
    );
    Ok(verdict.validity.exit_code() as u8)
}
