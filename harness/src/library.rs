//! The third adapter: the lock client library a user ships, as their code calls it.
//!
//! [`LockService`] and [`FencedStore`](crate::FencedStore) are the
//! systems behind a lock; a [`LockLibrary`] is the code in front of it, in the worker's own
//! process: how it takes a lease, its auto-renewal (a watchdog), its own "do I still hold
//! it?" check, and what it tells its caller when the lease is lost. The failures of a TTL lock
//! mostly live there: a watchdog that outlives its caller, a check answered from a local clock,
//! a renewal failure swallowed while the work goes on.
//!
//! fencer builds one library per worker from a [`LibraryContext`] and drives the cycle around
//! it: acquire through the library, read, work, ask the library whether the lease is still held,
//! write with the library's fencing token, release through the library. Every call the library
//! makes to the lock service goes through a recorded [`LockClient`], so it is recorded and every
//! call fault reaches it; its background tasks ([`LibraryContext::spawn`]) freeze with its
//! worker, as a GC pause or SIGSTOP freezes a whole process; it reads the worker's own clock
//! ([`LibraryContext::clock`]), which the nemesis skews.
//!
//! Contract (what the checkers hold a library to):
//! - [`LockLibrary::check`] answers held only when the lease still is: a check that answers
//!   held after the lease provably ended (another owner was granted the lock before the check
//!   was asked) is `stale-ownership-check`;
//! - when the library learns its lease is gone (a renewal refused, renewals unanswered for a
//!   whole TTL), it tells its worker ([`LibraryContext::notify_lost`]); a lease lost with the
//!   library silent is `silent-lease-loss`;
//! - its renewals end with the lease: none after the release, none after the worker's caller
//!   gave the work up ([`LockLibrary::cancel`], or the [`Lease`] dropped): `zombie-renewal`;
//!   a lease kept alive with nobody working under it is `abandoned-lease`.

use std::any::Any;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rand_chacha::ChaCha8Rng;

use crate::adapter::{CallError, FencingToken, LockService, Owned, OwnerToken};
use crate::client::{LockClient, Process};
use crate::clock::{LocalClock, TrueClock};
use crate::event::Op;
use crate::freeze::Freezable;
use crate::rng::{Stream, stream_rng};
use crate::task::{AbortHandle, JoinHandle};

/// A lease as a lock client library hands it to its caller: what the caller needs to work
/// under it, and the library's own state for it.
pub struct Lease {
    /// The owner token the library's calls to the lock service carry for this lease.
    pub owner: OwnerToken,
    /// The fencing token the library hands out with the lease, when it has one; without one
    /// the worker's writes carry token 0, and the store cannot refuse a stale one.
    pub fencing_token: Option<FencingToken>,
    /// The library's own state for this lease (its watchdog, say), kept by the caller and
    /// dropped with the lease: a library whose renewal must die with its caller ties it to
    /// this guard, as a lock guard's drop ends it in the code people write.
    pub guard: Option<Box<dyn Any + Send + Sync>>,
}

impl Lease {
    /// A lease of `owner`, with the library's fencing token if it has one, and no state of
    /// the library's.
    pub fn new(owner: OwnerToken, fencing_token: Option<FencingToken>) -> Lease {
        Lease {
            owner,
            fencing_token,
            guard: None,
        }
    }

    /// This lease holding `guard`, the library's state for it, until the lease is dropped.
    pub fn with_guard(self, guard: impl Any + Send + Sync) -> Lease {
        Lease {
            guard: Some(Box::new(guard)),
            ..self
        }
    }
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("owner", &self.owner)
            .field("fencing_token", &self.fencing_token)
            .field("guard", &self.guard.is_some())
            .finish()
    }
}

/// A lock client library under test: the calls its users make, with its own renewal inside.
///
/// Each method is handed the recorded [`LockClient`] to make its lock-service calls with:
/// the worker's own in [`LockLibrary::acquire`] and [`LockLibrary::release`], and the check's
/// process ([`crate::roles::check_task`]) in [`LockLibrary::check`], because the worker has
/// its check open meanwhile and a process has one call open at a time. Background work (a
/// watchdog) calls as a process of its own ([`LibraryContext::task_client`]) from a task
/// spawned with [`LibraryContext::spawn`]. A library that talks to its lock service itself
/// (an `exec:` child) may ignore the client it is handed.
///
/// Errors follow [`CallError`]: `NotApplied` only when the call had no effect, `Unknown` when
/// it may have had one. fencer records `info` for a call that panics or does not answer within
/// a few call timeouts ([`crate::client::LIBRARY_CALL_TIMEOUTS`]).
#[async_trait]
pub trait LockLibrary: Send + Sync {
    /// One attempt to take the run's lock, as its users take it without waiting: `Some` lease
    /// when granted, `None` when another owner holds it. `owner` is fencer's token for this
    /// attempt (drawn from the run's seed, so a replay draws the same); use it as the lease's
    /// owner. fencer's worker waits and retries between attempts. An attempt whose outcome is
    /// unknown may have been granted: clean up after it as the library does.
    async fn acquire(
        &self,
        lock: &LockClient,
        owner: OwnerToken,
    ) -> Result<Option<Lease>, CallError>;

