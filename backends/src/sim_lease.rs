//! The reference lease service of the simulation tier, and its mutants.
//!
//! Leases expire on the lock server's own clock (which the nemesis skews), owner tokens are
//! compared atomically with every renew and release, and fencing tokens come from a per-lock
//! counter. Every change it applies is logged to the history as ground truth (`type: log`,
//! process `lock`), which is what lets checkers see a lease race the clients could not.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use fencer_harness::{
    Acquired, CallError, FencingToken, LocalClock, LockChange, LockService, Owned, OwnerToken,
    Recorder, Restartable, caller_clock,
};

use crate::ttl_ns;

/// Which rules the lease service follows: the reference, or one known bug.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum LeaseRules {
    /// Compare-and-renew, compare-and-release, counter tokens.
    Reference,
    /// Release deletes the lease without comparing the owner (Redis `DEL` instead of the Lua
    /// compare-and-delete): a paused holder's late release frees its successor's lease.
    UnsafeRelease,
    /// Renew extends whatever lease is live without comparing the owner (`PEXPIRE` without the
    /// `GET == owner` check): a stale holder keeps its successor's lease alive.
    UncheckedRenew,
    /// Renew finds the caller's lease even after it expired and was granted to someone else,
    /// and revives it: two live leases at once.
    ResurrectingRenew,
    /// The fencing token is the lock server's wall clock in milliseconds: a backward clock step
    /// hands out a smaller token than an earlier grant.
    ClockTokens,
    /// The token counter lives only in memory and restarts from zero with the server (a Redis
    /// `INCR fence:k` without persistence, an in-process counter): after a restart, grants
    /// reuse tokens the store has already seen.
    VolatileCounter,
    /// Renew accepts the caller's lease up to a grace period (a fiftieth of the TTL) after it
    /// expired, even when a rival was granted the lock meanwhile: leases are kept per owner
    /// and the renew's "expires > now - grace" skew tolerance revives the old one beside its
    /// successor. Only a renew that lands within the grace of the expiry, after a rival's
    /// grant, shows it.
    LateRenew,
    /// Release compares the owner and logs the release, but deletes another key than the one
    /// the lease lives under (the lock's name built with a different prefix on the release
    /// path): the lease stays until its TTL runs out, and acquires meanwhile are answered
    /// busy although the service's own log says the lock was released.
    BusyWhileFree,
    /// Renew compares the owner and the expiry, then sets the lease to never expire (Redis
    /// `SET key owner` without `PX`, which drops the key's TTL, or a `PERSIST` by mistake):
    /// once renewed, a lease whose holder stops without releasing holds the lock for good.
    StickyLock,
    /// The lease outlives its expiry until the next grant takes the lock over, and renew
    /// compares only the owner (`UPDATE leases SET expires = now + ttl WHERE name = ? AND
    /// owner = ?`, without `AND expires > now`): a renew arriving after the lease expired, with
    /// nobody granted the lock in between, revives it.
    ReviveExpired,
    /// Renew answers ok without applying anything when, by the caller's clock, the lease was
    /// granted or last renewed less than a quarter of a TTL ago (repeated renews coalesced on
    /// the client's timestamp): a caller whose clock steps back or runs slow is told its lease
    /// was renewed while it runs out.
    ClockThrottledRenew,
    /// Release compares the owner in one round trip and deletes the lock's key in a second
    /// one, [`STEP_GAP_MIN_NS`] to [`STEP_GAP_MAX_NS`] later (`GET` then `DEL` from the
    /// client, instead of one compare-and-delete script): a release whose check passes just
    /// before the lease expires deletes a rival's lease granted in between.
    TwoStepRelease,
    /// Renew compares the owner and the expiry in one round trip and extends the lock's key
    /// in a second one, [`STEP_GAP_MIN_NS`] to [`STEP_GAP_MAX_NS`] later (`GET` then
    /// `PEXPIRE`, whose answer is not read): a renew whose check passes just before the lease
    /// expires extends a rival's lease granted in between, or, with none, answers ok while
    /// the lease has run out.
    TwoStepRenew,
    /// Renew answers ok without applying anything when the caller's lease has expired and
    /// nobody was granted the lock since (an `UPDATE … WHERE owner = ? AND expires > now`
    /// whose affected-row count is never read): the caller is told its lease was extended
    /// while it has run out.
    ExpiredRenewOk,
}

/// The least gap between the two round trips of [`LeaseRules::TwoStepRelease`] and
/// [`LeaseRules::TwoStepRenew`]: a millisecond, a fast client on a local network.
pub const STEP_GAP_MIN_NS: u64 = 1_000_000;

/// The greatest such gap: ten milliseconds, a loaded client or a cross-zone hop.
pub const STEP_GAP_MAX_NS: u64 = 10_000_000;

/// The gap between the two steps of one owner's calls, fixed by its owner token so that a run
/// replays as it ran and different acquisitions see different gaps.
fn step_gap(owner: OwnerToken) -> Duration {
    let spread_ns = STEP_GAP_MAX_NS - STEP_GAP_MIN_NS + 1;
    let within_ns = u64::try_from(owner.0 % u128::from(spread_ns)).unwrap_or(0);
    Duration::from_nanos(STEP_GAP_MIN_NS + within_ns)
}

