//! The worker's cycle, shared by every workload: workers race for one lease and do the
//! workload's protected work (the `work` module's) while they hold it.
//!
//! Each cycle is the lease-protected loop, through the worker's lock client library: acquire →
//! read → think → check → prepare → write(token) → hold → release, the library renewing the
//! lease meanwhile as it does. The *prepare* step sits between the last lease check and the
//! write being sent: a holder paused there has checked that it owns the lease, and sends its
//! UPDATE after losing it. No client-side check can close that gap; only the store's fence can.

use std::sync::Arc;

use std::sync::Mutex;

use fencer_harness::task::JoinHandle;
use fencer_harness::{
    Lease, LibraryContext, LockClient, LockLibrary, Op, OwnerToken, StoreClient, Stream, roles,
    stream_rng,
};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use fencer_harness::Workload;

use crate::kind::ClientVariant;
use crate::lease::RenewFailurePolicy;
use crate::shape::CycleShape;
use crate::wait::{WaitMode, Waits};
use crate::work::sleep_ns;

/// Settings of a workload run: the shape of every worker's cycle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegisterConfig {
    /// Number of workers.
    pub workers: usize,
    /// Cycles per worker.
    pub ops_per_worker: usize,
    /// Lease TTL requested on every acquire and renew.
    pub ttl_ns: u64,
    /// Renewal period while a lease is held.
    pub renew_every_ns: u64,
    /// What a worker does when a renewal fails or is unanswered.
    pub on_renew_failure: RenewFailurePolicy,
    /// Lock all workers contend for.
    pub lock: String,
    /// Store key the lock protects.
    pub key: String,
    /// Wait between two acquire attempts on a busy lock when polling; the shortest wait when
    /// backing off.
    pub retry_every_ns: u64,
    /// Acquire attempts per cycle before the worker gives the cycle up.
    pub max_acquire_attempts: u32,
    /// What the worker does under the lock.
    pub workload: Workload,
    /// fencer's own client the worker is, when it is one: its caller's bugs (ignoring a lost
    /// lease, resending a rejected write) are the worker's; any other client is driven as the
    /// reference drives its library.
    pub variant: ClientVariant,
    /// How [`plan_workers`] draws cycle durations. Absent in older configs: full.
    #[serde(default)]
    pub cycle_shape: CycleShape,
    /// How a worker waits between acquire attempts on a busy lock. Absent in older configs:
    /// poll.
    #[serde(default)]
    pub wait: WaitMode,
}

impl RegisterConfig {
    /// Defaults for `workers` workers doing `ops_per_worker` cycles with `ttl_ns` leases
    /// renewed every `renew_every_ns`.
    pub fn new(workers: usize, ops_per_worker: usize, ttl_ns: u64, renew_every_ns: u64) -> Self {
        RegisterConfig {
            workers,
            ops_per_worker,
            ttl_ns,
            renew_every_ns,
            on_renew_failure: RenewFailurePolicy::Stop,
            lock: "lock-1".into(),
            key: "register-1".into(),
            retry_every_ns: ttl_ns / 20,
            max_acquire_attempts: 1_000,
            workload: Workload::FencedRegister,
            variant: ClientVariant::Reference,
            cycle_shape: CycleShape::Full,
            wait: WaitMode::Poll,
        }
    }

    /// As [`RegisterConfig::new`], for `workload` (its key) run by `variant` workers.
    pub fn for_workload(self, workload: Workload, variant: ClientVariant) -> Self {
        RegisterConfig {
            key: workload.key().into(),
            workload,
            variant,
            ..self
        }
    }

    /// The renew-failure policy in force: a worker that ignores renew failures continues
    /// whatever the setting says.
    pub fn effective_policy(&self) -> RenewFailurePolicy {
        match self.variant {
            ClientVariant::IgnoreRenewFailure => RenewFailurePolicy::Continue,
            _ => self.on_renew_failure,
        }
    }
}

/// One worker's script.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerPlan {
    /// The cycles, in order.
    pub cycles: Vec<CyclePlan>,
}

/// One acquire → write → release cycle; durations in true nanoseconds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CyclePlan {
    /// Idle time before trying to acquire.
    pub delay_ns: u64,
    /// Work between the read and the final lease check.
    pub think_ns: u64,
    /// Between the final lease check and sending the write.
    pub prepare_ns: u64,
    /// Holding the lease after the write, before releasing.
    pub hold_ns: u64,
    /// The value to write; `None` writes the write id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// Draws every worker's script from the workload stream (one sub-stream per worker, so adding
/// a worker leaves the others' scripts unchanged), in the config's [`CycleShape`].
pub fn plan_workers(config: &RegisterConfig, seed: u64) -> Vec<WorkerPlan> {
    (0..config.workers)
        .map(|worker| {
            let mut rng = stream_rng(seed, Stream::Workload, worker as u32);
            let cycles = (0..config.ops_per_worker)
                .map(|_| config.cycle_shape.draw(config.ttl_ns, &mut rng))
                .collect();
            WorkerPlan { cycles }
        })
        .collect()
}

/// A worker: its recorded clients, its lock client library and its private randomness.
pub struct Worker {
    /// Index; the process is named `w{index}`.
    pub index: usize,
    /// The worker's lock client (process `w{index}`): what its library makes its calls for
    /// the worker with.
    pub lock: LockClient,
    /// The lock client its library's ownership checks call as (`w{index}:check`).
    pub check: LockClient,
    /// The worker's store client.
    pub store: StoreClient,
    /// The lock client library the worker takes, checks and releases its leases through.
    pub library: Arc<dyn LockLibrary>,
    /// What the library was built from: its notices and its background tasks.
    pub context: LibraryContext,
}