    /// The library's own ownership check: whether `lease` is still held, as the library
    /// decides it (asking the lock service, or its own belief).
    async fn check(&self, lock: &LockClient, lease: &Lease) -> Result<bool, CallError>;

    /// Gives `lease` back.
    async fn release(&self, lock: &LockClient, lease: Lease) -> Result<Owned, CallError>;

    /// The caller gave up the work it did under `lease` (its request was cancelled, its
    /// deadline passed) while its process lives on: do what the library does then. The
    /// default drops the lease, which ends whatever the library tied to its guard.
    async fn cancel(&self, lease: Lease) {
        drop(lease);
    }
}

/// The settings a library is built for: the run's lock and how its leases are kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LibrarySettings {
    /// The lock every worker contends for.
    pub lock: Arc<str>,
    /// The TTL the run asks for on every grant and renewal.
    pub ttl: Duration,
    /// How often the run's settings say a held lease is renewed.
    pub renew_every: Duration,
    /// How long a caller waits for a reply before recording `info`.
    pub call_timeout: Duration,
}

/// What a lock client library of one worker is built from: the worker's process (its name,
/// clock and faults), the run's lock settings, and the means to run background tasks and to
/// tell the worker things, all of it recorded.
#[derive(Clone)]
pub struct LibraryContext {
    worker: Process,
    service: Arc<dyn LockService>,
    settings: LibrarySettings,
    truth: TrueClock,
    seed: u64,
    index: u32,
    tasks: Arc<Tasks>,
    lost: Arc<Mutex<BTreeSet<OwnerToken>>>,
}

/// The background tasks a worker's library spawned, aborted when the worker is done.
#[derive(Default)]
struct Tasks {
    running: Mutex<Vec<AbortHandle>>,
}

impl Tasks {
    fn push(&self, task: AbortHandle) {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        running.retain(|task| !task.is_finished());
        running.push(task);
    }

    fn abort_all(&self) {
        let running = std::mem::take(&mut *self.running.lock().unwrap_or_else(|p| p.into_inner()));
        for task in running {
            task.abort();
        }
    }
}

impl LibraryContext {
    /// The context of the library of the worker `worker` (index `index` among the run's
    /// workers) calling `service`, for a run of `seed` with `settings`.
    pub fn new(
        worker: Process,
        service: Arc<dyn LockService>,
        settings: LibrarySettings,
        seed: u64,
        index: u32,
    ) -> LibraryContext {
        LibraryContext {
            truth: worker.clock().truth(),
            worker,
            service,
            settings,
            seed,
            index,
            tasks: Arc::default(),
            lost: Arc::default(),
        }
    }

    /// The worker's name (`w0`).
    pub fn worker(&self) -> &str {
        self.worker.name()
    }

    /// The run's lock settings.
    pub fn settings(&self) -> &LibrarySettings {
        &self.settings
    }

    /// The worker's own clock: what the library reads as "now", skewed with its process.
    pub fn clock(&self) -> &LocalClock {
        self.worker.clock()
    }

    /// The worker's recorded lock client: the calls a library makes for its caller.
    pub fn client(&self) -> LockClient {
        LockClient::new(self.worker.clone(), Arc::clone(&self.service))
    }

    /// A recorded lock client calling as the worker's process `task` (`w0:task`), with the
    /// worker's clock and faults: for calls a library's background task makes.
    pub fn task_client(&self, task: &str) -> LockClient {
        self.client().for_task(&format!("{}:{task}", self.worker()))
    }

    /// The worker's process: what a library that talks to the lock service itself records its
    /// calls through ([`Process::library_acquire`]).
    pub fn process(&self) -> &Process {
        &self.worker
    }

    /// A random stream of the library's own, drawn from the run's seed: the same draws on
    /// every replay.
    pub fn rng(&self) -> ChaCha8Rng {
        stream_rng(self.seed, Stream::Library, self.index)
    }

