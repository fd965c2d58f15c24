//! One lazily opened, self-healing connection to a Redis server, shared by a lock and a store.
//!
//! The connection is opened on first use, inside whatever runtime makes the call, so an adapter
//! can be built before that runtime exists (from a plain `#[test]`); a call from a different
//! runtime opens a new one. A connection that broke (server killed, network cut) is dropped and
//! reopened on the next call.
//!
//! A `redis-sentinel://` URL ([`crate::redis_sentinel`]) names no server but the sentinels
//! that know the primary: each connection goes to the primary a majority of them names then,
//! and a broken connection or a `READONLY` reply (the server was demoted) sends the next call
//! back to the sentinels.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fencer_harness::CallError;
use redis::aio::MultiplexedConnection;

use crate::error::BackendError;
use crate::per_runtime::PerRuntime;
use crate::redis_sentinel::{self, SENTINEL_SCHEME, SentinelTarget};
use crate::url::shown_if_scheme;

/// How long opening a connection may take before the call fails as not applied.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Where connections go.
enum Route {
    /// One server, always the same.
    Direct(redis::Client),
    /// The primary the sentinels name at the time of connecting.
    Sentinel(SentinelTarget),
}

/// A Redis server address and its live connection, if one is open.
pub struct RedisConnection {
    route: Route,
    shown_url: String,
    /// The open connection, kept for the runtime whose task drives it.
    live: PerRuntime<MultiplexedConnection>,
    /// Every primary (as the sentinels announce it) a connection went to: more than one means
    /// a failover happened in between.
    primaries: Mutex<BTreeSet<String>>,
    /// Set when a caller gave up on a call before it finished ([`RedisConnection::watched`]).
    abandoned: AtomicBool,
}

/// Notes, when dropped before its call finished, that the caller gave up on it.
struct Watch<'a> {
    abandoned: &'a AtomicBool,
    finished: bool,
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.abandoned.store(true, Ordering::Relaxed);
        }
    }
}

impl RedisConnection {
    /// Checks `url` (`redis://host:port[/db]`, or `redis-sentinel://h:p,…/NAME[?via=…]`)
    /// without connecting.
    pub fn open(url: &str) -> Result<RedisConnection, BackendError> {
        let shown_url = shown_if_scheme(
            url,
            &["redis", SENTINEL_SCHEME],
            "a redis://host:port URL (or redis-sentinel://host:port,…/NAME)",
        )?;
        let route = if url.starts_with(SENTINEL_SCHEME) {
            Route::Sentinel(SentinelTarget::parse(url)?)
        } else {
            Route::Direct(redis::Client::open(url).map_err(|error| {
                BackendError::BadUrl(format!("bad Redis URL {shown_url}: {error}"))
            })?)
        };
        Ok(RedisConnection {
            route,
            shown_url,
            live: PerRuntime::default(),
            primaries: Mutex::default(),
            abandoned: AtomicBool::new(false),
        })
    }

    /// Every primary, as its sentinels announce it, that a connection went to so far (empty
    /// for a `redis://` URL). More than one: a failover happened, and with Redis's
    /// asynchronous replication the new primary may lack writes the old one acknowledged.
    pub fn primaries_used(&self) -> Vec<String> {
        let used = self
            .primaries
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        used.iter().cloned().collect()
    }

    /// The URL with its password hidden.
    pub fn shown_url(&self) -> &str {
        &self.shown_url
    }

    /// The live connection, opening one if needed. Failing to open one means nothing was sent.
    /// With a sentinel URL, a call given up on since (see [`RedisConnection::watched`]) makes
    /// this open a new one, to whichever primary the sentinels name now.
    pub async fn get(&self) -> Result<MultiplexedConnection, CallError> {
        let sentinel = matches!(self.route, Route::Sentinel(_));
        let stale = sentinel && self.abandoned.swap(false, Ordering::Relaxed);
        self.live.get_or_open(|_| !stale, || self.connect()).await
    }

