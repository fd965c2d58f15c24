//! Drives a plan against any lock service and store: the workers, their renewal tasks and the
//! nemesis, on whatever runtime the caller runs it in.
//!
//! The simulation tier calls it inside a paused runtime; the real tier inside a runtime with
//! real time and I/O. Nothing here knows which: the only differences are how time passes and
//! what the adapters talk to. Every run is bounded: the workers get a deadline derived from the
//! plan, and whatever is still running then is cancelled and recorded as `info`.

use std::sync::Arc;
use std::time::Duration;

use fencer_harness::{
    AppliedWrite, Event, EventType, FencedStore, Freezable, History, LeaseBoard, LocalClock,
    LockClient, LockService, Network, NodeClock, Op, Process, ProcessFaults, Recorder, RestartGate,
    StoreClient, Stream, TrueClock, stream_rng,
};
use fencer_nemesis::{ServerFaults, Targets};
use fencer_workloads::{RegisterConfig, Worker};
use tokio::sync::oneshot;

use crate::RunError;
use crate::plan::Plan;

/// The lock and key a run uses. A real server outlives runs, so each run gets its own names
/// and never sees another run's lease or fence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunNames {
    /// Lock all workers contend for.
    pub lock: String,
    /// Store key the lock protects.
    pub key: String,
}

impl RunNames {
    /// `fencer/<tag>/lock` and `fencer/<tag>/register`.
    pub fn tagged(tag: &str) -> RunNames {
        RunNames {
            lock: format!("fencer/{tag}/lock"),
            key: format!("fencer/{tag}/register"),
        }
    }
}

/// How long a store may take to hand over its applied log at the end of a run.
const APPLIED_LOG_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs `plan` against `lock` and `store` on the current runtime and returns the history, with
/// the store's applied log (for `names.key`) appended as `store` `log` events.
///
/// Faults may target workers, and the lock service's restart when it offers one
/// ([`LockService::offers_restart`]: fencer refuses calls while it is down and calls its hook);
/// a server's clock is not reachable at the adapter boundary. [`drive_with_servers`] also
/// reaches servers fencer started itself.
pub async fn drive(
    plan: Arc<Plan>,
    lock: Arc<dyn LockService>,
    store: Arc<dyn FencedStore>,
    names: RunNames,
) -> Result<History, RunError> {
    drive_with_servers(plan, lock, store, names, ServerTargets::new()).await
}

/// Real servers a run may fault, by role (`lock`, `store`).
pub type ServerTargets = std::collections::BTreeMap<String, Arc<dyn ServerFaults>>;

/// As [`drive`], with `servers` (fencer's own, by role) as targets of the plan's server faults:
/// pauses, restarts, clock jumps and proxy faults, executed by the nemesis at their times and
/// recorded in the history like every other fault.
pub async fn drive_with_servers(
    plan: Arc<Plan>,
    lock: Arc<dyn LockService>,
    store: Arc<dyn FencedStore>,
    names: RunNames,
    servers: ServerTargets,
) -> Result<History, RunError> {
    let settings = &plan.settings;
    let truth = TrueClock::start();
    let recorder = Arc::new(Recorder::new(truth));
    let network = Arc::new(Network::new(
        settings.latency,
        stream_rng(settings.seed, Stream::Latency, 0),
        Duration::from_nanos(settings.call_timeout_ns),
    ));
    let config = RegisterConfig {
        lock: names.lock.clone(),
        key: names.key.clone(),
        ..settings.register_config()
    };
    // A lock server fencer started is restarted as a process; otherwise the service's own
    // restart hook, if it offers one, behind a gate that keeps it down meanwhile.
    let restart_gate = (lock.offers_restart() && !servers.contains_key("lock"))
        .then(|| Arc::new(RestartGate::new(Arc::clone(&lock), truth)));
    let lock = match &restart_gate {
        Some(gate) => Arc::clone(gate) as Arc<dyn LockService>,
        None => lock,
    };
    let (workers, mut targets) =
        spawn_workers(&plan, &config, &lock, &store, &recorder, &network, truth);
    targets.real_servers = servers;
    if let Some(gate) = restart_gate {
        targets.servers.insert("lock".into(), gate);
    }
    fencer_nemesis::validate(&plan.faults, &targets).map_err(RunError::Plan)?;
    let (stop_nemesis, stopped) = oneshot::channel();
    let nemesis = tokio::spawn(fencer_nemesis::inject(
        plan.faults.clone(),
        targets,
        Arc::clone(&recorder),
        stopped,
    ));
    let deadline = tokio::time::Instant::now() + run_budget(&plan);
    let mut unfinished = Vec::new();
    for (index, mut worker) in workers.into_iter().enumerate() {
        match tokio::time::timeout_at(deadline, &mut worker).await {
            Ok(joined) => joined
                .map_err(|error| RunError::Internal(format!("worker w{index} failed: {error}")))?,
            Err(_elapsed) => unfinished.push(worker),
        }
    }
    // Past the deadline: cancel whatever still runs. Dropping a call records it as `info`.
    for worker in unfinished {
        worker.abort();
        let _ = worker.await;
    }
    // Stopping the nemesis resumes a paused server and starts a killed one again, so the
    // store can hand over its log.
    let _ = stop_nemesis.send(());
    nemesis
        .await
        .map_err(|error| RunError::Internal(format!("nemesis failed: {error}")))?
        .map_err(RunError::Internal)?;
    append_applied_log(&recorder, store.as_ref(), &names.key).await;
    Ok(recorder.take_history())
}

