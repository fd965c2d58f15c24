//! A lease service on ZooKeeper: one session per grant is the lease, an ephemeral sequential
//! node under `/fencer/locks/<lock>` holding the owner token is the claim, the lowest node wins,
//! and that node's `czxid` is the fencing token.
//!
//! The session is the lease, so it must die exactly when the holder stops renewing. A ZooKeeper
//! client normally pings its session from a background task, which keeps a frozen worker's
//! session (and lock) alive for ever — fencer's pause would be invisible. So each grant's
//! session is *detached*: it is opened for the acquire and the connection is dropped afterwards
//! without closing the session; each renew reconnects to it (a reconnect resets the server's
//! expiry timer, like a ping) and drops the connection again. Nothing touches the session
//! between fencer's calls, and the server expires it — deleting the ephemeral node — one session
//! timeout after the last renew, measured on the server's monotonic clock.
//!
//! The server clamps a session timeout to `[2, 20] × tickTime`. A longer session than asked
//! only makes the next holder wait; a *shorter* one would let the server end the lease while
//! the holder still trusts it, so an acquire whose TTL exceeds the server's maximum is refused
//! (`NotApplied`, nothing granted) with the clamp in the message.
//!
//! [`ZookeeperLockRules::UnsafeRelease`] deletes whichever node holds the lock, without the
//! owner check: the bug fencer must catch.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use fencer_harness::{Acquired, CallError, LockService, Owned, OwnerToken};
use zookeeper_client::{Acls, Client, CreateMode, SessionInfo};

use crate::zookeeper_conn::{Touch, ZookeeperConnection, node_name, within};

/// Which release the service uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZookeeperLockRules {
    /// Delete our own node, after checking it still holds our owner token.
    Reference,
    /// Mutant: delete the lowest node under the lock, whoever owns it.
    UnsafeRelease,
}

/// A grant this adapter made: the session that is the lease and the node that is the claim.
#[derive(Clone)]
struct Held {
    session: SessionInfo,
    node: String,
    /// The session timeout the server granted (what a renew asks for again).
    timeout: Duration,
}

/// Leases on a ZooKeeper server.
pub struct ZookeeperLock {
    connection: Arc<ZookeeperConnection>,
    rules: ZookeeperLockRules,
    /// Live grants by lock and owner: the session to reconnect to on renew and release.
    held: Mutex<HashMap<(String, OwnerToken), Held>>,
}

/// The parent of every lock's contender nodes.
const LOCKS_ROOT: &str = "/fencer/locks";

fn lock_dir(lock: &str) -> String {
    format!("{LOCKS_ROOT}/{}", node_name(lock))
}

/// The contender node names in sequence order (the suffix is a zero-padded counter).
fn sorted(mut children: Vec<String>) -> Vec<String> {
    children.sort_by(|a, b| sequence_of(a).cmp(sequence_of(b)));
    children
}

fn sequence_of(child: &str) -> &str {
    child.rsplit('-').next().unwrap_or(child)
}

impl ZookeeperLock {
    /// A lease service over `connection` following `rules`.
    pub fn new(connection: Arc<ZookeeperConnection>, rules: ZookeeperLockRules) -> ZookeeperLock {
        ZookeeperLock {
            connection,
            rules,
            held: Mutex::new(HashMap::new()),
        }
    }

    fn held(&self, lock: &str, owner: OwnerToken) -> Option<Held> {
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(lock.to_string(), owner))
            .cloned()
    }

    fn forget(&self, lock: &str, owner: OwnerToken) {
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&(lock.to_string(), owner));
    }

    /// Creates `/fencer/locks/<lock>` (and its parents) if missing.
    async fn ensure_dir(client: &Client, dir: &str) -> Result<(), CallError> {
        let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
        for path in ["/fencer", LOCKS_ROOT, dir] {
            match within(client.create(path, b"", &persistent)).await? {
                Ok(_) | Err(zookeeper_client::Error::NodeExists) => {}
                Err(error) => {
                    return Err(CallError::NotApplied(format!(
                        "zookeeper: cannot create {path}: {error}"
                    )));
                }
            }
        }
        Ok(())
    }

    /// With our node created: are we the lowest? Then read our node's czxid (a create inside
    /// ZooKeeper 3.8.0 may report -1, ZOOKEEPER-4026, so it is read back).
    async fn claim(client: &Client, dir: &str, node: &str) -> Result<Acquired, CallError> {
        let children = match within(client.list_children(dir)).await? {
            Ok(children) => sorted(children),
            Err(error) => return Err(CallError::Unknown(format!("zookeeper: {error}"))),
        };
        let ours = node.rsplit('/').next().unwrap_or(node);
        if children.first().map(String::as_str) != Some(ours) {
            return Ok(Acquired::Busy);
        }
        match within(client.check_stat(node)).await? {
            Ok(Some(stat)) if stat.czxid > 0 => Ok(Acquired::Granted {
                fencing_token: stat.czxid as u64,
            }),
            Ok(other) => Err(CallError::Unknown(format!(
                "zookeeper: our node {node} vanished or has no czxid ({other:?})"
            ))),
            Err(error) => Err(CallError::Unknown(format!("zookeeper: {error}"))),
        }
    }

    /// The mutant's release: deletes the current holder's node, whoever it is.
    async fn release_whoever(&self, lock: &str) -> Result<Owned, CallError> {
        let client = self.connection.store_client().await?;
        let dir = lock_dir(lock);
        let children = match within(client.list_children(&dir)).await? {
            Ok(children) => sorted(children),
            Err(zookeeper_client::Error::NoNode) => return Ok(Owned::NotOwner),
            Err(error) => return Err(self.connection.sent_error(error).await),
        };
        let Some(lowest) = children.first() else {
            return Ok(Owned::NotOwner);
        };
        match within(client.delete(&format!("{dir}/{lowest}"), None)).await? {
            Ok(()) => Ok(Owned::Done),
            Err(zookeeper_client::Error::NoNode) => Ok(Owned::NotOwner),
            Err(error) => Err(self.connection.sent_error(error).await),
        }
    }

    /// Reconnects to `held`'s session and checks our node still carries `owner`. On success the
    /// session's expiry was reset, and the node's version is returned with the client.
    async fn reattach(
        &self,
        held: &Held,
        owner: OwnerToken,
        close_on_drop: bool,
    ) -> Result<Option<(Client, i32)>, CallError> {
        let client = match self
            .connection
            .touch_lease(held.session.clone(), held.timeout, close_on_drop)
            .await
        {
            Ok(client) => client,
            Err(Touch::Expired) => return Ok(None),
            Err(Touch::Refused(why)) => return Err(CallError::NotApplied(why)),
            // The reconnect may have reached the server and reset the expiry.
            Err(Touch::Failed(why)) => return Err(CallError::Unknown(why)),
        };
        // A reattached session may land on a member of an ensemble that has not yet applied
        // our node's create (a detached session carries no last-seen zxid, so the member does
        // not refuse us): catch it up with the leader before reading, or a lagging member
        // would answer "no node" for a lease we hold.
        if let Err(error) = within(client.sync(&held.node)).await? {
            return Err(CallError::Unknown(format!("zookeeper: sync: {error}")));
        }
        match within(client.get_data(&held.node)).await? {
            Ok((data, stat)) if data == owner.to_string().as_bytes() => {
                Ok(Some((client, stat.version)))
            }
            Ok(_) | Err(zookeeper_client::Error::NoNode) => Ok(None),
            Err(error) => Err(CallError::Unknown(format!("zookeeper: {error}"))),
        }
    }
}

