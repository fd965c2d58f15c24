//! `fencer shrink DIR`: reduce a failing run's plan to a minimal one with the same anomaly
//! class, written beside the original as `plan.min.json` with the before/after sizes in
//! `shrink.json`; and the shrinking flags `fencer gate` shares.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use crate::{Plan, Verdict};
use clap::Args;
use fencer_checkers::AnomalyClass;
use fencer_gate::minimize::{Against, MinimizeError, minimize};
use fencer_gate::session::describe_shrink;
use fencer_gate::shrink::ShrinkLimits;
use fencer_results::{parse_run_json, read_run_file};
use fencer_run::settings::parse_duration;

use super::output::outln;
use super::{Context, Failure, Outcome};

/// `fencer shrink`'s flags.
#[derive(Args, Debug)]
pub struct ShrinkArgs {
    /// The failing run directory (with plan.json and verdict.json).
    dir: PathBuf,
    /// The anomaly class to preserve (default: the run's first anomaly's class).
    #[arg(long)]
    class: Option<AnomalyClass>,
    /// Count warnings as the anomaly too (as a `--strict` run found them).
    #[arg(long)]
    strict: bool,
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
pub fn shrink_command(args: &ShrinkArgs, context: &Context) -> Outcome {
    let dir = &args.dir;
    let bad = |error: fencer_results::RunDirError| Failure::BadInput(error.to_string());
    let plan_bytes = read_run_file(dir, "plan.json").map_err(bad)?;
    let plan = Plan::from_json(&plan_bytes, &dir.join("plan.json").display().to_string())
        .map_err(Failure::bad_input)?;
    let verdict: Verdict = parse_run_json(dir, "verdict.json").map_err(bad)?;
    let class = match args.class {
        Some(class) => class,
        // A warning fails only a strict shrink: without --strict it names no failure.
        None => verdict
            .first_failure()
            .or_else(|| args.strict.then(|| verdict.anomalies.first()).flatten())
            .map(|a| a.class)
            .ok_or_else(|| {
                Failure::BadInput(format!(
                    "{}: the run has no anomaly to shrink for (verdict: {})",
                    dir.join("verdict.json").display(),
                    verdict.summary_line()
                ))
            })?,
    };
    let against = Against {
        backends: &context.backends,
        strict: args.strict,
    };
    let record = minimize(
        dir,
        &plan,
        class,
        verdict.events as usize,
        args.limits.limits(),
        against,
        &AtomicBool::new(false),
    )
    .map_err(|error| match error {
        MinimizeError::DoesNotFail { .. } | MinimizeError::Run(_) => Failure::bad_input(error),
        MinimizeError::NotReproducible(_) | MinimizeError::Io { .. } | MinimizeError::Save(_) => {
            Failure::internal(error)
        }
    })?;
    outln!(
        "{}",
        describe_shrink(&record, &context.program, args.strict)
    );
    Ok(1)
}