/// Waits until the worker's work under its lease is cancelled: at once for a cancellation
/// that comes while it works, and `held_ns` into the work for one that came while the worker
/// held no lease (waiting for the lock, or idle), which is held until there is work to
/// abandon.
async fn cancellation(cancels: &mut tokio::sync::watch::Receiver<u64>, held_ns: u64) {
    if cancels.has_changed().unwrap_or(false) {
        cancels.mark_unchanged();
        sleep_ns(held_ns).await;
        return;
    }
    if cancels.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// A write the work has decided on and not yet sent: what abandoned work still sends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PendingWrite {
    pub(crate) write_id: String,
    pub(crate) value: String,
}

/// The worker's abandoned work still running, by the slot whose process name (`wN:late`,
/// `wN:late-1`, …) it writes as, so two alive at once never share a name. The worker waits
/// for it before it ends, as a process outlives the work it abandoned.
#[derive(Default)]
struct LateWork {
    running: Vec<(usize, JoinHandle<()>)>,
}

impl LateWork {
    /// Sends `write` under `token` after `prepare_ns`, as abandoned work of `worker` does: it
    /// no longer asks the library anything, and only the store's fence can refuse it.
    fn send(
        &mut self,
        worker: &Worker,
        write: PendingWrite,
        token: u64,
        prepare_ns: u64,
        key: &str,
    ) {
        self.running.retain(|(_, task)| !task.is_finished());
        let slot = (0..=self.running.len())
            .find(|slot| self.running.iter().all(|(taken, _)| taken != slot))
            .expect("n tasks leave one of n + 1 slots free");
        let name = roles::late_work(worker.lock.process().name(), slot);
        let store = worker.store.for_task(&name);
        let key = key.to_string();
        let task = worker.context.spawn(async move {
            sleep_ns(prepare_ns).await;
            let _ = store
                .write(&key, token, &write.write_id, &write.value)
                .await;
        });
        self.running.push((slot, task));
    }

    /// Waits until every abandoned write has been sent and answered.
    async fn finish(self) {
        for (_, task) in self.running {
            // A late write only records calls; an abort is also an end.
            let _ = task.await;
        }
    }
}

/// Ends a worker's library's background tasks when the worker ends, however it ends: a
/// finished worker, or one cancelled at the run's deadline.
struct EndTasks<'a>(&'a LibraryContext);

impl Drop for EndTasks<'_> {
    fn drop(&mut self) {
        self.0.end();
    }
}

impl Worker {
    /// Carries out `plan`. Returns when every cycle is done or given up.
    pub async fn run(self, plan: &WorkerPlan, config: &RegisterConfig, seed: u64) {
        let _end = EndTasks(&self.context);
        let mut owners = stream_rng(seed, Stream::Tokens, self.index as u32);
        let mut waits = Waits::new(
            config.wait,
            config.retry_every_ns,
            config.ttl_ns,
            seed,
            self.index,
        );
        let mut late = LateWork::default();
        let mut cancels = self.lock.process().faults().cancellations();
        for (cycle_number, cycle) in plan.cycles.iter().enumerate() {
            self.lock.process().record_cycle_start(self.index);
            sleep_ns(cycle.delay_ns).await;
            let Some(lease) = self.acquire(config, &mut owners, &mut waits).await else {
                continue;
            };
            let pending = Mutex::new(None);
            let cancelled = tokio::select! {
                biased;
                () = cancellation(&mut cancels, cycle.think_ns / 2) => true,
                () = self.work(cycle, cycle_number, config, &lease, &pending) => false,
            };
            if !cancelled {
                // Safe even when the lease was lost: the service compares the owner token.
                let _ = self.library.release(&self.lock, lease).await;
                continue;
            }
            let token = lease.fencing_token.unwrap_or(0);
            self.lock
                .process()
                .notice(Op::Abandoned, &config.lock, lease.owner, None);
            self.library.cancel(lease).await;
            let pending = pending.into_inner().unwrap_or_else(|p| p.into_inner());
            if let Some(write) = pending {
                late.send(&self, write, token, cycle.prepare_ns, &config.key);
            }
        }
        late.finish().await;
    }

    /// Acquires the lock through the library, retrying while busy after the waits of the
    /// config's wait mode, each attempt with a fresh owner token. An attempt whose outcome is
    /// unknown is the library's to clean up.
    async fn acquire(
        &self,
        config: &RegisterConfig,
        owners: &mut ChaCha8Rng,
        waits: &mut Waits,
    ) -> Option<Lease> {
        waits.begin();
        for _ in 0..config.max_acquire_attempts {
            let owner =
                OwnerToken(u128::from(owners.next_u64()) << 64 | u128::from(owners.next_u64()));
            if let Ok(Some(lease)) = self.library.acquire(&self.lock, owner).await {
                return Some(lease);
            }
            sleep_ns(waits.after_refusal_ns()).await;
        }
        None
    }

    /// Whether the worker may go on with protected work under `lease`: always under the
    /// `continue` policy; under `stop`, only until its library told it the lease is lost.
    pub(crate) fn told_lost(&self, config: &RegisterConfig, lease: &Lease) -> bool {
        config.effective_policy() == RenewFailurePolicy::Stop && self.context.told_lost(lease.owner)
    }

