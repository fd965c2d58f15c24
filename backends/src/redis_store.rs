//! A fenced register on Redis: one Lua script reads the stored fence, compares the write's
//! token and applies it (or not) atomically, and appends every applied write to a per-key list
//! that serves as the store's applied log.
//!
//! [`RedisStoreRules::Unfenced`] skips the compare: the store then accepts whatever arrives.

use std::sync::Arc;

use async_trait::async_trait;
use fencer_harness::{AppliedWrite, CallError, FencedStore, FencingToken, ReadValue, Written};
use redis::Script;

use crate::log_entry;
use crate::redis_conn::RedisConnection;
use crate::redis_origin::Origins;
use crate::written_keys::WrittenKeys;

/// Whether writes are fenced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RedisStoreRules {
    /// Apply only if the token is >= the stored fence, in the same script.
    Fenced,
    /// Mutant: apply every write.
    Unfenced,
}

/// KEYS: register hash, applied-log list. ARGV: token, write id, value, fenced (1/0).
/// Returns {1, seq} when applied, {0, current fence} when rejected.
const WRITE: &str = r"
local current = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
local token = tonumber(ARGV[1])
if ARGV[4] == '1' and token < current then
  return {0, current}
end
redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'write_id', ARGV[2], 'value', ARGV[3])
local seq = redis.call('RPUSH', KEYS[2], ARGV[1] .. ' ' .. ARGV[2])
return {1, seq}
";

/// A fenced register per key on a Redis server.
pub struct RedisStore {
    connection: Arc<RedisConnection>,
    rules: RedisStoreRules,
    write: Script,
    /// Keys written through this adapter: whose applied logs [`FencedStore::applied_log`] reads.
    keys: WrittenKeys,
    /// Whether the server lost a key's register (and its log's beginning) since.
    origins: Origins,
}

impl RedisStore {
    /// A store over `connection` following `rules`.
    pub fn new(connection: Arc<RedisConnection>, rules: RedisStoreRules) -> RedisStore {
        RedisStore {
            connection,
            rules,
            write: Script::new(WRITE),
            keys: WrittenKeys::default(),
            origins: Origins::default(),
        }
    }
}

fn log_key(key: &str) -> String {
    format!("{key}:applied")
}

#[async_trait]
impl FencedStore for RedisStore {
    async fn write(
        &self,
        key: &str,
        fencing_token: FencingToken,
        write_id: &str,
        value: &str,
    ) -> Result<Written, CallError> {
        self.connection
            .watched(async {
                self.keys.note(key);
                let mut connection = self.connection.get().await?;
                self.origins
                    .mark(&self.connection, &mut connection, key)
                    .await?;
                let fenced = match self.rules {
                    RedisStoreRules::Fenced => "1",
                    RedisStoreRules::Unfenced => "0",
                };
                let reply: (u64, u64) = match self
                    .write
                    .key(key)
                    .key(log_key(key))
                    .arg(fencing_token)
                    .arg(write_id)
                    .arg(value)
                    .arg(fenced)
                    .invoke_async(&mut connection)
                    .await
                {
                    Ok(reply) => reply,
                    Err(error) => return Err(self.connection.sent_error(error).await),
                };
                Ok(match reply {
                    (1, _seq) => Written::Applied,
                    (_, current_token) => Written::Rejected { current_token },
                })
            })
            .await
    }

    async fn read(&self, key: &str) -> Result<ReadValue, CallError> {
        self.connection
            .watched(async {
                let mut connection = self.connection.get().await?;
                let (fence, write_id, value): (Option<u64>, Option<String>, Option<String>) =
                    match redis::cmd("HMGET")
                        .arg(key)
                        .arg("fence")
                        .arg("write_id")
                        .arg("value")
                        .query_async(&mut connection)
                        .await
                    {
                        Ok(reply) => reply,
                        Err(error) => return Err(self.connection.sent_error(error).await),
                    };
                Ok(ReadValue {
                    fencing_token: fence.unwrap_or(0),
                    write_id,
                    value,
                })
            })
            .await
    }

    /// The applied writes of every key written through this adapter; `None` if the server
    /// cannot be read, an entry is out of form, or the server lost a key's log since the run
    /// began (a restart without persistence, which its origin marker tells), or the writes went
    /// to more than one primary (a Sentinel failover: replication is asynchronous, so the new
    /// primary's log may lack writes the old one applied).
    async fn applied_log(&self) -> Option<Vec<AppliedWrite>> {
        let primaries = self.connection.primaries_used();
        if primaries.len() > 1 {
            eprintln!(
                "fencer: {} failed over during the run (primaries {}): no store log",
                self.connection.shown_url(),
                primaries.join(", ")
            );
            return None;
        }
        let keys = self.keys.all();
        let mut connection = self.connection.get().await.ok()?;
        let mut log = Vec::new();
        for key in keys {
            let entries: Vec<String> = redis::cmd("LRANGE")
                .arg(log_key(&key))
                .arg(0)
                .arg(-1)
                .query_async(&mut connection)
                .await
                .ok()?;
            if !self.origins.intact(&mut connection, &key).await.ok()? {
                eprintln!(
                    "fencer: {} lost the applied log of {key} during the run (restarted \
                     without persistence): no store log",
                    self.connection.shown_url()
                );
                return None;
            }
            for (position, entry) in entries.iter().enumerate() {
                log.push(log_entry::parse(position as u64 + 1, &key, entry)?);
            }
        }
        Some(log)
    }
}
