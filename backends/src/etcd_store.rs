//! A fenced register on etcd: one txn compares the write's token with the stored fence and
//! either refuses it or puts the new fence, the register's state and an applied-log entry.
//!
//! Keys, for a register `K`: `K/fence` (the newest accepted token), `K/state` (token, write id
//! and value of the last applied write, as JSON) and `K/applied/<write id>` (one per applied
//! write). The txn is one entry of etcd's raft log, applied at one revision under the store's
//! write lock, so the compare and the puts see the same state and nothing runs between them.
//!
//! etcd compares values as bytes, lexicographically, so the fence is stored as 20 zero-padded
//! digits (`u64::MAX` has 20): for equal widths byte order is numeric order. etcd has no
//! "less or equal", and a value compare on a missing key is false, so the txn asks the
//! opposite question: `If(fence > token) Then(read the fence: rejected) Else(apply)`. A
//! register never written has no fence key, the compare is false, and the first write applies.
//!
//! The applied log is read back sorted by `mod_revision`: each applied write is its own txn,
//! hence its own revision, which gives the store's total order.
//!
//! [`EtcdStoreRules::Unfenced`] applies every write without the compare.

use std::sync::Arc;

use async_trait::async_trait;
use fencer_harness::{AppliedWrite, CallError, FencedStore, FencingToken, ReadValue, Written};
use serde_json::{Value, json};

use crate::etcd_conn::{EtcdConnection, base64, int, ranged, succeeded, text};
use crate::written_keys::WrittenKeys;

/// Whether writes are fenced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EtcdStoreRules {
    /// Apply only if the token is >= the stored fence, in the same txn.
    Fenced,
    /// Mutant: apply every write.
    Unfenced,
}

/// A fenced register per key on an etcd server.
pub struct EtcdStore {
    connection: Arc<EtcdConnection>,
    rules: EtcdStoreRules,
    /// Keys written through this adapter: whose applied logs [`FencedStore::applied_log`] reads.
    keys: WrittenKeys,
}

impl EtcdStore {
    /// A store over `connection` following `rules`.
    pub fn new(connection: Arc<EtcdConnection>, rules: EtcdStoreRules) -> EtcdStore {
        EtcdStore {
            connection,
            rules,
            keys: WrittenKeys::default(),
        }
    }

    /// The applied writes of `key`, in store order.
    async fn applied_to(&self, key: &str) -> Result<Vec<AppliedWrite>, CallError> {
        let prefix = log_prefix(key);
        let reply = self
            .connection
            .post(
                "/v3/kv/range",
                &json!({
                    "key": base64(&prefix),
                    "range_end": base64(&prefix_end(&prefix)),
                    "sort_target": "MOD",
                    "sort_order": "ASCEND",
                }),
            )
            .await?;
        let entries = reply.get("kvs").and_then(Value::as_array);
        let mut log = Vec::new();
        for (position, kv) in entries.into_iter().flatten().enumerate() {
            let entry: Value = text(kv, "value")
                .and_then(|value| serde_json::from_str(&value).ok())
                .ok_or_else(|| CallError::Unknown(format!("unreadable log entry {kv}")))?;
            log.push(AppliedWrite {
                seq: position as u64 + 1,
                key: key.to_string(),
                fencing_token: int(&entry, "token"),
                write_id: entry["write_id"].as_str().unwrap_or_default().to_string(),
            });
        }
        Ok(log)
    }
}

/// 20 digits hold every u64, so byte order of fences is numeric order.
fn fence_text(token: FencingToken) -> String {
    format!("{token:020}")
}

fn fence_key(key: &str) -> String {
    format!("{key}/fence")
}

fn state_key(key: &str) -> String {
    format!("{key}/state")
}

fn log_prefix(key: &str) -> String {
    format!("{key}/applied/")
}