    /// Asks the library, recorded, whether `lease` is still held; under the `continue` policy
    /// the answer is recorded and ignored.
    pub(crate) async fn still_held(&self, config: &RegisterConfig, lease: &Lease) -> bool {
        let held = self
            .lock
            .process()
            .check(
                &config.lock,
                lease.owner,
                self.library.check(&self.check, lease),
            )
            .await;
        match config.effective_policy() {
            RenewFailurePolicy::Continue => true,
            RenewFailurePolicy::Stop => matches!(held, Ok(true)),
        }
    }
}

#[cfg(test)]
mod tests {
    use fencer_harness::{Acquired, CallError, EventType, History, Op, Owned, WorkerFault};

    use super::*;
    use crate::testkit::{
        FakeLock, FakeStore, MS, Rig, S, config, cycle, events, run_worker, run_worker_over,
        simulate, sleep_ns, steps, times,
    };

    const CYCLE_SHAPE: [&str; 10] = [
        "invoke acquire",
        "ok acquire",
        "invoke read",
        "ok read",
        "invoke check",
        "ok check",
        "invoke write",
        "ok write",
        "invoke release",
        "ok release",
    ];

    #[test]
    fn a_lease_edge_attack_sends_the_write_renew_and_release_at_the_lease_s_edge() {
        let history = run_worker(
            &config(10 * S, 3 * S),
            vec![cycle(S, 0, 0)],
            FakeLock::granting(1),
            FakeStore::default(),
            |faults| {
                faults.start(
                    WorkerFault::LeaseEdge {
                        own_offset_ns: -100 * MS as i64,
                        rival_offset_ns: 0,
                        anchor: fencer_harness::EdgeAnchor::Sent,
                    },
                    u64::MAX,
                )
            },
        );
        let sent = |f| times(&events(&history, "w0", EventType::Invoke, f));
        // Granted at 0 with a 10 s TTL and confirmed by the check at 1 s, whose renew is not
        // held: the lease's edge is then at 11 s, and everything the worker does next waits
        // for 10.9 s.
        let check = times(&events(&history, "w0:check", EventType::Invoke, Op::Renew));
        assert_eq!(check, [S]);
        assert_eq!(sent(Op::Write), [10_900 * MS]);
        let renews = times(&events(&history, "w0:renew", EventType::Invoke, Op::Renew));
        assert_eq!(renews, [10_900 * MS]);
        // The renew sent at 10.9 s is still on its way when the write's reply comes, so the
        // release is sent at the same edge, at once.
        assert_eq!(sent(Op::Release), [10_900 * MS]);
    }

    #[test]
    fn the_client_path_publishes_the_edge_while_the_lease_is_held_and_clears_it_on_release() {
        let edges = simulate(async {
            let rig = Rig::new(0);
            let worker = rig.worker(
                &config(10 * S, 3 * S),
                FakeLock::granting(1),
                FakeStore::default(),
            );
            let plan = WorkerPlan {
                cycles: vec![cycle(2 * S, 0, 0)],
            };
            let faults = std::sync::Arc::clone(rig.faults());
            let watcher = fencer_harness::task::spawn(async move {
                sleep_ns(S).await;
                faults.lease_edge_ns()
            });
            worker.run(&plan, &config(10 * S, 3 * S), 0).await;
            (watcher.await.unwrap(), rig.faults().lease_edge_ns())
        });
        assert_eq!(edges, (Some(10 * S), None), "granted at 0 with a 10 s TTL");
    }

    #[test]
    fn a_cycle_acquires_reads_writes_then_releases() {
        let history = run_worker(
            &config(10 * S, 3 * S),
            vec![cycle(S, 100 * MS, 500 * MS)],
            FakeLock::granting(42),
            FakeStore::default(),
            |_| {},
        );
        assert_eq!(steps(&history, "w0"), CYCLE_SHAPE);
    }

    #[test]
    fn the_write_carries_the_granted_fencing_token_and_the_cycle_s_write_id() {
        let history = run_worker(
            &config(10 * S, 3 * S),
            vec![cycle(S, 100 * MS, 500 * MS)],
            FakeLock::granting(42),
            FakeStore::default(),
            |_| {},
        );
        let granted = events(&history, "w0", EventType::Ok, Op::Acquire);
        assert_eq!(granted[0].token, Some(42));
        let write = events(&history, "w0", EventType::Invoke, Op::Write)[0];
        assert_eq!(write.token, Some(42));
        assert_eq!(write.key.as_deref(), Some("register-1"));
        assert_eq!(write.write_id.as_deref(), Some("w0-0"));
        assert_eq!(write.value.as_deref(), Some("w0-0"));
    }

    #[test]
    fn the_write_is_sent_after_think_and_prepare_and_the_release_after_hold() {
        let history = run_worker(
            &config(10 * S, 3 * S),
            vec![cycle(S, 100 * MS, 500 * MS)],
            FakeLock::granting(1),
            FakeStore::default(),
            |_| {},
        );
        let write = events(&history, "w0", EventType::Invoke, Op::Write);
        assert_eq!(times(&write), [1_100 * MS]);
        let release = events(&history, "w0", EventType::Invoke, Op::Release);
        assert_eq!(times(&release), [1_600 * MS]);
        let acquire = events(&history, "w0", EventType::Invoke, Op::Acquire)[0];
        assert_eq!(release[0].owner, acquire.owner, "released what it acquired");
    }

