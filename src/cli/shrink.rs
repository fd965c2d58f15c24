//! `fencer shrink DIR`, and the shrinking step of `fencer gate`: reduce a failing run's plan to
//! a minimal one with the same anomaly class, written beside the original as `plan.min.json`
//! with the before/after sizes in `shrink.json`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::{Plan, Verdict, simulate};
use clap::Args;
use fencer_checkers::AnomalyClass;
use fencer_gate::regressions::write_atomically;
use fencer_gate::shrink::{PlanSize, ShrinkLimits, fails_with, shrink};
use fencer_gate::summary::ShrinkRecord;
use fencer_results::{parse_run_json, read_run_file};
use fencer_run::settings::parse_duration;

use super::{Failure, Outcome};

/// `fencer shrink`'s flags.
#[derive(Args, Debug)]
pub struct ShrinkArgs {
    /// The failing run directory (with plan.json and verdict.json).
    dir: PathBuf,
    /// The anomaly class to preserve (default: the run's first anomaly's class).
    #[arg(long)]
    class: Option<AnomalyClass>,
    #[command(flatten)]
    limits: ShrinkFlags,
}

/// How long shrinking may take; shared with `gate`.
#[derive(Args, Debug, Clone)]
pub struct ShrinkFlags {
    /// Wall-time budget for shrinking one failure.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    shrink_time: u64,
    /// Most candidate plans to simulate while shrinking one failure.
    #[arg(long, default_value_t = 2_000)]
    shrink_candidates: usize,
}

impl ShrinkFlags {
    /// The shrinker's limits.
    pub fn limits(&self) -> ShrinkLimits {
        ShrinkLimits {
            max_candidates: self.shrink_candidates,
            budget: Duration::from_nanos(self.shrink_time),
        }
    }
}

/// Shrinks the run in `args.dir`.
pub fn shrink_command(args: &ShrinkArgs) -> Outcome {
    let dir = &args.dir;
    let bad = |error: fencer_results::RunDirError| Failure::BadInput(error.to_string());
    let plan_bytes = read_run_file(dir, "plan.json").map_err(bad)?;
    let plan = Plan::from_json(&plan_bytes, &dir.join("plan.json").display().to_string())
        .map_err(|error| Failure::BadInput(error.to_string()))?;
    let verdict: Verdict = parse_run_json(dir, "verdict.json").map_err(bad)?;
    let class = match args.class {
        Some(class) => class,
        None => verdict.anomalies.first().map(|a| a.class).ok_or_else(|| {
            Failure::BadInput(format!(
                "{}: the run has no anomaly to shrink for (verdict: {})",
                dir.join("verdict.json").display(),
                verdict.summary_line()
            ))
        })?,
    };
    let record = shrink_failure(
        dir,
        &plan,
        class,
        verdict.events as usize,
        args.limits.limits(),
        &AtomicBool::new(false),
    )?;
    print_record(&record);
    Ok(1)
}

/// Prints what a shrink achieved, two lines.
pub fn print_record(record: &ShrinkRecord) {
    let size = |size: &PlanSize, events: usize| {
        format!(
            "{} faults, {} cycles, {} workers, {} events",
            size.faults, size.cycles, size.workers, events
        )
    };
    println!(
        "shrunk ({}, {} candidates{}): {} -> {}",
        record.class,
        record.candidates,
        record
            .stopped_by
            .as_ref()
            .map_or(String::new(), |why| format!(", stopped by the {why}")),
        size(&record.before, record.events_before),
        size(&record.after, record.events_after),
    );
    println!(
        "minimal plan: {} (run it: fencer run --plan {})",
        record.plan, record.plan
    );
}

/// Shrinks `plan` (which failed with `class`, in `dir`) and writes `plan.min.json` and
/// `shrink.json` into `dir`. Refuses a plan that does not fail with `class` in the first place.
pub fn shrink_failure(
    dir: &Path,
    plan: &Plan,
    class: AnomalyClass,
    events_before: usize,
    limits: ShrinkLimits,
    interrupted: &AtomicBool,
) -> Result<ShrinkRecord, Failure> {
    let mut still_fails = fails_with(class);
    if !still_fails(plan) {
        return Err(Failure::BadInput(format!(
            "{}: the plan does not show {class} (nothing to shrink)",
            dir.join("plan.json").display()
        )));
    }
    let shrunk = shrink(
        plan,
        |candidate| !interrupted.load(Ordering::SeqCst) && still_fails(candidate),
        limits,
    );
    let history = simulate(&shrunk.plan).map_err(|error| Failure::Internal(error.to_string()))?;
    // The predicate accepted this plan; a verdict without the class now would mean the
    // simulation is not deterministic.
    if !fencer_run::checking::judge(&shrunk.plan.settings, &history, false)
        .anomaly_counts
        .contains_key(class.name())
    {
        return Err(Failure::Internal(format!(
            "the shrunk plan stopped showing {class} when run again: the simulation is not \
             deterministic for it"
        )));
    }
    let min_path = dir.join("plan.min.json");
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |error: std::io::Error| Failure::BadInput(format!("{path}: {error}"))
    };
    write_atomically(&min_path, &shrunk.plan.to_json()).map_err(io(&min_path))?;
    let record = ShrinkRecord {
        plan: min_path.display().to_string(),
        class: class.name().to_string(),
        before: PlanSize::of(plan),
        after: PlanSize::of(&shrunk.plan),
        events_before,
        events_after: history.events.len(),
        candidates: shrunk.candidates,
        stopped_by: shrunk.stopped_by.map(str::to_string),
    };
    let mut json = serde_json::to_vec_pretty(&record).expect("records always serialise");
    json.push(b'\n');
    let record_path = dir.join("shrink.json");
    write_atomically(&record_path, &json).map_err(io(&record_path))?;
    Ok(record)
}
