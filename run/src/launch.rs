//! Running a plan against the backends it names, in the tier they call for.
//!
//! The plan's lock and store names resolve through [`Backends`]; when both keep simulated time
//! the run is the simulation tier (one paused current-thread runtime: the history is a pure
//! function of the plan), otherwise the real tier (real time and I/O, a deadline on the run,
//! the backends probed first). Either way the same workers and nemesis run, and a fault aimed
//! at a backend that cannot take it (a lock service with no clock of fencer's to skew, a store
//! behind a plain URL) is left out of the run and named in the plan it ran
//! ([`Plan::left_out`]), never dropped silently.

use std::sync::Arc;
use std::time::Duration;

use fencer_harness::runtime::{real_runtime, simulation_runtime};
use fencer_harness::{
    AppliedWrite, Event, EventType, FencedStore, LocalClock, LockService, Network, NodeClock, Op,
    PackedHistory, Process, ProcessFaults, Recorder, StoreClient, Stream, TrueClock, Workload,
    stream_rng,
};
use fencer_nemesis::Fault;
use tokio::sync::oneshot;

use crate::RunError;
use crate::backends::{Backends, Built, Note, RunContext, Time};
use crate::bounds::RunLimits;
use crate::clients::BuiltClient;
use crate::drive::{Run, RunNames, cancel, gate_restart, join_workers, spawn_workers};
use crate::plan::Plan;
use crate::reach::{Reach, Roles, check_by, client_takes, fit_by};

/// How long a store or lock service may take to hand over its log at the end of a run.
const LOG_TIMEOUT: Duration = Duration::from_secs(10);

/// A run's lock service and store, built.
type BuiltPair = (Built<dyn LockService>, Built<dyn FencedStore>);

/// What to run a plan against.
#[derive(Clone)]
pub struct Launch<'a> {
    /// Where the plan's names resolve.
    pub backends: &'a Backends,
    /// Where notes for the person running fencer go (servers started and stopped).
    pub note: Note,
    /// The lock and key names of the run; by default the simulation's fixed ones, and in real
    /// time names of its own, so runs sharing a server never meet.
    pub names: Option<RunNames>,
    /// Refuse a plan holding a fault its backends cannot take, instead of leaving the fault out
    /// and naming it: for plans written by hand or saved from another run, whose every fault
    /// was meant.
    pub refuse_unreachable: bool,
    /// What the run may take (events recorded, simulated time) before it is stopped with
    /// [`RunError::Limit`].
    pub limits: RunLimits,
}

/// What a run did.
#[derive(Debug)]
pub struct Launched {
    /// The plan as it ran: the given one without the faults its backends could not take, which
    /// it names in [`Plan::left_out`].
    pub plan: Plan,
    /// What was recorded, in the checking form the recorder keeps (unpack an event, or all
    /// of them, only to explain or show it).
    pub history: PackedHistory,
    /// When each worker began each of its cycles, in true nanoseconds since the start of the
    /// run (by worker number, then cycle number): kept beside the history, for cutting the
    /// plan around an anomaly's evidence.
    pub cycle_starts_ns: Vec<Vec<u64>>,
    /// The tier it ran in.
    pub time: Time,
}

/// What a real-time run had recorded when it was interrupted ([`RunError::Interrupted`]): the
/// events up to the stop, with the calls then open left unanswered, and neither the servers'
/// logs nor the nemesis's heals, which a stopped run does not wait for.
#[derive(Debug)]
pub struct Unfinished {
    /// The plan as it ran (see [`Launched::plan`]).
    pub plan: Plan,
    /// What was recorded until the stop.
    pub history: PackedHistory,
    /// When each worker began each cycle it reached ([`Launched::cycle_starts_ns`]).
    pub cycle_starts_ns: Vec<Vec<u64>>,
    /// When the run was stopped, in true nanoseconds since its start.
    pub stopped_at_ns: u64,
}

