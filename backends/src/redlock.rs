//! Redlock, as published (antirez, "Distributed locks with Redis"): a lease held on a majority
//! of N independent Redis masters, which never talk to each other.
//!
//! - acquire: `SET lock owner NX PX ttl` on every master at once, each bounded by a short
//!   per-master timeout. Granted when a majority (N/2 + 1) set the key **and** the validity
//!   left, `ttl − elapsed − drift` with `drift = ttl · drift_factor + 2 ms`, is still positive;
//!   otherwise the key is deleted again on every master (compare-and-delete in Lua) and the
//!   acquire fails.
//! - renew: compare-and-`PEXPIRE` in Lua on every master; done when a majority extended the key
//!   within the validity the renew itself leaves.
//! - release: compare-and-delete on every master, including those the client believes it never
//!   locked (a set whose reply was lost may have been applied).
//!
//! The owner stored on every master is the harness's owner token, random per acquisition, so a
//! compare-and-delete can only remove the caller's own key.
//!
//! Its safety rests on timing: a majority's keys must expire no sooner than the client
//! believes. A master whose clock jumps forward, or that restarts without persistence, forgets
//! a key early; once a majority did, a second client acquires while the first still counts
//! positive validity. No setting of this adapter prevents it; fencer shows it (see the
//! README's "Redlock").
//!
//! # Fencing tokens: Redlock has none
//!
//! A grant's fencing token must exceed every earlier grant's, so that a store can refuse a
//! holder that was superseded. Redlock offers none: the random owner proves who holds a lease,
//! never which lease came later. The URL's `fence=` says what the adapter hands back instead:
//!
//! - `fence=none` (the default): the adapter's own count of the grants it made, kept in its
//!   memory. It orders the grants of this one client process, which is what fencer's checkers
//!   need to tell the later of two grants, and it is **no fence**: clients in two processes
//!   count from 1 each, so a store fencing on it would admit or refuse the wrong holder. Run it
//!   with an unfenced store (`?variant=unfenced`) to see what Redlock alone protects.
//! - `fence=redis://HOST:PORT`: `INCR` on one separate Redis, a single counter every client
//!   shares, persisted on every write (`appendfsync always`) so it survives its restart: the
//!   honest answer "take the token from something that has one". It is taken after the
//!   majority was reached and counted in the validity, so it falls inside the lease it is for.
//!
//! Why not an `INCR` on every master, taking the highest of the majority's answers? Two
//! majorities share a member, but not necessarily the member that holds the highest count.
//! With counts 10, 0, 0, 0, 0 on n1…n5, a grant through {n1, n2, n3} takes max(11, 1, 1) = 11,
//! and the next grant through {n3, n4, n5} takes max(2, 1, 1) = 2: backwards, with every master
//! up. A master restarted without persistence resets its count too, and a quorum read only
//! returns the latest write when every write reached a majority and no member forgets, which
//! is what consensus provides and independent masters do not.

mod options;
mod tally;

pub use options::{
    DEFAULT_DRIFT_FACTOR, DEFAULT_NODE_TIMEOUT, Fence, ParameterError, REDLOCK_SCHEME,
    RedlockOptions,
};

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use fencer_harness::{Acquired, CallError, FencingToken, LockService, Owned, OwnerToken};
use redis::Script;
use redis::aio::MultiplexedConnection;

use crate::error::BackendError;
use crate::redis_conn::RedisConnection;
use crate::url::redact_url;
use tally::{NodeReply, Tally};

/// Deletes the key only if it holds the caller's owner: KEYS lock; ARGV owner.
const UNLOCK: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
";

/// Extends the key only if it holds the caller's owner: KEYS lock; ARGV owner, ttl (ms).
const EXTEND: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
";

/// The part of the drift allowance that does not scale with the TTL: Redis's own expiry
/// resolution (it expires keys with 1 ms precision).
const DRIFT_FIXED: Duration = Duration::from_millis(2);