    /// Runs `call` (one adapter call's commands), noting whether its caller gives up on it
    /// first: a caller's own timeout drops a call that hangs on a paused or cut-off primary,
    /// and the connection it hangs on would hold up every later call too, while the sentinels
    /// may already name another primary.
    pub async fn watched<T>(&self, call: impl Future<Output = T>) -> T {
        let mut watch = Watch {
            abandoned: &self.abandoned,
            finished: false,
        };
        let result = call.await;
        watch.finished = true;
        result
    }

    async fn connect(&self) -> Result<MultiplexedConnection, CallError> {
        match &self.route {
            Route::Direct(client) => connect_to(client, &self.shown_url).await,
            Route::Sentinel(target) => self.connect_to_primary(target).await,
        }
    }

    /// Asks the sentinels for the primary and connects to it (through its `via` address),
    /// checking it is a primary. Nothing is sent before that check, so every failure here
    /// leaves the call not applied.
    async fn connect_to_primary(
        &self,
        target: &SentinelTarget,
    ) -> Result<MultiplexedConnection, CallError> {
        let announced = target.primary().await.map_err(|why| {
            CallError::NotApplied(format!("no Redis primary for {}: {why}", self.shown_url))
        })?;
        let dialled = target.dialled(&announced);
        let shown = format!("primary {announced} (dialled at {dialled})");
        let client = redis::Client::open(format!("redis://{dialled}")).map_err(|error| {
            CallError::NotApplied(format!("bad primary address {shown}: {error}"))
        })?;
        let mut connection = connect_to(&client, &shown).await?;
        match tokio::time::timeout(CONNECT_TIMEOUT, redis_sentinel::is_primary(&mut connection))
            .await
        {
            Ok(Ok(true)) => {}
            Ok(Ok(false)) => {
                return Err(CallError::NotApplied(format!(
                    "the sentinels of {} name {shown}, which is not a primary (yet)",
                    self.shown_url
                )));
            }
            Ok(Err(error)) => {
                return Err(CallError::NotApplied(format!("ROLE on {shown}: {error}")));
            }
            Err(_elapsed) => {
                return Err(CallError::NotApplied(format!(
                    "ROLE on {shown}: no answer within {CONNECT_TIMEOUT:?}"
                )));
            }
        }
        let mut used = self
            .primaries
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        used.insert(announced);
        Ok(connection)
    }

    /// Classifies an error from a command that was sent: its effect is unknown (a Lua script
    /// that failed half-way is not rolled back either), except a `READONLY` refusal: the
    /// server is a replica, where no write of any command or script takes effect, so nothing
    /// was applied. A broken connection, or one to a demoted primary (or, with a sentinel URL,
    /// one whose reply timed out), is dropped so the next call reconnects (through the
    /// sentinels, to whoever is primary then).
    pub async fn sent_error(&self, error: redis::RedisError) -> CallError {
        let read_only = error.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly);
        // A primary that stopped answering may have been replaced: ask the sentinels again.
        let sentinel_timeout = matches!(self.route, Route::Sentinel(_)) && error.is_timeout();
        if read_only
            || sentinel_timeout
            || error.is_io_error()
            || error.is_connection_dropped()
            || error.is_unrecoverable_error()
        {
            self.live.forget().await;
        }
        if read_only {
            CallError::NotApplied(format!(
                "redis: the server is a replica (READONLY), nothing was written: {error}"
            ))
        } else {
            CallError::Unknown(format!("redis: {error}"))
        }
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

/// Opens a connection with `client`, bounded by [`CONNECT_TIMEOUT`]; `shown` names the server.
async fn connect_to(
    client: &redis::Client,
    shown: &str,
) -> Result<MultiplexedConnection, CallError> {
    let connecting = client.get_multiplexed_async_connection();
    match tokio::time::timeout(CONNECT_TIMEOUT, connecting).await {
        Ok(Ok(connection)) => Ok(connection),
        Ok(Err(error)) => Err(CallError::NotApplied(format!(
            "cannot connect to Redis at {shown}: {error}"
        ))),
        Err(_elapsed) => Err(CallError::NotApplied(format!(
            "cannot connect to Redis at {shown}: no answer within {CONNECT_TIMEOUT:?}"
        ))),
    }
}
