//! What the workloads' unit tests share: a lock service and a store small enough to read at a
//! glance, a worker `w0` wired to them through the recorded client path, and short forms of
//! the recorded events to assert on.
//!
//! Everything runs on fencer's simulation runtime (one thread, paused time), so every event
//! time below is exact and a test that waits 20 s of simulated time costs nothing.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use fencer_harness::runtime::simulation_runtime;
use fencer_harness::{
    Acquired, CallError, Event, EventType, FencedStore, FencingToken, History, LatencyModel,
    LibraryContext, LibrarySettings, LocalClock, LockClient, LockService, Network, NodeClock, Op,
    Owned, OwnerToken, Process, ProcessFaults, ReadValue, Recorder, StoreClient, Stream, TrueClock,
    Written, stream_rng,
};

use crate::reference::ReferenceLibrary;
use crate::register::{CyclePlan, RegisterConfig, Worker, WorkerPlan};

/// One second, in nanoseconds.
pub(crate) const S: u64 = 1_000_000_000;
/// One millisecond, in nanoseconds.
pub(crate) const MS: u64 = 1_000_000;

/// Runs `test` to completion on the simulation runtime, failing it if it has not finished
/// after an hour of simulated time (a renewal loop that never ends would otherwise hang it).
pub(crate) fn simulate<F: Future>(test: F) -> F::Output {
    simulation_runtime().block_on(async {
        fencer_harness::time::timeout(Duration::from_secs(3_600), test)
            .await
            .expect("the test ends within an hour of simulated time")
    })
}

/// Sleeps `duration_ns` of simulated time.
pub(crate) async fn sleep_ns(duration_ns: u64) {
    fencer_harness::time::sleep(Duration::from_nanos(duration_ns)).await;
}

/// A lease service holding one lease that never expires: acquire grants when it is free (each
/// grant's token one above the last), renew and release apply only for the holder.
///
/// Scripted replies come first: each is given once, in order, to the next call of its kind,
/// and changes nothing (a scripted `Busy` or `NotOwner` is a refusal, a scripted error a call
/// that failed or went unanswered).
#[derive(Default)]
pub(crate) struct FakeLock {
    state: Mutex<LockState>,
}

#[derive(Default)]
struct LockState {
    holder: Option<OwnerToken>,
    last_token: FencingToken,
    acquires: VecDeque<Result<Acquired, CallError>>,
    renews: VecDeque<Result<Owned, CallError>>,
    /// Every release is answered `not-owner`, changing nothing.
    releases_refused: bool,
}

impl FakeLock {
    /// A free lock whose first grant carries `token`.
    pub(crate) fn granting(token: FencingToken) -> FakeLock {
        let lock = FakeLock::default();
        lock.state().last_token = token - 1;
        lock
    }

    /// A lock `owner` holds, as if its acquire had been granted.
    pub(crate) fn held_by(owner: OwnerToken) -> FakeLock {
        let lock = FakeLock::granting(1);
        lock.state().holder = Some(owner);
        lock
    }

    /// The next acquires answer `replies`, in order.
    pub(crate) fn acquires_answer(
        self,
        replies: impl IntoIterator<Item = Result<Acquired, CallError>>,
    ) -> FakeLock {
        self.state().acquires.extend(replies);
        self
    }

    /// The next renews answer `replies`, in order.
    pub(crate) fn renews_answer(
        self,
        replies: impl IntoIterator<Item = Result<Owned, CallError>>,
    ) -> FakeLock {
        self.state().renews.extend(replies);
        self
    }

    /// Every release is refused (`not-owner`): a service that lost the lease meanwhile.
    pub(crate) fn releases_refused(self) -> FakeLock {
        self.state().releases_refused = true;
        self
    }

    fn state(&self) -> std::sync::MutexGuard<'_, LockState> {
        self.state.lock().expect("no test panics while holding it")
    }
}

#[async_trait]
impl LockService for FakeLock {
    async fn acquire(
        &self,
        _lock: &str,
        owner: OwnerToken,
        _ttl: Duration,
    ) -> Result<Acquired, CallError> {
        let mut state = self.state();
        if let Some(reply) = state.acquires.pop_front() {
            return reply;
        }
        if state.holder.is_some() {
            return Ok(Acquired::Busy);
        }
        state.holder = Some(owner);
        state.last_token += 1;
        Ok(Acquired::Granted {
            fencing_token: state.last_token,
        })
    }