/// A Redlock client over N masters (see the module documentation).
pub struct RedlockLock {
    options: RedlockOptions,
    masters: Vec<Arc<RedisConnection>>,
    counter: Option<Arc<RedisConnection>>,
    unlock: Script,
    extend: Script,
    /// Grants made so far, for `fence=none`.
    grants: AtomicU64,
    shown_url: String,
}

impl RedlockLock {
    /// Checks `url` (see [`RedlockOptions`]) without connecting.
    pub fn open(url: &str) -> Result<RedlockLock, BackendError> {
        let options = RedlockOptions::parse(url)?;
        let masters = options
            .masters
            .iter()
            .map(|address| RedisConnection::open(&format!("redis://{address}")).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()?;
        let counter = match &options.fence {
            Fence::None => None,
            Fence::Counter(url) => Some(Arc::new(RedisConnection::open(url)?)),
        };
        Ok(RedlockLock {
            options,
            masters,
            counter,
            unlock: Script::new(UNLOCK),
            extend: Script::new(EXTEND),
            grants: AtomicU64::new(0),
            shown_url: redact_url(url),
        })
    }

    /// Round-trips a PING to every master and to the fence counter: a run starts from a whole
    /// cluster, and the faults come from its plan.
    pub async fn ping(&self) -> Result<(), BackendError> {
        let pings = self.masters.iter().chain(&self.counter).map(|c| c.ping());
        let failed: Vec<String> = futures::future::join_all(pings)
            .await
            .into_iter()
            .filter_map(|reply| reply.err().map(|error| error.to_string()))
            .collect();
        if failed.is_empty() {
            Ok(())
        } else {
            Err(BackendError::Unreachable(format!(
                "Redlock {}: {}",
                self.shown_url,
                failed.join("; ")
            )))
        }
    }

    /// The validity a lease of `ttl` has left after `elapsed`: `ttl − elapsed − drift`, or
    /// `None` when nothing is left.
    fn validity(&self, ttl: Duration, elapsed: Duration) -> Option<Duration> {
        let drift = ttl.mul_f64(self.options.drift_factor) + DRIFT_FIXED;
        ttl.checked_sub(elapsed)
            .and_then(|left| left.checked_sub(drift))
            .filter(|left| !left.is_zero())
    }

    /// Runs `command` on one master within the per-master timeout (opening its connection
    /// counts). `Ok(true)` is a yes, `Ok(false)` a no.
    async fn on_master<F, C>(&self, master: &RedisConnection, command: C) -> NodeReply
    where
        C: FnOnce(MultiplexedConnection) -> F,
        F: Future<Output = Result<bool, redis::RedisError>>,
    {
        let timeout = self.options.node_timeout;
        let started = Instant::now();
        let connection = match tokio::time::timeout(timeout, master.get()).await {
            Ok(Ok(connection)) => connection,
            Ok(Err(error)) => return NodeReply::NotSent(error.to_string()),
            Err(_elapsed) => {
                return NodeReply::NotSent(format!(
                    "{}: no connection within {timeout:?}",
                    master.shown_url()
                ));
            }
        };
        let left = timeout.saturating_sub(started.elapsed());
        match tokio::time::timeout(left, command(connection)).await {
            Ok(Ok(true)) => NodeReply::Yes,
            Ok(Ok(false)) => NodeReply::No,
            Ok(Err(error)) => NodeReply::Unknown(format!(
                "{}: {}",
                master.shown_url(),
                master.sent_error(error).await
            )),
            Err(_elapsed) => NodeReply::Unknown(format!(
                "{}: no reply within {timeout:?}",
                master.shown_url()
            )),
        }
    }

    /// `SET lock owner NX PX ttl` on every master at once.
    async fn set_everywhere(&self, lock: &str, owner: &str, ttl_ms: u64) -> Vec<NodeReply> {
        let sets = self.masters.iter().map(|master| {
            self.on_master(master, |mut connection| async move {
                let set: Option<String> = redis::cmd("SET")
                    .arg(lock)
                    .arg(owner)
                    .arg("NX")
                    .arg("PX")
                    .arg(ttl_ms)
                    .query_async(&mut connection)
                    .await?;
                Ok(set.is_some())
            })
        });
        futures::future::join_all(sets).await
    }

    /// Runs `script` (KEYS lock; ARGV owner, then `ttl_ms` if given) on every master at once;
    /// a yes is a script that returned 1.
    async fn script_everywhere(
        &self,
        script: &Script,
        lock: &str,
        owner: &str,
        ttl_ms: Option<u64>,
    ) -> Vec<NodeReply> {
        let calls = self.masters.iter().map(|master| {
            self.on_master(master, |mut connection| async move {
                let mut invocation = script.key(lock);
                invocation.arg(owner);
                if let Some(ttl_ms) = ttl_ms {
                    invocation.arg(ttl_ms);
                }
                let done: i64 = invocation.invoke_async(&mut connection).await?;
                Ok(done == 1)
            })
        });
        futures::future::join_all(calls).await
    }

    /// The token for a grant that reached a majority: the counter's `INCR`, or this adapter's
    /// own count (see the module documentation). The counter may take up to `validity_left`:
    /// it is no Redlock master, and it fsyncs before it answers, so the masters' short timeout
    /// does not fit it, while a token that comes after the validity ran out is for a lease
    /// already void.
    async fn token(&self, lock: &str, validity_left: Duration) -> Result<FencingToken, NoToken> {
        let Some(counter) = &self.counter else {
            return Ok(self.grants.fetch_add(1, Ordering::Relaxed) + 1);
        };
        let increment = async {
            let mut connection = counter.get().await?;
            match redis::cmd("INCR")
                .arg(format!("{lock}:fence"))
                .query_async::<u64>(&mut connection)
                .await
            {
                Ok(token) => Ok(token),
                Err(error) => Err(counter.sent_error(error).await),
            }
        };
        match tokio::time::timeout(validity_left, increment).await {
            Ok(token) => token.map_err(NoToken::Counter),
            Err(_elapsed) => Err(NoToken::Late {
                counter: counter.shown_url().to_string(),
                validity_left,
            }),
        }
    }

    /// Undoes a failed acquire: compare-and-delete on every master. `Ok` when no key of
    /// `owner` can be left anywhere (each master refused the set, was never reached, or
    /// answered the delete); otherwise why not.
    async fn undo(&self, lock: &str, owner: &str, sets: &[NodeReply]) -> Result<(), KeysLeft> {
        let unlocks = self
            .script_everywhere(&self.unlock, lock, owner, None)
            .await;
        let left: Vec<&str> = sets
            .iter()
            .zip(&unlocks)
            .filter(|(set, _)| matches!(set, NodeReply::Yes | NodeReply::Unknown(_)))
            .filter_map(|(_, unlock)| match unlock {
                NodeReply::NotSent(why) | NodeReply::Unknown(why) => Some(why.as_str()),
                NodeReply::Yes | NodeReply::No => None,
            })
            .collect();
        match left.first() {
            None => Ok(()),
            Some(why) => Err(KeysLeft {
                masters: left.len(),
                first: why.to_string(),
            }),
        }
    }
}

/// Why a grant that reached a majority got no fencing token: the lease is then undone.
#[derive(Debug, thiserror::Error)]
enum NoToken {
    /// The majority took so long that no validity was left to ask for one.
    #[error("no validity was left")]
    NoValidity,
    /// The fence counter refused or lost the `INCR`.
    #[error("fence counter: {0}")]
    Counter(CallError),
    /// The fence counter did not answer before the lease's validity ran out.
    #[error("fence counter {counter}: no reply within the {validity_left:?} of validity left")]
    Late {
        /// The counter's URL, password hidden.
        counter: String,
        /// How long it was given.
        validity_left: Duration,
    },
}

/// Masters an undone acquire may have left its key on: the outcome is then unknown.
#[derive(Debug, thiserror::Error)]
#[error("the key may be left on {masters} masters until it expires ({first})")]
struct KeysLeft {
    /// How many.
    masters: usize,
    /// Why the first of them could not be told to delete it.
    first: String,
}

/// Redis wants whole milliseconds, at least one.
fn ttl_ms(ttl: Duration) -> u64 {
    (ttl.as_millis() as u64).max(1)
}

#[async_trait]
impl LockService for RedlockLock {
    /// Sets the key on every master; granted on a majority with validity left (and a token
    /// from the counter, with `fence=redis://`). Otherwise every master is told to drop the
    /// key: `busy` when another owner's keys kept the majority out, not applied when masters
    /// were unreachable, unknown when a master that may have taken the key could not be told.
    async fn acquire(
        &self,
        lock: &str,
        owner: OwnerToken,
        ttl: Duration,
    ) -> Result<Acquired, CallError> {
        let owner = owner.to_string();
        let quorum = self.options.quorum();
        let started = Instant::now();
        let sets = self.set_everywhere(lock, &owner, ttl_ms(ttl)).await;
        let tally = Tally::of(&sets);
        let mut why = tally.describe("set the key");
        if tally.reached(quorum) {
            let token = match self.validity(ttl, started.elapsed()) {
                Some(left) => self.token(lock, left).await,
                None => Err(NoToken::NoValidity),
            };
            match token {
                Ok(fencing_token) if self.validity(ttl, started.elapsed()).is_some() => {
                    return Ok(Acquired::Granted { fencing_token });
                }
                Ok(_) => why = format!("{why}, but no validity was left with the token"),
                Err(error) => why = format!("{why}, but {error}"),
            }
            why = format!("{why} after {:?}", started.elapsed());
        }
        if let Err(left) = self.undo(lock, &owner, &sets).await {
            return Err(CallError::Unknown(format!(
                "Redlock acquire of {lock}: {why}; {left}"
            )));
        }
        if tally.no > 0 && !tally.reached(quorum) {
            Ok(Acquired::Busy)
        } else {
            Err(CallError::NotApplied(format!(
                "Redlock acquire of {lock}: {why}; undone on every master"
            )))
        }
    }