impl<'a> Launch<'a> {
    /// A launch over `backends`, resolving the plan's own names, notes discarded.
    pub fn new(backends: &'a Backends) -> Launch<'a> {
        Launch {
            backends,
            note: Arc::new(|_| {}),
            names: None,
            refuse_unreachable: false,
            limits: RunLimits::default(),
        }
    }

    /// `plan` as the built backends can run it: its faults they cannot take left out and
    /// named, or the plan refused ([`Launch::refuse_unreachable`]).
    fn fit(
        &self,
        plan: &Plan,
        lock: &Built<dyn LockService>,
        store: &Built<dyn FencedStore>,
    ) -> Result<Plan, RunError> {
        let roles = Roles {
            lock: (&plan.settings.lock, Reach::of(lock)),
            store: (&plan.settings.store, Reach::of(store)),
        };
        let client = &plan.settings.client;
        if self.refuse_unreachable {
            roles.check(plan)?;
            check_by(plan, |fault| client_takes(client, fault))?;
            return Ok(plan.clone());
        }
        Ok(fit_by(&roles.fit(plan), |fault| {
            client_takes(client, fault)
        }))
    }

    /// Refuses a fault fencer's own backends cannot take before any of them is built (no
    /// server started, no connection made); a registered backend's faults are judged once it
    /// is built ([`Launch::fit`]).
    fn refuse_by_name(&self, plan: &Plan) -> Result<(), RunError> {
        let unknown_yet = Reach {
            clock: true,
            restart: true,
            server: true,
        };
        let reach = |name| self.backends.reach_by_name(name).unwrap_or(unknown_yet);
        let roles = Roles {
            lock: (&plan.settings.lock, reach(&plan.settings.lock)),
            store: (&plan.settings.store, reach(&plan.settings.store)),
        };
        roles.check(plan)?;
        Ok(check_by(plan, |fault| {
            client_takes(&plan.settings.client, fault)
        })?)
    }

    /// The tier a plan with these backends and client runs in: simulated only when all three
    /// are.
    pub fn time(&self, plan: &Plan) -> Result<Time, RunError> {
        let lock = self.backends.lock_time(&plan.settings.lock)?;
        let store = self.backends.store_time(&plan.settings.store)?;
        let client = self.backends.clients().time(&plan.settings.client)?;
        Ok(
            if [lock, store, client]
                .iter()
                .all(|time| *time == Time::Simulated)
            {
                Time::Simulated
            } else {
                Time::Real
            },
        )
    }

    /// Runs `plan` to completion on a runtime of its own, of the kind its tier needs.
    pub fn run(&self, plan: &Plan) -> Result<Launched, RunError> {
        match self.time(plan)? {
            Time::Simulated => simulation_runtime().block_on(self.drive(plan)),
            Time::Real => real_runtime()
                .map_err(|error| {
                    RunError::Internal(format!("cannot start a tokio runtime: {error}"))
                })?
                .block_on(self.drive(plan)),
        }
    }

    /// Runs `plan` to completion on the current runtime, which must suit its tier: a paused
    /// current-thread one for the simulation tier ([`simulation_runtime`]), a real one
    /// otherwise. For backends that keep connections on the runtime that opened them, so
    /// several runs share one.
    pub async fn drive(&self, plan: &Plan) -> Result<Launched, RunError> {
        plan.check()?;
        if self.refuse_unreachable {
            self.refuse_by_name(plan)?;
        }
        match self.time(plan)? {
            Time::Simulated => self.simulated(plan).await,
            Time::Real => self.real(plan).await,
        }
    }

    /// Builds both backends for one run, lock first, then the client.
    fn build(
        &self,
        plan: &Plan,
        truth: TrueClock,
        recorder: &Arc<Recorder>,
    ) -> Result<(BuiltPair, BuiltClient), RunError> {
        let cx = RunContext {
            truth,
            recorder,
            note: &self.note,
            workers: plan.workers.len(),
            lock_url: None,
        };
        let mut lock = self.backends.build_lock(&plan.settings.lock, &cx)?;
        let store = self.backends.build_store(&plan.settings.store, &cx)?;
        let client = self.backends.clients().build(
            &plan.settings.client,
            &RunContext {
                lock_url: lock.url.as_deref(),
                ..cx
            },
        )?;
        if lock.restart.is_none() && lock.server.is_none() && lock.cluster.is_none() {
            let (adapter, restart) = gate_restart(Arc::clone(&lock.adapter), truth);
            lock.adapter = adapter;
            lock.restart = restart;
        }
        Ok(((lock, store), client))
    }

    async fn simulated(&self, plan: &Plan) -> Result<Launched, RunError> {
        let truth = TrueClock::start();
        let recorder = Arc::new(Recorder::with_limit(truth, self.limits.events));
        let network = network(plan);
        let ((lock, store), client) = self.build(plan, truth, &recorder)?;
        let plan = Arc::new(self.fit(plan, &lock, &store)?);
        let config = match &self.names {
            Some(names) => names.config(&plan.settings),
            None => plan.settings.register_config(),
        };
        let (workers, mut targets) = spawn_workers(
            &plan,
            &config,
            &lock.adapter,
            &store.adapter,
            &client.library,
            &recorder,
            &network,
            truth,
        )?;
        add_targets(&mut targets, "lock", &lock);
        add_targets(&mut targets, "store", &store);
        fencer_nemesis::validate(&plan.faults, &targets)?;
        let (stop_nemesis, stopped) = oneshot::channel();
        let nemesis = fencer_harness::task::spawn(fencer_nemesis::inject(
            plan.faults.clone(),
            targets,
            Arc::clone(&recorder),
            stopped,
        ));
        // Simulated time needs no budget: a call that never answers times out by itself, and
        // time only moves when every task waits. It has its ceilings, though: a run that
        // would take longer, or record more, than a run may is stopped. A plan may stop it
        // sooner, which is no error.
        let (stop_ns, stopped_by_plan) = self.limits.stop_ns(&plan);
        let unfinished = join_workers(workers, truth.instant_at(stop_ns), &recorder).await?;
        let out_of_time = !stopped_by_plan && !unfinished.is_empty();
        cancel(unfinished).await;
        // The nemesis may already be done with its schedule; then nobody listens.
        let _ = stop_nemesis.send(());
        nemesis
            .await
            .map_err(|error| RunError::Internal(format!("nemesis failed: {error}")))??;
        self.limits.check(&recorder, out_of_time)?;
        settle(&plan).await;
        if plan.settings.workload == Workload::LockCounter {
            final_read(&config.key, truth, &recorder, &network, &store.adapter).await;
        }
        append_logs(&recorder, &lock, &store, &config.lock, &config.key).await;
        self.limits.check(&recorder, false)?;
        Ok(Launched {
            plan: Arc::unwrap_or_clone(plan),
            history: recorder.take_packed(),
            cycle_starts_ns: recorder.take_cycle_starts(),
            time: Time::Simulated,
        })
    }

    async fn real(&self, plan: &Plan) -> Result<Launched, RunError> {
        let truth = TrueClock::start();
        let recorder = Arc::new(Recorder::with_limit(truth, self.limits.events));
        let ((lock, store), client) = self.build(plan, truth, &recorder)?;
        for probe in [&lock.probe, &store.probe, &client.probe]
            .into_iter()
            .flatten()
        {
            probe.ping().await?;
        }
        let plan = Arc::new(self.fit(plan, &lock, &store)?);
        let names = self
            .names
            .clone()
            .unwrap_or_else(|| RunNames::tagged(&crate::real::unique_tag(plan.settings.seed)));
        let config = names.config(&plan.settings);
        let run = Run {
            plan: &plan,
            config: &config,
            recorder: &recorder,
            truth,
            limits: self.limits,
        };
        let ran = run
            .to_deadline(&lock.adapter, &store.adapter, &client.library, |targets| {
                add_targets(targets, "lock", &lock);
                add_targets(targets, "store", &store);
                for (worker, target) in &client.targets {
                    targets
                        .real_servers
                        .insert(worker.clone(), Arc::clone(target));
                }
            })
            .await;
        if let Err(RunError::Interrupted(None)) = ran {
            return Err(RunError::Interrupted(Some(Box::new(Unfinished {
                plan: Arc::unwrap_or_clone(plan),
                stopped_at_ns: truth.now_ns(),
                history: recorder.take_packed(),
                cycle_starts_ns: recorder.take_cycle_starts(),
            }))));
        }
        ran?;
        append_logs(&recorder, &lock, &store, &config.lock, &config.key).await;
        self.limits.check(&recorder, false)?;
        let history = recorder.take_packed();
        // Servers fencer started stop here, once their logs are in, and the client's children.
        drop((lock, store, client));
        Ok(Launched {
            plan: Arc::unwrap_or_clone(plan),
            history,
            cycle_starts_ns: recorder.take_cycle_starts(),
            time: Time::Real,
        })
    }
}

fn network(plan: &Plan) -> Arc<Network> {
    let settings = &plan.settings;
    Arc::new(Network::new(
        settings.latency,
        stream_rng(settings.seed, Stream::Latency, 0),
        Duration::from_nanos(settings.call_timeout_ns),
    ))
}

/// Makes what a built backend lets fencer reach a target of the plan's faults, by role.
fn add_targets<T: ?Sized>(targets: &mut fencer_nemesis::Targets, role: &str, built: &Built<T>) {
    if let Some(clock) = &built.clock {
        targets.clocks.insert(role.to_string(), clock.clone());
    }
    if let Some(restart) = &built.restart {
        targets
            .servers
            .insert(role.to_string(), Arc::clone(restart));
    }
    if let Some(server) = &built.server {
        targets
            .real_servers
            .insert(role.to_string(), Arc::clone(server));
    }
    // A cluster's members, one real server each, as `lock.n1`, ….
    for (member, server) in &built.members {
        targets
            .real_servers
            .insert(format!("{role}.{member}"), Arc::clone(server));
    }
    if let Some(cluster) = &built.cluster {
        targets
            .clusters
            .insert(role.to_string(), Arc::clone(cluster));
    }
}

/// Waits until every request still held in flight by a delay fault has landed, so the
/// backends' logs are complete before the run ends (simulated time: this costs nothing).
async fn settle(plan: &Plan) {
    let settings = &plan.settings;
    let longest_delay_ns = plan
        .faults
        .iter()
        .map(Fault::holds_requests_ns)
        .max()
        .unwrap_or(0);
    let settle_ns = longest_delay_ns
        .saturating_add(settings.latency.max_ns.saturating_mul(2))
        .saturating_add(settings.call_timeout_ns);
    fencer_harness::time::sleep(Duration::from_nanos(settle_ns)).await;
}

/// The lock-counter's ground truth for lost and duplicated increments: once every worker is
/// done and every write has landed, a process named `final` reads the counter.
async fn final_read(
    key: &str,
    truth: TrueClock,
    recorder: &Arc<Recorder>,
    network: &Arc<Network>,
    store: &Arc<dyn FencedStore>,
) {
    let process = Process::new(
        "final",
        LocalClock::new(truth, NodeClock::with_offset(0)),
        Arc::new(ProcessFaults::default()),
        Arc::clone(recorder),
        Arc::clone(network),
    );
    let client = StoreClient::new(process, Arc::clone(store));
    // Recorded whatever its outcome; a failed final read leaves the checker without a total.
    let _ = client.read(key).await;
}

/// Appends the logs the backends offer and did not record as they went.
async fn append_logs(
    recorder: &Recorder,
    lock: &Built<dyn LockService>,
    store: &Built<dyn FencedStore>,
    lock_name: &str,
    key: &str,
) {
    if !store.records_log {
        append_applied_log(recorder, store.adapter.as_ref(), key).await;
    }
    if !lock.records_log {
        append_lock_log(recorder, lock.adapter.as_ref(), lock_name).await;
    }
}

/// Appends what the store says it applied to `key`, in its order, as `store` `log` events.
/// Their `time_ns` is the end of the run (the recorder keeps time monotonic); `seq` carries
/// the store's order.
pub(crate) async fn append_applied_log(recorder: &Recorder, store: &dyn FencedStore, key: &str) {
    let mut log = match fencer_harness::time::timeout(
        LOG_TIMEOUT,
        fencer_harness::time::adapter_code(store.applied_log()),
    )
    .await
    {
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

/// Appends what the lock service says it changed on `lock`, in its order, as `lock` `log`
/// events: the same events fencer's simulated lease service records as it goes, with the
/// service's own clock readings, and its expiries read by its own rule
/// ([`LockService::lock_log_expiry`]).
pub(crate) async fn append_lock_log(recorder: &Recorder, service: &dyn LockService, lock: &str) {
    let mut log = match fencer_harness::time::timeout(
        LOG_TIMEOUT,
        fencer_harness::time::adapter_code(service.lock_log()),
    )
    .await
    {
        Ok(Some(log)) => log,
        Ok(None) => return,
        Err(_elapsed) => {
            tracing::warn!("the lock service did not hand over its lock log in time");
            return;
        }
    };
    log.sort_by_key(|entry| entry.seq);
    // Every expiry is recorded as the first reading at which the lease is over, by the
    // service's own rule.
    let rule = service.lock_log_expiry();
    for entry in log.into_iter().filter(|entry| entry.lock == lock) {
        recorder.record(rule.applied_to(entry).into_event());
    }
}
