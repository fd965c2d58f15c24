//! The PostgreSQL adapters against a real server (default
//! `postgres://postgres@127.0.0.1:5432/test`, or `FENCER_POSTGRES_URL`), each test in a fresh
//! schema: the reference lease table and fenced store show no anomaly under faults, the store
//! without the fence condition is caught, the lease table's log lets fencer judge leases (and
//! see the release without the owner compare), and a Redis lock mixes with a PostgreSQL store.

#![cfg(feature = "postgres")]

mod support;

use std::sync::Arc;

use fencer_backends::PostgresConnection;
use fencer_run::real::unique_tag;
use support::{FencedVerdict, stale_write_plan, with_query};

fn postgres_url() -> String {
    std::env::var("FENCER_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// A fresh schema on the test server, dropped when the test ends (even by a panic), and the
/// URL (`?schema=`) that puts a run's lock and store in it.
struct FreshSchema {
    connection: Arc<PostgresConnection>,
    url: String,
}

impl Drop for FreshSchema {
    fn drop(&mut self) {
        if let Ok(runtime) = fencer_harness::runtime::real_runtime() {
            let _ = runtime.block_on(self.connection.drop_schema());
        }
    }
}

fn connect(test: &str) -> Option<FreshSchema> {
    let schema = format!("fencer_{}", unique_tag(0).replace('-', "_"));
    let connection =
        Arc::new(PostgresConnection::open(&postgres_url(), &schema).expect("a valid URL"));
    let url = with_query(&postgres_url(), &format!("schema={schema}"));
    support::reachable(test, "PostgreSQL", "postgresql", connection.ping())
        .then_some(FreshSchema { connection, url })
}

#[test]
fn postgres_lease_table_and_fenced_store_show_no_anomaly_under_faults() {
    let Some(fresh) = connect("postgres_reference") else {
        return;
    };
    let (lock, store) = support::adapters(&fresh.url, &fresh.url);
    support::assert_clean_under_faults(
        "postgres_lease_table_and_fenced_store_show_no_anomaly_under_faults",
        lock,
        store,
    );
}

#[test]
fn postgres_store_without_the_fence_condition_is_caught() {
    let Some(fresh) = connect("postgres_unfenced") else {
        return;
    };
    let (fenced, unfenced) = support::fenced_and_unfenced(&fresh.url, &fresh.url);
    support::assert_fence_refuses_the_stale_write(
        &fenced,
        &unfenced,
        &stale_write_plan(),
        FencedVerdict::Valid,
    );
}

/// PostgreSQL timestamps are microseconds: the lock log's expiries are exact to that.
const POSTGRES_EXPIRY_SLACK_NS: u64 = 1_000;

#[test]
fn postgres_lock_log_judges_the_leases_and_shows_the_release_without_owner_compare() {
    let Some(fresh) = connect("postgres_lock_log") else {
        return;
    };
    let (reference, unsafe_release) = support::safe_and_unsafe_release(&fresh.url);
    support::assert_lock_log_judges_the_leases(
        &reference,
        &unsafe_release,
        &support::stale_release_plan(),
        POSTGRES_EXPIRY_SLACK_NS,
        1,
    );
}

/// The stale write reaches PostgreSQL under a Redis lock and is refused there; without the fence
/// condition it is accepted and caught.
#[cfg(feature = "redis")]
#[test]
fn redis_lock_mixes_with_a_postgres_store() {
    let test = "redis_lock_postgres_store";
    let Some(fresh) = connect(test) else {
        return;
    };
    let redis_url = support::redis_url();
    if !support::url_reachable(test, "Redis", "redis-server", &redis_url) {
        return;
    }
    let (fenced, unfenced) = support::fenced_and_unfenced(&redis_url, &fresh.url);
    support::assert_fence_refuses_the_stale_write(
        &fenced,
        &unfenced,
        &stale_write_plan(),
        FencedVerdict::Valid,
    );
}

#[test]
fn postgres_auth_failure_and_wrong_scheme_are_clear_errors() {
    let error = PostgresConnection::open("redis://127.0.0.1:6379", "s")
        .err()
        .unwrap()
        .to_string();
    assert!(error.contains("expected a postgres://"), "{error}");
    let error = PostgresConnection::open(&postgres_url(), "bad-name;")
        .err()
        .unwrap()
        .to_string();
    assert!(error.contains("expected a schema name"), "{error}");
    // A role that does not exist: the server refuses the login, and the password never shows.
    let connection = PostgresConnection::open(
        "postgres://no_such_role_fencer:s3cret@127.0.0.1:5432/test",
        "s",
    )
    .unwrap();
    let runtime = fencer_harness::runtime::real_runtime().unwrap();
    let error = runtime.block_on(connection.ping()).unwrap_err().to_string();
    assert!(error.contains("cannot connect to PostgreSQL at"), "{error}");
    assert!(!error.contains("s3cret"), "{error}");
}