    /// Extends the caller's key on every master; a majority in time is a renewed lease. A renew
    /// that reached only a minority extended no lease (a lease is a majority's keys), so it is
    /// answered as not applied, or as not the owner when every master answered.
    async fn renew(
        &self,
        lock: &str,
        owner: OwnerToken,
        ttl: Duration,
    ) -> Result<Owned, CallError> {
        let owner = owner.to_string();
        let quorum = self.options.quorum();
        let started = Instant::now();
        let replies = self
            .script_everywhere(&self.extend, lock, &owner, Some(ttl_ms(ttl)))
            .await;
        let tally = Tally::of(&replies);
        let in_time = self.validity(ttl, started.elapsed()).is_some();
        if tally.reached(quorum) && in_time {
            return Ok(Owned::Done);
        }
        let why = tally.describe("extended the key");
        if !tally.surely_missed(quorum) {
            let late = if in_time { "" } else { ", after its validity" };
            return Err(CallError::Unknown(format!(
                "Redlock renew of {lock}: {why}{late}"
            )));
        }
        if tally.not_sent == 0 {
            Ok(Owned::NotOwner)
        } else {
            Err(CallError::NotApplied(format!(
                "Redlock renew of {lock}: {why}"
            )))
        }
    }

    /// Deletes the caller's key on every master; done when a majority deleted it, not the
    /// owner when every master answered and fewer did (the lease had already ended).
    async fn release(&self, lock: &str, owner: OwnerToken) -> Result<Owned, CallError> {
        let owner = owner.to_string();
        let quorum = self.options.quorum();
        let replies = self
            .script_everywhere(&self.unlock, lock, &owner, None)
            .await;
        let tally = Tally::of(&replies);
        if tally.reached(quorum) {
            return Ok(Owned::Done);
        }
        let why = tally.describe("deleted the key");
        if !tally.surely_missed(quorum) {
            Err(CallError::Unknown(format!(
                "Redlock release of {lock}: {why}"
            )))
        } else if tally.not_sent == 0 {
            Ok(Owned::NotOwner)
        } else {
            Err(CallError::NotApplied(format!(
                "Redlock release of {lock}: {why}"
            )))
        }
    }
}
