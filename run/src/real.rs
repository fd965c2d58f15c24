//! The real tier: a plan run in real time against real servers (or any adapter), with faults
//! injected at the adapter boundary.
//!
//! Time is real, so TTLs are scaled down to a few hundred milliseconds and a run takes seconds.
//! Against any server, faults are the ones a client can suffer without touching the server: a
//! worker (and its renewal task) frozen, a reply lost after the server applied the request
//! (acquire, renew, write), a worker's clock skewed. Against servers fencer started itself
//! (`private:` URLs, [`fencer_servers::PrivateServer`]) the plan may also pause, kill and
//! restart them, jump their clock and fault fencer's proxy in front of them. Replay is "the
//! same plan again": the server's timing is not ours to fix, so the recorded history, not the
//! seed, is the artifact.

use std::sync::Arc;

use fencer_harness::runtime::real_runtime;
use fencer_harness::{FencedStore, History, LockService};

use crate::RunError;
use crate::backends::builtin_reach;
use crate::drive::{RunNames, ServerTargets, drive_with_servers};
use crate::plan::{InvalidPlan, Plan};
use crate::reach::Roles;
use crate::settings::Settings;

/// Expands `settings` into a plan for the real tier ([`Settings::in_real_time`]) with only the
/// faults fencer's own backends by those names can take ([`fit_to_servers`]).
pub fn real_plan(settings: &Settings) -> Plan {
    fit_to_servers(&Plan::generate(&settings.in_real_time()))
}

/// The backends `plan` names, if they are fencer's own, with what fencer can do to each.
fn own_roles(plan: &Plan) -> Roles<'_> {
    Roles {
        lock: (&plan.settings.lock, builtin_reach(&plan.settings.lock)),
        store: (&plan.settings.store, builtin_reach(&plan.settings.store)),
    }
}

/// `plan` without the faults aimed at a server (`lock`, `store`) that fencer's own backends by
/// those names cannot take (a server behind a plain URL keeps its own time and process; a
/// private server takes all but clock drift; an exec child pauses and restarts), named in its
/// [`Plan::left_out`].
pub fn fit_to_servers(plan: &Plan) -> Plan {
    own_roles(plan).fit(plan)
}

/// Why fencer's own backends named by `plan` cannot take one of its faults (a hand-written
/// or simulation plan run against servers): the error names the fault at its place.
pub fn check_servers_take_faults(plan: &Plan) -> Result<(), InvalidPlan> {
    own_roles(plan).check(plan)
}

/// Runs `plan` in real time against `lock` and `store` on a fresh runtime, using `names` for
/// the lock and the key (so runs sharing a server never meet).
pub fn run_real(
    plan: &Plan,
    lock: Arc<dyn LockService>,
    store: Arc<dyn FencedStore>,
    names: RunNames,
) -> Result<History, RunError> {
    run_real_with_servers(plan, lock, store, names, ServerTargets::new())
}

/// As [`run_real`], with `servers` (fencer's own, by role) as targets of the plan's server
/// faults.
pub fn run_real_with_servers(
    plan: &Plan,
    lock: Arc<dyn LockService>,
    store: Arc<dyn FencedStore>,
    names: RunNames,
    servers: ServerTargets,
) -> Result<History, RunError> {
    plan.check()?;
    let runtime = real_runtime()
        .map_err(|error| RunError::Internal(format!("cannot start a tokio runtime: {error}")))?;
    runtime.block_on(drive_with_servers(
        Arc::new(plan.clone()),
        lock,
        store,
        names,
        servers,
    ))
}

/// A tag unique to this process and moment, for [`RunNames::tagged`] on shared servers.
pub fn unique_tag(seed: u64) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos())
        .unwrap_or(0);
    format!("{}-{nanos:x}-s{seed}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencer_workloads::CycleShape;

    #[test]
    fn real_plans_draw_real_time_cycles_and_keep_the_simulation_s_faults() {
        let settings = Settings {
            seed: 5,
            ..Settings::default()
        };
        let simulated = Plan::generate(&settings);
        let real = real_plan(&settings);
        assert_eq!(simulated.settings.cycle_shape, CycleShape::Full);
        assert_eq!(real.settings.cycle_shape, CycleShape::RealTime);
        assert_ne!(real.workers, simulated.workers);
        // The shape decides the workers' scripts only: the fault schedule is the simulation's
        // minus what a plain URL's servers cannot take.
        assert_eq!(real.faults, fit_to_servers(&simulated).faults);
    }
}
