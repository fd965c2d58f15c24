//! The real tier: a plan run in real time against real servers (or any adapter), with faults
//! injected at the adapter boundary.
//!
//! Time is real, so TTLs are scaled down to a few hundred milliseconds and a run takes seconds.
//! Against any server, faults are the ones a client can suffer without touching the server: a
//! worker (and its renewal task) frozen, a reply lost after the server applied the request
//! (acquire, renew, write), a worker's clock skewed. Against servers fencer started itself
//! (`private:` URLs, [`crate::servers::PrivateServer`]) the plan may also pause, kill and
//! restart them, jump their clock and fault fencer's proxy in front of them. Replay is "the
//! same plan again": the server's timing is not ours to fix, so the recorded history, not the
//! seed, is the artifact.

use std::sync::Arc;

use fencer_harness::runtime::real_runtime;
use fencer_harness::{FencedStore, History, LatencyModel, LockService};

use fencer_nemesis::Fault;
use fencer_workloads::CycleShape;

use crate::RunError;
use crate::drive::{RunNames, ServerTargets, drive_with_servers};
use crate::plan::Plan;
use crate::settings::Settings;
use fencer_servers::PrivateBackend;

/// Expands `settings` into a plan for the real tier: no simulated latency (the wire is real),
/// mostly short cycles ([`CycleShape::RealTime`]: a critical section sleeps in real time) and
/// only the server faults its servers can take ([`fit_to_servers`]).
pub fn real_plan(settings: &Settings) -> Plan {
    let settings = Settings {
        latency: LatencyModel::NONE,
        cycle_shape: CycleShape::RealTime,
        ..settings.clone()
    };
    fit_to_servers(Plan::generate(&settings))
}

/// `plan` without the faults aimed at a server (`lock`, `store`) that its servers cannot take:
/// a server behind a plain URL keeps its own time and process, out of fencer's reach, so
/// every fault aimed at it goes; a server fencer started (a `private:` URL) takes them all but
/// clock drift (libfaketime offsets are steps).
pub fn fit_to_servers(mut plan: Plan) -> Plan {
    let Plan {
        settings, faults, ..
    } = &mut plan;
    faults.retain(|fault| takes(settings, fault).is_ok());
    plan
}

/// Why the servers of `plan` cannot take one of its faults (a hand-written or simulation plan
/// run against servers): the message names the fault and what would run it.
pub fn check_servers_take_faults(plan: &Plan) -> Result<(), String> {
    for (index, fault) in plan.faults.iter().enumerate() {
        takes(&plan.settings, fault).map_err(|why| format!("faults[{index}]: {why}"))?;
    }
    Ok(())
}

/// Whether a run with `settings` (whose `private:` roles are fencer's own servers) can execute
/// `fault`.
fn takes(settings: &Settings, fault: &Fault) -> Result<(), String> {
    if !fault.aims_at_server() {
        return Ok(());
    }
    let target = fault.target();
    let private = settings.server_url(target).and_then(PrivateBackend::parse);
    let Some(Ok((backend, _))) = private else {
        return Err(format!(
            "`{}` at {} ns aims at the {target} server, which is not fencer's own: start it \
             with --{target} {}",
            fault.kind().name(),
            fault.at_ns(),
            PrivateBackend::URLS
        ));
    };
    if let Fault::ClockDrift { .. } = fault {
        return Err(format!(
            "clock drift at {} ns on the {target} server: a real server's clock can be \
             stepped (libfaketime, Redis expiry rewrite), not made to drift",
            fault.at_ns()
        ));
    }
    if let Fault::ClockJump { .. } = fault
        && !backend.takes_clock_jumps()
    {
        return Err(format!(
            "clock jump at {} ns on the {target} server: the clock of a private {backend:?} \
             cannot be stepped (etcd ignores libfaketime; ZooKeeper expires sessions by its \
             monotonic clock)",
            fault.at_ns()
        ));
    }
    Ok(())
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
    plan.check().map_err(RunError::Plan)?;
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
        assert_eq!(real.faults, fit_to_servers(simulated).faults);
    }
}
