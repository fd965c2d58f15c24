//! A fenced register on ZooKeeper, by optimistic concurrency: read the register znode (its data
//! and version), compare the write's token in the client, then commit one multi-op —
//! `set_data(register, new, expected version)` + `create(applied-log node, persistent
//! sequential)`. ZooKeeper applies a multi all-or-nothing, and the version check fails it if
//! anyone changed the register since it was read, so the compare and the write act as one
//! atomic step: a lost race re-reads and compares again. The log node is created in the same
//! multi, so the applied log can never disagree with the register.
//!
//! Layout: `/fencer/store/<key>` holds `token\nwrite_id\nvalue` (empty until the first write);
//! its children `w-<seq>` hold `token write_id`, one per applied write, in commit order.
//!
//! [`ZookeeperStoreRules::Unfenced`] skips the compare: the store then accepts whatever arrives.

use std::sync::Arc;

use async_trait::async_trait;
use fencer_harness::{AppliedWrite, CallError, FencedStore, FencingToken, ReadValue, Written};
use zookeeper_client::{Acls, Client, CreateMode, MultiWriteError};

use crate::log_entry;
use crate::written_keys::WrittenKeys;
use crate::zookeeper_conn::{ZookeeperConnection, node_name, within};

/// Whether writes are fenced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZookeeperStoreRules {
    /// Apply only if the token is >= the stored one, guarded by the register's version.
    Fenced,
    /// Mutant: apply every write.
    Unfenced,
}

/// How many lost version races one write may run before it gives up (nothing applied).
const MAX_RACES: usize = 100;

const STORE_ROOT: &str = "/fencer/store";

fn register_path(key: &str) -> String {
    format!("{STORE_ROOT}/{}", node_name(key))
}

/// A register's data, parsed: `(token, write id, value)`; empty data is the unwritten register.
fn parse_register(data: &[u8]) -> Result<ReadValue, CallError> {
    if data.is_empty() {
        return Ok(ReadValue::default());
    }
    let text = String::from_utf8_lossy(data);
    let mut parts = text.splitn(3, '\n');
    let token = parts.next().and_then(|token| token.parse().ok());
    match (token, parts.next(), parts.next()) {
        (Some(fencing_token), Some(write_id), Some(value)) => Ok(ReadValue {
            fencing_token,
            write_id: Some(write_id.to_string()),
            value: Some(value.to_string()),
        }),
        _ => Err(CallError::Unknown(format!(
            "zookeeper: register holds unexpected data {text:?}"
        ))),
    }
}

/// A fenced register per key on a ZooKeeper server.
pub struct ZookeeperStore {
    connection: Arc<ZookeeperConnection>,
    rules: ZookeeperStoreRules,
    /// Keys written through this adapter: whose applied logs [`FencedStore::applied_log`] reads.
    keys: WrittenKeys,
}

impl ZookeeperStore {
    /// A store over `connection` following `rules`.
    pub fn new(connection: Arc<ZookeeperConnection>, rules: ZookeeperStoreRules) -> ZookeeperStore {
        ZookeeperStore {
            connection,
            rules,
            keys: WrittenKeys::default(),
        }
    }

    /// Creates the empty register (and its parents) if missing.
    async fn ensure_register(&self, client: &Client, path: &str) -> Result<(), CallError> {
        let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
        for node in ["/fencer", STORE_ROOT, path] {
            match within(client.create(node, b"", &persistent)).await? {
                Ok(_) | Err(zookeeper_client::Error::NodeExists) => {}
                Err(error) => return Err(self.connection.sent_error(error).await),
            }
        }
        Ok(())
    }