    #[test]
    fn busy_and_refused_acquires_are_retried_every_retry_every_with_fresh_owner_tokens() {
        let lock = FakeLock::granting(7).acquires_answer([
            Ok(Acquired::Busy),
            Err(CallError::NotApplied("refused".into())),
        ]);
        let history = run_worker(
            &config(10 * S, 3 * S),
            vec![cycle(0, 0, 0)],
            lock,
            FakeStore::default(),
            |_| {},
        );
        let acquires = events(&history, "w0", EventType::Invoke, Op::Acquire);
        assert_eq!(times(&acquires), [0, 500 * MS, 1_000 * MS]);
        let owners: std::collections::BTreeSet<_> =
            acquires.iter().map(|event| event.owner.clone()).collect();
        assert_eq!(owners.len(), 3, "a fresh owner token per attempt");
        // Nothing was granted before the third attempt, so nothing is released in between.
        assert_eq!(
            steps(&history, "w0")[..6],
            [
                "invoke acquire",
                "fail acquire",
                "invoke acquire",
                "fail acquire",
                "invoke acquire",
                "ok acquire"
            ]
        );
        let write = events(&history, "w0", EventType::Invoke, Op::Write)[0];
        assert_eq!(write.token, Some(7));
    }

    #[test]
    fn a_backing_off_worker_waits_its_own_jittered_back_off_and_starts_over_each_acquire() {
        let config = |wait| RegisterConfig {
            wait,
            ..config(10 * S, 3 * S)
        };
        // Six refusals, a grant, then two refusals of the second cycle's acquire.
        let script = || {
            let busy = |count| std::iter::repeat_n(Ok(Acquired::Busy), count);
            let granted = Ok(Acquired::Granted { fencing_token: 3 });
            FakeLock::granting(7).acquires_answer(busy(6).chain([granted]).chain(busy(2)))
        };
        let run = |wait| {
            run_worker(
                &config(wait),
                vec![cycle(0, 0, 0), cycle(0, 0, 0)],
                script(),
                FakeStore::default(),
                |_| {},
            )
        };
        let (backing_off, polling) = (run(WaitMode::Backoff), run(WaitMode::Poll));
        let acquires = events(&backing_off, "w0", EventType::Invoke, Op::Acquire);
        assert_eq!(acquires.len(), 10);
        let gaps: Vec<u64> = times(&acquires)
            .windows(2)
            .map(|pair| pair[1] - pair[0])
            .collect();
        // Simulated timers fire at the very nanosecond of the wait drawn.
        let mut expected = crate::wait::Backoff::for_worker(500 * MS, 10 * S, 0, 0);
        let mut next = || expected.next_wait_ns();
        let first: Vec<u64> = (0..6).map(|_| next()).collect();
        expected.reset();
        let mut next = || expected.next_wait_ns();
        let second: Vec<u64> = (0..2).map(|_| next()).collect();
        assert_eq!(gaps[..6], first[..]);
        assert_eq!(gaps[7..], second[..]);
        assert!(second.iter().all(|gap| *gap <= 4 * 500 * MS), "{second:?}");
        let polled = events(&polling, "w0", EventType::Invoke, Op::Acquire);
        let owners = |acquires: &[&fencer_harness::Event]| -> Vec<_> {
            acquires.iter().map(|event| event.owner.clone()).collect()
        };
        assert_eq!(
            owners(&acquires),
            owners(&polled),
            "backing off draws no owner token of its own"
        );
    }

    #[test]
    fn an_unanswered_acquire_is_released_before_the_retry() {
        let lock =
            FakeLock::granting(1).acquires_answer([Err(CallError::Unknown("timeout".into()))]);
        let history = run_worker(
            &config(10 * S, 3 * S),
            vec![cycle(0, 0, 0)],
            lock,
            FakeStore::default(),
            |_| {},
        );
        assert_eq!(
            steps(&history, "w0")[..6],
            [
                "invoke acquire",
                "info acquire",
                "invoke release",
                "fail release",
                "invoke acquire",
                "ok acquire"
            ]
        );
        let acquires = events(&history, "w0", EventType::Invoke, Op::Acquire);
        let releases = events(&history, "w0", EventType::Invoke, Op::Release);
        assert_eq!(releases[0].owner, acquires[0].owner);
        assert_ne!(acquires[1].owner, acquires[0].owner);
    }

    #[test]
    fn a_cycle_is_given_up_after_max_acquire_attempts_and_the_next_one_runs() {
        let config = RegisterConfig {
            max_acquire_attempts: 3,
            ..config(10 * S, 3 * S)
        };
        let lock =
            FakeLock::granting(1).acquires_answer(std::iter::repeat_n(Ok(Acquired::Busy), 3));
        let history = run_worker(
            &config,
            vec![cycle(0, 0, 0), cycle(0, 0, 0)],
            lock,
            FakeStore::default(),
            |_| {},
        );
        let steps = steps(&history, "w0");
        assert_eq!(steps[..6], ["invoke acquire", "fail acquire"].repeat(3));
        assert_eq!(steps[6..], CYCLE_SHAPE);
        let write = events(&history, "w0", EventType::Invoke, Op::Write)[0];
        assert_eq!(write.write_id.as_deref(), Some("w0-1"));
    }

