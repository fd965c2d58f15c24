//! A lease service on etcd: a lease with the TTL, and a lock key attached to it, created only
//! if absent in one txn; the key's `create_revision` is the fencing token.
//!
//! etcd's revision counts every change to the store, is never reused and survives restarts
//! (it lives in the data dir), so each holder's `create_revision` is greater than every earlier
//! holder's. The key dies with its lease, on etcd's clock: when a holder stops renewing, etcd
//! revokes the lease and deletes the key, and the next acquire can create it again.
//!
//! **TTLs are whole seconds.** A TTL is rounded *up* to whole seconds (300 ms → 1 s): the lease
//! then outlives what the worker believes, which is safe; rounding down would let a worker act
//! on a lease etcd already dropped. etcd also raises a TTL to its own minimum,
//! `ceil(1.5 × election timeout)` (2 s with the default 1 s election timeout; 1 s with
//! `--election-timeout 100`, as fencer's private servers run), and a keep-alive renews the
//! lease to the TTL it was granted with, not to the `ttl` a renew passes.
//!
//! [`EtcdLockRules::UnsafeRelease`] deletes the key without comparing the owner: the classic
//! bug fencer must catch.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use fencer_harness::{Acquired, CallError, LockService, Owned, OwnerToken};
use serde_json::{Value, json};

use crate::etcd_conn::{EtcdConnection, base64, int, ranged, succeeded};

/// Which release the service uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EtcdLockRules {
    /// Delete the key in a txn guarded on the owner, then revoke its lease.
    Reference,
    /// Mutant: delete the key, whoever asks.
    UnsafeRelease,
}

/// Leases on an etcd server.
pub struct EtcdLock {
    connection: Arc<EtcdConnection>,
    rules: EtcdLockRules,
}

impl EtcdLock {
    /// A lease service over `connection` following `rules`.
    pub fn new(connection: Arc<EtcdConnection>, rules: EtcdLockRules) -> EtcdLock {
        EtcdLock { connection, rules }
    }

    /// The rules this service follows.
    pub fn rules(&self) -> EtcdLockRules {
        self.rules
    }

    /// Revokes `lease`, ignoring the answer: called only where the lease holds no key of a
    /// live lock (a busy acquire, a key already deleted), so it merely ends a lease early that
    /// would expire anyway.
    async fn revoke_quietly(&self, lease: u64) {
        let _ = self
            .connection
            .post("/v3/lease/revoke", &json!({ "ID": lease.to_string() }))
            .await;
    }

    /// The lock key's lease if `owner` holds it, read in one txn guarded on the owner.
    async fn owners_lease(&self, lock: &str, owner: OwnerToken) -> Result<Option<u64>, CallError> {
        let reply = self
            .connection
            .post(
                "/v3/kv/txn",
                &json!({
                    "compare": [owner_holds(lock, owner)],
                    "success": [range(lock)],
                }),
            )
            .await?;
        if !succeeded(&reply) {
            return Ok(None);
        }
        Ok(ranged(&reply, 0)
            .first()
            .map(|kv| int(kv, "lease"))
            .filter(|lease| *lease != 0))
    }
}

/// etcd leases are whole seconds; rounding up keeps the lease at least as long as the worker
/// believes.
pub fn ttl_secs(ttl: Duration) -> u64 {
    ttl.as_nanos().div_ceil(1_000_000_000).max(1) as u64
}

/// Compare: `lock` exists and holds `owner`. A value compare on a missing key fails.
fn owner_holds(lock: &str, owner: OwnerToken) -> Value {
    json!({
        "target": "VALUE",
        "result": "EQUAL",
        "key": base64(lock),
        "value": base64(&owner.to_string()),
    })
}

fn range(key: &str) -> Value {
    json!({ "request_range": { "key": base64(key) } })
}

fn delete(key: &str) -> Value {
    json!({ "request_delete_range": { "key": base64(key) } })
}

