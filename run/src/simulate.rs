//! Runs a plan in the simulation tier and returns its history.
//!
//! Everything — workers, renewal tasks, the lock server, the SQLite store, the nemesis — runs
//! on one current-thread runtime with paused time, and every random draw comes from the plan's
//! seed, so the history is a pure function of the plan.

use std::sync::Arc;

use fencer_backends::{SimLeaseService, SqliteStore};
use fencer_harness::runtime::simulation_runtime;
use fencer_harness::{
    FencedStore, History, LocalClock, Network, NodeClock, Process, ProcessFaults, Recorder,
    StoreClient, Stream, TrueClock, Workload, stream_rng,
};
use fencer_nemesis::Fault;
use tokio::sync::oneshot;

use crate::RunError;
use crate::drive::spawn_workers;
use crate::plan::Plan;

/// Runs `plan` to completion and returns what was recorded.
pub fn simulate(plan: &Plan) -> Result<History, RunError> {
    plan.check()?;
    let plan = Arc::new(plan.clone());
    simulation_runtime().block_on(run(plan))
}

async fn run(plan: Arc<Plan>) -> Result<History, RunError> {
    let settings = &plan.settings;
    let truth = TrueClock::start();
    let recorder = Arc::new(Recorder::new(truth));
    let network = Arc::new(Network::new(
        settings.latency,
        stream_rng(settings.seed, Stream::Latency, 0),
        std::time::Duration::from_nanos(settings.call_timeout_ns),
    ));
    let lock_clock = LocalClock::new(truth, NodeClock::with_offset(0));
    let sim_lock = Arc::new(SimLeaseService::new(
        lock_clock.clone(),
        Arc::clone(&recorder),
        settings.lock.rules(),
    ));
    let lock_service = settings.lock.serve(Arc::clone(&sim_lock));
    let store: Arc<dyn FencedStore> = Arc::new(
        SqliteStore::in_memory(settings.store.rules(), Some(Arc::clone(&recorder)))
            .map_err(|error| RunError::Internal(error.to_string()))?,
    );

    let (workers, mut targets) = spawn_workers(
        &plan,
        &settings.register_config(),
        &lock_service,
        &store,
        &recorder,
        &network,
        truth,
    );
    targets.clocks.insert("lock".into(), lock_clock);
    targets.servers.insert("lock".into(), sim_lock);
    fencer_nemesis::validate(&plan.faults, &targets)?;
    let (stop_nemesis, stopped) = oneshot::channel();
    let nemesis = tokio::spawn(fencer_nemesis::inject(
        plan.faults.clone(),
        targets,
        Arc::clone(&recorder),
        stopped,
    ));
    for (index, worker) in workers.into_iter().enumerate() {
        worker
            .await
            .map_err(|error| RunError::Internal(format!("worker w{index} failed: {error}")))?;
    }
    // The nemesis may already be done with its schedule; then nobody listens and that is fine.
    let _ = stop_nemesis.send(());
    nemesis
        .await
        .map_err(|error| RunError::Internal(format!("nemesis failed: {error}")))??;
    settle(&plan).await;
    if settings.workload == Workload::LockCounter {
        final_read(&plan, truth, &recorder, &network, &store).await;
    }
    Ok(recorder.take_history())
}

/// Waits until every request still held in flight by a delay fault has landed, so the
/// store's log is complete before the run ends (simulated time: this costs nothing).
async fn settle(plan: &Plan) {
    let settings = &plan.settings;
    let longest_delay_ns = plan
        .faults
        .iter()
        .map(Fault::holds_requests_ns)
        .max()
        .unwrap_or(0);
    let settle_ns = longest_delay_ns + 2 * settings.latency.max_ns + settings.call_timeout_ns;
    tokio::time::sleep(std::time::Duration::from_nanos(settle_ns)).await;
}

/// The lock-counter's ground truth for lost and duplicated increments: once every worker is
/// done and every write has landed, a process named `final` reads the counter.
async fn final_read(
    plan: &Plan,
    truth: TrueClock,
    recorder: &Arc<Recorder>,
    network: &Arc<Network>,
    store: &Arc<dyn FencedStore>,
) {
    let settings = &plan.settings;
    let process = Process::new(
        "final",
        LocalClock::new(truth, NodeClock::with_offset(0)),
        Arc::new(ProcessFaults::default()),
        Arc::clone(recorder),
        Arc::clone(network),
    );
    let client = StoreClient::new(process, Arc::clone(store));
    // Recorded whatever its outcome; a failed final read leaves the checker without a total.
    let _ = client.read(settings.register_config().key.as_str()).await;
}

#[cfg(test)]
mod tests {
    use fencer_backends::registry::LockBackend;

    use crate::{Plan, Settings, simulate};

    #[test]
    fn the_nondeterministic_lock_really_is_and_the_reference_is_not() {
        let settings = Settings {
            ops_per_worker: 3,
            lock: LockBackend::TestNondeterministic,
            ..Settings::default()
        };
        let plan = Plan::generate(&settings);
        assert_ne!(
            simulate(&plan).unwrap().to_jsonl(),
            simulate(&plan).unwrap().to_jsonl()
        );
        let reference = Plan::generate(&Settings {
            lock: LockBackend::Sim,
            ..settings
        });
        assert_eq!(
            simulate(&reference).unwrap().to_jsonl(),
            simulate(&reference).unwrap().to_jsonl()
        );
    }
}
