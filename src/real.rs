//! The real tier: a plan run in real time against real servers (or any adapter), with faults
//! injected at the adapter boundary.
//!
//! Time is real, so TTLs are scaled down to a few hundred milliseconds and a run takes seconds.
//! Faults are the ones a client can suffer without touching the server: a worker (and its
//! renewal task) frozen, a reply lost after the server applied the request (acquire, renew,
//! write), a worker's clock skewed. Replay is "the same plan again": the server's timing is not
//! ours to fix, so the recorded history, not the seed, is the artifact.

use std::sync::Arc;

use fencer_harness::runtime::real_runtime;
use fencer_harness::{FencedStore, History, LatencyModel, LockService};

use crate::drive::{RunNames, drive};
use crate::plan::Plan;
use crate::settings::Settings;
use crate::simulate::SimError;

/// Expands `settings` into a plan for the real tier: no simulated latency (the wire is real)
/// and no faults on the lock server's clock (not reachable at the adapter boundary; a server
/// fencer starts itself can be skewed by other means).
pub fn real_plan(settings: &Settings) -> Plan {
    let settings = Settings {
        latency: LatencyModel::NONE,
        ..settings.clone()
    };
    without_server_faults(Plan::generate(&settings))
}

/// `plan` without faults aimed at the lock server itself (its clock, its restarts): an
/// adapter's server keeps its own time and process, which fencer cannot reach from the adapter
/// boundary. Server-side faults on real servers go through `servers` and `proxy` instead.
pub fn without_server_faults(mut plan: Plan) -> Plan {
    plan.faults.retain(|fault| fault.target() != "lock");
    plan
}

/// Runs `plan` in real time against `lock` and `store` on a fresh runtime, using `names` for
/// the lock and the key (so runs sharing a server never meet).
pub fn run_real(
    plan: &Plan,
    lock: Arc<dyn LockService>,
    store: Arc<dyn FencedStore>,
    names: RunNames,
) -> Result<History, SimError> {
    plan.check().map_err(SimError::Plan)?;
    let runtime = real_runtime()
        .map_err(|error| SimError::Internal(format!("cannot start a tokio runtime: {error}")))?;
    runtime.block_on(drive(Arc::new(plan.clone()), lock, store, names))
}

/// A tag unique to this process and moment, for [`RunNames::tagged`] on shared servers.
pub fn unique_tag(seed: u64) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos())
        .unwrap_or(0);
    format!("{}-{nanos:x}-s{seed}", std::process::id())
}
