//! A user-written backend tested with fencer: an in-memory lease service and fenced store, with
//! one deliberate bug that fencer catches by itself.
//!
//! The lock's `release` deletes the lease without checking who asks (the classic
//! `DEL lock` instead of compare-and-delete). A worker that was paused past its TTL wakes up and
//! releases the lease that now belongs to someone else; fencer's `foreign-release` checker sees
//! it from the replies alone.
//!
//! Run it: `cargo run --example custom_backend` (exit 0 when the bug was caught).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use fencer::{
    Acquired, AppliedWrite, CallError, FencedStore, FencingToken, Harness, LockService, Owned,
    OwnerToken, ReadValue, Written,
};
use tokio::time::Instant;

/// One lease: who holds it, until when, under which fencing token.
struct Lease {
    owner: OwnerToken,
    expires: Instant,
}

/// Leases in memory. Time comes from `tokio::time`, so fencer can run it in simulated time.
#[derive(Default)]
pub struct MemoryLock {
    /// Per lock: the live lease (if any) and the last fencing token granted.
    locks: Mutex<BTreeMap<String, (Option<Lease>, FencingToken)>>,
    /// The deliberate bug: release without comparing the owner.
    pub buggy_release: bool,
}

#[async_trait]
impl LockService for MemoryLock {
    async fn acquire(&self, lock: &str, owner: OwnerToken, ttl: Duration) -> Result<Acquired, CallError> {
        let mut locks = self.locks.lock().unwrap();
        let (lease, last_token) = locks.entry(lock.to_string()).or_insert((None, 0));
        if lease.as_ref().is_some_and(|lease| lease.expires > Instant::now()) {
            return Ok(Acquired::Busy);
        }
        *last_token += 1;
        *lease = Some(Lease { owner, expires: Instant::now() + ttl });
        Ok(Acquired::Granted { fencing_token: *last_token })
    }

    async fn renew(&self, lock: &str, owner: OwnerToken, ttl: Duration) -> Result<Owned, CallError> {
        let mut locks = self.locks.lock().unwrap();
        match locks.get_mut(lock).and_then(|(lease, _)| lease.as_mut()) {
            Some(lease) if lease.owner == owner && lease.expires > Instant::now() => {
                lease.expires = Instant::now() + ttl;
                Ok(Owned::Done)
            }
            _ => Ok(Owned::NotOwner),
        }
    }

    async fn release(&self, lock: &str, owner: OwnerToken) -> Result<Owned, CallError> {
        let mut locks = self.locks.lock().unwrap();
        let Some((lease, _)) = locks.get_mut(lock) else {
            return Ok(Owned::NotOwner);
        };
        let live = lease.as_ref().is_some_and(|lease| lease.expires > Instant::now());
        let mine = lease.as_ref().is_some_and(|lease| lease.owner == owner);
        if live && (mine || self.buggy_release) {
            *lease = None;
            Ok(Owned::Done)
        } else {
            Ok(Owned::NotOwner)
        }
    }
}

/// A fenced register per key, with the log of every write it applied.
#[derive(Default)]
pub struct MemoryStore {
    /// Per key: (fence, write id, value).
    values: Mutex<BTreeMap<String, (FencingToken, String, String)>>,
    applied: Mutex<Vec<AppliedWrite>>,
}

#[async_trait]
impl FencedStore for MemoryStore {
    async fn write(&self, key: &str, token: FencingToken, write_id: &str, value: &str) -> Result<Written, CallError> {
        let mut values = self.values.lock().unwrap();
        if let Some((current_token, ..)) = values.get(key)
            && token < *current_token
        {
            return Ok(Written::Rejected { current_token: *current_token });
        }
        values.insert(key.to_string(), (token, write_id.to_string(), value.to_string()));
        let mut applied = self.applied.lock().unwrap();
        let seq = applied.len() as u64 + 1;
        let write_id = write_id.to_string();
        applied.push(AppliedWrite { seq, key: key.to_string(), fencing_token: token, write_id });
        Ok(Written::Applied)
    }

    async fn read(&self, key: &str) -> Result<ReadValue, CallError> {
        let values = self.values.lock().unwrap();
        Ok(match values.get(key) {
            Some((token, write_id, value)) => ReadValue {
                fencing_token: *token,
                write_id: Some(write_id.clone()),
                value: Some(value.clone()),
            },
            None => ReadValue::default(),
        })
    }

    async fn applied_log(&self) -> Option<Vec<AppliedWrite>> {
        Some(self.applied.lock().unwrap().clone())
    }
}

/// fencer over this backend: 3 workers × 20 cycles, pauses and lost renew replies, 10 seeds,
/// in simulated time (a 10 s lease costs nothing).
pub fn harness(buggy_release: bool) -> Harness {
    let lock = MemoryLock { buggy_release, ..MemoryLock::default() };
    Harness::new(lock, MemoryStore::default()).name("custom_backend").seeds(0..10)
}

fn main() {
    let report = harness(true).save_failures_to(None).run();
    println!("buggy release: {}", report.summary());
    let caught = report.failures().next().is_some();
    println!("{}", if caught { "fencer caught the bug" } else { "the bug went unnoticed" });
    std::process::exit(if caught { 0 } else { 1 });
}