/// Spawns one task per worker of `plan` (each frozen with its own [`ProcessFaults`], calling
/// `lock` and `store` through recorded clients on its own clock) and returns the tasks with the
/// workers' fault switches and clocks as nemesis targets. The workers share one lease board,
/// so a lease-edge fault on one of them can hold its rivals' acquires. Shared by the simulation and the real
/// tier, so both run exactly the same workers.
pub(crate) fn spawn_workers(
    plan: &Arc<Plan>,
    config: &RegisterConfig,
    lock: &Arc<dyn LockService>,
    store: &Arc<dyn FencedStore>,
    recorder: &Arc<Recorder>,
    network: &Arc<Network>,
    truth: TrueClock,
) -> (Vec<tokio::task::JoinHandle<()>>, Targets) {
    let mut targets = Targets::default();
    let mut workers = Vec::with_capacity(plan.workers.len());
    let board = LeaseBoard::new(plan.workers.len());
    for index in 0..plan.workers.len() {
        let name = format!("w{index}");
        let faults = Arc::new(ProcessFaults::on_board(&board, index));
        let clock = LocalClock::new(truth, NodeClock::with_offset(0));
        targets.processes.insert(name.clone(), Arc::clone(&faults));
        targets.clocks.insert(name.clone(), clock.clone());
        let process = Process::new(
            name,
            clock,
            Arc::clone(&faults),
            Arc::clone(recorder),
            Arc::clone(network),
        );
        let worker = Worker {
            index,
            lock: LockClient::new(process.clone(), Arc::clone(lock)),
            renew_lock: LockClient::new(process.sibling("renew"), Arc::clone(lock)),
            store: StoreClient::new(process, Arc::clone(store)),
        };
        let task_plan = Arc::clone(plan);
        let config = config.clone();
        workers.push(tokio::spawn(Freezable::new(
            async move {
                worker
                    .run(&task_plan.workers[index], &config, task_plan.settings.seed)
                    .await;
            },
            faults,
            truth,
        )));
    }
    (workers, targets)
}

/// The longest a run may take: every cycle back to back with its longest acquire wait, plus
/// every pause, plus slack. Generous on purpose: it exists so a hung backend cannot hang the run.
fn run_budget(plan: &Plan) -> Duration {
    let settings = &plan.settings;
    let cycles: u64 = plan.workers.iter().map(|w| w.cycles.len() as u64).sum();
    let per_cycle_ns = plan
        .workers
        .iter()
        .flat_map(|w| &w.cycles)
        .map(|c| c.delay_ns + c.think_ns + c.prepare_ns + c.hold_ns)
        .max()
        .unwrap_or(0)
        .saturating_add(settings.ttl_ns.saturating_mul(3))
        .saturating_add(settings.call_timeout_ns.saturating_mul(4));
    let paused_ns: u64 = plan
        .faults
        .iter()
        .map(|fault| fault.stalls_workers_ns(settings.ttl_ns))
        .fold(0, u64::saturating_add);
    Duration::from_nanos(
        cycles
            .saturating_mul(per_cycle_ns)
            .saturating_add(paused_ns)
            .saturating_add(10_000_000_000),
    )
}

/// Appends what the store says it applied to `key`, in its order, as `store` `log` events.
/// Their `time_ns` is the end of the run (the recorder keeps time monotonic); `seq` carries
/// the store's order.
async fn append_applied_log(recorder: &Recorder, store: &dyn FencedStore, key: &str) {
    let mut log = match tokio::time::timeout(APPLIED_LOG_TIMEOUT, store.applied_log()).await {
        Ok(Some(log)) => log,
        Ok(None) => return,
        Err(_elapsed) => {
            tracing::warn!("the store did not hand over its applied log in time");
            return;
        }
    };
    log.sort_by_key(|write| write.seq);
    let mut seq = 0;
    for AppliedWrite {
        key: written_key,
        fencing_token,
        write_id,
        ..
    } in log.into_iter().filter(|write| write.key == key)
    {
        seq += 1;
        recorder.record(Event {
            key: Some(written_key),
            token: Some(fencing_token),
            write_id: Some(write_id),
            seq: Some(seq),
            ..Event::new("store", EventType::Log, Op::Write)
        });
    }
}
