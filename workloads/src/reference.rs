//! fencer's reference lock client library, and its mutants: what a careful library over any
//! [`LockService`](fencer_harness::LockService) does, and the bugs people ship in it.
//!
//! - **acquire**: one owner-tokened attempt; once granted, a watchdog renews the lease every
//!   renewal period in a task of the worker's process (it freezes with the worker). An attempt
//!   whose outcome is unknown may have been granted, so it is released at once (a no-op if it
//!   was not), and reported unknown.
//! - **check**: the belief first (a lease already lost or unconfirmed past its validity is not
//!   held), then the lock service itself: an owner-checked renew, the one call every lock
//!   service answers atomically against its current holder. Only the service's yes is a yes.
//! - **lost**: whenever a renewal, check or release is refused, or a whole TTL passes with no
//!   renewal confirmed, the worker is told, once per lease.
//! - **release**: the watchdog stopped first, then the owner-checked release.
//! - **cancel**: the lease's guard dropped, and with it the watchdog.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use fencer_harness::task::AbortHandle;
use fencer_harness::{
    Acquired, CallError, Lease, LibraryContext, LockClient, LockLibrary, Owned, OwnerToken, roles,
};

use crate::kind::ClientVariant;
use crate::lease::{LeaseBelief, Watchdog, WatchdogRules, tell_lost};

/// How much of a TTL a `sparse-renewal` watchdog waits between renewals, in thousandths.
const SPARSE_PERIOD_PER_MILLE_TTL: u64 = 600;

/// The reference library of one worker, or a mutant of it.
pub struct ReferenceLibrary {
    cx: LibraryContext,
    variant: ClientVariant,
    /// Every watchdog this library started that may still run, by the slot whose process
    /// name it renews as, so two running at once never share a name.
    slots: Mutex<Slots>,
    /// Watchdogs kept by the library rather than by their lease: a `zombie-renewal` one
    /// after its release, an `eternal-watchdog` one until its release.
    kept: Mutex<Vec<(OwnerToken, Watchdog)>>,
}

/// The renewal tasks' slots: the clients by slot (made once: one task after another renews as
/// the same process) and the tasks that hold a slot.
#[derive(Default)]
struct Slots {
    clients: Vec<LockClient>,
    taken: Vec<(usize, AbortHandle)>,
}

/// What a lease of the reference library keeps: the belief its watchdog and check share, and
/// the watchdog itself when the lease owns it (dropping the lease ends it).
struct LeaseState {
    belief: Arc<LeaseBelief>,
    watchdog: Option<Watchdog>,
}

impl ReferenceLibrary {
    /// The library `variant` of the worker `cx` describes.
    pub fn new(cx: &LibraryContext, variant: ClientVariant) -> ReferenceLibrary {
        ReferenceLibrary {
            cx: cx.clone(),
            variant,
            slots: Mutex::default(),
            kept: Mutex::default(),
        }
    }

    fn ttl(&self) -> Duration {
        self.cx.settings().ttl
    }

    fn rules(&self) -> WatchdogRules {
        let ttl = self.ttl();
        let every = match self.variant {
            ClientVariant::SparseRenewal => ttl * SPARSE_PERIOD_PER_MILLE_TTL as u32 / 1_000,
            _ => self.cx.settings().renew_every,
        };
        WatchdogRules {
            ttl,
            every,
            swallow_failures: self.variant == ClientVariant::SilentWatchdog,
        }
    }

    /// Whether this variant tells its worker anything at all.
    fn tells(&self) -> bool {
        self.variant != ClientVariant::SilentWatchdog
    }