#[async_trait]
impl LockService for ZookeeperLock {
    async fn acquire(
        &self,
        lock: &str,
        owner: OwnerToken,
        ttl: Duration,
    ) -> Result<Acquired, CallError> {
        let lease = self
            .connection
            .open_lease(ttl)
            .await
            .map_err(|error| CallError::NotApplied(error.to_string()))?;
        if lease.negotiated < ttl {
            return Err(CallError::NotApplied(format!(
                "zookeeper: the server clamps session timeouts to at most {} ms, shorter than the \
                 {} ms TTL (raise maxSessionTimeout or tickTime, or use a shorter TTL)",
                lease.negotiated.as_millis(),
                ttl.as_millis()
            )));
        }
        let client = lease.client;
        let dir = lock_dir(lock);
        let ephemeral = CreateMode::EphemeralSequential.with_acls(Acls::anyone_all());
        let prefix = format!("{dir}/lease-");
        let data = owner.to_string();
        let mut created = within(client.create(&prefix, data.as_bytes(), &ephemeral)).await?;
        if let Err(zookeeper_client::Error::NoNode) = created {
            // First acquire on this lock: make its directory, then try again.
            Self::ensure_dir(&client, &dir).await?;
            created = within(client.create(&prefix, data.as_bytes(), &ephemeral)).await?;
        }
        let node = match created {
            Ok((_stat, sequence)) => format!("{prefix}{sequence}"),
            // A lost create leaves at most a node in a session nobody renews: it expires.
            Err(error) => return Err(CallError::Unknown(format!("zookeeper: {error}"))),
        };
        let acquired = Self::claim(&client, &dir, &node).await?;
        match acquired {
            Acquired::Granted { .. } => {
                let held = Held {
                    session: client.session().clone(),
                    node,
                    timeout: lease.negotiated,
                };
                self.held
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert((lock.to_string(), owner), held);
            }
            Acquired::Busy => {
                // Our node must not queue behind the holder; should this delete be lost, the
                // session (never renewed) expires within the TTL and takes the node with it.
                let _ = within(client.delete(&node, None)).await;
            }
        }
        Ok(acquired)
    }

    async fn renew(
        &self,
        lock: &str,
        owner: OwnerToken,
        _ttl: Duration,
    ) -> Result<Owned, CallError> {
        let Some(held) = self.held(lock, owner) else {
            return Ok(Owned::NotOwner);
        };
        match self.reattach(&held, owner, false).await? {
            Some(_) => Ok(Owned::Done),
            None => {
                self.forget(lock, owner);
                Ok(Owned::NotOwner)
            }
        }
    }

    async fn release(&self, lock: &str, owner: OwnerToken) -> Result<Owned, CallError> {
        if self.rules == ZookeeperLockRules::UnsafeRelease {
            self.forget(lock, owner);
            return self.release_whoever(lock).await;
        }
        let Some(held) = self.held(lock, owner) else {
            return Ok(Owned::NotOwner);
        };
        // Reattached with close-on-drop: once the node is gone, dropping the client closes the
        // session too.
        let Some((client, version)) = self.reattach(&held, owner, true).await? else {
            self.forget(lock, owner);
            return Ok(Owned::NotOwner);
        };
        match within(client.delete(&held.node, Some(version))).await? {
            Ok(()) => {
                self.forget(lock, owner);
                Ok(Owned::Done)
            }
            Err(zookeeper_client::Error::NoNode | zookeeper_client::Error::BadVersion) => {
                self.forget(lock, owner);
                Ok(Owned::NotOwner)
            }
            Err(error) => Err(CallError::Unknown(format!("zookeeper: {error}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contenders_sort_by_their_sequence_number() {
        let children = vec!["lease-0000000010".into(), "lease-0000000002".into()];
        assert_eq!(sorted(children)[0], "lease-0000000002");
        assert_eq!(lock_dir("fencer/t/lock"), "/fencer/locks/fencer%2Ft%2Flock");
    }
}
