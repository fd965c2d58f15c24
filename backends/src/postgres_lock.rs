//! A lease service on PostgreSQL: one row per lock, taken with an upsert that only overwrites
//! an expired lease and bumps its `generation` (the fencing token) in the same statement.
//!
//! Expiry is judged by the server's `now()`. Release does not delete the row (the generation
//! would restart at 1); it expires the lease instead.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use fencer_harness::{Acquired, CallError, LockService, Owned, OwnerToken};

use crate::postgres_conn::PostgresConnection;

const ACQUIRE: &str = "
INSERT INTO fencer_lease AS t (name, holder, generation, expires_at)
VALUES ($1, $2, 1, now() + $3::float8 * interval '1 millisecond')
ON CONFLICT (name) DO UPDATE
  SET holder = EXCLUDED.holder, generation = t.generation + 1, expires_at = EXCLUDED.expires_at
  WHERE t.expires_at < now()
RETURNING generation";

const RENEW: &str = "
UPDATE fencer_lease SET expires_at = now() + $3::float8 * interval '1 millisecond'
WHERE name = $1 AND holder = $2 AND expires_at >= now()";

const RELEASE: &str = "
UPDATE fencer_lease SET expires_at = '-infinity'
WHERE name = $1 AND holder = $2 AND expires_at >= now()";

/// Leases in a PostgreSQL table.
pub struct PostgresLock {
    connection: Arc<PostgresConnection>,
}

impl PostgresLock {
    /// A lease service over `connection`.
    pub fn new(connection: Arc<PostgresConnection>) -> PostgresLock {
        PostgresLock { connection }
    }

    async fn owned(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Owned, CallError> {
        let (client, statement) = self.connection.prepared(sql).await?;
        match client.execute(&statement, params).await {
            Ok(1) => Ok(Owned::Done),
            Ok(_) => Ok(Owned::NotOwner),
            Err(error) => Err(self.connection.sent_error(error).await),
        }
    }
}

fn ttl_ms(ttl: Duration) -> f64 {
    ttl.as_secs_f64() * 1e3
}

#[async_trait]
impl LockService for PostgresLock {
    async fn acquire(
        &self,
        lock: &str,
        owner: OwnerToken,
        ttl: Duration,
    ) -> Result<Acquired, CallError> {
        let (client, statement) = self.connection.prepared(ACQUIRE).await?;
        let owner = owner.to_string();
        match client
            .query_opt(&statement, &[&lock, &owner, &ttl_ms(ttl)])
            .await
        {
            Ok(Some(row)) => Ok(Acquired::Granted {
                fencing_token: row.get::<_, i64>(0) as u64,
            }),
            Ok(None) => Ok(Acquired::Busy),
            Err(error) => Err(self.connection.sent_error(error).await),
        }
    }

    async fn renew(
        &self,
        lock: &str,
        owner: OwnerToken,
        ttl: Duration,
    ) -> Result<Owned, CallError> {
        let owner = owner.to_string();
        self.owned(RENEW, &[&lock, &owner, &ttl_ms(ttl)]).await
    }

    async fn release(&self, lock: &str, owner: OwnerToken) -> Result<Owned, CallError> {
        let owner = owner.to_string();
        self.owned(RELEASE, &[&lock, &owner]).await
    }
}
