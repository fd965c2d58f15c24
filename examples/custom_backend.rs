//! A user-written backend tested with fencer: in-memory leases and a fenced store with one
//! deliberate bug. `release` deletes the lease without checking who asks (`DEL lock`, not
//! compare-and-delete), so a worker paused past its TTL releases its successor's lease and the
//! `foreign-release` checker sees it. `cargo run --example custom_backend` panics if unnoticed.

use std::{collections::BTreeMap, sync::Mutex, time::Duration};

use fencer::{
    Acquired, AppliedWrite, CallError, FencedStore, FencingToken, Harness, LockService, Owned,
    OwnerToken, ReadValue, Written, async_trait,
};
use tokio::time::Instant;

/// A lease's holder and expiry, while anyone holds it.
type Lease = Option<(OwnerToken, Instant)>;

/// Leases in memory. Time comes from `tokio::time`, so fencer can run it in simulated time.
#[derive(Default)]
pub struct MemoryLock {
    /// Per lock: the live lease (owner, expiry) if any, and the last fencing token granted.
    locks: Mutex<BTreeMap<String, (Lease, FencingToken)>>,
    /// The deliberate bug: release without comparing the owner.
    pub buggy_release: bool,
}

/// True if `lease` is held by anyone (`None`) or by `owner`, and has not expired.
fn live(lease: &Lease, owner: Option<OwnerToken>) -> bool {
    lease.is_some_and(|(holder, expires)| {
        expires > Instant::now() && owner.is_none_or(|owner| owner == holder)
    })
}

#[async_trait]
impl LockService for MemoryLock {
    async fn acquire(
        &self,
        lock: &str,
        owner: OwnerToken,
        ttl: Duration,
    ) -> Result<Acquired, CallError> {
        let mut locks = self.locks.lock().unwrap();
        let (lease, last_token) = locks.entry(lock.to_string()).or_default();
        if live(lease, None) {
            return Ok(Acquired::Busy);
        }
        *last_token += 1;
        *lease = Some((owner, Instant::now() + ttl));
        Ok(Acquired::Granted {
            fencing_token: *last_token,
        })
    }

    async fn renew(
        &self,
        lock: &str,
        owner: OwnerToken,
        ttl: Duration,
    ) -> Result<Owned, CallError> {
        let mut locks = self.locks.lock().unwrap();
        match locks.get_mut(lock) {
            Some((lease, _)) if live(lease, Some(owner)) => {
                *lease = Some((owner, Instant::now() + ttl));
                Ok(Owned::Done)
            }
            _ => Ok(Owned::NotOwner),
        }
    }

    async fn release(&self, lock: &str, owner: OwnerToken) -> Result<Owned, CallError> {
        let mut locks = self.locks.lock().unwrap();
        let checked_owner = (!self.buggy_release).then_some(owner);
        match locks.get_mut(lock) {
            Some((lease, _)) if live(lease, checked_owner) => {
                *lease = None;
                Ok(Owned::Done)
            }
            _ => Ok(Owned::NotOwner),
        }
    }
}

/// A fenced register per key, with the log of every write it applied.
#[derive(Default)]
pub struct MemoryStore {
    /// Per key: the last applied write's token, id and value.
    values: Mutex<BTreeMap<String, ReadValue>>,
    applied: Mutex<Vec<AppliedWrite>>,
}

#[async_trait]
impl FencedStore for MemoryStore {
    async fn write(
        &self,
        key: &str,
        token: FencingToken,
        write_id: &str,
        value: &str,
    ) -> Result<Written, CallError> {
        let mut values = self.values.lock().unwrap();
        let current = values.entry(key.to_string()).or_default();
        // The fence: compared and applied under one lock, so no newer write can slip between.
        if token < current.fencing_token {
            let current_token = current.fencing_token;
            return Ok(Written::Rejected { current_token });
        }
        *current = ReadValue {
            fencing_token: token,
            write_id: Some(write_id.to_string()),
            value: Some(value.to_string()),
        };
        let mut applied = self.applied.lock().unwrap();
        let seq = applied.len() as u64 + 1;
        applied.push(AppliedWrite {
            seq,
            key: key.into(),
            fencing_token: token,
            write_id: write_id.into(),
        });
        Ok(Written::Applied)
    }

    async fn read(&self, key: &str) -> Result<ReadValue, CallError> {
        let values = self.values.lock().unwrap();
        Ok(values.get(key).cloned().unwrap_or_default())
    }

    async fn applied_log(&self) -> Option<Vec<AppliedWrite>> {
        Some(self.applied.lock().unwrap().clone())
    }
}

/// fencer over this backend: 3 workers × 20 cycles, the default faults, seeds 0..10, in simulated
/// time (a 10 s lease costs nothing).
pub fn harness(buggy_release: bool) -> Harness {
    let lock = MemoryLock {
        buggy_release,
        ..MemoryLock::default()
    };
    Harness::new(lock, MemoryStore::default())
        .name("custom_backend")
        .seeds(0..10)
}

fn main() {
    let report = harness(true).save_failures_to(None).run();
    assert!(
        report.failures().next().is_some(),
        "unnoticed: {}",
        report.summary()
    );
    println!("fencer caught the bug: {}", report.summary());
}