/// The end of etcd's `[prefix, end)` range holding every key that starts with `prefix`
/// (which ends in `/`, so bumping its last byte stays ASCII).
fn prefix_end(prefix: &str) -> String {
    let mut end = prefix.as_bytes().to_vec();
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    String::from_utf8(end).unwrap_or_default()
}

fn put(key: &str, value: &str) -> Value {
    json!({ "request_put": { "key": base64(key), "value": base64(value) } })
}

#[async_trait]
impl FencedStore for EtcdStore {
    async fn write(
        &self,
        key: &str,
        fencing_token: FencingToken,
        write_id: &str,
        value: &str,
    ) -> Result<Written, CallError> {
        self.keys.note(key);
        let state =
            json!({ "token": fencing_token.to_string(), "write_id": write_id, "value": value });
        let logged = json!({ "token": fencing_token.to_string(), "write_id": write_id });
        let apply = json!([
            put(&fence_key(key), &fence_text(fencing_token)),
            put(&state_key(key), &state.to_string()),
            put(
                &format!("{}{write_id}", log_prefix(key)),
                &logged.to_string()
            ),
        ]);
        let txn = match self.rules {
            EtcdStoreRules::Fenced => json!({
                "compare": [{
                    "target": "VALUE",
                    "result": "GREATER",
                    "key": base64(&fence_key(key)),
                    "value": base64(&fence_text(fencing_token)),
                }],
                "success": [{ "request_range": { "key": base64(&fence_key(key)) } }],
                "failure": apply,
            }),
            EtcdStoreRules::Unfenced => json!({ "success": apply }),
        };
        let reply = self.connection.post("/v3/kv/txn", &txn).await?;
        let refused = self.rules == EtcdStoreRules::Fenced && succeeded(&reply);
        if !refused {
            return Ok(Written::Applied);
        }
        let current_token = ranged(&reply, 0)
            .first()
            .and_then(|kv| text(kv, "value"))
            .and_then(|fence| fence.parse().ok())
            .ok_or_else(|| {
                CallError::Unknown(format!("etcd refused a write but sent no fence: {reply}"))
            })?;
        Ok(Written::Rejected { current_token })
    }

    async fn read(&self, key: &str) -> Result<ReadValue, CallError> {
        let reply = self
            .connection
            .post("/v3/kv/range", &json!({ "key": base64(&state_key(key)) }))
            .await?;
        let Some(kv) = reply.get("kvs").and_then(|kvs| kvs.get(0)) else {
            return Ok(ReadValue::default());
        };
        let state: Value = text(kv, "value")
            .and_then(|value| serde_json::from_str(&value).ok())
            .ok_or_else(|| CallError::Unknown(format!("unreadable register state {kv}")))?;
        Ok(ReadValue {
            fencing_token: int(&state, "token"),
            write_id: state["write_id"].as_str().map(str::to_string),
            value: state["value"].as_str().map(str::to_string),
        })
    }

    async fn applied_log(&self) -> Option<Vec<AppliedWrite>> {
        let keys = self.keys.all();
        let mut log = Vec::new();
        for key in keys {
            log.extend(self.applied_to(&key).await.ok()?);
        }
        Some(log)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences_sort_as_bytes_in_numeric_order() {
        let tokens = [0, 7, 34, 100, 1_000_000, u64::MAX];
        for pair in tokens.windows(2) {
            assert!(fence_text(pair[0]) < fence_text(pair[1]), "{pair:?}");
        }
        assert_eq!(fence_text(u64::MAX).len(), 20);
    }

    #[test]
    fn the_log_range_covers_the_prefix_only() {
        let prefix = log_prefix("fencer/r1/register");
        let end = prefix_end(&prefix);
        assert_eq!(end, "fencer/r1/register/applied0");
        assert!(format!("{prefix}w0-1").as_str() < end.as_str());
        for other in [
            state_key("fencer/r1/register"),
            fence_key("fencer/r1/register"),
        ] {
            assert!(other < prefix || other >= end, "{other}");
        }
    }
}
