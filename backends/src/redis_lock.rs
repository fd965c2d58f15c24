//! A lease service on Redis: `SET lock owner NX PX ttl` and `INCR lock:fence` in one Lua
//! script, so a grant and its fencing token are one atomic step.
//!
//! Renew and release compare the owner inside Lua before `PEXPIRE`/`DEL`, which is what makes
//! them safe against a stale holder. [`RedisLockRules::UnsafeRelease`] is the classic bug
//! (`DEL` without the compare) that fencer must catch.
//!
//! Every script that changes a lease appends what it did to the lock's log in the same script
//! (`redis_lock_log`), with the server's clock and the expiry Redis itself set: the
//! lock log [`LockService::lock_log`] hands over. The holder's token in a renew or release
//! entry is the `lock:fence` counter's value, which is the live lease's token: only a grant
//! increments it, in the script that sets the key.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use fencer_harness::{
    Acquired, CallError, ExpiryRule, LockLogEntry, LockService, Owned, OwnerToken,
};
use redis::Script;

use crate::redis_conn::RedisConnection;
use crate::redis_lock_log::{self, LOG_PRELUDE, SERVER_SHIFT_KEY, Unreadable};
use crate::redis_origin::Origins;
use crate::written_keys::WrittenKeys;

/// How Redis ends a lease, which its lock log's expiries are read by: a key is expired only
/// once the server's clock, in whole milliseconds, is past its expiry (`mstime() > when`), so
/// it is live through the whole millisecond its `PEXPIRETIME` names, whatever the
/// microseconds of `TIME` say.
pub const EXPIRY: ExpiryRule = ExpiryRule {
    live_at_expiry: true,
    resolution_ns: 1_000_000,
};

/// Which release the service uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RedisLockRules {
    /// Compare-and-delete in Lua.
    Reference,
    /// Mutant: plain `DEL`, whoever asks.
    UnsafeRelease,
}

// Every lock script: KEYS lock, fence, log, lock clock shift, server clock shift; ARGV owner
// (and ttl_ms). Each runs after LOG_PRELUDE, which defines `log`.

const ACQUIRE: &str = r"
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 0
end
local token = redis.call('INCR', KEYS[2])
log('grant ' .. ARGV[1] .. ' ' .. token .. ' ' .. ARGV[2], true)
return token
";

const RENEW: &str = r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local token = redis.call('GET', KEYS[2]) or '0'
log('renew ' .. ARGV[1] .. ' ' .. ARGV[1] .. ' ' .. token .. ' ' .. ARGV[2], true)
return 1
";

const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
local token = redis.call('GET', KEYS[2]) or '0'
log('release ' .. ARGV[1] .. ' ' .. ARGV[1] .. ' ' .. token, false)
return 1
";

/// Deletes whoever holds the lease, and logs that holder: what it really did.
const UNSAFE_RELEASE: &str = r"
local holder = redis.call('GET', KEYS[1])
if not holder then
  return 0
end
redis.call('DEL', KEYS[1])
local token = redis.call('GET', KEYS[2]) or '0'
log('release ' .. ARGV[1] .. ' ' .. holder .. ' ' .. token, false)
return 1
";

/// What a jump of `jump` ms of the server's clock does to the key `key` (Lua, inside a script
/// whose variables `key` and `jump` are set): its remaining time shrinks by the jump (grows for
/// a backward one), and a key with less left than a forward jump expires now. Adds 1 to
/// `moved` for a key that had an expiry.
macro_rules! shift_one_expiry {
    () => {
        r"
local left = redis.call('PTTL', key)
if left >= 0 then
  moved = moved + 1
  if left <= jump then
    redis.call('DEL', key)
  else
    redis.call('PEXPIRE', key, left - jump)
  end
end
"
    };
}

/// Jumps one lock's clock: KEYS lock, its clock shift; ARGV jump (ms). The shift the lock log
/// adds moves in the same script as the expiry. Returns 1 if a lease was live.
const LOCK_JUMP: &str = concat!(
    r"
redis.call('INCRBY', KEYS[2], ARGV[1])
local key, jump, moved = KEYS[1], tonumber(ARGV[1]), 0
",
    shift_one_expiry!(),
    "return moved
"
);