    async fn renew(
        &self,
        _lock: &str,
        owner: OwnerToken,
        _ttl: Duration,
    ) -> Result<Owned, CallError> {
        let mut state = self.state();
        if let Some(reply) = state.renews.pop_front() {
            return reply;
        }
        Ok(if state.holder == Some(owner) {
            Owned::Done
        } else {
            Owned::NotOwner
        })
    }

    async fn release(&self, _lock: &str, owner: OwnerToken) -> Result<Owned, CallError> {
        let mut state = self.state();
        Ok(if state.holder == Some(owner) && !state.releases_refused {
            state.holder = None;
            Owned::Done
        } else {
            Owned::NotOwner
        })
    }
}

/// A fenced register in memory: a write applies when its token is at least the newest one
/// applied.
#[derive(Default)]
pub(crate) struct FakeStore {
    current: Mutex<ReadValue>,
}

impl FakeStore {
    /// A store whose last applied write carried `token` and left `value`.
    pub(crate) fn holding(token: FencingToken, value: &str) -> FakeStore {
        FakeStore {
            current: Mutex::new(ReadValue {
                fencing_token: token,
                write_id: Some("before".into()),
                value: Some(value.into()),
            }),
        }
    }
}

#[async_trait]
impl FencedStore for FakeStore {
    async fn write(
        &self,
        _key: &str,
        fencing_token: FencingToken,
        write_id: &str,
        value: &str,
    ) -> Result<Written, CallError> {
        let mut current = self
            .current
            .lock()
            .expect("no test panics while holding it");
        if fencing_token < current.fencing_token {
            return Ok(Written::Rejected {
                current_token: current.fencing_token,
            });
        }
        *current = ReadValue {
            fencing_token,
            write_id: Some(write_id.into()),
            value: Some(value.into()),
        };
        Ok(Written::Applied)
    }

    async fn read(&self, _key: &str) -> Result<ReadValue, CallError> {
        Ok(self
            .current
            .lock()
            .expect("no test panics while holding it")
            .clone())
    }
}

/// One process `w0` whose clock reads true time, on a wire with a fixed one-way latency and a
/// 1 s call timeout, recording into one history. Build it inside [`simulate`].
pub(crate) struct Rig {
    recorder: Arc<Recorder>,
    process: Process,
}

impl Rig {
    /// A rig whose every message takes `one_way_ns` to arrive.
    pub(crate) fn new(one_way_ns: u64) -> Rig {
        let truth = TrueClock::start();
        let recorder = Arc::new(Recorder::new(truth));
        let network = Arc::new(Network::new(
            LatencyModel {
                min_ns: one_way_ns,
                max_ns: one_way_ns,
            },
            stream_rng(0, Stream::Latency, 0),
            Duration::from_secs(1),
        ));
        let process = Process::new(
            "w0",
            LocalClock::new(truth, NodeClock::with_offset(0)),
            Arc::new(ProcessFaults::default()),
            Arc::clone(&recorder),
            network,
        );
        Rig { recorder, process }
    }

    /// The faults the nemesis would inject into `w0` and its renewal task (shared, for a
    /// task watching them).
    pub(crate) fn faults(&self) -> &Arc<ProcessFaults> {
        self.process.faults()
    }

    /// Worker 0 as `config` says (its client variant, lock, TTL and renewal period), calling
    /// `lock` and `store`.
    pub(crate) fn worker(
        &self,
        config: &RegisterConfig,
        lock: FakeLock,
        store: FakeStore,
    ) -> Worker {
        let lock: Arc<dyn LockService> = Arc::new(lock);
        let context = self.context(config, Arc::clone(&lock));
        let worker_lock = LockClient::new(self.process.clone(), lock);
        Worker {
            index: 0,
            check: worker_lock.for_task("w0:check"),
            lock: worker_lock,
            store: StoreClient::new(self.process.clone(), Arc::new(store)),
            library: Arc::new(ReferenceLibrary::new(&context, config.variant)),
            context,
        }
    }

