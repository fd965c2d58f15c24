//! Whether a Redis server still holds what an adapter put there: a marker key set the first
//! time the adapter uses a lock (or a store key), and never set again.
//!
//! A restart of a Redis without persistence loses every key: leases, fence counters, and the
//! beginning of every log with them. A log read back afterwards holds only what came after the
//! restart, and judged as the server's whole record it would contradict every reply given
//! before (each `ok` a call "it never applied"). A missing marker tells the loss apart from a
//! log that is merely short, so the adapters then hand over no log at all: a log is used
//! whole or not at all.

use std::collections::BTreeSet;
use std::sync::Mutex;

use fencer_harness::CallError;
use redis::aio::MultiplexedConnection;

use crate::redis_conn::RedisConnection;

/// The keys whose markers this adapter has set.
#[derive(Debug, Default)]
pub(crate) struct Origins(Mutex<BTreeSet<String>>);

fn marker_key(key: &str) -> String {
    format!("{key}:origin")
}

impl Origins {
    fn is_marked(&self, key: &str) -> bool {
        let marked = self.0.lock().unwrap_or_else(|poison| poison.into_inner());
        marked.contains(key)
    }

    /// Sets `key`'s marker unless this adapter already has: before the first call on `key`
    /// is sent, so the marker is older than anything the call logs.
    pub async fn mark(
        &self,
        connection: &RedisConnection,
        live: &mut MultiplexedConnection,
        key: &str,
    ) -> Result<(), CallError> {
        if self.is_marked(key) {
            return Ok(());
        }
        let set = redis::cmd("SET")
            .arg(marker_key(key))
            .arg(1)
            .query_async::<()>(live)
            .await;
        match set {
            Ok(()) => {
                let mut marked = self.0.lock().unwrap_or_else(|poison| poison.into_inner());
                marked.insert(key.to_string());
                Ok(())
            }
            Err(error) => Err(connection.sent_error(error).await),
        }
    }

    /// Whether the server still holds `key`'s marker, if this adapter set one: `false` means
    /// it lost `key`'s data (and its log's beginning) since.
    pub async fn intact(
        &self,
        live: &mut MultiplexedConnection,
        key: &str,
    ) -> Result<bool, redis::RedisError> {
        if !self.is_marked(key) {
            return Ok(true);
        }
        redis::cmd("EXISTS")
            .arg(marker_key(key))
            .query_async::<bool>(live)
            .await
    }
}
