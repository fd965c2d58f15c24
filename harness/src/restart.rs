//! The one server fault fencer injects through the server itself rather than at the client
//! boundary: a restart, which loses whatever the server kept only in memory.
//!
//! What survives a restart is the backend's property, not the nemesis's: the reference lease
//! service keeps its token counter (as a durable store would) but loses every lease, a volatile
//! one also forgets its counter. The nemesis only says *when* and *for how long*.
//!
//! A user's lock service offers a restart through [`LockService::restart`]; [`RestartGate`]
//! puts it in front of the nemesis, refusing calls while the service is down, so the user's
//! hook only has to lose its volatile state.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;

use crate::adapter::{
    Acquired, CallError, ExpiryRule, LockLogEntry, LockService, Owned, OwnerToken, RestartError,
};
use crate::clock::TrueClock;

/// A server the nemesis can restart.
#[async_trait]
pub trait Restartable: Send + Sync + std::fmt::Debug {
    /// Restarts now: in-memory state is lost as the backend defines, and every call that
    /// reaches the server in the next `down_ns` true nanoseconds is refused as
    /// `NotApplied("connection refused")`. An error means the restart did not happen.
    async fn restart(&self, down_ns: u64) -> Result<(), RestartError>;
}

/// A lock service that offers [`LockService::restart`], made [`Restartable`]: calls reaching it
/// while it is down are refused here, before the service sees them, and a restart calls the
/// service's own hook. Workers call the gate, the nemesis restarts it.
pub struct RestartGate {
    service: Arc<dyn LockService>,
    truth: TrueClock,
    /// True time until which the service is down (0: up).
    down_until_ns: AtomicU64,
}