    /// A second cycle 10 s after the first gives a renewal task left running time to show.
    fn and_another_cycle_10_s_later(first: CyclePlan) -> Vec<CyclePlan> {
        let second = CyclePlan {
            delay_ns: 10 * S,
            ..cycle(0, 0, 0)
        };
        vec![first, second]
    }

    /// The events of `w0`'s renewal task about the first cycle's lease.
    fn first_lease_renewals(history: &fencer_harness::History) -> Vec<&fencer_harness::Event> {
        let first_owner = &events(history, "w0", EventType::Invoke, Op::Acquire)[0].owner;
        history
            .events
            .iter()
            .filter(|event| event.process == "w0:renew" && &event.owner == first_owner)
            .collect()
    }

    #[test]
    fn the_lease_is_renewed_every_renew_every_while_held_and_never_after_the_release() {
        let history = run_worker(
            &config(10 * S, 3 * S),
            and_another_cycle_10_s_later(cycle(0, 0, 7 * S)),
            FakeLock::granting(1),
            FakeStore::default(),
            |_| {},
        );
        let release = events(&history, "w0", EventType::Invoke, Op::Release)[0];
        assert_eq!(release.time_ns, 7 * S);
        let renewals: Vec<_> = first_lease_renewals(&history)
            .iter()
            .map(|event| (event.kind, event.time_ns))
            .collect();
        assert_eq!(
            renewals,
            [
                (EventType::Invoke, 3 * S),
                (EventType::Ok, 3 * S),
                (EventType::Invoke, 6 * S),
                (EventType::Ok, 6 * S)
            ]
        );
    }

    #[test]
    fn the_renewal_is_stopped_before_the_release_is_sent() {
        // Each message takes 0.1 s: the lease is granted at 0.2 s, read at 0.4 s, checked
        // (the check's own renew) at 0.6 s, the write answered at 0.8 s, and the hold ends at
        // 6.5 s with the watchdog's second renew (sent at 6.4 s) in flight.
        let history = run_worker_over(
            100 * MS,
            &config(10 * S, 3 * S),
            and_another_cycle_10_s_later(cycle(0, 0, 5_700 * MS)),
            FakeLock::granting(1),
            FakeStore::default(),
        );
        let release = events(&history, "w0", EventType::Invoke, Op::Release)[0];
        assert_eq!(release.time_ns, 6_500 * MS);
        let renewals = first_lease_renewals(&history);
        let shown: Vec<_> = renewals
            .iter()
            .map(|event| (event.kind, event.time_ns, event.error.as_deref()))
            .collect();
        assert_eq!(
            shown,
            [
                (EventType::Invoke, 3_200 * MS, None),
                (EventType::Ok, 3_400 * MS, None),
                (EventType::Invoke, 6_400 * MS, None),
                (EventType::Info, 6_500 * MS, Some("cancelled"))
            ]
        );
        assert!(renewals.iter().all(|event| event.index < release.index));
    }

    #[test]
    fn aborting_the_worker_s_task_ends_its_renewal_task() {
        let history = simulate(async {
            let rig = Rig::new(0);
            let worker = rig.worker(
                &config(10 * S, 3 * S),
                FakeLock::granting(1),
                FakeStore::default(),
            );
            let plan = WorkerPlan {
                cycles: vec![cycle(0, 0, 20 * S)],
            };
            let task = fencer_harness::task::spawn(async move {
                worker.run(&plan, &config(10 * S, 3 * S), 0).await;
            });
            sleep_ns(7 * S).await;
            task.abort();
            assert!(task.await.unwrap_err().is_cancelled());
            sleep_ns(60 * S).await;
            rig.history()
        });
        let renews = events(&history, "w0:renew", EventType::Invoke, Op::Renew);
        assert_eq!(times(&renews), [3 * S, 6 * S]);
    }

    /// A fenced-register worker whose renewal task outlives its lease: TTL 10 s, renewed every
    /// 3 s.
    fn zombie_config() -> RegisterConfig {
        config(10 * S, 3 * S).for_workload(
            fencer_harness::Workload::FencedRegister,
            ClientVariant::ZombieRenewal,
        )
    }

    #[test]
    fn a_zombie_renewal_worker_renews_its_released_lease_until_refused() {
        let config = zombie_config();
        let second = CyclePlan {
            delay_ns: 5 * S,
            ..cycle(0, 0, 0)
        };
        let history = run_worker(
            &config,
            vec![cycle(S, 0, 0), second],
            FakeLock::granting(1),
            FakeStore::default(),
            |_| {},
        );
        let first_owner = events(&history, "w0", EventType::Invoke, Op::Acquire)[0]
            .owner
            .clone();
        let release = events(&history, "w0", EventType::Invoke, Op::Release)[0];
        assert_eq!(release.time_ns, S);
        let zombie: Vec<_> = history
            .events
            .iter()
            .filter(|event| event.process == "w0:renew" && event.owner == first_owner)
            .collect();
        assert_eq!(zombie.len(), 2, "one renew, then refused: {zombie:?}");
        assert_eq!(
            (zombie[0].kind, zombie[0].time_ns),
            (EventType::Invoke, 3 * S)
        );
        assert_eq!(zombie[1].kind, EventType::Fail);
        assert_eq!(zombie[1].error.as_deref(), Some("not-owner"));
    }