/// [`LeaseRules::LateRenew`]'s grace period, as a fraction of the TTL (`ttl / this`).
pub const LATE_RENEW_GRACE_PER_TTL: i64 = 50;

/// [`LeaseRules::ClockThrottledRenew`]'s least interval between two applied renews on the
/// caller's clock, as a fraction of the TTL (`ttl / this`).
pub const RENEW_THROTTLE_PER_TTL: i64 = 4;

/// The expiry of a [`LeaseRules::StickyLock`] lease once renewed: never.
pub const NEVER_EXPIRES_NS: i64 = i64::MAX;

impl LeaseRules {
    /// Every variant, reference first.
    pub const ALL: [LeaseRules; 14] = [
        LeaseRules::Reference,
        LeaseRules::UnsafeRelease,
        LeaseRules::UncheckedRenew,
        LeaseRules::ResurrectingRenew,
        LeaseRules::ClockTokens,
        LeaseRules::VolatileCounter,
        LeaseRules::LateRenew,
        LeaseRules::BusyWhileFree,
        LeaseRules::StickyLock,
        LeaseRules::ReviveExpired,
        LeaseRules::ClockThrottledRenew,
        LeaseRules::TwoStepRelease,
        LeaseRules::TwoStepRenew,
        LeaseRules::ExpiredRenewOk,
    ];
}

#[derive(Clone, Copy, Debug)]
struct Lease {
    owner: OwnerToken,
    token: FencingToken,
    expires_ns: i64,
    /// The caller's clock when the lease was granted or last renewed, read only under
    /// [`LeaseRules::ClockThrottledRenew`].
    confirmed_caller_ns: Option<i64>,
}

#[derive(Debug, Default)]
struct LockState {
    counter: u64,
    /// Granted leases not yet released, oldest first; the last one is the current lease. The
    /// reference only ever looks at the last one; `ResurrectingRenew` looks further back.
    leases: Vec<Lease>,
}

impl LockState {
    fn current(&self) -> Option<&Lease> {
        self.leases.last()
    }
}

/// What a renew did to the lock's state.
enum Renewed {
    /// The lease was extended.
    Applied(Lease),
    /// No lease of the caller's to renew.
    Refused,
    /// Answered ok without being applied ([`LeaseRules::ClockThrottledRenew`]).
    Skipped,
}

/// The simulated lock server.
#[derive(Debug)]
pub struct SimLeaseService {
    clock: LocalClock,
    recorder: Arc<Recorder>,
    rules: LeaseRules,
    locks: Mutex<BTreeMap<String, LockState>>,
    /// True time until which a restart keeps the server down (0: up).
    down_until_ns: AtomicU64,
}

impl SimLeaseService {
    /// A lock server whose time is `clock` (skewable by the nemesis), logging to `recorder`.
    pub fn new(clock: LocalClock, recorder: Arc<Recorder>, rules: LeaseRules) -> SimLeaseService {
        SimLeaseService {
            clock,
            recorder,
            rules,
            locks: Mutex::new(BTreeMap::new()),
            down_until_ns: AtomicU64::new(0),
        }
    }

    /// The lock server's clock now, for a call that reaches the server; refused while a
    /// restart keeps it down: the connection is refused before anything is read, so nothing
    /// was applied.
    fn now_unless_down(&self) -> Result<i64, CallError> {
        let true_ns = self.clock.truth().now_ns();
        if true_ns < self.down_until_ns.load(Ordering::Relaxed) {
            return Err(CallError::NotApplied("connection refused".into()));
        }
        Ok(self.clock.read_at(true_ns))
    }

    fn with_lock<T>(&self, lock: &str, body: impl FnOnce(&mut LockState) -> T) -> T {
        let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        // Looked up by `&str` first: a lock seen before costs no `String`.
        if let Some(state) = locks.get_mut(lock) {
            return body(state);
        }
        body(locks.entry(lock.to_string()).or_default())
    }
}

/// The calls of the two-step mutants, and the expired-lease check of
/// [`LeaseRules::ExpiredRenewOk`].
impl SimLeaseService {
    /// Whether the current lease of `lock` is `owner`'s and has expired by the server's clock.
    fn own_lease_expired(&self, lock: &str, owner: OwnerToken) -> Result<bool, CallError> {
        let now_ns = self.now_unless_down()?;
        Ok(self.with_lock(lock, |state| {
            state
                .current()
                .is_some_and(|lease| lease.owner == owner && lease.expires_ns <= now_ns)
        }))
    }

    /// Records that `owner`'s release on `lock` removed `lease` at `now_ns`: done.
    fn record_release(&self, lock: &str, now_ns: i64, owner: OwnerToken, lease: &Lease) -> Owned {
        let released = LockChange::Released {
            owner,
            holder: lease.owner,
            holder_token: lease.token,
        };
        self.recorder
            .record_lock_change(lock, now_ns, &released, None);
        Owned::Done
    }

