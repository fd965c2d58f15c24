//! One lazily opened connection to a PostgreSQL server, in a schema of its own.
//!
//! Like the Redis connection it opens on first use inside the caller's runtime and reopens
//! after the server closed it. Every adapter works in one schema (created if missing), so a
//! test or run can use a fresh one on a shared server and never meet another's rows.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use fencer_harness::CallError;
use tokio_postgres::{Client, NoTls, Statement};

use crate::error::BackendError;
use crate::url::shown_if_scheme;

/// How long opening a connection (and creating the schema) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Tables both adapters use; created on connect, idempotently.
const SCHEMA_SQL: &str = "
CREATE TABLE IF NOT EXISTS fencer_lease (
  name text PRIMARY KEY,
  holder text NOT NULL,
  generation bigint NOT NULL,
  expires_at timestamptz NOT NULL
);
CREATE TABLE IF NOT EXISTS fencer_register (
  key text PRIMARY KEY,
  fence bigint NOT NULL,
  write_id text NOT NULL,
  value text NOT NULL
);
CREATE TABLE IF NOT EXISTS fencer_lock_log (
  seq bigserial PRIMARY KEY,
  name text NOT NULL,
  change text NOT NULL,
  owner text NOT NULL,
  holder text NOT NULL,
  holder_token bigint NOT NULL,
  ttl_ns bigint,
  at timestamptz NOT NULL,
  expires_at timestamptz
);
CREATE TABLE IF NOT EXISTS fencer_applied (
  seq bigserial PRIMARY KEY,
  key text NOT NULL,
  fence bigint NOT NULL,
  write_id text NOT NULL
);
";

/// A PostgreSQL server address, the schema to work in, and the live connection if open.
pub struct PostgresConnection {
    url: String,
    shown_url: String,
    schema: String,
    live: tokio::sync::Mutex<Option<Live>>,
}

/// An open client and the statements prepared on it (they die with it).
struct Live {
    client: Arc<Client>,
    statements: BTreeMap<String, Statement>,
}

impl PostgresConnection {
    /// Checks `url` (`postgres://user[:password]@host:port/db`) and `schema` (letters, digits
    /// and `_`) without connecting.
    pub fn open(url: &str, schema: &str) -> Result<PostgresConnection, BackendError> {
        let shown_url = shown_if_scheme(
            url,
            &["postgres", "postgresql"],
            "a postgres://user@host:port/db URL",
        )?;
        url.parse::<tokio_postgres::Config>().map_err(|error| {
            BackendError::BadUrl(format!("bad PostgreSQL URL {shown_url}: {error}"))
        })?;
        if schema.is_empty()
            || !schema
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(BackendError::BadUrl(format!(
                "expected a schema name of letters, digits and _, found `{schema}`"
            )));
        }
        Ok(PostgresConnection {
            url: url.to_string(),
            shown_url,
            schema: schema.to_string(),
            live: tokio::sync::Mutex::new(None),
        })
    }

    /// The URL with its password hidden.
    pub fn shown_url(&self) -> &str {
        &self.shown_url
    }

    /// The schema this connection works in.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// The live client, connecting (and creating the schema) if needed. Failing here means
    /// nothing was sent.
    pub async fn get(&self) -> Result<Arc<Client>, CallError> {
        let mut live = self.live.lock().await;
        Ok(Arc::clone(&self.live_client(&mut live).await?.client))
    }

    /// The live client and `sql` prepared on it (once per connection: a call is then one round
    /// trip, not two).
    pub async fn prepared(&self, sql: &str) -> Result<(Arc<Client>, Statement), CallError> {
        let mut live = self.live.lock().await;
        let live = self.live_client(&mut live).await?;
        if let Some(statement) = live.statements.get(sql) {
            return Ok((Arc::clone(&live.client), statement.clone()));
        }
        let statement = match live.client.prepare(sql).await {
            Ok(statement) => statement,
            // Preparing has no effect on data, so the call itself was not applied.
            Err(error) => {
                return Err(CallError::NotApplied(format!(
                    "postgres: cannot prepare a statement: {}",
                    describe(&error)
                )));
            }
        };
        live.statements.insert(sql.to_string(), statement.clone());
        Ok((Arc::clone(&live.client), statement))
    }

    async fn live_client<'a>(&self, live: &'a mut Option<Live>) -> Result<&'a mut Live, CallError> {
        if live.as_ref().is_some_and(|live| !live.client.is_closed()) {
            return Ok(live.as_mut().expect("checked above"));
        }
        let client = match tokio::time::timeout(CONNECT_TIMEOUT, self.connect()).await {
            Ok(Ok(client)) => Arc::new(client),
            Ok(Err(error)) => {
                return Err(CallError::NotApplied(format!(
                    "cannot connect to PostgreSQL at {}: {}",
                    self.shown_url,
                    describe(&error)
                )));
            }
            Err(_elapsed) => {
                return Err(CallError::NotApplied(format!(
                    "cannot connect to PostgreSQL at {}: no answer within {CONNECT_TIMEOUT:?}",
                    self.shown_url
                )));
            }
        };
        Ok(live.insert(Live {
            client,
            statements: BTreeMap::new(),
        }))
    }

    async fn connect(&self) -> Result<Client, tokio_postgres::Error> {
        let (client, connection) = tokio_postgres::connect(&self.url, NoTls).await?;
        // The connection task ends by itself when the client is dropped or the server goes.
        tokio::spawn(async move {
            let _ = connection.await;
        });
        let setup = format!(
            "CREATE SCHEMA IF NOT EXISTS {schema}; SET search_path TO {schema}; {SCHEMA_SQL}",
            schema = self.schema
        );
        client.batch_execute(&setup).await?;
        Ok(client)
    }

    /// Classifies an error from a statement that was sent. A database error answering an
    /// autocommit statement means it rolled back: not applied. Anything else (connection lost
    /// mid-statement) leaves the outcome unknown.
    pub async fn sent_error(&self, error: tokio_postgres::Error) -> CallError {
        if error.as_db_error().is_some() {
            return CallError::NotApplied(format!("postgres: {}", describe(&error)));
        }
        *self.live.lock().await = None;
        CallError::Unknown(format!("postgres: {}", describe(&error)))
    }

    /// Connects and runs `SELECT 1`: a clear error up front beats a run full of failed calls.
    pub async fn ping(&self) -> Result<(), BackendError> {
        let client = self.get().await?;
        client
            .simple_query("SELECT 1")
            .await
            .map(|_| ())
            .map_err(|error| {
                BackendError::Unreachable(format!(
                    "PostgreSQL at {}: {}",
                    self.shown_url,
                    describe(&error)
                ))
            })
    }

    /// Drops the schema and everything in it (for tests that made a fresh one).
    pub async fn drop_schema(&self) -> Result<(), BackendError> {
        let client = self.get().await?;
        client
            .batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema))
            .await
            .map_err(|error| BackendError::Unreachable(describe(&error)))
    }
}

/// The error with its database message, if any (tokio-postgres' Display alone says only "db
/// error").
fn describe(error: &tokio_postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => match std::error::Error::source(error) {
            Some(cause) => format!("{error}: {cause}"),
            None => error.to_string(),
        },
    }
}
