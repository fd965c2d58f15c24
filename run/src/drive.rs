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
    FencedStore, Freezable, History, LeaseBoard, LibraryContext, LibrarySettings, LocalClock,
    LockClient, LockService, Network, NodeClock, Process, ProcessFaults, Recorder, RestartGate,
    Restartable, StoreClient, Stream, TrueClock, roles, stream_rng,
};
use fencer_nemesis::{ServerFaults, Targets};
use fencer_workloads::{RegisterConfig, Worker};
use tokio::sync::oneshot;

use crate::RunError;
use crate::bounds::RunLimits;
use crate::clients::{Clients, LibraryBuilder};
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
    /// The workload's view of `settings`, on these names.
    pub fn config(&self, settings: &crate::Settings) -> RegisterConfig {
        RegisterConfig {
            lock: self.lock.clone(),
            key: self.key.clone(),
            ..settings.register_config()
        }
    }

    /// `fencer/<tag>/lock` and `fencer/<tag>/register`.
    pub fn tagged(tag: &str) -> RunNames {
        RunNames {
            lock: format!("fencer/{tag}/lock"),
            key: format!("fencer/{tag}/register"),
        }
    }
}

/// Runs `plan` against `lock` and `store` on the current runtime and returns the history, with
/// the store's applied log (for `names.key`) appended as `store` `log` events and the lock
/// service's log (for `names.lock`) as `lock` `log` events, when they offer them.
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
    let truth = TrueClock::start();
    let limits = RunLimits::default();
    let recorder = Arc::new(Recorder::with_limit(truth, limits.events));
    let config = names.config(&plan.settings);
    let run = Run {
        plan: &plan,
        config: &config,
        recorder: &recorder,
        truth,
        limits,
    };
    // A lock server fencer started is restarted as a process; otherwise the service's own
    // restart hook, if it offers one, behind a gate that keeps it down meanwhile.
    let (lock, restart) = if servers.contains_key("lock") {
        (lock, None)
    } else {
        gate_restart(lock, truth)
    };
    let library = Clients::builtin(&plan.settings.client).ok_or_else(|| {
        RunError::Backend(fencer_backends::BackendError::BadUrl(format!(
            "client `{}`: drive runs fencer's own clients; run others through Launch",
            plan.settings.client
        )))
    })?;
    run.to_deadline(&lock, &store, &library, |targets| {
        targets.real_servers = servers;
        if let Some(restart) = restart {
            targets.servers.insert("lock".into(), restart);
        }
    })
    .await?;
    crate::launch::append_applied_log(&recorder, store.as_ref(), &names.key).await;
    crate::launch::append_lock_log(&recorder, lock.as_ref(), &names.lock).await;
    limits.check(&recorder, false)?;
    Ok(recorder.take_history())
}

/// `lock` as the workers and the nemesis see it: behind a [`RestartGate`] when it offers a
/// restart of its own ([`LockService::offers_restart`]), so the nemesis can restart it and
/// calls meanwhile are refused, with the gate as the restart's target.
pub(crate) fn gate_restart(
    lock: Arc<dyn LockService>,
    truth: TrueClock,
) -> (Arc<dyn LockService>, Option<Arc<dyn Restartable>>) {
    if !lock.offers_restart() {
        return (lock, None);
    }
    let gate = Arc::new(RestartGate::new(lock, truth));
    (Arc::clone(&gate) as Arc<dyn LockService>, Some(gate))
}

/// One run's plan, workload view and recording, for the drivers of both tiers.
pub(crate) struct Run<'a> {
    pub(crate) plan: &'a Arc<Plan>,
    pub(crate) config: &'a RegisterConfig,
    pub(crate) recorder: &'a Arc<Recorder>,
    pub(crate) truth: TrueClock,
    /// What the run may take before it is stopped; the recorder holds `limits.events`.
    pub(crate) limits: RunLimits,
}

impl Run<'_> {
    /// The simulated network between workers and backends, drawn from the plan's seed.
    pub(crate) fn network(&self) -> Arc<Network> {
        let settings = &self.plan.settings;
        Arc::new(Network::new(
            settings.latency,
            stream_rng(settings.seed, Stream::Latency, 0),
            Duration::from_nanos(settings.call_timeout_ns),
        ))
    }

    /// Runs the workers and the nemesis until every worker is done or the run's time budget
    /// is spent (then whatever still runs is cancelled and recorded as `info`), and stops the
    /// nemesis, healing what it still holds. `reach` adds what the backends let the nemesis
    /// reach (clocks, restarts, servers) to the workers' own targets. Fails when the run
    /// reaches its limits: its budget is more than the time a run may take and the workers
    /// are still running then, or the recorder is full.
    pub(crate) async fn to_deadline(
        &self,
        lock: &Arc<dyn LockService>,
        store: &Arc<dyn FencedStore>,
        library: &LibraryBuilder,
        reach: impl FnOnce(&mut Targets),
    ) -> Result<(), RunError> {
        let network = self.network();
        let (workers, mut targets) = spawn_workers(
            self.plan,
            self.config,
            lock,
            store,
            library,
            self.recorder,
            &network,
            self.truth,
        )?;
        reach(&mut targets);
        fencer_nemesis::validate(&self.plan.faults, &targets)?;
        // The plan's times count from here, where the workers start: starting servers and
        // clusters (a JVM takes seconds) must not squeeze the schedule's first faults together.
        let started_ns = self.truth.now_ns();
        let faults = self
            .plan
            .faults
            .iter()
            .map(|fault| fault.clone().delayed_by(started_ns))
            .collect();
        let (stop_nemesis, stopped) = oneshot::channel();
        let nemesis = fencer_harness::task::spawn(fencer_nemesis::inject(
            faults,
            targets,
            Arc::clone(self.recorder),
            stopped,
        ));
        // A plan's own stop is no error; the budget, when it is more than a run may take, is.
        let budget_ns = u64::try_from(run_budget(self.plan).as_nanos()).unwrap_or(u64::MAX);
        let (stop_ns, stopped_by_plan) = self.limits.stop_ns(self.plan);
        let limited = !stopped_by_plan && budget_ns > stop_ns;
        let deadline = fencer_harness::time::now() + Duration::from_nanos(budget_ns.min(stop_ns));
        let listening = crate::interrupt::Listening::start();
        let unfinished = tokio::select! {
            biased;
            () = listening.requested() => return Err(RunError::Interrupted(None)),
            joined = join_workers(workers, deadline, self.recorder) => joined?,
        };
        let out_of_time = limited && !unfinished.is_empty();
        // Past the deadline: cancel whatever still runs. Dropping a call records it as `info`.
        cancel(unfinished).await;
        // Stopping the nemesis resumes a paused server and starts a killed one again, so the
        // backends can hand over their logs.
        let _ = stop_nemesis.send(());
        nemesis
            .await
            .map_err(|error| RunError::Internal(format!("nemesis failed: {error}")))??;
        self.limits.check(self.recorder, out_of_time)
    }
}