    /// Logs that `owner`'s renew extended `lease` by `ttl`, as every renewing path does.
    fn record_renewal(
        &self,
        lock: &str,
        now_ns: i64,
        owner: OwnerToken,
        lease: &Lease,
        ttl: Duration,
    ) -> Owned {
        let renewed = LockChange::Renewed {
            owner,
            holder: lease.owner,
            holder_token: lease.token,
            ttl,
            expires_ns: lease.expires_ns,
        };
        self.recorder
            .record_lock_change(lock, now_ns, &renewed, None);
        Owned::Done
    }

    /// [`LeaseRules::TwoStepRelease`]: the owner compared, then after the step gap the
    /// current lease deleted, whoever holds it by then.
    async fn release_in_two_steps(
        &self,
        lock: &str,
        owner: OwnerToken,
    ) -> Result<Owned, CallError> {
        self.now_unless_down()?;
        let checked = self.with_lock(lock, |state| {
            state.current().is_some_and(|lease| lease.owner == owner)
        });
        if !checked {
            return Ok(Owned::NotOwner);
        }
        fencer_harness::time::sleep(step_gap(owner)).await;
        let now_ns = self.now_unless_down()?;
        let Some(lease) = self.with_lock(lock, |state| state.leases.pop()) else {
            return Ok(Owned::NotOwner);
        };
        Ok(self.record_release(lock, now_ns, owner, &lease))
    }

    /// [`LeaseRules::TwoStepRenew`]: the owner and expiry compared, then after the step gap
    /// the live lease extended, whoever holds it by then; ok whatever the second step found,
    /// since the owner was checked.
    async fn renew_in_two_steps(
        &self,
        lock: &str,
        owner: OwnerToken,
        ttl: Duration,
    ) -> Result<Owned, CallError> {
        let now_ns = self.now_unless_down()?;
        let checked = self.with_lock(lock, |state| {
            state
                .current()
                .is_some_and(|lease| lease.owner == owner && lease.expires_ns > now_ns)
        });
        if !checked {
            return Ok(Owned::NotOwner);
        }
        fencer_harness::time::sleep(step_gap(owner)).await;
        let now_ns = self.now_unless_down()?;
        let extended = self.with_lock(lock, |state| {
            let lease = state
                .leases
                .last_mut()
                .filter(|lease| lease.expires_ns > now_ns)?;
            lease.expires_ns = now_ns.saturating_add(ttl_ns(ttl));
            Some(*lease)
        });
        let Some(lease) = extended else {
            // Nothing changed, so nothing is logged.
            return Ok(Owned::Done);
        };
        Ok(self.record_renewal(lock, now_ns, owner, &lease, ttl))
    }
}

/// The calling process's clock, under [`LeaseRules::ClockThrottledRenew`] (the only rules
/// that look at it); `None` otherwise or outside a call.
fn caller_now_ns(rules: LeaseRules) -> Option<i64> {
    (rules == LeaseRules::ClockThrottledRenew)
        .then(caller_clock)
        .flatten()
        .map(|clock| clock.now_ns())
}

/// How soon after the last applied renew, by the caller's clock, a
/// [`LeaseRules::ClockThrottledRenew`] service skips another.
fn renew_throttle_ns(ttl: Duration) -> i64 {
    ttl_ns(ttl) / RENEW_THROTTLE_PER_TTL
}

/// How long after its expiry a [`LeaseRules::LateRenew`] service still renews a lease.
fn late_renew_grace_ns(ttl: Duration) -> i64 {
    ttl_ns(ttl) / LATE_RENEW_GRACE_PER_TTL
}

#[async_trait]
impl LockService for SimLeaseService {
    async fn acquire(
        &self,
        lock: &str,
        owner: OwnerToken,
        ttl: Duration,
    ) -> Result<Acquired, CallError> {
        let now_ns = self.now_unless_down()?;
        let caller_ns = caller_now_ns(self.rules);
        let granted = self.with_lock(lock, |state| {
            if state
                .current()
                .is_some_and(|lease| lease.expires_ns > now_ns)
            {
                return None;
            }
            let token = match self.rules {
                LeaseRules::ClockTokens => (now_ns.max(0) / 1_000_000) as u64,
                _ => {
                    state.counter += 1;
                    state.counter
                }
            };
            let lease = Lease {
                owner,
                token,
                expires_ns: now_ns.saturating_add(ttl_ns(ttl)),
                confirmed_caller_ns: caller_ns,
            };
            match self.rules {
                LeaseRules::ResurrectingRenew => {}
                // Rows past their grace are garbage; the rest may still be renewed.
                LeaseRules::LateRenew => {
                    let grace_ns = late_renew_grace_ns(ttl);
                    state
                        .leases
                        .retain(|lease| lease.expires_ns.saturating_add(grace_ns) > now_ns);
                }
                _ => state.leases.clear(),
            }
            state.leases.push(lease);
            Some(lease)
        });
        let Some(lease) = granted else {
            return Ok(Acquired::Busy);
        };
        let granted = LockChange::Granted {
            owner,
            fencing_token: lease.token,
            ttl,
            expires_ns: lease.expires_ns,
        };
        self.recorder
            .record_lock_change(lock, now_ns, &granted, None);
        Ok(Acquired::Granted {
            fencing_token: lease.token,
        })
    }

