//! A lease service on Redis: `SET lock owner NX PX ttl` and `INCR lock:fence` in one Lua
//! script, so a grant and its fencing token are one atomic step.
//!
//! Renew and release compare the owner inside Lua before `PEXPIRE`/`DEL`, which is what makes
//! them safe against a stale holder. [`RedisLockRules::UnsafeRelease`] is the classic bug
//! (`DEL` without the compare) that fencer must catch.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use fencer_harness::{Acquired, CallError, LockService, Owned, OwnerToken};
use redis::Script;

use crate::redis_conn::RedisConnection;

/// Which release the service uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RedisLockRules {
    /// Compare-and-delete in Lua.
    Reference,
    /// Mutant: plain `DEL`, whoever asks.
    UnsafeRelease,
}

const ACQUIRE: &str = r"
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return 0
";

const RENEW: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
";

const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
";

const UNSAFE_RELEASE: &str = r"
return redis.call('DEL', KEYS[1])
";

/// What a jump of the server's clock does to one key: its remaining time shrinks by the jump
/// (grows for a backward one), and a key with less left than a forward jump expires now.
pub(crate) const JUMP_EXPIRY: &str = r"
local left = redis.call('PTTL', KEYS[1])
if left < 0 then return 0 end
if left <= tonumber(ARGV[1]) then
  redis.call('DEL', KEYS[1])
  return 1
end
redis.call('PEXPIRE', KEYS[1], left - tonumber(ARGV[1]))
return 1
";

/// Leases on a Redis server.
pub struct RedisLock {
    connection: Arc<RedisConnection>,
    rules: RedisLockRules,
    acquire: Script,
    renew: Script,
    release: Script,
}

impl RedisLock {
    /// A lease service over `connection` following `rules`.
    pub fn new(connection: Arc<RedisConnection>, rules: RedisLockRules) -> RedisLock {
        RedisLock {
            connection,
            rules,
            acquire: Script::new(ACQUIRE),
            renew: Script::new(RENEW),
            release: Script::new(match rules {
                RedisLockRules::Reference => RELEASE,
                RedisLockRules::UnsafeRelease => UNSAFE_RELEASE,
            }),
        }
    }

    /// The rules this service follows.
    pub fn rules(&self) -> RedisLockRules {
        self.rules
    }

    /// Emulates the Redis server's clock jumping forward by `jump` for `lock`'s lease: Redis
    /// expires keys by its wall clock, but Debian's Redis hangs under libfaketime, so the jump
    /// is applied to the lease's expiry instead. Returns whether a lease was live.
    pub async fn jump_server_clock(&self, lock: &str, jump: Duration) -> Result<bool, CallError> {
        let mut connection = self.connection.get().await?;
        match Script::new(JUMP_EXPIRY)
            .key(lock)
            .arg(jump.as_millis() as u64)
            .invoke_async::<u64>(&mut connection)
            .await
        {
            Ok(live) => Ok(live == 1),
            Err(error) => Err(self.connection.sent_error(error).await),
        }
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
        let mut connection = self.connection.get().await?;
        let token: u64 = match self
            .acquire
            .key(lock)
            .key(fence_key(lock))
            .arg(owner.to_string())
            .arg(ttl_ms(ttl))
            .invoke_async(&mut connection)
            .await
        {
            Ok(token) => token,
            Err(error) => return Err(self.connection.sent_error(error).await),
        };
        Ok(match token {
            0 => Acquired::Busy,
            fencing_token => Acquired::Granted { fencing_token },
        })
    }

    async fn renew(
        &self,
        lock: &str,
        owner: OwnerToken,
        ttl: Duration,
    ) -> Result<Owned, CallError> {
        let mut connection = self.connection.get().await?;
        match self
            .renew
            .key(lock)
            .arg(owner.to_string())
            .arg(ttl_ms(ttl))
            .invoke_async::<u64>(&mut connection)
            .await
        {
            Ok(1) => Ok(Owned::Done),
            Ok(_) => Ok(Owned::NotOwner),
            Err(error) => Err(self.connection.sent_error(error).await),
        }
    }

    async fn release(&self, lock: &str, owner: OwnerToken) -> Result<Owned, CallError> {
        let mut connection = self.connection.get().await?;
        match self
            .release
            .key(lock)
            .arg(owner.to_string())
            .invoke_async::<u64>(&mut connection)
            .await
        {
            Ok(1) => Ok(Owned::Done),
            Ok(_) => Ok(Owned::NotOwner),
            Err(error) => Err(self.connection.sent_error(error).await),
        }
    }
}