/// Waits for every worker until `deadline`, or until `recorder` is full; returns the workers
/// still running then.
pub(crate) async fn join_workers(
    workers: Vec<fencer_harness::task::JoinHandle<()>>,
    deadline: tokio::time::Instant,
    recorder: &Recorder,
) -> Result<Vec<fencer_harness::task::JoinHandle<()>>, RunError> {
    let mut unfinished = Vec::new();
    for (index, mut worker) in workers.into_iter().enumerate() {
        if recorder.is_full() {
            unfinished.push(worker);
            continue;
        }
        tokio::select! {
            biased;
            () = recorder.filled() => unfinished.push(worker),
            joined = fencer_harness::time::timeout_at(deadline, &mut worker) => match joined {
                Ok(joined) => joined.map_err(|error| {
                    RunError::Internal(format!("worker w{index} failed: {error}"))
                })?,
                Err(_elapsed) => unfinished.push(worker),
            },
        }
    }
    Ok(unfinished)
}

/// Cancels `workers` and waits until each is gone (a call dropped midway records `info`).
pub(crate) async fn cancel(workers: Vec<fencer_harness::task::JoinHandle<()>>) {
    for worker in workers {
        worker.abort();
        let _ = worker.await;
    }
}

/// Spawns one task per worker of `plan` (each frozen with its own [`ProcessFaults`], calling
/// `lock` through the library `library` builds for it and `store` through a recorded client,
/// on its own clock) and returns the tasks with the workers' fault switches and clocks as
/// nemesis targets. The workers share one lease board, so a lease-edge fault on one of them
/// can hold its rivals' acquires. Shared by the simulation and the real tier, so both run
/// exactly the same workers.
#[allow(clippy::too_many_arguments)]
pub(crate) fn spawn_workers(
    plan: &Arc<Plan>,
    config: &RegisterConfig,
    lock: &Arc<dyn LockService>,
    store: &Arc<dyn FencedStore>,
    library: &LibraryBuilder,
    recorder: &Arc<Recorder>,
    network: &Arc<Network>,
    truth: TrueClock,
) -> Result<(Vec<fencer_harness::task::JoinHandle<()>>, Targets), RunError> {
    let mut targets = Targets::default();
    let mut workers = Vec::with_capacity(plan.workers.len());
    let board = LeaseBoard::new(plan.workers.len());
    let settings = LibrarySettings {
        lock: config.lock.as_str().into(),
        ttl: Duration::from_nanos(config.ttl_ns),
        renew_every: Duration::from_nanos(config.renew_every_ns),
        call_timeout: network.call_timeout(),
    };
    for index in 0..plan.workers.len() {
        let name = format!("w{index}");
        let faults = Arc::new(ProcessFaults::on_board(&board, index));
        let clock = LocalClock::new(truth, NodeClock::with_offset(0));
        targets.processes.insert(name.clone(), Arc::clone(&faults));
        targets.clocks.insert(name.clone(), clock.clone());
        let process = Process::new(
            name.as_str(),
            clock,
            Arc::clone(&faults),
            Arc::clone(recorder),
            Arc::clone(network),
        );
        let context = LibraryContext::new(
            process.clone(),
            Arc::clone(lock),
            settings.clone(),
            plan.settings.seed,
            index as u32,
        );
        let worker_lock = LockClient::new(process.clone(), Arc::clone(lock));
        let worker = Worker {
            index,
            check: worker_lock.for_task(&roles::check_task(&name)),
            lock: worker_lock,
            store: StoreClient::new(process, Arc::clone(store)),
            library: library(&context).map_err(RunError::Backend)?,
            context,
        };
        let task_plan = Arc::clone(plan);
        let config = config.clone();
        workers.push(fencer_harness::task::spawn(Freezable::new(
            async move {
                worker
                    .run(&task_plan.workers[index], &config, task_plan.settings.seed)
                    .await;
            },
            faults,
            truth,
        )));
    }
    Ok((workers, targets))
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
        .map(|c| {
            [c.think_ns, c.prepare_ns, c.hold_ns]
                .into_iter()
                .fold(c.delay_ns, u64::saturating_add)
        })
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