    async fn renew(
        &self,
        lock: &str,
        owner: OwnerToken,
        ttl: Duration,
    ) -> Result<Owned, CallError> {
        match self.rules {
            LeaseRules::TwoStepRenew => return self.renew_in_two_steps(lock, owner, ttl).await,
            LeaseRules::ExpiredRenewOk if self.own_lease_expired(lock, owner)? => {
                // Nothing changed, so nothing is logged.
                return Ok(Owned::Done);
            }
            _ => {}
        }
        let now_ns = self.now_unless_down()?;
        let caller_ns = caller_now_ns(self.rules);
        let renewed = self.with_lock(lock, |state| {
            let lease = match self.rules {
                LeaseRules::ResurrectingRenew => state
                    .leases
                    .iter_mut()
                    .rev()
                    .find(|lease| lease.owner == owner),
                LeaseRules::UncheckedRenew => state
                    .leases
                    .last_mut()
                    .filter(|lease| lease.expires_ns > now_ns),
                LeaseRules::LateRenew => {
                    let grace_ns = late_renew_grace_ns(ttl);
                    state.leases.iter_mut().rev().find(|lease| {
                        lease.owner == owner && lease.expires_ns.saturating_add(grace_ns) > now_ns
                    })
                }
                LeaseRules::ReviveExpired => {
                    state.leases.last_mut().filter(|lease| lease.owner == owner)
                }
                _ => state
                    .leases
                    .last_mut()
                    .filter(|lease| lease.owner == owner && lease.expires_ns > now_ns),
            };
            let Some(lease) = lease else {
                return Renewed::Refused;
            };
            if let (Some(caller_ns), Some(confirmed_ns)) = (caller_ns, lease.confirmed_caller_ns)
                && caller_ns < confirmed_ns.saturating_add(renew_throttle_ns(ttl))
            {
                return Renewed::Skipped;
            }
            lease.expires_ns = match self.rules {
                LeaseRules::StickyLock => NEVER_EXPIRES_NS,
                _ => now_ns.saturating_add(ttl_ns(ttl)),
            };
            lease.confirmed_caller_ns = caller_ns;
            Renewed::Applied(*lease)
        });
        let lease = match renewed {
            Renewed::Applied(lease) => lease,
            Renewed::Refused => return Ok(Owned::NotOwner),
            // Nothing changed, so nothing is logged.
            Renewed::Skipped => return Ok(Owned::Done),
        };
        Ok(self.record_renewal(lock, now_ns, owner, &lease, ttl))
    }

    async fn release(&self, lock: &str, owner: OwnerToken) -> Result<Owned, CallError> {
        if self.rules == LeaseRules::TwoStepRelease {
            return self.release_in_two_steps(lock, owner).await;
        }
        let now_ns = self.now_unless_down()?;
        let released = self.with_lock(lock, |state| {
            let position = match self.rules {
                LeaseRules::UnsafeRelease => state.leases.len().checked_sub(1),
                LeaseRules::ResurrectingRenew => {
                    state.leases.iter().rposition(|lease| lease.owner == owner)
                }
                _ => state
                    .leases
                    .len()
                    .checked_sub(1)
                    .filter(|&last| state.leases[last].owner == owner),
            }?;
            Some(match self.rules {
                // The key deleted is not the lease's: the lease stays.
                LeaseRules::BusyWhileFree => state.leases[position],
                _ => state.leases.remove(position),
            })
        });
        let Some(lease) = released else {
            return Ok(Owned::NotOwner);
        };
        Ok(self.record_release(lock, now_ns, owner, &lease))
    }

    /// Leases expire on the server's own [`LocalClock`]; nothing here reads `tokio::time`.
    fn reads_tokio_time(&self) -> bool {
        false
    }
}

