//! Runs a plan in the simulation tier and returns its history.
//!
//! Everything — workers, renewal tasks, the lock server, the SQLite store, the nemesis — runs
//! on one current-thread runtime with paused time, and every random draw comes from the plan's
//! seed, so the history is a pure function of the plan.

use fencer_harness::{History, PackedHistory};

use crate::RunError;
use crate::backends::{Backends, Time};
use crate::launch::Launch;
use crate::plan::Plan;

/// Runs `plan`, whose backends are fencer's own simulated ones, to completion and returns
/// what was recorded. ([`Launch`] runs any plan, with a user's backends too.)
pub fn simulate(plan: &Plan) -> Result<History, RunError> {
    simulate_packed(plan).map(|history| history.unpack())
}

/// As [`simulate`], the history in the checking form it was recorded in: what checking,
/// writing and measuring a run read, without building its events.
pub fn simulate_packed(plan: &Plan) -> Result<PackedHistory, RunError> {
    let backends = Backends::new();
    let launch = Launch::new(&backends);
    if launch.time(plan)? != Time::Simulated {
        return Err(RunError::Internal(format!(
            "simulate runs fencer's simulated backends only, not lock `{}`, store `{}`: \
             run the plan with Launch",
            plan.settings.lock.shown(),
            plan.settings.store.shown()
        )));
    }
    launch.run(plan).map(|launched| launched.history)
}

#[cfg(test)]
mod tests {
    use fencer_backends::registry::LockBackend;

    use crate::{Plan, Settings, simulate};

    #[test]
    fn the_nondeterministic_lock_really_is_and_the_reference_is_not() {
        let settings = Settings {
            ops_per_worker: 3,
            lock: LockBackend::TestNondeterministic.into(),
            ..Settings::default()
        };
        let plan = Plan::generate(&settings);
        assert_ne!(
            simulate(&plan).unwrap().to_jsonl(),
            simulate(&plan).unwrap().to_jsonl()
        );
        let reference = Plan::generate(&Settings {
            lock: LockBackend::Sim.into(),
            ..settings
        });
        assert_eq!(
            simulate(&reference).unwrap().to_jsonl(),
            simulate(&reference).unwrap().to_jsonl()
        );
    }
}