impl std::fmt::Debug for RestartGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestartGate")
            .field("down_until_ns", &self.down_until_ns.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl RestartGate {
    /// `service` behind a gate on `truth`'s time.
    pub fn new(service: Arc<dyn LockService>, truth: TrueClock) -> RestartGate {
        RestartGate {
            service,
            truth,
            down_until_ns: AtomicU64::new(0),
        }
    }

    fn refuse_while_down(&self) -> Result<(), CallError> {
        if self.truth.now_ns() < self.down_until_ns.load(Ordering::Relaxed) {
            return Err(CallError::NotApplied("connection refused".into()));
        }
        Ok(())
    }
}

#[async_trait]
impl LockService for RestartGate {
    async fn acquire(
        &self,
        lock: &str,
        owner: OwnerToken,
        ttl: Duration,
    ) -> Result<Acquired, CallError> {
        self.refuse_while_down()?;
        self.service.acquire(lock, owner, ttl).await
    }

    async fn renew(
        &self,
        lock: &str,
        owner: OwnerToken,
        ttl: Duration,
    ) -> Result<Owned, CallError> {
        self.refuse_while_down()?;
        self.service.renew(lock, owner, ttl).await
    }

    async fn release(&self, lock: &str, owner: OwnerToken) -> Result<Owned, CallError> {
        self.refuse_while_down()?;
        self.service.release(lock, owner).await
    }

    /// The service's own log: the gate refuses calls, it changes no lease.
    async fn lock_log(&self) -> Option<Vec<LockLogEntry>> {
        self.service.lock_log().await
    }

    /// The service's own rule, for the service's own log.
    fn lock_log_expiry(&self) -> ExpiryRule {
        self.service.lock_log_expiry()
    }

    /// The service's own answer: the gate reads the true clock, never `tokio::time`.
    fn reads_tokio_time(&self) -> bool {
        self.service.reads_tokio_time()
    }
}

#[async_trait]
impl Restartable for RestartGate {
    async fn restart(&self, down_ns: u64) -> Result<(), RestartError> {
        let until_ns = self.truth.now_ns().saturating_add(down_ns);
        self.down_until_ns.fetch_max(until_ns, Ordering::Relaxed);
        crate::time::adapter_code(self.service.restart()).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::runtime::simulation_runtime;

    /// Grants every acquire with the next token; a restart forgets the counter.
    #[derive(Default)]
    struct Counting {
        next: Mutex<u64>,
        restarts: Mutex<u32>,
    }

    #[async_trait]
    impl LockService for Counting {
        async fn acquire(
            &self,
            _: &str,
            _: OwnerToken,
            _: Duration,
        ) -> Result<Acquired, CallError> {
            let mut next = self.next.lock().unwrap();
            *next += 1;
            Ok(Acquired::Granted {
                fencing_token: *next,
            })
        }
        async fn lock_log(&self) -> Option<Vec<LockLogEntry>> {
            let restarts = *self.restarts.lock().unwrap();
            Some(vec![LockLogEntry {
                seq: u64::from(restarts),
                lock: "L".into(),
                at_ns: 0,
                change: crate::adapter::LockChange::Released {
                    owner: OwnerToken(1),
                    holder: OwnerToken(1),
                    holder_token: 1,
                },
            }])
        }
        async fn renew(&self, _: &str, _: OwnerToken, _: Duration) -> Result<Owned, CallError> {
            Ok(Owned::Done)
        }
        async fn release(&self, _: &str, _: OwnerToken) -> Result<Owned, CallError> {
            Ok(Owned::Done)
        }
        fn offers_restart(&self) -> bool {
            true
        }
        async fn restart(&self) -> Result<(), RestartError> {
            *self.next.lock().unwrap() = 0;
            *self.restarts.lock().unwrap() += 1;
            Ok(())
        }
    }

    #[test]
    fn the_gate_refuses_calls_while_down_and_the_hook_loses_the_state() {
        let service = Arc::new(Counting::default());
        let replies = simulation_runtime().block_on(async {
            let gate = RestartGate::new(
                Arc::clone(&service) as Arc<dyn LockService>,
                TrueClock::start(),
            );
            let ttl = Duration::from_secs(1);
            let mut replies = vec![gate.acquire("L", OwnerToken(1), ttl).await];
            gate.acquire("L", OwnerToken(2), ttl).await.unwrap();
            Restartable::restart(&gate, 1_000_000_000).await.unwrap();
            replies.push(gate.acquire("L", OwnerToken(3), ttl).await);
            crate::time::sleep(Duration::from_secs(1)).await;
            replies.push(gate.acquire("L", OwnerToken(4), ttl).await);
            replies
        });
        assert_eq!(
            replies,
            [
                Ok(Acquired::Granted { fencing_token: 1 }),
                Err(CallError::NotApplied("connection refused".into())),
                Ok(Acquired::Granted { fencing_token: 1 }),
            ],
            "refused while down, the counter lost with the restart"
        );
        assert_eq!(*service.restarts.lock().unwrap(), 1);
    }

    #[test]
    fn the_gate_hands_over_the_service_s_lock_log() {
        let service = Arc::new(Counting::default());
        let log = simulation_runtime().block_on(async {
            let gate = RestartGate::new(
                Arc::clone(&service) as Arc<dyn LockService>,
                TrueClock::start(),
            );
            Restartable::restart(&gate, 1).await.unwrap();
            gate.lock_log().await
        });
        let log = log.expect("the service offers a log, so the gate does");
        assert_eq!(
            log[0].seq, 1,
            "the log as the service gives it after the restart"
        );
    }

    /// A service with only the three calls.
    struct Plain;

    #[async_trait]
    impl LockService for Plain {
        async fn acquire(
            &self,
            _: &str,
            _: OwnerToken,
            _: Duration,
        ) -> Result<Acquired, CallError> {
            Ok(Acquired::Busy)
        }
        async fn renew(&self, _: &str, _: OwnerToken, _: Duration) -> Result<Owned, CallError> {
            Ok(Owned::NotOwner)
        }
        async fn release(&self, _: &str, _: OwnerToken) -> Result<Owned, CallError> {
            Ok(Owned::NotOwner)
        }
    }

    #[test]
    fn a_restart_is_not_offered_unless_the_service_says_so() {
        assert!(!Plain.offers_restart());
        let error = simulation_runtime().block_on(Plain.restart()).unwrap_err();
        assert_eq!(error, RestartError::NotOffered);
        assert_eq!(error.to_string(), "this lock service offers no restart");
    }
}
