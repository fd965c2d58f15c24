//! The PostgreSQL adapters against a real server (default
//! `postgres://postgres@127.0.0.1:5432/test`, or `FENCER_POSTGRES_URL`), each test in a fresh
//! schema: the reference lease table and fenced store show no anomaly under faults, the store
//! without the fence condition is caught, and a Redis lock mixes with a PostgreSQL store.

#![cfg(feature = "postgres")]

mod support;

use std::sync::Arc;

use fencer::backends::{PostgresConnection, PostgresLock, PostgresStore, PostgresStoreRules};
use fencer::drive::RunNames;
use fencer::real::{run_real, unique_tag};
use fencer::{FencedStore, LockService, Validity, check};
use fencer_harness::{EventType, Op};
use support::{reachable, stale_write_plan};

fn postgres_url() -> String {
    std::env::var("FENCER_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// A fresh schema on the test server, dropped when the test ends (even by a panic).
struct FreshSchema {
    connection: Arc<PostgresConnection>,
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
    reachable(test, "PostgreSQL", "postgresql", connection.ping())
        .then_some(FreshSchema { connection })
}

fn backends(
    connection: &Arc<PostgresConnection>,
    store: PostgresStoreRules,
) -> (Arc<dyn LockService>, Arc<dyn FencedStore>) {
    (
        Arc::new(PostgresLock::new(Arc::clone(connection))),
        Arc::new(PostgresStore::new(Arc::clone(connection), store)),
    )
}

#[test]
fn postgres_lease_table_and_fenced_store_show_no_anomaly_under_faults() {
    let Some(fresh) = connect("postgres_reference") else {
        return;
    };
    let (lock, store) = backends(&fresh.connection, PostgresStoreRules::Fenced);
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
    let plan = stale_write_plan();
    let run = |rules| {
        let (lock, store) = backends(&fresh.connection, rules);
        let history = run_real(&plan, lock, store, RunNames::tagged(&unique_tag(0))).unwrap();
        check(&history)
    };
    let fenced = run(PostgresStoreRules::Fenced);
    assert_eq!(
        fenced.validity,
        Validity::Valid,
        "{}",
        fenced.summary_line()
    );
    let unfenced = run(PostgresStoreRules::Unfenced);
    assert!(
        unfenced.anomaly_counts.contains_key("stale-write-accepted"),
        "{}",
        unfenced.summary_line()
    );
}

#[cfg(feature = "redis")]
#[test]
fn redis_lock_mixes_with_a_postgres_store() {
    use fencer::backends::{RedisConnection, RedisLock, RedisLockRules};
    let Some(fresh) = connect("redis_lock_postgres_store") else {
        return;
    };
    let redis_url =
        std::env::var("FENCER_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let redis = Arc::new(RedisConnection::open(&redis_url).unwrap());
    if !reachable(
        "redis_lock_postgres_store",
        "Redis",
        "redis-server",
        redis.ping(),
    ) {
        return;
    }
    let lock: Arc<dyn LockService> = Arc::new(RedisLock::new(redis, RedisLockRules::Reference));
    let store: Arc<dyn FencedStore> = Arc::new(PostgresStore::new(
        Arc::clone(&fresh.connection),
        PostgresStoreRules::Fenced,
    ));
    let history = run_real(
        &stale_write_plan(),
        lock,
        store,
        RunNames::tagged(&unique_tag(0)),
    )
    .unwrap();
    let verdict = check(&history);
    assert_eq!(
        verdict.validity,
        Validity::Valid,
        "{}",
        verdict.summary_line()
    );
    // The stale write reached PostgreSQL and was refused there.
    assert!(
        history
            .events
            .iter()
            .any(|e| e.is(EventType::Fail, Op::Write) && e.error.as_deref() == Some("rejected")),
        "the stale write was not refused by the store"
    );
}

#[test]
fn postgres_auth_failure_and_wrong_scheme_are_clear_errors() {
    let error = PostgresConnection::open("redis://127.0.0.1:6379", "s")
        .err()
        .unwrap();
    assert!(error.contains("expected a postgres://"), "{error}");
    let error = PostgresConnection::open(&postgres_url(), "bad-name;")
        .err()
        .unwrap();
    assert!(error.contains("expected a schema name"), "{error}");
    // A role that does not exist: the server refuses the login, and the password never shows.
    let connection = PostgresConnection::open(
        "postgres://no_such_role_fencer:s3cret@127.0.0.1:5432/test",
        "s",
    )
    .unwrap();
    let runtime = fencer_harness::runtime::real_runtime().unwrap();
    let error = runtime.block_on(connection.ping()).unwrap_err();
    assert!(error.contains("cannot connect to PostgreSQL at"), "{error}");
    assert!(!error.contains("s3cret"), "{error}");
}
