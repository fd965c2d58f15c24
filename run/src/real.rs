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

use crate::RunError;
use crate::drive::{RunNames, ServerTargets, drive_with_servers};
use crate::fit::{Reach, fit};
use crate::plan::Plan;
use crate::settings::Settings;

/// Expands `settings` into a plan for the real tier: no simulated latency (the wire is real)
/// and only the faults its backends can take ([`fit`]; `reach` says what the adapters offer),
/// the rest named in [`Plan::left_out`].
pub fn real_plan(settings: &Settings, reach: Reach) -> Plan {
    let settings = Settings {
        latency: LatencyModel::NONE,
        ..settings.clone()
    };
    fit(Plan::generate(&settings), reach)
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
