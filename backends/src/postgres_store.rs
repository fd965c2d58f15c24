//! A fenced register on PostgreSQL: an upsert that overwrites only when the stored fence is
//! not newer (`WHERE fence <= $token`, 0 rows = rejected), logging each applied write to an
//! append-only table in the same statement.
//!
//! [`PostgresStoreRules::Unfenced`] drops the fence condition: the store then accepts whatever
//! arrives, which fencer must catch.

use std::sync::Arc;

use async_trait::async_trait;
use fencer_harness::{AppliedWrite, CallError, FencedStore, FencingToken, ReadValue, Written};

use crate::postgres_conn::PostgresConnection;
use crate::written_keys::WrittenKeys;

/// Whether writes are fenced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PostgresStoreRules {
    /// Apply only if the stored fence is <= the write's token, in the same statement.
    Fenced,
    /// Mutant: apply every write.
    Unfenced,
}

/// `$1` key, `$2` token, `$3` write id, `$4` value. Returns how many writes were applied (0 or
/// 1) and the fence stored before the statement.
fn write_sql(rules: PostgresStoreRules) -> String {
    let condition = match rules {
        PostgresStoreRules::Fenced => "WHERE r.fence <= EXCLUDED.fence",
        PostgresStoreRules::Unfenced => "",
    };
    format!(
        "WITH applied AS (
           INSERT INTO fencer_register AS r (key, fence, write_id, value) VALUES ($1::text, $2::bigint, $3::text, $4::text)
           ON CONFLICT (key) DO UPDATE
             SET fence = EXCLUDED.fence, write_id = EXCLUDED.write_id, value = EXCLUDED.value
             {condition}
           RETURNING key),
         logged AS (
           INSERT INTO fencer_applied (key, fence, write_id) SELECT $1, $2, $3 FROM applied
           RETURNING seq)
         SELECT (SELECT count(*) FROM logged),
                (SELECT fence FROM fencer_register WHERE key = $1)"
    )
}

/// A fenced register per key in PostgreSQL tables.
pub struct PostgresStore {
    connection: Arc<PostgresConnection>,
    write_sql: String,
    /// Keys written through this adapter: the applied log is read for these only (the table
    /// is shared by every run in the schema).
    keys: WrittenKeys,
}

impl PostgresStore {
    /// A store over `connection` following `rules`.
    pub fn new(connection: Arc<PostgresConnection>, rules: PostgresStoreRules) -> PostgresStore {
        PostgresStore {
            connection,
            write_sql: write_sql(rules),
            keys: WrittenKeys::default(),
        }
    }
}

#[async_trait]
impl FencedStore for PostgresStore {
    async fn write(
        &self,
        key: &str,
        fencing_token: FencingToken,
        write_id: &str,
        value: &str,
    ) -> Result<Written, CallError> {
        self.keys.note(key);
        let (client, statement) = self.connection.prepared(&self.write_sql).await?;
        let token = fencing_token as i64;
        match client
            .query_one(&statement, &[&key, &token, &write_id, &value])
            .await
        {
            Ok(row) => {
                let applied: i64 = row.get(0);
                let current: Option<i64> = row.get(1);
                Ok(if applied == 1 {
                    Written::Applied
                } else {
                    Written::Rejected {
                        current_token: current.unwrap_or(0) as u64,
                    }
                })
            }
            Err(error) => Err(self.connection.sent_error(error).await),
        }
    }

    async fn read(&self, key: &str) -> Result<ReadValue, CallError> {
        let client = self.connection.get().await?;
        match client
            .query_opt(
                "SELECT fence, write_id, value FROM fencer_register WHERE key = $1",
                &[&key],
            )
            .await
        {
            Ok(Some(row)) => Ok(ReadValue {
                fencing_token: row.get::<_, i64>(0) as u64,
                write_id: Some(row.get(1)),
                value: Some(row.get(2)),
            }),
            Ok(None) => Ok(ReadValue::default()),
            Err(error) => Err(self.connection.sent_error(error).await),
        }
    }

    async fn applied_log(&self) -> Option<Vec<AppliedWrite>> {
        let keys = self.keys.all();
        let client = self.connection.get().await.ok()?;
        let rows = client
            .query(
                "SELECT seq, key, fence, write_id FROM fencer_applied WHERE key = ANY($1) \
                 ORDER BY seq",
                &[&keys],
            )
            .await
            .ok()?;
        Some(
            rows.iter()
                .map(|row| AppliedWrite {
                    seq: row.get::<_, i64>(0) as u64,
                    key: row.get(1),
                    fencing_token: row.get::<_, i64>(2) as u64,
                    write_id: row.get(3),
                })
                .collect(),
        )
    }
}
