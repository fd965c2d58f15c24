//! One lazily opened, self-healing connection to a Redis server, shared by a lock and a store.
//!
//! The connection is opened on first use, inside whatever runtime makes the call, so an adapter
//! can be built before that runtime exists (from a plain `#[test]`); a call from a different
//! runtime opens a new one. A connection that broke (server killed, network cut) is dropped and
//! reopened on the next call.

use std::time::Duration;

use fencer_harness::CallError;
use redis::aio::MultiplexedConnection;

use crate::error::BackendError;
use crate::per_runtime::PerRuntime;
use crate::url::shown_if_scheme;

/// How long opening a connection may take before the call fails as not applied.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// A Redis server address and its live connection, if one is open.
pub struct RedisConnection {
    client: redis::Client,
    shown_url: String,
    /// The open connection, kept for the runtime whose task drives it.
    live: PerRuntime<MultiplexedConnection>,
}

impl RedisConnection {
    /// Checks `url` (`redis://host:port[/db]`) without connecting.
    pub fn open(url: &str) -> Result<RedisConnection, BackendError> {
        let shown_url = shown_if_scheme(url, &["redis"], "a redis://host:port URL")?;
        let client = redis::Client::open(url)
            .map_err(|error| BackendError::BadUrl(format!("bad Redis URL {shown_url}: {error}")))?;
        Ok(RedisConnection {
            client,
            shown_url,
            live: PerRuntime::default(),
        })
    }

    /// The URL with its password hidden.
    pub fn shown_url(&self) -> &str {
        &self.shown_url
    }

    /// The live connection, opening one if needed. Failing to open one means nothing was sent.
    pub async fn get(&self) -> Result<MultiplexedConnection, CallError> {
        self.live.get_or_open(|_| true, || self.connect()).await
    }

    async fn connect(&self) -> Result<MultiplexedConnection, CallError> {
        let connecting = self.client.get_multiplexed_async_connection();
        match tokio::time::timeout(CONNECT_TIMEOUT, connecting).await {
            Ok(Ok(connection)) => Ok(connection),
            Ok(Err(error)) => Err(CallError::NotApplied(format!(
                "cannot connect to Redis at {}: {error}",
                self.shown_url
            ))),
            Err(_elapsed) => Err(CallError::NotApplied(format!(
                "cannot connect to Redis at {}: no answer within {CONNECT_TIMEOUT:?}",
                self.shown_url
            ))),
        }
    }

    /// Classifies an error from a command that was sent: its effect is unknown (a Lua script
    /// that failed half-way is not rolled back either). A broken connection is dropped so the
    /// next call reconnects.
    pub async fn sent_error(&self, error: redis::RedisError) -> CallError {
        if error.is_io_error() || error.is_connection_dropped() || error.is_unrecoverable_error() {
            self.live.forget().await;
        }
        CallError::Unknown(format!("redis: {error}"))
    }

    /// Emulates a step of the server's wall clock by `jump_ms` (negative: backwards) on every
    /// key that has an expiry: Redis expires keys by its wall clock, but Debian's build hangs
    /// under libfaketime, so the jump is applied to the expiries instead. Each key's remaining
    /// time shrinks by the jump (grows for a backward one) and a key with less left than a
    /// forward jump expires now; the clock the lock logs read moves by the jump in the same
    /// script, so their times stay the clock Redis's expiry behaves by. Meant for a private
    /// server (it blocks it while touching every key). Returns how many keys had an expiry.
    pub async fn shift_expiries(&self, jump_ms: i64) -> Result<usize, BackendError> {
        let mut connection = self.get().await?;
        let script = redis::Script::new(crate::redis_lock::SERVER_JUMP);
        let mut call = script.key(crate::redis_lock_log::SERVER_SHIFT_KEY);
        call.arg(jump_ms);
        let shifted = call.invoke_async::<i64>(&mut connection);
        let moved = tokio::time::timeout(CONNECT_TIMEOUT, shifted)
            .await
            .map_err(|_elapsed| {
                BackendError::Unreachable(format!(
                    "shifting expiries on {} timed out",
                    self.shown_url
                ))
            })?
            .map_err(|error| {
                BackendError::Unreachable(format!(
                    "shifting expiries on {}: {error}",
                    self.shown_url
                ))
            })?;
        Ok(moved as usize)
    }

    /// Round-trips a PING: a clear error up front beats a run full of failed calls.
    pub async fn ping(&self) -> Result<(), BackendError> {
        let mut connection = self.get().await?;
        let command = redis::cmd("PING");
        let ping = command.query_async::<String>(&mut connection);
        match tokio::time::timeout(CONNECT_TIMEOUT, ping).await {
            Ok(Ok(_pong)) => Ok(()),
            Ok(Err(error)) => Err(BackendError::Unreachable(format!(
                "Redis at {} refused PING: {error}",
                self.shown_url
            ))),
            Err(_elapsed) => Err(BackendError::Unreachable(format!(
                "Redis at {} did not answer PING within {CONNECT_TIMEOUT:?}",
                self.shown_url
            ))),
        }
    }
}
