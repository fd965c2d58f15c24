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
    Acquired, CallError, Event, EventType, FencingToken, LocalClock, LockService, Op, Owned,
    OwnerToken, Recorder, Restartable,
};

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
}

/// [`LeaseRules::LateRenew`]'s grace period, as a fraction of the TTL (`ttl / this`).
pub const LATE_RENEW_GRACE_PER_TTL: i64 = 50;

impl LeaseRules {
    /// Every variant, reference first.
    pub const ALL: [LeaseRules; 7] = [
        LeaseRules::Reference,
        LeaseRules::UnsafeRelease,
        LeaseRules::UncheckedRenew,
        LeaseRules::ResurrectingRenew,
        LeaseRules::ClockTokens,
        LeaseRules::VolatileCounter,
        LeaseRules::LateRenew,
    ];
}

#[derive(Clone, Copy, Debug)]
struct Lease {
    owner: OwnerToken,
    token: FencingToken,
    expires_ns: i64,
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

    /// Refuses a call that reaches the server while a restart keeps it down: the connection
    /// is refused before anything is read, so nothing was applied.
    fn refuse_while_down(&self) -> Result<(), CallError> {
        if self.clock.truth().now_ns() < self.down_until_ns.load(Ordering::Relaxed) {
            return Err(CallError::NotApplied("connection refused".into()));
        }
        Ok(())
    }

    /// Logs a change applied at lock-server time `now_ns` (no await since it was read).
    fn log(&self, f: Op, lock: &str, now_ns: i64, fill: impl FnOnce(&mut Event)) {
        let mut event = Event {
            lock: Some(lock.to_string()),
            local_ns: Some(now_ns),
            ..Event::new("lock", EventType::Log, f)
        };
        fill(&mut event);
        self.recorder.record(event);
    }

    fn with_lock<T>(&self, lock: &str, body: impl FnOnce(&mut LockState) -> T) -> T {
        let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        body(locks.entry(lock.to_string()).or_default())
    }
}

fn ttl_ns(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_nanos()).unwrap_or(i64::MAX)
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
        self.refuse_while_down()?;
        let now_ns = self.clock.now_ns();
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
        self.log(Op::Acquire, lock, now_ns, |event| {
            event.owner = Some(owner.to_string());
            event.token = Some(lease.token);
            event.ttl_ns = Some(ttl.as_nanos() as u64);
            event.expires_ns = Some(lease.expires_ns);
        });
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
        self.refuse_while_down()?;
        let now_ns = self.clock.now_ns();
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
                _ => state
                    .leases
                    .last_mut()
                    .filter(|lease| lease.owner == owner && lease.expires_ns > now_ns),
            }?;
            lease.expires_ns = now_ns.saturating_add(ttl_ns(ttl));
            Some(*lease)
        });
        let Some(lease) = renewed else {
            return Ok(Owned::NotOwner);
        };
        self.log(Op::Renew, lock, now_ns, |event| {
            event.owner = Some(owner.to_string());
            event.holder = Some(lease.owner.to_string());
            event.holder_token = Some(lease.token);
            event.ttl_ns = Some(ttl.as_nanos() as u64);
            event.expires_ns = Some(lease.expires_ns);
        });
        Ok(Owned::Done)
    }

    async fn release(&self, lock: &str, owner: OwnerToken) -> Result<Owned, CallError> {
        self.refuse_while_down()?;
        let now_ns = self.clock.now_ns();
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
            Some(state.leases.remove(position))
        });
        let Some(lease) = released else {
            return Ok(Owned::NotOwner);
        };
        self.log(Op::Release, lock, now_ns, |event| {
            event.owner = Some(owner.to_string());
            event.holder = Some(lease.owner.to_string());
            event.holder_token = Some(lease.token);
        });
        Ok(Owned::Done)
    }
}

#[async_trait]
impl Restartable for SimLeaseService {
    /// Every lease is lost (logged as a release of that lease by its own holder, with error
    /// `restart`, so lease-checkers see it end); the counter survives unless the rules are
    /// [`LeaseRules::VolatileCounter`].
    async fn restart(&self, down_ns: u64) -> Result<(), String> {
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
            self.log(Op::Release, &lock, now_ns, |event| {
                event.owner = Some(lease.owner.to_string());
                event.holder = Some(lease.owner.to_string());
                event.holder_token = Some(lease.token);
                event.error = Some("restart".into());
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencer_harness::{NodeClock, TrueClock, runtime::simulation_runtime};

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
        tokio::time::sleep(TTL + Duration::from_millis(1)).await;
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
            tokio::time::sleep(Duration::from_secs(100)).await;
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
            tokio::time::sleep(TTL).await;
            // Expired: B is granted the lock, and A's renew, inside the grace, revives A's.
            assert_eq!(service.acquire("L", B, TTL).await, granted(2));
            tokio::time::sleep(grace / 2).await;
            assert_eq!(service.renew("L", A, TTL).await, Ok(Owned::Done));
            // Past the grace, a renew is refused as the reference would.
            service.release("L", B).await.unwrap();
            service.release("L", A).await.unwrap();
            service.acquire("L", A, TTL).await.unwrap();
            tokio::time::sleep(TTL + grace).await;
            assert_eq!(service.renew("L", A, TTL).await, Ok(Owned::NotOwner));
        });
        let renew = history.events.iter().find(|e| e.f == Op::Renew).unwrap();
        assert_eq!(renew.holder_token, Some(1), "the old lease came back");
        assert_eq!(renew.owner.as_deref(), Some(&*A.to_string()));
    }

    #[test]
    fn the_reference_refuses_a_renew_one_millisecond_after_expiry() {
        with_service(LeaseRules::Reference, |service, _| async move {
            service.acquire("L", A, TTL).await.unwrap();
            tokio::time::sleep(TTL + Duration::from_millis(1)).await;
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
        tokio::time::sleep(Duration::from_secs(1)).await;
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
}
