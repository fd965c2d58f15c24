//! How small the zoo's counterexamples shrink: for a mutant, its first catching seed shrunk
//! toward the class it must be caught with, measured in what a reader of the timeline sees
//! (workers acting, cycles, faults, events) — what `fencer mutants --shrink` tabulates.

use std::time::Instant;

use fencer_checkers::AnomalyClass;
use fencer_run::plan::Plan;
use fencer_run::{Backends, Launch, RunError};
use fencer_workloads::WaitMode;

use crate::mutants::{Mutant, hunt};
use crate::shrink::{Evidence, PlanSize, ShrinkLimits, fails_with, shrink_toward};

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
    /// Wall time of the shrink alone, in seconds (the hunt and the runs that measure the
    /// result are not counted).
    pub shrink_s: f64,
}

/// Why a mutant's counterexample could not be shrunk.
#[derive(Debug, thiserror::Error)]
pub enum ZooShrinkError {
    /// No seed below the cap caught the mutant.
    #[error("{0}: not caught within {1} seeds")]
    NotCaught(&'static str, u64),
    /// The first catch did not report the mutant's expected class.
    #[error("{mutant}: seed {seed} did not show {class}")]
    WrongClass {
        /// The mutant.
        mutant: &'static str,
        /// The seed.
        seed: u64,
        /// The class it should have shown.
        class: &'static str,
    },
    /// A run failed.
    #[error(transparent)]
    Run(#[from] RunError),
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
    let class: AnomalyClass =
        mutant
            .expected_class
            .parse()
            .map_err(|_| ZooShrinkError::WrongClass {
                mutant: mutant.name,
                seed,
                class: mutant.expected_class,
            })?;
    let backends = Backends::new();
    let plan = Plan::generate(&mutant.waiting(wait, seed));
    let original = Launch::new(&backends).run(&plan)?;
    let verdict =
        fencer_run::checking::judge(&original.plan.settings, &original.history, mutant.strict);
    let story = verdict
        .anomalies
        .iter()
        .find(|anomaly| anomaly.class == class)
        .ok_or(ZooShrinkError::WrongClass {
            mutant: mutant.name,
            seed,
            class: mutant.expected_class,
        })?;
    let evidence = Evidence::cited(
        &original.history,
        &story.events,
        original.cycle_starts_ns.clone(),
    );
    let started = Instant::now();
    let shrunk = shrink_toward(
        &plan,
        &evidence,
        fails_with(class, &backends, mutant.strict),
        limits,
    );
    let shrink_s = started.elapsed().as_secs_f64();
    let events_after = Launch::new(&backends).run(&shrunk.plan)?.history.len();
    Ok(ZooShrink {
        mutant,
        seed,
        before: (PlanSize::of(&plan), original.history.len()),
        after: (PlanSize::of(&shrunk.plan), events_after),
        plan: shrunk.plan,
        candidates: shrunk.candidates,
        stopped_by: shrunk.stopped_by,
        shrink_s,
    })
}
