//! Backends that exist only to test fencer itself.
//!
//! [`NondeterministicLock`] breaks the simulation tier's one promise on purpose: it draws from
//! process-global state, so two runs of the same plan in one process record different
//! histories. `fencer gate --check-determinism` must catch exactly this kind of backend (a
//! user's adapter that reads the OS clock or a global counter), and a test can only prove that
//! with a backend that really is non-deterministic. It is reachable as the hidden lock name
//! `test-nondeterministic`, built only with the `test-backends` feature, listed nowhere and
//! documented only here.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use fencer_harness::{Acquired, CallError, LockService, Owned, OwnerToken};

/// Instances created so far in this process: the global state each instance reads.
static INSTANCES: AtomicU64 = AtomicU64::new(0);

/// Wraps a lock service; the first acquire of each instance is delayed by a number of
/// milliseconds that depends on how many instances the process created before it.
pub struct NondeterministicLock {
    inner: Arc<dyn LockService>,
    delay: Duration,
    delayed: AtomicU64,
}

impl NondeterministicLock {
    /// Wraps `inner`; every new instance gets a different delay.
    pub fn new(inner: Arc<dyn LockService>) -> NondeterministicLock {
        let instance = INSTANCES.fetch_add(1, Ordering::SeqCst);
        NondeterministicLock {
            inner,
            delay: Duration::from_millis(1 + instance % 500),
            delayed: AtomicU64::new(0),
        }
    }
}

#[async_trait]
impl LockService for NondeterministicLock {
    async fn acquire(
        &self,
        lock: &str,
        owner: OwnerToken,
        ttl: Duration,
    ) -> Result<Acquired, CallError> {
        if self.delayed.fetch_add(1, Ordering::SeqCst) == 0 {
            fencer_harness::time::sleep(self.delay).await;
        }
        self.inner.acquire(lock, owner, ttl).await
    }

    async fn renew(
        &self,
        lock: &str,
        owner: OwnerToken,
        ttl: Duration,
    ) -> Result<Owned, CallError> {
        self.inner.renew(lock, owner, ttl).await
    }

    async fn release(&self, lock: &str, owner: OwnerToken) -> Result<Owned, CallError> {
        self.inner.release(lock, owner).await
    }
}