    /// Starts a watchdog for `owner` in the lowest free slot.
    fn start_watchdog(&self, owner: OwnerToken, belief: &Arc<LeaseBelief>) -> Watchdog {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.taken.retain(|(_, task)| !task.is_finished());
        let slot = (0..=slots.taken.len())
            .find(|slot| slots.taken.iter().all(|(taken, _)| taken != slot))
            .expect("n tasks leave one of n + 1 slots free");
        while slots.clients.len() <= slot {
            let task = roles::renewal_task(self.cx.worker(), slots.clients.len());
            let client = self.cx.client().for_task(&task);
            slots.clients.push(client);
        }
        let client = slots.clients[slot].clone();
        let watchdog = Watchdog::start(&self.cx, client, owner, self.rules(), Arc::clone(belief));
        slots.taken.push((slot, watchdog.abort_handle()));
        watchdog
    }

    fn keep(&self, owner: OwnerToken, watchdog: Watchdog) {
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        kept.retain(|(_, watchdog)| watchdog.is_running());
        kept.push((owner, watchdog));
    }

    fn take_kept(&self, owner: OwnerToken) -> Option<Watchdog> {
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let at = kept.iter().position(|(held, _)| *held == owner)?;
        Some(kept.remove(at).1)
    }

    fn state(lease: &Lease) -> Option<&LeaseState> {
        lease.guard.as_ref()?.downcast_ref::<LeaseState>()
    }

    fn tell_lost(&self, belief: &LeaseBelief, owner: OwnerToken, why: &str) {
        if self.tells() {
            tell_lost(&self.cx, belief, owner, why);
        }
    }
}

#[async_trait]
impl LockLibrary for ReferenceLibrary {
    async fn acquire(
        &self,
        lock: &LockClient,
        owner: OwnerToken,
    ) -> Result<Option<Lease>, CallError> {
        let name = &self.cx.settings().lock;
        let sent_local_ns = self.cx.clock().now_ns();
        match lock.acquire(name, owner, self.ttl()).await {
            Ok(Acquired::Granted { fencing_token }) => {
                let ttl_ns = i64::try_from(self.ttl().as_nanos()).unwrap_or(i64::MAX);
                let belief = Arc::new(LeaseBelief::new(sent_local_ns.saturating_add(ttl_ns)));
                let watchdog = self.start_watchdog(owner, &belief);
                let owned = match self.variant {
                    ClientVariant::EternalWatchdog => {
                        self.keep(owner, watchdog);
                        None
                    }
                    _ => Some(watchdog),
                };
                let state = LeaseState {
                    belief,
                    watchdog: owned,
                };
                Ok(Some(
                    Lease::new(owner, Some(fencing_token)).with_guard(state),
                ))
            }
            Ok(Acquired::Busy) => Ok(None),
            Err(CallError::NotApplied(why)) => Err(CallError::NotApplied(why)),
            Err(CallError::Unknown(why)) => {
                let _ = lock.release(name, owner).await;
                Err(CallError::Unknown(why))
            }
        }
    }

    async fn check(&self, lock: &LockClient, lease: &Lease) -> Result<bool, CallError> {
        let Some(state) = ReferenceLibrary::state(lease) else {
            return Err(CallError::NotApplied(
                "not a lease of this library".to_string(),
            ));
        };
        let belief = &state.belief;
        if self.variant == ClientVariant::CachedCheck {
            return Ok(belief.status() != crate::lease::LeaseStatus::Lost);
        }
        if belief.ran_out_at(self.cx.clock().now_ns()) {
            belief.lose();
            self.tell_lost(belief, lease.owner, "no renewal confirmed for a whole TTL");
            return Ok(false);
        }
        let sent_local_ns = self.cx.clock().now_ns();
        match lock
            .renew(&self.cx.settings().lock, lease.owner, self.ttl())
            .await
        {
            Ok(Owned::Done) => {
                let ttl_ns = i64::try_from(self.ttl().as_nanos()).unwrap_or(i64::MAX);
                belief.confirm(sent_local_ns, ttl_ns);
                // A watchdog refused while this check was in flight already told the worker
                // the lease is lost: the check must not contradict it.
                Ok(belief.status() != crate::lease::LeaseStatus::Lost)
            }
            Ok(Owned::NotOwner) | Err(CallError::NotApplied(_)) => {
                belief.lose();
                self.tell_lost(belief, lease.owner, "ownership check refused");
                Ok(false)
            }
            // Not confirmed: not held, as far as the library can say.
            Err(CallError::Unknown(_)) => Ok(false),
        }
    }