    #[test]
    fn a_zombie_renewal_dies_when_its_worker_ends() {
        let config = zombie_config();
        // The renew replies are lost, so nothing ever refuses the zombie. The first cycle's
        // check (a renew too) goes unanswered at 2 s, so nothing is written and the lease is
        // released then; the second cycle starts at 6.5 s and its check's lost reply ends it
        // at 7.5 s, before the zombie's validity runs out at 10 s.
        let second = CyclePlan {
            delay_ns: 4_500 * MS,
            ..cycle(0, 0, 0)
        };
        let history = run_worker(
            &config,
            vec![cycle(S, 0, 0), second],
            FakeLock::granting(1),
            FakeStore::default(),
            |faults| faults.start(WorkerFault::LoseReplies(Op::Renew), u64::MAX),
        );
        let first_owner = events(&history, "w0", EventType::Invoke, Op::Acquire)[0]
            .owner
            .clone();
        let zombie_renews: Vec<_> = events(&history, "w0:renew", EventType::Invoke, Op::Renew)
            .into_iter()
            .filter(|event| event.owner == first_owner)
            .collect();
        // Renewing 3 s after each 1 s timeout: at 3 s and 7 s, that one still unanswered when
        // the worker ends at 7.5 s.
        assert_eq!(times(&zombie_renews), [3 * S, 7 * S]);
        let end = events(&history, "w0", EventType::Ok, Op::Release)[1].time_ns;
        assert_eq!(end, 7_500 * MS);
        let last = history.events.last().expect("recorded");
        assert_eq!(
            (last.process.as_str(), last.kind),
            ("w0:renew", EventType::Info)
        );
        assert_eq!(last.error.as_deref(), Some("cancelled"));
        assert_eq!(last.time_ns, end, "cancelled when the worker ended");
    }

    #[test]
    fn a_renewal_task_started_beside_a_live_zombie_takes_the_next_free_name() {
        let config = zombie_config();
        // Renew replies are lost, so the first lease's zombie is never refused and is still
        // renewing while the second lease's task renews; a third cycle much later keeps the
        // worker, and so its tasks, alive meanwhile.
        let second = CyclePlan {
            delay_ns: 2 * S,
            ..cycle(0, 0, 5 * S)
        };
        let third = CyclePlan {
            delay_ns: 20 * S,
            ..cycle(0, 0, 0)
        };
        let history = run_worker(
            &config,
            vec![cycle(S, 0, 0), second, third],
            FakeLock::granting(1),
            FakeStore::default(),
            |faults| faults.start(WorkerFault::LoseReplies(Op::Renew), u64::MAX),
        );
        let owners: Vec<_> = events(&history, "w0", EventType::Invoke, Op::Acquire)
            .iter()
            .map(|acquire| acquire.owner.clone())
            .collect();
        let renewed_by = |process| {
            events(&history, process, EventType::Invoke, Op::Renew)
                .iter()
                .map(|renew| renew.owner.clone())
                .collect::<Vec<_>>()
        };
        let first_task = renewed_by("w0:renew");
        assert!(!first_task.is_empty(), "the first lease was renewed");
        assert!(first_task.iter().all(|owner| *owner == owners[0]));
        let second_task = renewed_by("w0:renew-1");
        assert!(!second_task.is_empty(), "the second lease was renewed");
        assert!(second_task.iter().all(|owner| *owner == owners[1]));
        // Every name has one call open at a time, so the history reads back.
        let read = History::read_jsonl(&history.to_jsonl()[..], "zombie.jsonl");
        assert_eq!(read.expect("reads back"), history);
    }

    #[test]
    fn stop_policy_writes_nothing_after_a_refused_renew() {
        let lock = FakeLock::granting(1).renews_answer([Ok(Owned::NotOwner)]);
        let history = run_worker(
            &config(10 * S, 3 * S),
            vec![cycle(5 * S, 0, 0)],
            lock,
            FakeStore::default(),
            |_| {},
        );
        // Told of the loss at 3 s, the worker asks nothing more and writes nothing.
        assert_eq!(
            steps(&history, "w0"),
            [
                "invoke acquire",
                "ok acquire",
                "invoke read",
                "ok read",
                "notice lost",
                "invoke release",
                "ok release"
            ]
        );
        let lost = events(&history, "w0", EventType::Notice, Op::Lost);
        assert_eq!(times(&lost), [3 * S]);
        assert_eq!(lost[0].error.as_deref(), Some("renewal refused"));
    }

    #[test]
    fn stop_policy_writes_nothing_after_an_unanswered_renew() {
        let history = run_worker(
            &config(10 * S, 3 * S),
            vec![cycle(5 * S, 0, 0)],
            FakeLock::granting(1),
            FakeStore::default(),
            |faults| faults.start(WorkerFault::LoseReplies(Op::Renew), u64::MAX),
        );
        let unanswered = events(&history, "w0:renew", EventType::Info, Op::Renew);
        assert_eq!(times(&unanswered), [4 * S]);
        // The check at 5 s asks the service with a renew of its own, unanswered too: not held.
        let check_renew = events(&history, "w0:check", EventType::Info, Op::Renew);
        assert_eq!(times(&check_renew), [6 * S]);
        assert_eq!(
            events(&history, "w0", EventType::Fail, Op::Check)[0].time_ns,
            6 * S
        );
        assert!(events(&history, "w0", EventType::Invoke, Op::Write).is_empty());
        assert_eq!(
            events(&history, "w0", EventType::Invoke, Op::Release)[0].time_ns,
            6 * S
        );
    }