    /// The library context of `w0` calling `lock` with `config`'s lock, TTL and period.
    pub(crate) fn context(
        &self,
        config: &RegisterConfig,
        lock: Arc<dyn LockService>,
    ) -> LibraryContext {
        LibraryContext::new(
            self.process.clone(),
            lock,
            LibrarySettings {
                lock: config.lock.as_str().into(),
                ttl: Duration::from_nanos(config.ttl_ns),
                renew_every: Duration::from_nanos(config.renew_every_ns),
                call_timeout: Duration::from_secs(1),
            },
            0,
            0,
        )
    }

    /// The lock client of `w0`'s renewal task (process `w0:renew`).
    pub(crate) fn renew_client(&self, lock: Arc<dyn LockService>) -> LockClient {
        LockClient::new(self.process.sibling("renew"), lock)
    }

    /// The run's true clock.
    pub(crate) fn truth(&self) -> TrueClock {
        self.process.clock().truth()
    }

    /// Everything recorded so far.
    pub(crate) fn history(&self) -> History {
        self.recorder.take_history()
    }
}

/// Runs worker 0 through `cycles` against `lock` and `store` on a wire without latency, with
/// `faults` injected first, then waits a minute more (so a renewal task left behind would
/// show), and returns the history.
pub(crate) fn run_worker(
    config: &RegisterConfig,
    cycles: Vec<CyclePlan>,
    lock: FakeLock,
    store: FakeStore,
    faults: impl FnOnce(&ProcessFaults),
) -> History {
    simulate(async {
        let rig = Rig::new(0);
        faults(rig.faults());
        run_and_linger(&rig, config, cycles, lock, store).await
    })
}

/// As [`run_worker`], with no faults, on a wire where every message takes `one_way_ns`.
pub(crate) fn run_worker_over(
    one_way_ns: u64,
    config: &RegisterConfig,
    cycles: Vec<CyclePlan>,
    lock: FakeLock,
    store: FakeStore,
) -> History {
    simulate(async {
        let rig = Rig::new(one_way_ns);
        run_and_linger(&rig, config, cycles, lock, store).await
    })
}

async fn run_and_linger(
    rig: &Rig,
    config: &RegisterConfig,
    cycles: Vec<CyclePlan>,
    lock: FakeLock,
    store: FakeStore,
) -> History {
    let plan = WorkerPlan { cycles };
    rig.worker(config, lock, store).run(&plan, config, 0).await;
    sleep_ns(60 * S).await;
    rig.history()
}

/// A one-worker, one-cycle configuration with `ttl_ns` leases renewed every `renew_every_ns`
/// (busy acquires retried every `ttl_ns / 20`).
pub(crate) fn config(ttl_ns: u64, renew_every_ns: u64) -> RegisterConfig {
    RegisterConfig::new(1, 1, ttl_ns, renew_every_ns)
}

/// A cycle starting at once: think, prepare and hold for the given times.
pub(crate) fn cycle(think_ns: u64, prepare_ns: u64, hold_ns: u64) -> CyclePlan {
    CyclePlan {
        delay_ns: 0,
        think_ns,
        prepare_ns,
        hold_ns,
        value: None,
    }
}

/// `"{type} {f}"` of each event `process` recorded, in order: a cycle's shape at a glance.
pub(crate) fn steps(history: &History, process: &str) -> Vec<String> {
    history
        .events
        .iter()
        .filter(|event| event.process == process)
        .map(|event| format!("{} {}", event.kind.name(), event.f.name()))
        .collect()
}

/// The events `process` recorded of type `kind` and operation `f`, in order.
pub(crate) fn events<'h>(
    history: &'h History,
    process: &str,
    kind: EventType,
    f: Op,
) -> Vec<&'h Event> {
    history
        .events
        .iter()
        .filter(|event| event.process == process && event.is(kind, f))
        .collect()
}

/// The true times of `events`, in nanoseconds.
pub(crate) fn times(events: &[&Event]) -> Vec<u64> {
    events.iter().map(|event| event.time_ns).collect()
}