    async fn release(&self, lock: &LockClient, mut lease: Lease) -> Result<Owned, CallError> {
        let owner = lease.owner;
        let mut state = lease
            .guard
            .take()
            .and_then(|guard| guard.downcast::<LeaseState>().ok());
        let watchdog = state
            .as_mut()
            .and_then(|state| state.watchdog.take())
            .or_else(|| self.take_kept(owner));
        if let Some(watchdog) = watchdog {
            if self.variant == ClientVariant::ZombieRenewal {
                // The bug: the watchdog is left running past the release.
                self.keep(owner, watchdog);
            } else {
                watchdog.stop().await;
            }
        }
        let reply = lock.release(&self.cx.settings().lock, owner).await;
        if let (Ok(Owned::NotOwner), Some(state)) = (&reply, &state) {
            state.belief.lose();
            self.tell_lost(&state.belief, owner, "release refused: the lease was gone");
        }
        reply
    }
}

#[cfg(test)]
mod tests {
    use fencer_harness::{EventType, Freezable, Op, Owned, WorkerFault, Workload};

    use crate::kind::ClientVariant;
    use crate::register::{RegisterConfig, WorkerPlan};
    use crate::testkit::{
        FakeLock, FakeStore, MS, Rig, S, config, cycle, events, run_worker, sleep_ns, steps, times,
    };

    fn as_client(variant: ClientVariant) -> RegisterConfig {
        config(10 * S, 3 * S).for_workload(Workload::FencedRegister, variant)
    }

    #[test]
    fn the_check_asks_the_service_with_an_owner_checked_renew_as_the_check_process() {
        let history = run_worker(
            &as_client(ClientVariant::Reference),
            vec![cycle(S, 0, 0)],
            FakeLock::granting(3),
            FakeStore::default(),
            |_| {},
        );
        let acquired = events(&history, "w0", EventType::Invoke, Op::Acquire)[0];
        let asked = events(&history, "w0:check", EventType::Invoke, Op::Renew);
        assert_eq!(times(&asked), [S]);
        assert_eq!(asked[0].owner, acquired.owner);
        assert_eq!(asked[0].ttl_ns, Some(10 * S));
        let check = events(&history, "w0", EventType::Ok, Op::Check)[0];
        assert_eq!(check.owner, acquired.owner);
        assert_eq!(check.lock.as_deref(), Some("lock-1"));
    }

    #[test]
    fn a_check_the_service_refuses_answers_not_held_and_tells_the_worker_once() {
        let history = run_worker(
            &as_client(ClientVariant::Reference),
            vec![cycle(S, 0, 0)],
            FakeLock::granting(3).renews_answer([Ok(Owned::NotOwner)]),
            FakeStore::default(),
            |_| {},
        );
        assert_eq!(
            steps(&history, "w0"),
            [
                "invoke acquire",
                "ok acquire",
                "invoke read",
                "ok read",
                "invoke check",
                "notice lost",
                "fail check",
                "invoke release",
                "ok release",
            ],
            "told at the refusal"
        );
        let not_held = events(&history, "w0", EventType::Fail, Op::Check)[0];
        assert_eq!(not_held.error.as_deref(), Some("not-held"));
    }

    #[test]
    fn a_release_the_service_refuses_tells_the_worker_its_lease_was_gone() {
        // A lock that lost the lease (a restart, say) between the check and the release.
        let lock = FakeLock::granting(3);
        let history = run_worker(
            &as_client(ClientVariant::Reference),
            vec![cycle(0, 0, 0)],
            lock.releases_refused(),
            FakeStore::default(),
            |_| {},
        );
        let lost = events(&history, "w0", EventType::Notice, Op::Lost);
        assert_eq!(lost.len(), 1);
        assert_eq!(
            lost[0].error.as_deref(),
            Some("release refused: the lease was gone")
        );
    }