    #[test]
    fn stop_policy_writes_nothing_once_an_unrenewed_lease_ran_out_on_the_worker_s_clock() {
        let history = run_worker(
            &config(10 * S, 20 * S),
            vec![cycle(10 * S, 0, 0)],
            FakeLock::granting(1),
            FakeStore::default(),
            |_| {},
        );
        assert!(events(&history, "w0:renew", EventType::Invoke, Op::Renew).is_empty());
        // Past its validity on the worker's clock at 10 s, the lease is not claimed: the
        // check asks the service nothing, answers not held, and tells the worker it is lost.
        assert!(events(&history, "w0:check", EventType::Invoke, Op::Renew).is_empty());
        assert_eq!(
            times(&events(&history, "w0", EventType::Fail, Op::Check)),
            [10 * S]
        );
        let lost = events(&history, "w0", EventType::Notice, Op::Lost);
        assert_eq!(times(&lost), [10 * S]);
        assert_eq!(
            lost[0].error.as_deref(),
            Some("no renewal confirmed for a whole TTL")
        );
        assert!(events(&history, "w0", EventType::Invoke, Op::Write).is_empty());
    }

    #[test]
    fn stop_policy_writes_after_thinking_past_the_ttl_while_renewals_succeed() {
        let history = run_worker(
            &config(10 * S, 3 * S),
            vec![cycle(11 * S, 0, 0)],
            FakeLock::granting(1),
            FakeStore::default(),
            |_| {},
        );
        let renewed = events(&history, "w0:renew", EventType::Ok, Op::Renew);
        assert_eq!(times(&renewed), [3 * S, 6 * S, 9 * S]);
        let write = events(&history, "w0", EventType::Invoke, Op::Write);
        assert_eq!(times(&write), [11 * S]);
    }

    #[test]
    fn a_loss_told_during_prepare_does_not_stop_the_write_already_decided() {
        let history = run_worker(
            &config(10 * S, 3 * S),
            vec![cycle(2 * S, 2 * S, 0)],
            FakeLock::granting(1).renews_answer([Ok(Owned::Done), Ok(Owned::NotOwner)]),
            FakeStore::default(),
            |_| {},
        );
        // The check's renew at 2 s is answered done; the watchdog's at 3 s refused, and the
        // worker told; the write, decided at the check, goes at 4 s all the same.
        let refused = events(&history, "w0:renew", EventType::Fail, Op::Renew);
        assert_eq!(times(&refused), [3 * S]);
        assert_eq!(
            times(&events(&history, "w0", EventType::Notice, Op::Lost)),
            [3 * S]
        );
        let write = events(&history, "w0", EventType::Invoke, Op::Write);
        assert_eq!(times(&write), [4 * S]);
    }

    /// Under `continue` (set, or forced by the `ignore-renew-failure` worker), a refused or
    /// unanswered renew does not stop the write.
    #[test]
    fn continue_policy_and_ignore_renew_failure_worker_write_after_a_failed_renew() {
        let continuing = RegisterConfig {
            on_renew_failure: RenewFailurePolicy::Continue,
            ..config(10 * S, 3 * S)
        };
        let ignoring = config(10 * S, 3 * S).for_workload(
            fencer_harness::Workload::FencedRegister,
            ClientVariant::IgnoreRenewFailure,
        );
        for config in [continuing, ignoring] {
            let refusing = FakeLock::granting(5).renews_answer([Ok(Owned::NotOwner)]);
            let refused = run_worker(
                &config,
                vec![cycle(5 * S, 0, 0)],
                refusing,
                FakeStore::default(),
                |_| {},
            );
            let unanswered = run_worker(
                &config,
                vec![cycle(5 * S, 0, 0)],
                FakeLock::granting(5),
                FakeStore::default(),
                |faults| faults.start(WorkerFault::LoseReplies(Op::Renew), u64::MAX),
            );
            // Told of the loss at 3 s, the worker still asks, is told not held, and writes.
            let mut told = CYCLE_SHAPE.to_vec();
            told.insert(4, "notice lost");
            told[6] = "fail check";
            assert_eq!(steps(&refused, "w0"), told, "{config:?}");
            let write = events(&refused, "w0", EventType::Invoke, Op::Write)[0];
            assert_eq!((write.time_ns, write.token), (5 * S, Some(5)));
            // Its check's renew unanswered at 6 s, it writes then.
            let mut unconfirmed = CYCLE_SHAPE.to_vec();
            unconfirmed[5] = "fail check";
            assert_eq!(steps(&unanswered, "w0"), unconfirmed, "{config:?}");
            let write = events(&unanswered, "w0", EventType::Invoke, Op::Write)[0];
            assert_eq!((write.time_ns, write.token), (6 * S, Some(5)));
        }
    }

    /// Runs `variant` through `cycles` with the worker's work cancelled at true time
    /// `cancel_ns`, then waits a minute.
    fn cancelled_at(
        cancel_ns: u64,
        variant: ClientVariant,
        cycles: Vec<CyclePlan>,
    ) -> fencer_harness::History {
        simulate(async {
            let rig = Rig::new(0);
            let config = config(10 * S, 3 * S)
                .for_workload(fencer_harness::Workload::FencedRegister, variant);
            let worker = rig.worker(&config, FakeLock::granting(7), FakeStore::default());
            let faults = std::sync::Arc::clone(rig.faults());
            let cancel = fencer_harness::task::spawn(async move {
                sleep_ns(cancel_ns).await;
                faults.start(WorkerFault::Cancel, cancel_ns);
            });
            worker.run(&WorkerPlan { cycles }, &config, 0).await;
            let _ = cancel.await;
            sleep_ns(60 * S).await;
            rig.history()
        })
    }

