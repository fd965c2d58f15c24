//! A lease service on PostgreSQL: one row per lock, taken with an upsert that only overwrites
//! an expired lease and bumps its `generation` (the fencing token) in the same statement.
//!
//! Expiry is judged by the server's `now()`. Release does not delete the row (the generation
//! would restart at 1); it expires the lease instead.
//!
//! Each statement that changes a lease also inserts what it did into `fencer_lock_log` (a CTE
//! over the change's `RETURNING`), with the same `now()` it judged expiry by and the
//! `expires_at` it stored: one statement, one transaction, so the log holds exactly the changes
//! that committed, in commit order per lock (the log's `seq` is drawn while the lease row is
//! locked). [`PostgresLockRules::UnsafeRelease`] is the classic bug, a release that does not
//! compare the owner; it logs the holder whose lease it really ended.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use fencer_harness::{
    Acquired, CallError, ExpiryRule, LockChange, LockLogEntry, LockService, Owned, OwnerToken,
};

use crate::postgres_conn::PostgresConnection;
use crate::ttl_ns;
use crate::written_keys::WrittenKeys;

/// How this service ends a lease: it is live while `expires_at >= now()` (a renew or release
/// takes it, an acquire is refused), on PostgreSQL's microsecond timestamps, so it ends only
/// once `now()` is past its expiry.
pub const EXPIRY: ExpiryRule = ExpiryRule {
    live_at_expiry: true,
    resolution_ns: 1_000,
};

/// Which release the service uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PostgresLockRules {
    /// Expire the lease only if the caller holds it.
    Reference,
    /// Mutant: expire the live lease, whoever asks.
    UnsafeRelease,
}

/// `$1` lock, `$2` owner, `$3` TTL (ms), `$4` TTL (ns, for the log). Returns the generation
/// when granted, no row when busy.
const ACQUIRE: &str = "
WITH granted AS (
  INSERT INTO fencer_lease AS t (name, holder, generation, expires_at)
  VALUES ($1::text, $2::text, 1, now() + $3::float8 * interval '1 millisecond')
  ON CONFLICT (name) DO UPDATE
    SET holder = EXCLUDED.holder, generation = t.generation + 1, expires_at = EXCLUDED.expires_at
    WHERE t.expires_at < now()
  RETURNING generation, expires_at),
logged AS (
  INSERT INTO fencer_lock_log (name, change, owner, holder, holder_token, ttl_ns, at, expires_at)
  SELECT $1::text, 'grant', $2::text, $2::text, generation, $4::bigint, now(), expires_at
  FROM granted)
SELECT generation FROM granted";

/// `$1` lock, `$2` owner, `$3` TTL (ms), `$4` TTL (ns). Returns how many leases it extended.
const RENEW: &str = "
WITH renewed AS (
  UPDATE fencer_lease SET expires_at = now() + $3::float8 * interval '1 millisecond'
  WHERE name = $1::text AND holder = $2::text AND expires_at >= now()
  RETURNING holder, generation, expires_at),
logged AS (
  INSERT INTO fencer_lock_log (name, change, owner, holder, holder_token, ttl_ns, at, expires_at)
  SELECT $1::text, 'renew', $2::text, holder, generation, $4::bigint, now(), expires_at
  FROM renewed)
SELECT count(*) FROM renewed";

/// `$1` lock, `$2` owner; `holder_check` is the owner compare (empty for the mutant). Returns
/// how many leases it ended.
fn release_sql(rules: PostgresLockRules) -> String {
    let holder_check = match rules {
        PostgresLockRules::Reference => "AND holder = $2::text",
        PostgresLockRules::UnsafeRelease => "",
    };
    format!(
        "WITH released AS (
           UPDATE fencer_lease SET expires_at = '-infinity'
           WHERE name = $1::text {holder_check} AND expires_at >= now()
           RETURNING holder, generation),
         logged AS (
           INSERT INTO fencer_lock_log (name, change, owner, holder, holder_token, at)
           SELECT $1::text, 'release', $2::text, holder, generation, now() FROM released)
         SELECT count(*) FROM released"
    )
}

/// Leases in a PostgreSQL table.
pub struct PostgresLock {
    connection: Arc<PostgresConnection>,
    rules: PostgresLockRules,
    /// Locks called through this adapter: the lock log is read for these only (the table is
    /// shared by every run in the schema).
    locks: WrittenKeys,
}