    /// Runs `work` as a background task of the worker's process: it freezes while the worker
    /// is paused, and is aborted when the worker is done, so no task outlives its run.
    pub fn spawn<F>(&self, work: F) -> JoinHandle<()>
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let task = crate::task::spawn(Freezable::new(
            work,
            Arc::clone(self.worker.faults()),
            self.truth,
        ));
        self.tasks.push(task.abort_handle());
        task
    }

    /// Tells the worker that the lease of `owner` is lost, `why` in the library's words:
    /// recorded as a `lost` notice now, and seen by the worker before its next write.
    pub fn notify_lost(&self, owner: OwnerToken, why: &str) {
        self.lost
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(owner);
        self.worker
            .notice(Op::Lost, &self.settings.lock, owner, Some(why));
    }

    /// Tells the worker that the library's auto-renewal extended the lease of `owner`: a
    /// `renewed` notice, for a library whose renewals fencer does not see otherwise.
    pub fn notify_renewed(&self, owner: OwnerToken) {
        self.worker
            .notice(Op::Renewed, &self.settings.lock, owner, None);
    }

    /// Records that the lock service refused a renewal the library made on its own for the
    /// lease of `owner` (`why` in the library's words): a `renew-refused` notice, for a library
    /// whose renewals fencer does not see otherwise. It tells the worker nothing: whether the
    /// library then does is what `silent-lease-loss` judges.
    pub fn notify_renew_refused(&self, owner: OwnerToken, why: &str) {
        self.worker
            .notice(Op::RenewRefused, &self.settings.lock, owner, Some(why));
    }

    /// True once the library told the worker the lease of `owner` is lost.
    pub fn told_lost(&self, owner: OwnerToken) -> bool {
        self.lost
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&owner)
    }

    /// Aborts every background task the library still runs: its worker is done.
    pub fn end(&self) {
        self.tasks.abort_all();
    }
}

/// Builds a worker's library from its context: one library per worker per run, so workers
/// and seeds never share state.
pub type LibraryFactory = Arc<dyn Fn(&LibraryContext) -> Arc<dyn LockLibrary> + Send + Sync>;

#[cfg(test)]
mod tests {
    use std::future::Future;

    use super::*;
    use crate::adapter::Acquired;
    use crate::clock::NodeClock;
    use crate::event::EventType;
    use crate::freeze::{ProcessFaults, WorkerFault};
    use crate::runtime::simulation_runtime;
    use crate::{LatencyModel, Network, Recorder};

    const S: u64 = 1_000_000_000;
    const OWNER: OwnerToken = OwnerToken(0xabc);

    /// A lock service that is never called: the tests below record library calls only.
    struct Unused;

    #[async_trait]
    impl LockService for Unused {
        async fn acquire(
            &self,
            _: &str,
            _: OwnerToken,
            _: Duration,
        ) -> Result<Acquired, CallError> {
            unreachable!("not called")
        }
        async fn renew(&self, _: &str, _: OwnerToken, _: Duration) -> Result<Owned, CallError> {
            unreachable!("not called")
        }
        async fn release(&self, _: &str, _: OwnerToken) -> Result<Owned, CallError> {
            unreachable!("not called")
        }
    }

    /// One recorded event as the tests compare it: `(kind, f, time, error)`.
    type Seen = (EventType, Op, u64, Option<String>);