/// Jumps the whole server's clock: KEYS the server's clock shift; ARGV jump (ms). Every key
/// with an expiry is moved, and the shift, in one script, so no call sees half a jump. Returns
/// how many keys had an expiry.
pub(crate) const SERVER_JUMP: &str = concat!(
    r"
redis.call('INCRBY', KEYS[1], ARGV[1])
local jump, moved = tonumber(ARGV[1]), 0
for _, key in ipairs(redis.call('KEYS', '*')) do
",
    shift_one_expiry!(),
    "end
return moved
"
);

/// Leases on a Redis server.
pub struct RedisLock {
    connection: Arc<RedisConnection>,
    rules: RedisLockRules,
    acquire: Script,
    renew: Script,
    release: Script,
    /// Locks called through this adapter: whose logs [`LockService::lock_log`] reads.
    locks: WrittenKeys,
    /// Whether the server lost a lock's state (and its log's beginning) since.
    origins: Origins,
}

impl RedisLock {
    /// A lease service over `connection` following `rules`.
    pub fn new(connection: Arc<RedisConnection>, rules: RedisLockRules) -> RedisLock {
        let logging = |body: &str| Script::new(&format!("{LOG_PRELUDE}{body}"));
        RedisLock {
            connection,
            rules,
            acquire: logging(ACQUIRE),
            renew: logging(RENEW),
            release: logging(match rules {
                RedisLockRules::Reference => RELEASE,
                RedisLockRules::UnsafeRelease => UNSAFE_RELEASE,
            }),
            locks: WrittenKeys::default(),
            origins: Origins::default(),
        }
    }

    /// The rules this service follows.
    pub fn rules(&self) -> RedisLockRules {
        self.rules
    }

    /// Emulates the Redis server's clock jumping forward by `jump` for `lock`'s lease: Redis
    /// expires keys by its wall clock, but Debian's Redis hangs under libfaketime, so the jump
    /// is applied to the lease's expiry instead, and to the clock `lock`'s log reads. Returns
    /// whether a lease was live.
    pub async fn jump_server_clock(&self, lock: &str, jump: Duration) -> Result<bool, CallError> {
        let mut connection = self.connection.get().await?;
        match Script::new(LOCK_JUMP)
            .key(lock)
            .key(redis_lock_log::lock_shift_key(lock))
            .arg(jump.as_millis() as u64)
            .invoke_async::<u64>(&mut connection)
            .await
        {
            Ok(live) => Ok(live == 1),
            Err(error) => Err(self.connection.sent_error(error).await),
        }
    }

    /// Runs a renew or release script (`1`: the owner held the lock and the script acted on it)
    /// on the current connection, watched like every call through it.
    async fn owner_checked(
        &self,
        invocation: redis::ScriptInvocation<'_>,
        lock: &str,
    ) -> Result<Owned, CallError> {
        self.connection
            .watched(async {
                let mut connection = self.connection.get().await?;
                self.origins
                    .mark(&self.connection, &mut connection, lock)
                    .await?;
                match invocation.invoke_async::<u64>(&mut connection).await {
                    Ok(1) => Ok(Owned::Done),
                    Ok(_) => Ok(Owned::NotOwner),
                    Err(error) => Err(self.connection.sent_error(error).await),
                }
            })
            .await
    }

    /// `script` with the keys every lock script takes for `lock`, and `owner` as its first
    /// argument.
    fn call<'s>(
        &self,
        script: &'s Script,
        lock: &str,
        owner: OwnerToken,
    ) -> redis::ScriptInvocation<'s> {
        self.locks.note(lock);
        let mut invocation = script.prepare_invoke();
        invocation
            .key(lock)
            .key(fence_key(lock))
            .key(redis_lock_log::log_key(lock))
            .key(redis_lock_log::lock_shift_key(lock))
            .key(SERVER_SHIFT_KEY)
            .arg(owner.to_string());
        invocation
    }
}

