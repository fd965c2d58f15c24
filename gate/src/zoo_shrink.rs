//! How small the zoo's counterexamples shrink: for a mutant, its first catching seed shrunk
//! toward the class it must be caught with, measured in what a reader of the timeline sees
//! (workers acting, cycles, faults, events) — what `fencer mutants --shrink` tabulates.
//!
//! A mutant is hunted first where a user meets it: the default settings with only its lock,
//! store or client swapped in ([`Mutant::in_plain_defaults`]), over [`PLAIN_DEFAULT_SEEDS`]
//! (a short gate, `fencer gate --seeds 0..20`); a mutant that hides there is hunted in the
//! scenario `fencer mutants` exposes it with.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use fencer_checkers::AnomalyClass;
use fencer_run::plan::Plan;
use fencer_run::{Backends, RunError};
use fencer_workloads::WaitMode;

use crate::minimize::{Against, MinimizeError, ShrunkFailure, shrink_failing};
use crate::mutants::{Mutant, hunt, verdict_of};
use crate::shrink::{PlanSize, ShrinkLimits};

/// The seeds a mutant is hunted over under the plain defaults: those of a short gate,
/// `fencer gate --seeds 0..20`.
pub const PLAIN_DEFAULT_SEEDS: std::ops::Range<u64> = 0..20;

/// Where a mutant's counterexample was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// The default settings with the mutant's lock, store or client swapped in.
    Defaults,
    /// The workload, faults and fault rate `fencer mutants` exposes the mutant with.
    Zoo,
}

impl Scenario {
    /// The word the table prints.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Defaults => "defaults",
            Scenario::Zoo => "scenario",
        }
    }
}

/// One mutant's counterexample before and after shrinking.
#[derive(Clone, Debug)]
pub struct ZooShrink {
    /// The mutant.
    pub mutant: &'static Mutant,
    /// Where it was caught.
    pub scenario: Scenario,
    /// The first seed from 0 that caught it there.
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

/// Hunts `mutant` under the plain defaults over [`PLAIN_DEFAULT_SEEDS`] for a verdict with its
/// expected class, else in its zoo scenario from seed 0 (up to `cap` seeds, its workers waiting
/// as `wait` says), then shrinks the first catch toward that class under `limits`, judged as
/// the mutant is (strictly or not).
pub fn shrink_first_catch(
    mutant: &'static Mutant,
    wait: WaitMode,
    cap: u64,
    limits: ShrinkLimits,
) -> Result<ZooShrink, ZooShrinkError> {
    let class: AnomalyClass = mutant
        .expected_class
        .parse()
        .map_err(|_| ZooShrinkError::UnknownClass(mutant.name, mutant.expected_class))?;
    let mut under_defaults = None;
    for seed in PLAIN_DEFAULT_SEEDS {
        let verdict = verdict_of(&mutant.in_plain_defaults(seed), mutant.strict)?;
        if verdict.anomaly_counts.contains_key(class.name()) {
            under_defaults = Some(seed);
            break;
        }
    }
    let (scenario, settings) = match under_defaults {
        Some(seed) => (Scenario::Defaults, mutant.in_plain_defaults(seed)),
        None => {
            let seed = hunt(mutant, wait, cap)?
                .caught
                .ok_or(ZooShrinkError::NotCaught(mutant.name, cap))?
                .seed;
            (Scenario::Zoo, mutant.waiting(wait, seed))
        }
    };
    let seed = settings.seed;
    let backends = Backends::new();
    let plan = Plan::generate(&settings);
    let against = Against {
        backends: &backends,
        strict: mutant.strict,
    };
    let started = Instant::now();
    let ShrunkFailure {
        shrunk,
        original_events,
        confirmed,
        ..
    } = shrink_failing(
        &plan,
        Path::new(&format!("{} seed {seed}", mutant.name)),
        class,
        limits,
        against,
        &AtomicBool::new(false),
        None,
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
        scenario,
        seed,
        before: (PlanSize::of(&plan), original_events),
        after: (PlanSize::of(&shrunk.plan), confirmed.history.len()),
        plan: shrunk.plan,
        candidates: shrunk.candidates,
        stopped_by: shrunk.stopped_by,
        shrink_s,
    })
}