#[async_trait]
impl Restartable for SimLeaseService {
    /// Every lease is lost (logged as a release of that lease by its own holder, with error
    /// `restart`, so lease-checkers see it end); the counter survives unless the rules are
    /// [`LeaseRules::VolatileCounter`].
    async fn restart(&self, down_ns: u64) -> Result<(), fencer_harness::RestartError> {
        let until_ns = self.clock.truth().now_ns().saturating_add(down_ns);
        self.down_until_ns.fetch_max(until_ns, Ordering::Relaxed);
        let lost: Vec<(String, Lease)> = {
            let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
            let mut lost = Vec::new();
            for (name, state) in locks.iter_mut() {
                lost.extend(state.leases.drain(..).map(|lease| (name.clone(), lease)));
                if self.rules == LeaseRules::VolatileCounter {
                    state.counter = 0;
                }
            }
            lost
        };
        let now_ns = self.clock.now_ns();
        for (lock, lease) in lost {
            let lost = LockChange::Released {
                owner: lease.owner,
                holder: lease.owner,
                holder_token: lease.token,
            };
            self.recorder
                .record_lock_change(&lock, now_ns, &lost, Some("restart"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencer_harness::{EventType, NodeClock, Op, TrueClock, runtime::simulation_runtime};

    const TTL: Duration = Duration::from_secs(10);
    const A: OwnerToken = OwnerToken(0xa);
    const B: OwnerToken = OwnerToken(0xb);

    /// Runs `body` against a fresh service with `rules` inside a paused runtime; returns the
    /// history it logged.
    fn with_service<F, Fut>(rules: LeaseRules, body: F) -> fencer_harness::History
    where
        F: FnOnce(Arc<SimLeaseService>, LocalClock) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        simulation_runtime().block_on(async {
            let truth = TrueClock::start();
            let recorder = Arc::new(Recorder::new(truth));
            let clock = LocalClock::new(truth, NodeClock::with_offset(0));
            let service = Arc::new(SimLeaseService::new(
                clock.clone(),
                Arc::clone(&recorder),
                rules,
            ));
            body(service, clock).await;
            recorder.take_history()
        })
    }

    async fn expire() {
        fencer_harness::time::sleep(TTL + Duration::from_millis(1)).await;
    }

    fn granted(token: FencingToken) -> Result<Acquired, CallError> {
        Ok(Acquired::Granted {
            fencing_token: token,
        })
    }

    #[test]
    fn reference_grants_increasing_tokens_and_refuses_busy_lock() {
        with_service(LeaseRules::Reference, |service, _| async move {
            assert_eq!(service.acquire("L", A, TTL).await, granted(1));
            assert_eq!(service.acquire("L", B, TTL).await, Ok(Acquired::Busy));
            expire().await;
            assert_eq!(service.acquire("L", B, TTL).await, granted(2));
        });
    }

    #[test]
    fn reference_refuses_stale_owner_renew_and_release() {
        let history = with_service(LeaseRules::Reference, |service, _| async move {
            service.acquire("L", A, TTL).await.unwrap();
            expire().await;
            assert_eq!(service.renew("L", A, TTL).await, Ok(Owned::NotOwner));
            service.acquire("L", B, TTL).await.unwrap();
            assert_eq!(service.release("L", A).await, Ok(Owned::NotOwner));
            assert_eq!(service.renew("L", B, TTL).await, Ok(Owned::Done));
            assert_eq!(service.release("L", B).await, Ok(Owned::Done));
        });
        let logged: Vec<Op> = history.events.iter().map(|event| event.f).collect();
        assert_eq!(logged, [Op::Acquire, Op::Acquire, Op::Renew, Op::Release]);
    }

    #[test]
    fn ttl_is_measured_on_the_lock_server_clock() {
        with_service(LeaseRules::Reference, |service, clock| async move {
            service.acquire("L", A, TTL).await.unwrap();
            clock.jump(TTL.as_nanos() as i64);
            // No true time passed, but the server's clock says the lease is over.
            assert_eq!(service.acquire("L", B, TTL).await, granted(2));
        });
    }

    #[test]
    fn unsafe_release_frees_the_successors_lease() {
        let history = with_service(LeaseRules::UnsafeRelease, |service, _| async move {
            service.acquire("L", A, TTL).await.unwrap();
            expire().await;
            service.acquire("L", B, TTL).await.unwrap();
            assert_eq!(service.release("L", A).await, Ok(Owned::Done));
            assert_eq!(service.acquire("L", A, TTL).await, granted(3));
        });
        let release = history.events.iter().find(|e| e.f == Op::Release).unwrap();
        assert_eq!(release.owner.as_deref(), Some(&*A.to_string()));
        assert_eq!(release.holder.as_deref(), Some(&*B.to_string()));
    }

    #[test]
    fn unchecked_renew_extends_the_successors_lease() {
        with_service(LeaseRules::UncheckedRenew, |service, _| async move {
            service.acquire("L", A, TTL).await.unwrap();
            expire().await;
            service.acquire("L", B, TTL).await.unwrap();
            assert_eq!(service.renew("L", A, TTL).await, Ok(Owned::Done));
        });
    }

    #[test]
    fn resurrecting_renew_revives_an_expired_lease() {
        let history = with_service(LeaseRules::ResurrectingRenew, |service, _| async move {
            service.acquire("L", A, TTL).await.unwrap();
            expire().await;
            service.acquire("L", B, TTL).await.unwrap();
            assert_eq!(service.renew("L", A, TTL).await, Ok(Owned::Done));
        });
        let renew = history.events.iter().find(|e| e.f == Op::Renew).unwrap();
        assert_eq!(renew.holder_token, Some(1));
    }

    #[test]
    fn clock_tokens_regress_after_a_backward_step() {
        with_service(LeaseRules::ClockTokens, |service, clock| async move {
            fencer_harness::time::sleep(Duration::from_secs(100)).await;
            let Ok(Acquired::Granted {
                fencing_token: first,
            }) = service.acquire("L", A, TTL).await
            else {
                panic!("first acquire must be granted");
            };
            service.release("L", A).await.unwrap();
            clock.jump(-50_000_000_000);
            let Ok(Acquired::Granted {
                fencing_token: second,
            }) = service.acquire("L", B, TTL).await
            else {
                panic!("second acquire must be granted");
            };
            assert!(second < first, "{second} < {first}");
        });
    }

    #[test]
    fn late_renew_revives_a_lease_within_its_grace_beside_its_successor() {
        let grace = TTL / LATE_RENEW_GRACE_PER_TTL as u32;
        let history = with_service(LeaseRules::LateRenew, |service, _| async move {
            service.acquire("L", A, TTL).await.unwrap();
            fencer_harness::time::sleep(TTL).await;
            // Expired: B is granted the lock, and A's renew, inside the grace, revives A's.
            assert_eq!(service.acquire("L", B, TTL).await, granted(2));
            fencer_harness::time::sleep(grace / 2).await;
            assert_eq!(service.renew("L", A, TTL).await, Ok(Owned::Done));
            // Past the grace, a renew is refused as the reference would.
            service.release("L", B).await.unwrap();
            service.release("L", A).await.unwrap();
            service.acquire("L", A, TTL).await.unwrap();
            fencer_harness::time::sleep(TTL + grace).await;
            assert_eq!(service.renew("L", A, TTL).await, Ok(Owned::NotOwner));
        });
        let renew = history.events.iter().find(|e| e.f == Op::Renew).unwrap();
        assert_eq!(renew.holder_token, Some(1), "the old lease came back");
        assert_eq!(renew.owner.as_deref(), Some(&*A.to_string()));
    }

    #[test]
    fn busy_while_free_logs_the_release_but_keeps_the_lease_until_its_ttl() {
        let history = with_service(LeaseRules::BusyWhileFree, |service, _| async move {
            service.acquire("L", A, TTL).await.unwrap();
            assert_eq!(service.release("L", A).await, Ok(Owned::Done));
            assert_eq!(service.acquire("L", B, TTL).await, Ok(Acquired::Busy));
            expire().await;
            assert_eq!(service.acquire("L", B, TTL).await, granted(2));
        });
        let logged: Vec<Op> = history.events.iter().map(|event| event.f).collect();
        assert_eq!(logged, [Op::Acquire, Op::Release, Op::Acquire]);
    }

    #[test]
    fn sticky_lock_keeps_a_renewed_lease_forever_and_lets_an_unrenewed_one_lapse() {
        let history = with_service(LeaseRules::StickyLock, |service, _| async move {
            service.acquire("L", A, TTL).await.unwrap();
            expire().await;
            assert_eq!(service.acquire("L", B, TTL).await, granted(2));
            assert_eq!(service.renew("L", B, TTL).await, Ok(Owned::Done));
            fencer_harness::time::sleep(TTL * 100).await;
            assert_eq!(service.acquire("L", A, TTL).await, Ok(Acquired::Busy));
            // A release still frees it.
            assert_eq!(service.release("L", B).await, Ok(Owned::Done));
            assert_eq!(service.acquire("L", A, TTL).await, granted(3));
        });
        let renew = history.events.iter().find(|e| e.f == Op::Renew).unwrap();
        assert_eq!(renew.expires_ns, Some(NEVER_EXPIRES_NS));
    }

    #[test]
    fn revive_expired_renews_an_expired_lease_until_a_rival_is_granted() {
        let history = with_service(LeaseRules::ReviveExpired, |service, _| async move {
            service.acquire("L", A, TTL).await.unwrap();
            expire().await;
            assert_eq!(service.renew("L", A, TTL).await, Ok(Owned::Done));
            assert_eq!(service.acquire("L", B, TTL).await, Ok(Acquired::Busy));
            expire().await;
            assert_eq!(service.acquire("L", B, TTL).await, granted(2));
            assert_eq!(service.renew("L", A, TTL).await, Ok(Owned::NotOwner));
            // A released lease stays released.
            service.release("L", B).await.unwrap();
            assert_eq!(service.renew("L", B, TTL).await, Ok(Owned::NotOwner));
        });
        let renew = history.events.iter().find(|e| e.f == Op::Renew).unwrap();
        assert_eq!(renew.holder_token, Some(1), "the expired lease came back");
    }

    /// A grant, a renew 3 s later, then the caller's clock stepped back 2 s and a renew 3 s
    /// after that, each through the recorded client path (so the service can read the
    /// caller's clock); a rival tries once the second renew's lease would have run out.
    /// Returns the replies: (first renew, second renew, rival's acquire) and the history.
    fn renews_across_a_backward_step(
        rules: LeaseRules,
    ) -> ((Owned, Owned, Acquired), fencer_harness::History) {
        use fencer_harness::{LatencyModel, LockClient, Network, Process, Stream, stream_rng};

        let mut replies = None;
        let out = &mut replies;
        let history = with_service(rules, |service, _| async move {
            let truth = service.clock.truth();
            let network = Arc::new(Network::new(
                LatencyModel::NONE,
                stream_rng(0, Stream::Latency, 0),
                Duration::from_secs(1),
            ));
            let client = |name: &str| {
                let clock = LocalClock::new(truth, NodeClock::with_offset(0));
                let process = Process::new(
                    name,
                    clock,
                    Arc::default(),
                    Arc::clone(&service.recorder),
                    Arc::clone(&network),
                );
                LockClient::new(process, Arc::clone(&service) as Arc<dyn LockService>)
            };
            let (holder, rival) = (client("w0"), client("w1"));
            holder.acquire("L", A, TTL).await.unwrap();
            fencer_harness::time::sleep(Duration::from_secs(3)).await;
            let first = holder.renew("L", A, TTL).await.unwrap();
            holder.process().clock().jump(-2_000_000_000);
            fencer_harness::time::sleep(Duration::from_secs(3)).await;
            let second = holder.renew("L", A, TTL).await.unwrap();
            fencer_harness::time::sleep(TTL - Duration::from_secs(3) + Duration::from_millis(1))
                .await;
            let rival_got = rival.acquire("L", B, TTL).await.unwrap();
            *out = Some((first, second, rival_got));
        });
        (replies.unwrap(), history)
    }

    #[test]
    fn clock_throttled_renew_answers_ok_without_renewing_after_the_caller_s_clock_steps_back() {
        let renews_logged = |history: &fencer_harness::History| {
            history
                .events
                .iter()
                .filter(|e| e.is(EventType::Log, Op::Renew))
                .count()
        };
        // By the caller's clock the second renew came 1 s after the first: skipped, told ok.
        let (replies, history) = renews_across_a_backward_step(LeaseRules::ClockThrottledRenew);
        assert_eq!(
            replies,
            (
                Owned::Done,
                Owned::Done,
                Acquired::Granted { fencing_token: 2 }
            )
        );
        assert_eq!(renews_logged(&history), 1);
        // The reference renews by its own clock and keeps the rival out.
        let (replies, history) = renews_across_a_backward_step(LeaseRules::Reference);
        assert_eq!(replies, (Owned::Done, Owned::Done, Acquired::Busy));
        assert_eq!(renews_logged(&history), 2);
    }

    #[test]
    fn the_reference_refuses_a_renew_one_millisecond_after_expiry() {
        with_service(LeaseRules::Reference, |service, _| async move {
            service.acquire("L", A, TTL).await.unwrap();
            fencer_harness::time::sleep(TTL + Duration::from_millis(1)).await;
            assert_eq!(service.renew("L", A, TTL).await, Ok(Owned::NotOwner));
        });
    }

    /// Acquire, restart for 1 s, try while down, then acquire after recovery; returns the
    /// tokens of the two grants and the reply received while down.
    async fn restart_and_reacquire(
        service: Arc<SimLeaseService>,
    ) -> (FencingToken, Result<Acquired, CallError>, FencingToken) {
        let Ok(Acquired::Granted {
            fencing_token: before,
        }) = service.acquire("L", A, TTL).await
        else {
            panic!("first acquire must be granted");
        };
        Restartable::restart(&*service, 1_000_000_000)
            .await
            .unwrap();
        let while_down = service.acquire("L", B, TTL).await;
        fencer_harness::time::sleep(Duration::from_secs(1)).await;
        // The lease was lost with the restart, well before its TTL: B gets the lock at once.
        let Ok(Acquired::Granted {
            fencing_token: after,
        }) = service.acquire("L", B, TTL).await
        else {
            panic!("acquire after recovery must be granted");
        };
        (before, while_down, after)
    }

    #[test]
    fn restart_loses_leases_refuses_calls_while_down_and_keeps_the_counter() {
        let mut outcome = None;
        let history = with_service(LeaseRules::Reference, |service, _| async {
            outcome = Some(restart_and_reacquire(service).await);
        });
        let (before, while_down, after) = outcome.unwrap();
        assert_eq!(
            while_down,
            Err(CallError::NotApplied("connection refused".into()))
        );
        assert!(after > before, "reference tokens survive a restart");
        let lost = history
            .events
            .iter()
            .find(|e| e.f == Op::Release)
            .expect("the lost lease is logged");
        assert_eq!(lost.error.as_deref(), Some("restart"));
        assert_eq!(lost.holder, lost.owner);
        assert_eq!(lost.holder_token, Some(before));
    }

    #[test]
    fn volatile_counter_regresses_tokens_after_a_restart() {
        let mut outcome = None;
        with_service(LeaseRules::VolatileCounter, |service, _| async {
            // Two grants first, so the regression is strict, not only a repeat.
            service.acquire("L", A, TTL).await.unwrap();
            service.release("L", A).await.unwrap();
            outcome = Some(restart_and_reacquire(service).await);
        });
        let (before, _, after) = outcome.unwrap();
        assert_eq!((before, after), (2, 1));
    }

    /// Runs a call of `service` by `A` sent `before_expiry` before A's lease expires, and an
    /// acquire by `B` at the expiry plus a microsecond; returns B's answer, A's, and the
    /// owners whose leases the log says A's call touched.
    fn race_across_the_expiry(
        rules: LeaseRules,
        before_expiry: Duration,
        call: fn(Arc<SimLeaseService>) -> OwnedCall,
    ) -> (
        Result<Acquired, CallError>,
        Result<Owned, CallError>,
        Vec<bool>,
    ) {
        let answers = Arc::new(Mutex::new(None));
        let told = Arc::clone(&answers);
        let history = with_service(rules, |service, _| async move {
            service.acquire("L", A, TTL).await.unwrap();
            fencer_harness::time::sleep(TTL - before_expiry).await;
            let held = fencer_harness::task::spawn(call(Arc::clone(&service)));
            fencer_harness::time::sleep(before_expiry + Duration::from_micros(1)).await;
            let rival = service.acquire("L", B, TTL).await;
            *told.lock().unwrap() = Some((rival, held.await.unwrap()));
        });
        let (rival, own) = answers.lock().unwrap().take().unwrap();
        // Whether each lease A's call touched was A's own.
        let touched = history
            .events
            .iter()
            .filter(|event| event.f != Op::Acquire)
            .map(|event| event.holder == event.owner)
            .collect();
        (rival, own, touched)
    }

    type OwnedCall =
        std::pin::Pin<Box<dyn std::future::Future<Output = Result<Owned, CallError>> + Send>>;

    fn release_by_a(service: Arc<SimLeaseService>) -> OwnedCall {
        Box::pin(async move { service.release("L", A).await })
    }

    fn renew_by_a(service: Arc<SimLeaseService>) -> OwnedCall {
        Box::pin(async move { service.renew("L", A, TTL).await })
    }

    #[test]
    fn a_two_step_release_checked_before_the_expiry_deletes_the_rival_s_lease() {
        let (rival, own, touched) = race_across_the_expiry(
            LeaseRules::TwoStepRelease,
            Duration::from_micros(500),
            release_by_a,
        );
        assert_eq!((rival, own), (granted(2), Ok(Owned::Done)));
        assert_eq!(touched, [false], "A's release ended B's lease");
        let (_, own, touched) = race_across_the_expiry(
            LeaseRules::Reference,
            Duration::from_micros(500),
            release_by_a,
        );
        assert_eq!(
            (own, touched),
            (Ok(Owned::Done), vec![true]),
            "the reference is atomic"
        );
    }

    #[test]
    fn a_two_step_release_whose_gap_ends_before_the_expiry_is_harmless() {
        let (rival, own, touched) = race_across_the_expiry(
            LeaseRules::TwoStepRelease,
            Duration::from_nanos(STEP_GAP_MAX_NS + 1_000_000),
            release_by_a,
        );
        assert_eq!(
            (rival, own, touched),
            (granted(2), Ok(Owned::Done), vec![true])
        );
    }

    #[test]
    fn a_two_step_renew_checked_before_the_expiry_extends_the_rival_s_lease() {
        let (rival, own, touched) = race_across_the_expiry(
            LeaseRules::TwoStepRenew,
            Duration::from_micros(500),
            renew_by_a,
        );
        assert_eq!((rival, own), (granted(2), Ok(Owned::Done)));
        assert_eq!(touched, [false], "A's renew extended B's lease");
    }

    #[test]
    fn a_two_step_renew_answers_ok_for_a_lease_that_ran_out_during_its_gap() {
        let history = with_service(LeaseRules::TwoStepRenew, |service, _| async move {
            service.acquire("L", A, TTL).await.unwrap();
            fencer_harness::time::sleep(TTL - Duration::from_micros(500)).await;
            assert_eq!(service.renew("L", A, TTL).await, Ok(Owned::Done));
            assert_eq!(
                service.acquire("L", B, TTL).await,
                granted(2),
                "A's lease is over"
            );
        });
        let renews = history.events.iter().filter(|e| e.f == Op::Renew).count();
        assert_eq!(renews, 0, "the ok renew applied nothing");
    }

    #[test]
    fn an_expired_renew_ok_service_answers_ok_without_renewing() {
        let history = with_service(LeaseRules::ExpiredRenewOk, |service, _| async move {
            service.acquire("L", A, TTL).await.unwrap();
            assert_eq!(service.renew("L", A, TTL).await, Ok(Owned::Done));
            expire().await;
            expire().await;
            assert_eq!(service.renew("L", A, TTL).await, Ok(Owned::Done));
            assert_eq!(service.acquire("L", B, TTL).await, granted(2));
            assert_eq!(service.renew("L", A, TTL).await, Ok(Owned::NotOwner));
        });
        let renews = history.events.iter().filter(|e| e.f == Op::Renew).count();
        assert_eq!(renews, 1, "only the renew of the live lease applied");
    }

    #[test]
    fn step_gaps_stay_within_their_bounds() {
        for owner in [0, 1, 8_999_999, 9_000_000, u128::MAX] {
            let gap = step_gap(OwnerToken(owner)).as_nanos() as u64;
            assert!((STEP_GAP_MIN_NS..=STEP_GAP_MAX_NS).contains(&gap), "{gap}");
        }
    }
}