    /// Runs `variant` through one cycle of 2 s thinking, its worker (and so its library)
    /// frozen from 1 s to 12 s, past the lease's 10 s TTL.
    fn paused_past_the_ttl(variant: ClientVariant) -> fencer_harness::History {
        crate::testkit::simulate(async {
            let rig = Rig::new(0);
            let config = as_client(variant);
            let worker = rig.worker(&config, FakeLock::granting(3), FakeStore::default());
            let faults = std::sync::Arc::clone(rig.faults());
            let pause = fencer_harness::task::spawn(async move {
                sleep_ns(S).await;
                faults.start(WorkerFault::Freeze, 12 * S);
            });
            let plan = WorkerPlan {
                cycles: vec![cycle(2 * S, 0, 0)],
            };
            Freezable::new(
                worker.run(&plan, &config, 0),
                std::sync::Arc::clone(rig.faults()),
                rig.truth(),
            )
            .await;
            let _ = pause.await;
            rig.history()
        })
    }

    #[test]
    fn a_cached_check_answers_held_after_a_pause_past_the_ttl_without_asking() {
        let cached = paused_past_the_ttl(ClientVariant::CachedCheck);
        assert!(events(&cached, "w0:check", EventType::Invoke, Op::Renew).is_empty());
        assert_eq!(
            times(&events(&cached, "w0", EventType::Ok, Op::Check)),
            [12 * S]
        );
        // The reference, past the lease's validity at the thaw, claims nothing: its check
        // answers not held without asking, the worker is told the lease is lost, and nothing
        // is written.
        let reference = paused_past_the_ttl(ClientVariant::Reference);
        assert!(events(&reference, "w0:check", EventType::Invoke, Op::Renew).is_empty());
        assert!(events(&reference, "w0", EventType::Ok, Op::Check).is_empty());
        assert!(events(&reference, "w0", EventType::Invoke, Op::Write).is_empty());
        assert_eq!(
            times(&events(&reference, "w0", EventType::Notice, Op::Lost)),
            [12 * S]
        );
    }

    #[test]
    fn a_silent_watchdog_tells_the_worker_nothing_of_a_refusal() {
        let history = run_worker(
            &as_client(ClientVariant::SilentWatchdog),
            vec![cycle(5 * S, 0, 0)],
            FakeLock::granting(3).renews_answer([Ok(Owned::NotOwner)]),
            FakeStore::default(),
            |_| {},
        );
        let refused = events(&history, "w0:renew", EventType::Fail, Op::Renew);
        assert_eq!(times(&refused), [3 * S]);
        assert!(events(&history, "w0", EventType::Notice, Op::Lost).is_empty());
    }

    #[test]
    fn a_sparse_renewal_renews_every_six_tenths_of_the_ttl_whatever_the_settings() {
        let history = run_worker(
            &as_client(ClientVariant::SparseRenewal),
            vec![cycle(0, 0, 13 * S)],
            FakeLock::granting(3),
            FakeStore::default(),
            |_| {},
        );
        let renews = events(&history, "w0:renew", EventType::Invoke, Op::Renew);
        assert_eq!(times(&renews), [6 * S, 12 * S]);
    }

    #[test]
    fn renewals_answered_late_are_timed_from_their_send() {
        let history = crate::testkit::run_worker_over(
            100 * MS,
            &as_client(ClientVariant::Reference),
            vec![cycle(0, 0, 4 * S)],
            FakeLock::granting(3),
            FakeStore::default(),
        );
        let renews = events(&history, "w0:renew", EventType::Invoke, Op::Renew);
        // Granted at 0.2 s: the watchdog renews 3 s later, whatever the check did meanwhile.
        assert_eq!(times(&renews), [3_200 * MS]);
    }
}
