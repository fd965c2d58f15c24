//! The Redis adapters against a real Redis server (default `redis://127.0.0.1:6379`, or
//! `FENCER_REDIS_URL`): the reference lock and fenced store show no anomaly under faults, and
//! each broken variant is caught.

#![cfg(feature = "redis")]

mod support;

use std::sync::Arc;

use fencer::backends::{RedisConnection, RedisLock, RedisLockRules, RedisStore, RedisStoreRules};
use fencer::drive::RunNames;
use fencer::real::{run_real, unique_tag};
use fencer::{FencedStore, LockService, Validity, check};
use support::{reachable, stale_release_plan, stale_write_plan};

fn redis_url() -> String {
    std::env::var("FENCER_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// A connection to the test server, or `None` when the test must skip.
fn connect(test: &str) -> Option<Arc<RedisConnection>> {
    let connection = Arc::new(RedisConnection::open(&redis_url()).expect("a valid Redis URL"));
    reachable(test, "Redis", "redis-server", connection.ping()).then_some(connection)
}

fn backends(
    connection: &Arc<RedisConnection>,
    lock: RedisLockRules,
    store: RedisStoreRules,
) -> (Arc<dyn LockService>, Arc<dyn FencedStore>) {
    (
        Arc::new(RedisLock::new(Arc::clone(connection), lock)),
        Arc::new(RedisStore::new(Arc::clone(connection), store)),
    )
}

#[test]
fn redis_reference_lock_and_fenced_store_show_no_anomaly_under_faults() {
    let Some(connection) = connect("redis_reference") else {
        return;
    };
    let (lock, store) = backends(
        &connection,
        RedisLockRules::Reference,
        RedisStoreRules::Fenced,
    );
    support::assert_clean_under_faults(
        "redis_reference_lock_and_fenced_store_show_no_anomaly_under_faults",
        lock,
        store,
    );
}

#[test]
fn redis_fenced_store_refuses_the_stale_write_the_unfenced_one_accepts() {
    let Some(connection) = connect("redis_stale_write") else {
        return;
    };
    let plan = stale_write_plan();
    let run = |rules| {
        let (lock, store) = backends(&connection, RedisLockRules::Reference, rules);
        let history = run_real(&plan, lock, store, RunNames::tagged(&unique_tag(0))).unwrap();
        check(&history)
    };
    let fenced = run(RedisStoreRules::Fenced);
    assert_eq!(
        fenced.validity,
        Validity::Valid,
        "{}",
        fenced.summary_line()
    );
    let unfenced = run(RedisStoreRules::Unfenced);
    assert!(
        unfenced.anomaly_counts.contains_key("stale-write-accepted"),
        "{}",
        unfenced.summary_line()
    );
}

#[test]
fn redis_release_without_owner_compare_is_caught() {
    let Some(connection) = connect("redis_unsafe_release") else {
        return;
    };
    let plan = stale_release_plan();
    let run = |rules| {
        let (lock, store) = backends(&connection, rules, RedisStoreRules::Fenced);
        let history = run_real(&plan, lock, store, RunNames::tagged(&unique_tag(0))).unwrap();
        check(&history)
    };
    let reference = run(RedisLockRules::Reference);
    // The stale owner's renewal may be cut off mid-call (`info`), which leaves the checker
    // honestly unsure; what it must never do is prove an anomaly.
    support::assert_verdict_not_invalid(&reference);
    let unsafe_release = run(RedisLockRules::UnsafeRelease);
    assert_eq!(unsafe_release.validity, Validity::Invalid);
    assert!(
        unsafe_release
            .anomaly_counts
            .contains_key("foreign-release"),
        "{}",
        unsafe_release.summary_line()
    );
}

#[test]
fn unreachable_redis_answers_not_applied_at_once() {
    // Port 1 on loopback: nothing listens, the connect is refused at once.
    let connection = Arc::new(RedisConnection::open("redis://127.0.0.1:1").unwrap());
    let (lock, store) = backends(
        &connection,
        RedisLockRules::Reference,
        RedisStoreRules::Fenced,
    );
    let runtime = fencer_harness::runtime::real_runtime().unwrap();
    let error = runtime.block_on(connection.ping()).unwrap_err();
    assert!(
        error.contains("cannot connect to Redis at redis://127.0.0.1:1"),
        "{error}"
    );
    let ttl = std::time::Duration::from_millis(300);
    support::assert_calls_not_applied(&*lock, &*store, ttl);
}

#[test]
fn redis_url_scheme_and_password_are_checked_and_hidden() {
    let error = RedisConnection::open("postgres://u:hunter2@127.0.0.1/x")
        .err()
        .unwrap();
    assert!(
        error.contains("expected a redis://host:port URL"),
        "{error}"
    );
    assert!(!error.contains("hunter2"), "{error}");
    let connection = RedisConnection::open("redis://:hunter2@127.0.0.1:1").unwrap();
    assert_eq!(connection.shown_url(), "redis://:***@127.0.0.1:1");
}

#[test]
fn a_redis_server_clock_jump_is_emulated_on_the_lease_expiry() {
    let Some(connection) = connect("redis_clock_jump") else {
        return;
    };
    let lock = RedisLock::new(connection, RedisLockRules::Reference);
    let name = format!("fencer/{}/jump", unique_tag(0));
    let ttl = std::time::Duration::from_secs(10);
    let runtime = fencer_harness::runtime::real_runtime().unwrap();
    runtime.block_on(async {
        let first = lock
            .acquire(&name, fencer::OwnerToken(1), ttl)
            .await
            .unwrap();
        let fencer::Acquired::Granted { fencing_token } = first else {
            panic!("a fresh lock is free: {first:?}")
        };
        // A 1 s jump leaves 9 s: still held.
        assert!(
            lock.jump_server_clock(&name, std::time::Duration::from_secs(1))
                .await
                .unwrap()
        );
        let second = lock
            .acquire(&name, fencer::OwnerToken(2), ttl)
            .await
            .unwrap();
        assert_eq!(second, fencer::Acquired::Busy);
        // A 10 s jump outruns the lease: the next owner gets it with a newer token.
        assert!(lock.jump_server_clock(&name, ttl).await.unwrap());
        let third = lock
            .acquire(&name, fencer::OwnerToken(3), ttl)
            .await
            .unwrap();
        assert_eq!(
            third,
            fencer::Acquired::Granted {
                fencing_token: fencing_token + 1
            }
        );
        // The first owner's renew now fails: its lease is gone.
        let renewed = lock.renew(&name, fencer::OwnerToken(1), ttl).await.unwrap();
        assert_eq!(renewed, fencer::Owned::NotOwner);
    });
}