impl PostgresLock {
    /// A lease service over `connection` following `rules`.
    pub fn new(connection: Arc<PostgresConnection>, rules: PostgresLockRules) -> PostgresLock {
        PostgresLock {
            connection,
            rules,
            locks: WrittenKeys::default(),
        }
    }

    /// The rules this service follows.
    pub fn rules(&self) -> PostgresLockRules {
        self.rules
    }

    /// Runs a renew or release statement, which answers how many leases it changed.
    async fn owned(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Owned, CallError> {
        let (client, statement) = self.connection.prepared(sql).await?;
        match client.query_one(&statement, params).await {
            Ok(row) if row.get::<_, i64>(0) == 1 => Ok(Owned::Done),
            Ok(_) => Ok(Owned::NotOwner),
            Err(error) => Err(self.connection.sent_error(error).await),
        }
    }
}

fn ttl_ms(ttl: Duration) -> f64 {
    ttl.as_secs_f64() * 1e3
}

/// A server timestamp as nanoseconds since the Unix epoch (negative before it).
fn epoch_ns(time: SystemTime) -> Option<i64> {
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_nanos()).ok(),
        Err(before) => i64::try_from(before.duration().as_nanos())
            .ok()
            .map(|ns| -ns),
    }
}

/// One `fencer_lock_log` row as the entry it records; `None` for a row out of form.
fn entry_of(row: &tokio_postgres::Row) -> Option<LockLogEntry> {
    let owner = |column: &str| row.get::<_, String>(column).parse::<OwnerToken>().ok();
    let holder_token = u64::try_from(row.get::<_, i64>("holder_token")).ok()?;
    let ttl = || {
        let ns = row.get::<_, Option<i64>>("ttl_ns")?;
        Some(Duration::from_nanos(u64::try_from(ns).ok()?))
    };
    let expires_ns = || epoch_ns(row.get::<_, Option<SystemTime>>("expires_at")?);
    let change = match row.get::<_, &str>("change") {
        "grant" => LockChange::Granted {
            owner: owner("owner")?,
            fencing_token: holder_token,
            ttl: ttl()?,
            expires_ns: expires_ns()?,
        },
        "renew" => LockChange::Renewed {
            owner: owner("owner")?,
            holder: owner("holder")?,
            holder_token,
            ttl: ttl()?,
            expires_ns: expires_ns()?,
        },
        "release" => LockChange::Released {
            owner: owner("owner")?,
            holder: owner("holder")?,
            holder_token,
        },
        _ => return None,
    };
    Some(LockLogEntry {
        seq: u64::try_from(row.get::<_, i64>("seq")).ok()?,
        lock: row.get("name"),
        at_ns: epoch_ns(row.get("at"))?,
        change,
    })
}

#[async_trait]
impl LockService for PostgresLock {
    async fn acquire(
        &self,
        lock: &str,
        owner: OwnerToken,
        ttl: Duration,
    ) -> Result<Acquired, CallError> {
        self.locks.note(lock);
        let (client, statement) = self.connection.prepared(ACQUIRE).await?;
        let owner = owner.to_string();
        match client
            .query_opt(&statement, &[&lock, &owner, &ttl_ms(ttl), &ttl_ns(ttl)])
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
        self.locks.note(lock);
        let owner = owner.to_string();
        self.owned(RENEW, &[&lock, &owner, &ttl_ms(ttl), &ttl_ns(ttl)])
            .await
    }

    async fn release(&self, lock: &str, owner: OwnerToken) -> Result<Owned, CallError> {
        self.locks.note(lock);
        let owner = owner.to_string();
        self.owned(&release_sql(self.rules), &[&lock, &owner]).await
    }

    /// The log rows of every lock called through this adapter, in `seq` order; `None` if the
    /// server cannot be read or a row is out of form (a log is used whole or not at all).
    async fn lock_log(&self) -> Option<Vec<LockLogEntry>> {
        let locks = self.locks.all();
        let client = self.connection.get().await.ok()?;
        let rows = client
            .query(
                "SELECT seq, name, change, owner, holder, holder_token, ttl_ns, at, expires_at \
                 FROM fencer_lock_log WHERE name = ANY($1) ORDER BY seq",
                &[&locks],
            )
            .await
            .ok()?;
        rows.iter().map(entry_of).collect()
    }

    /// PostgreSQL's as this service compares: live through its expiry ([`EXPIRY`]).
    fn lock_log_expiry(&self) -> ExpiryRule {
        EXPIRY
    }
}
