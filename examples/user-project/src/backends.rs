//! The project's own lock service and store: leases and a fenced register in memory, keeping
//! time with `tokio::time` (so fencer can run them in its simulation tier). `MemoryStore` with
//! `fenced: false` is the same store with its fence check left out, the bug fencer is for.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use fencer::{
    Acquired, CallError, Cli, FencedStore, FencingToken, LockService, Owned, OwnerToken, ReadValue,
    Time, Written, async_trait,
};
use tokio::time::Instant;

/// fencer's command line with this project's backends registered beside fencer's own.
pub fn cli() -> Cli {
    Cli::new()
        .lock(
            "memory-lock",
            Time::Simulated,
            "leases in memory",
            MemoryLock::default,
        )
        .store(
            "memory-store",
            Time::Simulated,
            "a fenced register in memory",
            || MemoryStore::new(true),
        )
        .store(
            "leaky-store",
            Time::Simulated,
            "memory-store without its fence",
            || MemoryStore::new(false),
        )
}

/// A lease's holder and expiry.
type Lease = Option<(OwnerToken, Instant)>;

/// Leases in memory: per lock, the live lease (if any) and the last fencing token granted.
#[derive(Default)]
pub struct MemoryLock {
    locks: Mutex<BTreeMap<String, (Lease, FencingToken)>>,
}

/// The lease on `lock` if `owner` holds it and it has not expired.
fn held_by(lease: &mut Lease, owner: OwnerToken) -> Option<&mut (OwnerToken, Instant)> {
    lease
        .as_mut()
        .filter(|(holder, expires)| *holder == owner && *expires > Instant::now())
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
        if lease.is_some_and(|(_, expires)| expires > Instant::now()) {
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
        let Some((lease, _)) = locks.get_mut(lock) else {
            return Ok(Owned::NotOwner);
        };
        match held_by(lease, owner) {
            Some((_, expires)) => {
                *expires = Instant::now() + ttl;
                Ok(Owned::Done)
            }
            None => Ok(Owned::NotOwner),
        }
    }

    async fn release(&self, lock: &str, owner: OwnerToken) -> Result<Owned, CallError> {
        let mut locks = self.locks.lock().unwrap();
        let Some((lease, _)) = locks.get_mut(lock) else {
            return Ok(Owned::NotOwner);
        };
        if held_by(lease, owner).is_none() {
            return Ok(Owned::NotOwner);
        }
        *lease = None;
        Ok(Owned::Done)
    }
}

/// A register per key in memory; `fenced` says whether a write is checked against the newest
/// fencing token accepted.
pub struct MemoryStore {
    registers: Mutex<BTreeMap<String, ReadValue>>,
    /// Whether a write is checked against the newest fencing token accepted.
    pub fenced: bool,
}

impl MemoryStore {
    /// An empty store, fenced or not.
    pub fn new(fenced: bool) -> MemoryStore {
        MemoryStore {
            registers: Mutex::default(),
            fenced,
        }
    }
}

#[async_trait]
impl FencedStore for MemoryStore {
    async fn write(
        &self,
        key: &str,
        fencing_token: FencingToken,
        write_id: &str,
        value: &str,
    ) -> Result<Written, CallError> {
        let mut registers = self.registers.lock().unwrap();
        let register = registers.entry(key.to_string()).or_default();
        if self.fenced && fencing_token < register.fencing_token {
            return Ok(Written::Rejected {
                current_token: register.fencing_token,
            });
        }
        *register = ReadValue {
            fencing_token,
            write_id: Some(write_id.to_string()),
            value: Some(value.to_string()),
        };
        Ok(Written::Applied)
    }

    async fn read(&self, key: &str) -> Result<ReadValue, CallError> {
        let registers = self.registers.lock().unwrap();
        Ok(registers.get(key).cloned().unwrap_or_default())
    }
}