    /// Runs `test` with the context of `w0` (1 s call timeout, no latency) on the simulation
    /// runtime and returns its output and the history it recorded.
    fn recorded<T>(
        test: impl FnOnce(LibraryContext) -> std::pin::Pin<Box<dyn Future<Output = T>>>,
    ) -> (T, Vec<Seen>) {
        simulation_runtime().block_on(async {
            let truth = TrueClock::start();
            let recorder = Arc::new(Recorder::new(truth));
            let network = Arc::new(Network::new(
                LatencyModel::NONE,
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
            let settings = LibrarySettings {
                lock: "L".into(),
                ttl: Duration::from_secs(10),
                renew_every: Duration::from_secs(3),
                call_timeout: Duration::from_secs(1),
            };
            let cx = LibraryContext::new(process, Arc::new(Unused), settings, 0, 0);
            let output = test(cx).await;
            let events = recorder
                .take_history()
                .events
                .into_iter()
                .map(|event| (event.kind, event.f, event.time_ns, event.error))
                .collect();
            (output, events)
        })
    }

    #[test]
    fn a_check_is_recorded_ok_when_held_and_fail_not_held_when_not() {
        for (held, kind, error) in [
            (true, EventType::Ok, None),
            (false, EventType::Fail, Some("not-held".to_string())),
        ] {
            let (answer, events) = recorded(|cx| {
                Box::pin(async move {
                    cx.process()
                        .check("L", OWNER, async {
                            crate::time::sleep(Duration::from_secs(2)).await;
                            Ok(held)
                        })
                        .await
                })
            });
            assert_eq!(answer, Ok(held));
            assert_eq!(
                events,
                [
                    (EventType::Invoke, Op::Check, 0, None),
                    (kind, Op::Check, 2 * S, error)
                ]
            );
        }
    }

    #[test]
    fn a_library_call_that_panics_or_hangs_is_recorded_unknown_and_its_worker_goes_on() {
        let (answer, events) = recorded(|cx| {
            Box::pin(async move {
                cx.process()
                    .check("L", OWNER, async { panic!("watchdog poisoned") })
                    .await
            })
        });
        assert!(
            matches!(&answer, Err(CallError::Unknown(why)) if why.contains("watchdog poisoned")),
            "{answer:?}"
        );
        assert_eq!(events[1].0, EventType::Info);
        let (answer, events) = recorded(|cx| {
            Box::pin(async move { cx.process().check("L", OWNER, std::future::pending()).await })
        });
        assert_eq!(answer, Err(CallError::Unknown("timeout".into())));
        assert_eq!(
            events[1],
            (EventType::Info, Op::Check, 4 * S, Some("timeout".into())),
            "given up after four call timeouts"
        );
    }

    #[test]
    fn an_acquire_made_by_the_library_itself_is_recorded_with_its_token_or_without_one() {
        let (_, events) = recorded(|cx| {
            Box::pin(async move {
                let process = cx.process();
                let ttl = Duration::from_secs(10);
                let _ = process
                    .library_acquire("L", OWNER, ttl, async { Ok(Some(Some(7))) })
                    .await;
                let _ = process
                    .library_acquire("L", OWNER, ttl, async { Ok(Some(None)) })
                    .await;
                let _ = process
                    .library_acquire("L", OWNER, ttl, async { Ok(None) })
                    .await;
            })
        });
        let kinds: Vec<_> = events.iter().map(|(kind, ..)| *kind).collect();
        assert_eq!(
            kinds,
            [
                EventType::Invoke,
                EventType::Ok,
                EventType::Invoke,
                EventType::Ok,
                EventType::Invoke,
                EventType::Fail
            ]
        );
        assert_eq!(events[5].3.as_deref(), Some("busy"));
    }

    #[test]
    fn a_lost_notice_is_recorded_and_told_to_the_worker_once_asked() {
        let (told, events) = recorded(|cx| {
            Box::pin(async move {
                assert!(!cx.told_lost(OWNER));
                crate::time::sleep(Duration::from_secs(5)).await;
                cx.notify_lost(OWNER, "renewal refused");
                cx.notify_renewed(OwnerToken(1));
                (cx.told_lost(OWNER), cx.told_lost(OwnerToken(1)))
            })
        });
        assert_eq!(told, (true, false));
        assert_eq!(
            events,
            [
                (
                    EventType::Notice,
                    Op::Lost,
                    5 * S,
                    Some("renewal refused".into())
                ),
                (EventType::Notice, Op::Renewed, 5 * S, None)
            ]
        );
    }

    #[test]
    fn a_library_task_freezes_with_its_worker_and_ends_with_it() {
        let ((ran_at, after_end), _) = recorded(|cx| {
            Box::pin(async move {
                let ran_at = Arc::new(Mutex::new(Vec::new()));
                let seen = Arc::clone(&ran_at);
                let truth = cx.clock().truth();
                let _task = cx.spawn(async move {
                    loop {
                        crate::time::sleep(Duration::from_secs(1)).await;
                        seen.lock().unwrap().push(truth.now_ns() / S);
                    }
                });
                crate::time::sleep(Duration::from_millis(2_500)).await;
                cx.process().faults().start(WorkerFault::Freeze, 6 * S);
                crate::time::sleep(Duration::from_secs(5)).await;
                cx.end();
                let at_end = ran_at.lock().unwrap().clone();
                crate::time::sleep(Duration::from_secs(5)).await;
                (at_end, ran_at.lock().unwrap().clone())
            })
        });
        // Ticks at 1 s and 2 s; frozen from 2.5 s to 6 s (the 3 s tick waits for the thaw);
        // then every second until the end at 7.5 s.
        assert_eq!(ran_at, [1, 2, 6, 7]);
        assert_eq!(after_end, ran_at, "nothing after the worker ended");
    }
}