    #[test]
    fn cancelled_work_ends_its_renewal_and_still_sends_its_write_late_unasked() {
        let history = cancelled_at(2 * S, ClientVariant::Reference, vec![cycle(4 * S, S, 0)]);
        // Cancelled at 2 s, while thinking: no check, no release by the worker (it tells that
        // it abandoned the lease, at the cancellation), no renewal after the cancellation.
        assert_eq!(
            steps(&history, "w0"),
            [
                "invoke acquire",
                "ok acquire",
                "invoke read",
                "ok read",
                "notice abandoned"
            ]
        );
        let abandoned = events(&history, "w0", EventType::Notice, Op::Abandoned);
        assert_eq!(times(&abandoned), [2 * S]);
        assert!(events(&history, "w0:renew", EventType::Invoke, Op::Renew).is_empty());
        // The abandoned work finishes preparing and sends its write at 3 s, with its token.
        let late = events(&history, "w0:late", EventType::Invoke, Op::Write);
        assert_eq!(times(&late), [3 * S]);
        assert_eq!(late[0].token, Some(7));
        assert_eq!(late[0].write_id.as_deref(), Some("w0-0"));
    }

    #[test]
    fn work_cancelled_after_its_write_was_sent_leaves_nothing_to_send_late() {
        let history = cancelled_at(2 * S, ClientVariant::Reference, vec![cycle(0, 0, 4 * S)]);
        assert_eq!(
            times(&events(&history, "w0", EventType::Invoke, Op::Write)),
            [0]
        );
        assert!(events(&history, "w0:late", EventType::Invoke, Op::Write).is_empty());
        assert!(events(&history, "w0", EventType::Invoke, Op::Release).is_empty());
    }

    #[test]
    fn a_cancellation_that_comes_with_no_lease_held_cancels_the_next_work_halfway_through_thinking()
    {
        let waiting = CyclePlan {
            delay_ns: 5 * S,
            ..cycle(4 * S, S, 0)
        };
        let history = cancelled_at(S, ClientVariant::Reference, vec![waiting]);
        // Idle until 5 s; granted then; cancelled 2 s into its 4 s of thinking.
        let late = events(&history, "w0:late", EventType::Invoke, Op::Write);
        assert_eq!(
            times(&late),
            [8 * S],
            "cancelled at 7 s, sent a second later"
        );
        assert!(events(&history, "w0", EventType::Invoke, Op::Check).is_empty());
    }

    #[test]
    fn an_eternal_watchdog_renews_a_cancelled_lease_for_nobody() {
        let eternal = cancelled_at(
            2 * S,
            ClientVariant::EternalWatchdog,
            vec![
                cycle(4 * S, S, 0),
                CyclePlan {
                    delay_ns: 20 * S,
                    ..cycle(0, 0, 0)
                },
            ],
        );
        let first_owner = &events(&eternal, "w0", EventType::Invoke, Op::Acquire)[0].owner;
        let renewed: Vec<u64> = events(&eternal, "w0:renew", EventType::Invoke, Op::Renew)
            .iter()
            .filter(|renew| &renew.owner == first_owner)
            .map(|renew| renew.time_ns)
            .collect();
        // Renewing every 3 s from the grant, long past the cancellation at 2 s: the worker's
        // own next cycle finds the lock busy for all its attempts (1,000, every 0.5 s).
        assert_eq!(renewed[..4], [3 * S, 6 * S, 9 * S, 12 * S]);
        assert!(renewed.len() > 150, "{} renewals", renewed.len());
        let granted = events(&eternal, "w0", EventType::Ok, Op::Acquire);
        assert_eq!(granted.len(), 1, "the second cycle never got the lock");
    }

    #[test]
    fn each_worker_s_script_comes_from_its_own_stream_within_the_ttl_s_bounds() {
        let ttl = 10 * S;
        let three = plan_workers(&RegisterConfig::new(3, 50, ttl, 3 * S), 9);
        let four = plan_workers(&RegisterConfig::new(4, 50, ttl, 3 * S), 9);
        assert_eq!(
            three[..],
            four[..3],
            "adding a worker leaves the others alone"
        );
        let longer = plan_workers(&RegisterConfig::new(3, 60, ttl, 3 * S), 9);
        for (short, long) in three.iter().zip(&longer) {
            assert_eq!(
                short.cycles[..],
                long.cycles[..50],
                "more cycles only append"
            );
        }
        assert_ne!(three[0], three[1]);
        assert_ne!(
            three,
            plan_workers(&RegisterConfig::new(3, 50, ttl, 3 * S), 10)
        );
        for cycle in four.iter().flat_map(|worker| &worker.cycles) {
            assert!(cycle.delay_ns <= ttl / 2 && cycle.think_ns <= ttl / 2);
            assert!(cycle.prepare_ns <= ttl / 50 && cycle.hold_ns <= ttl / 5);
            assert_eq!(cycle.value, None);
        }
    }
}