#[async_trait]
impl LockService for EtcdLock {
    async fn acquire(
        &self,
        lock: &str,
        owner: OwnerToken,
        ttl: Duration,
    ) -> Result<Acquired, CallError> {
        // A lease on its own holds nothing, so failing to get one leaves the lock untouched.
        let granted = self
            .connection
            .post(
                "/v3/lease/grant",
                &json!({ "TTL": ttl_secs(ttl).to_string() }),
            )
            .await
            .map_err(|error| match error {
                CallError::NotApplied(why) | CallError::Unknown(why) => CallError::NotApplied(why),
            })?;
        let lease = int(&granted, "ID");
        let create = json!({
            "request_put": {
                "key": base64(lock),
                "value": base64(&owner.to_string()),
                "lease": lease.to_string(),
            }
        });
        // The range after the put, in the same txn, reads the key this txn created.
        let reply = self
            .connection
            .post(
                "/v3/kv/txn",
                &json!({
                    "compare": [{ "target": "CREATE", "result": "EQUAL", "key": base64(lock),
                                  "create_revision": "0" }],
                    "success": [create, range(lock)],
                }),
            )
            .await;
        let reply = match reply {
            Ok(reply) => reply,
            Err(CallError::NotApplied(why)) => {
                self.revoke_quietly(lease).await;
                return Err(CallError::NotApplied(why));
            }
            // The key may have been created with this lease: leave the lease to expire.
            Err(unknown) => return Err(unknown),
        };
        if !succeeded(&reply) {
            self.revoke_quietly(lease).await;
            return Ok(Acquired::Busy);
        }
        let fencing_token = ranged(&reply, 1)
            .first()
            .map(|kv| int(kv, "create_revision"))
            .unwrap_or(0);
        if fencing_token == 0 {
            return Err(CallError::Unknown(format!(
                "etcd granted {lock} but its txn answer has no create_revision: {reply}"
            )));
        }
        Ok(Acquired::Granted { fencing_token })
    }

    async fn renew(
        &self,
        lock: &str,
        owner: OwnerToken,
        _ttl: Duration,
    ) -> Result<Owned, CallError> {
        // The lease is this acquisition's own: keeping it alive cannot extend anyone else's,
        // and a lease that expired meanwhile answers TTL 0 (etcd never revives one).
        let Some(lease) = self.owners_lease(lock, owner).await? else {
            return Ok(Owned::NotOwner);
        };
        let reply = self
            .connection
            .post("/v3/lease/keepalive", &json!({ "ID": lease.to_string() }))
            .await?;
        let left_secs = reply.get("result").map_or(0, |result| int(result, "TTL"));
        Ok(if left_secs > 0 {
            Owned::Done
        } else {
            Owned::NotOwner
        })
    }

    async fn release(&self, lock: &str, owner: OwnerToken) -> Result<Owned, CallError> {
        let compare = match self.rules {
            EtcdLockRules::Reference => vec![owner_holds(lock, owner)],
            EtcdLockRules::UnsafeRelease => Vec::new(),
        };
        let reply = self
            .connection
            .post(
                "/v3/kv/txn",
                &json!({ "compare": compare, "success": [range(lock), delete(lock)] }),
            )
            .await?;
        let held = ranged(&reply, 0);
        if !succeeded(&reply) || held.is_empty() {
            return Ok(Owned::NotOwner);
        }
        if self.rules == EtcdLockRules::Reference {
            self.revoke_quietly(int(&held[0], "lease")).await;
        }
        Ok(Owned::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttls_round_up_to_whole_seconds() {
        assert_eq!(ttl_secs(Duration::from_millis(300)), 1);
        assert_eq!(ttl_secs(Duration::from_millis(1_000)), 1);
        assert_eq!(ttl_secs(Duration::from_millis(1_001)), 2);
        assert_eq!(ttl_secs(Duration::ZERO), 1);
    }
}