/// Redis wants whole milliseconds, at least one.
fn ttl_ms(ttl: Duration) -> u64 {
    (ttl.as_millis() as u64).max(1)
}

fn fence_key(lock: &str) -> String {
    format!("{lock}:fence")
}

#[async_trait]
impl LockService for RedisLock {
    async fn acquire(
        &self,
        lock: &str,
        owner: OwnerToken,
        ttl: Duration,
    ) -> Result<Acquired, CallError> {
        self.connection
            .watched(async {
                let mut invocation = self.call(&self.acquire, lock, owner);
                invocation.arg(ttl_ms(ttl));
                let mut connection = self.connection.get().await?;
                self.origins
                    .mark(&self.connection, &mut connection, lock)
                    .await?;
                let token: u64 = match invocation.invoke_async(&mut connection).await {
                    Ok(token) => token,
                    Err(error) => return Err(self.connection.sent_error(error).await),
                };
                Ok(match token {
                    0 => Acquired::Busy,
                    fencing_token => Acquired::Granted { fencing_token },
                })
            })
            .await
    }

    async fn renew(
        &self,
        lock: &str,
        owner: OwnerToken,
        ttl: Duration,
    ) -> Result<Owned, CallError> {
        let mut invocation = self.call(&self.renew, lock, owner);
        invocation.arg(ttl_ms(ttl));
        self.owner_checked(invocation, lock).await
    }

    async fn release(&self, lock: &str, owner: OwnerToken) -> Result<Owned, CallError> {
        let invocation = self.call(&self.release, lock, owner);
        self.owner_checked(invocation, lock).await
    }

    /// The logs of every lock called through this adapter. `None` if the server cannot be
    /// read, if an entry is out of form, if the server has no `PEXPIRETIME` (Redis before
    /// 7.0), whose entries name no expiry, or if it lost a lock's log since the run began (a
    /// restart without persistence, which its origin marker tells), or if the calls went to
    /// more than one primary (a Sentinel failover: replication is asynchronous, so the new
    /// primary's log may lack grants the old one made): a log is used whole or not at all.
    async fn lock_log(&self) -> Option<Vec<LockLogEntry>> {
        let primaries = self.connection.primaries_used();
        if primaries.len() > 1 {
            eprintln!(
                "fencer: {} failed over during the run (primaries {}): no lock log",
                self.connection.shown_url(),
                primaries.join(", ")
            );
            return None;
        }
        let mut connection = self.connection.get().await.ok()?;
        let mut log = Vec::new();
        for lock in self.locks.all() {
            let entries: Vec<String> = redis::cmd("LRANGE")
                .arg(redis_lock_log::log_key(&lock))
                .arg(0)
                .arg(-1)
                .query_async(&mut connection)
                .await
                .ok()?;
            if !self.origins.intact(&mut connection, &lock).await.ok()? {
                eprintln!(
                    "fencer: {} lost the log of {lock} during the run (restarted without \
                     persistence): no lock log",
                    self.connection.shown_url()
                );
                return None;
            }
            for (position, entry) in entries.iter().enumerate() {
                match redis_lock_log::parse(position as u64 + 1, &lock, entry) {
                    Ok(entry) => log.push(entry),
                    Err(Unreadable::NoExpiry) => {
                        eprintln!(
                            "fencer: {} has no PEXPIRETIME (Redis before 7.0): no lock log",
                            self.connection.shown_url()
                        );
                        return None;
                    }
                    Err(Unreadable::Malformed(entry)) => {
                        eprintln!("fencer: lock log of {lock}: unreadable entry `{entry}`");
                        return None;
                    }
                }
            }
        }
        Some(log)
    }

    /// Redis's own: a key lives through its expiry millisecond ([`EXPIRY`]).
    fn lock_log_expiry(&self) -> ExpiryRule {
        EXPIRY
    }
}
