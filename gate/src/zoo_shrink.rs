//! How small the zoo's counterexamples shrink: for a mutant, its first catching seed shrunk
//! toward the class it must be caught with, measured in what a reader of the timeline sees
//! (workers acting, cycles, faults, events) — what `fencer mutants --shrink` tabulates.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use fencer_checkers::AnomalyClass;
use fencer_run::plan::Plan;
use fencer_run::{Backends, RunError, simulate_packed};
use fencer_workloads::WaitMode;

use crate::minimize::{Against, MinimizeError, ShrunkFailure, shrink_failing};
use crate::mutants::{Mutant, hunt};
use crate::shrink::{PlanSize, ShrinkLimits};

/// One mutant's counterexample before and after shrinking.
#[derive(Clone, Debug)]
pub struct ZooShrink {
    /// The mutant.
    pub mutant: &'static Mutant,
    /// The first seed from 0 that caught it.
    pub seed: u64,
    /// The caught plan's size, and the events its run recorded.
    pub before: (PlanSize, usize),
    /// The shrunk plan's size, and the events its run recorded.
    pub after: (PlanSize, usize),
    /// The shrunk plan itself.
    pub plan: Plan,
    /// Candidates simulated.
    pub candidates: usize,
    /// Why shrinking stopped early, if it did.
    pub stopped_by: Option<&'static str>,
    /// Wall time of the shrink in seconds, with the run that finds the anomaly's story and the
    /// run that confirms the result (the hunt is not counted).
    pub shrink_s: f64,
}

/// Why a mutant's counterexample could not be shrunk.
#[derive(Debug, thiserror::Error)]
pub enum ZooShrinkError {
    /// No seed below the cap caught the mutant.
    #[error("{0}: not caught within {1} seeds")]
    NotCaught(&'static str, u64),
    /// The mutant names a class fencer does not have.
    #[error("{0}: unknown anomaly class {1}")]
    UnknownClass(&'static str, &'static str),
    /// A run failed.
    #[error(transparent)]
    Run(#[from] RunError),
    /// The first catch did not shrink (it did not show the class, or the result did not
    /// reproduce).
    #[error("{mutant} at seed {seed}: {error}")]
    Shrink {
        /// The mutant.
        mutant: &'static str,
        /// The seed.
        seed: u64,
        /// What went wrong.
        error: MinimizeError,
    },
}

/// Hunts `mutant` from seed 0 (up to `cap` seeds), then shrinks its first catch toward the
/// mutant's expected class under `limits`, judged as the mutant is (strictly or not).
pub fn shrink_first_catch(
    mutant: &'static Mutant,
    wait: WaitMode,
    cap: u64,
    limits: ShrinkLimits,
) -> Result<ZooShrink, ZooShrinkError> {
    let seed = hunt(mutant, wait, cap)?
        .caught
        .ok_or(ZooShrinkError::NotCaught(mutant.name, cap))?
        .seed;
    let class: AnomalyClass = mutant
        .expected_class
        .parse()
        .map_err(|_| ZooShrinkError::UnknownClass(mutant.name, mutant.expected_class))?;
    let backends = Backends::new();
    let plan = Plan::generate(&mutant.waiting(wait, seed));
    let events_before = simulate_packed(&plan)?.len();
    let against = Against {
        backends: &backends,
        strict: mutant.strict,
    };
    let started = Instant::now();
    let ShrunkFailure { shrunk, confirmed } = shrink_failing(
        &plan,
        Path::new(&format!("{} seed {seed}", mutant.name)),
        class,
        limits,
        against,
        &AtomicBool::new(false),
    )
    .map_err(|error| match error {
        MinimizeError::Run(error) => ZooShrinkError::Run(error),
        error => ZooShrinkError::Shrink {
            mutant: mutant.name,
            seed,
            error,
        },
    })?;
    let shrink_s = started.elapsed().as_secs_f64();
    Ok(ZooShrink {
        mutant,
        seed,
        before: (PlanSize::of(&plan), events_before),
        after: (PlanSize::of(&shrunk.plan), confirmed.history.len()),
        plan: shrunk.plan,
        candidates: shrunk.candidates,
        stopped_by: shrunk.stopped_by,
        shrink_s,
    })
}