    /// One read-compare-commit round: `Ok(None)` when another writer won the race.
    async fn try_write(
        &self,
        client: &Client,
        path: &str,
        fencing_token: FencingToken,
        write_id: &str,
        value: &str,
    ) -> Result<Option<Written>, CallError> {
        let (data, stat) = match within(client.get_data(path)).await? {
            Ok(found) => found,
            Err(zookeeper_client::Error::NoNode) => {
                self.ensure_register(client, path).await?;
                return Ok(None);
            }
            Err(error) => return Err(self.connection.sent_error(error).await),
        };
        let current = parse_register(&data)?.fencing_token;
        if self.rules == ZookeeperStoreRules::Fenced && fencing_token < current {
            return Ok(Some(Written::Rejected {
                current_token: current,
            }));
        }
        let register = format!("{fencing_token}\n{write_id}\n{value}");
        let entry = log_entry::format(fencing_token, write_id);
        let sequential = CreateMode::PersistentSequential.with_acls(Acls::anyone_all());
        let mut multi = client.new_multi_writer();
        let built = multi
            .add_set_data(path, register.as_bytes(), Some(stat.version))
            .and_then(|()| multi.add_create(&format!("{path}/w-"), entry.as_bytes(), &sequential));
        if let Err(error) = built {
            return Err(CallError::NotApplied(format!("zookeeper: {error}")));
        }
        match within(multi.commit()).await? {
            Ok(_results) => Ok(Some(Written::Applied)),
            Err(MultiWriteError::OperationFailed {
                source: zookeeper_client::Error::BadVersion,
                ..
            }) => Ok(None),
            // The server answered and a multi that fails commits nothing.
            Err(MultiWriteError::OperationFailed { index, source }) => Err(CallError::NotApplied(
                format!("zookeeper: multi-op {index} failed: {source}"),
            )),
            Err(MultiWriteError::RequestFailed { source }) => {
                Err(self.connection.sent_error(source).await)
            }
        }
    }
}

#[async_trait]
impl FencedStore for ZookeeperStore {
    async fn write(
        &self,
        key: &str,
        fencing_token: FencingToken,
        write_id: &str,
        value: &str,
    ) -> Result<Written, CallError> {
        self.keys.note(key);
        let client = self.connection.store_client().await?;
        let path = register_path(key);
        for _race in 0..MAX_RACES {
            if let Some(written) = self
                .try_write(&client, &path, fencing_token, write_id, value)
                .await?
            {
                return Ok(written);
            }
        }
        Err(CallError::NotApplied(format!(
            "zookeeper: lost {MAX_RACES} version races on {path}"
        )))
    }

    async fn read(&self, key: &str) -> Result<ReadValue, CallError> {
        let client = self.connection.store_client().await?;
        match within(client.get_data(&register_path(key))).await? {
            Ok((data, _stat)) => parse_register(&data),
            Err(zookeeper_client::Error::NoNode) => Ok(ReadValue::default()),
            Err(error) => Err(self.connection.sent_error(error).await),
        }
    }

    async fn applied_log(&self) -> Option<Vec<AppliedWrite>> {
        let keys = self.keys.all();
        let client = self.connection.store_client().await.ok()?;
        let mut log = Vec::new();
        for key in keys {
            let path = register_path(&key);
            let mut children = match within(client.list_children(&path)).await.ok()? {
                Ok(children) => children,
                Err(zookeeper_client::Error::NoNode) => continue,
                Err(_) => return None,
            };
            // `w-<10-digit counter>`: name order is commit order.
            children.sort();
            for (position, child) in children.iter().enumerate() {
                let (data, _stat) = within(client.get_data(&format!("{path}/{child}")))
                    .await
                    .ok()?
                    .ok()?;
                let entry = String::from_utf8(data).ok()?;
                log.push(log_entry::parse(position as u64 + 1, &key, &entry)?);
            }
        }
        Some(log)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_data_round_trips_and_empty_is_unwritten() {
        assert_eq!(parse_register(b"").unwrap(), ReadValue::default());
        let read = parse_register(b"7\nw-1\nline one\nline two").unwrap();
        assert_eq!(read.fencing_token, 7);
        assert_eq!(read.write_id.as_deref(), Some("w-1"));
        assert_eq!(read.value.as_deref(), Some("line one\nline two"));
        assert!(parse_register(b"garbage").is_err());
    }
}
