//! The ZooKeeper adapters against a private ZooKeeper this test starts (tickTime 50 ms, so
//! 300 ms sessions are not clamped): the reference lock and fenced store show no anomaly under
//! faults, each broken variant is caught, and a paused holder's session — the lease — really
//! expires. A JVM starts slowly, so one test function shares one server across the scenarios.

#![cfg(feature = "zookeeper")]

mod support;

use std::sync::Arc;
use std::time::Duration;

use fencer::{Acquired, CallError, LockService, Owned, OwnerToken};
use fencer_backends::{ZookeeperConnection, ZookeeperLock, ZookeeperLockRules};
use fencer_run::real::unique_tag;
use fencer_servers::{PrivateBackend, ServerGuard};
use support::{FencedVerdict, stale_release_plan, stale_write_plan};

#[test]
fn zookeeper_adapters_against_a_private_server() {
    let started = ServerGuard::zookeeper(false);
    let test = "zookeeper_backend";
    let Some((_server, url)) = support::private_guard(test, PrivateBackend::Zookeeper, started)
    else {
        return;
    };
    let connection = Arc::new(ZookeeperConnection::open(&url).unwrap());
    a_paused_holders_session_expires_and_the_next_owner_gets_a_newer_token(&connection);
    a_ttl_beyond_the_servers_clamp_is_refused(&connection);
    let (lock, store) = support::adapters(&url, &url);
    support::assert_clean_under_faults(
        "zookeeper_reference_lock_and_fenced_store_show_no_anomaly_under_faults",
        lock,
        store,
    );
    // The frozen holder's renewal, in flight when it moves on to release, may be cut off
    // (`info`: a renew is a reconnect, slower than a Redis script), which leaves the checker
    // honestly unsure about that release: never invalid, not always valid.
    let (fenced, unfenced) = support::fenced_and_unfenced(&url, &url);
    support::assert_fence_refuses_the_stale_write(
        &fenced,
        &unfenced,
        &stale_write_plan(),
        FencedVerdict::NotInvalid,
    );
    // The bug shows only when the frozen holder's release lands while the next holder's node
    // is the lowest; on a loaded machine the timing can miss it, so up to three runs.
    let (reference, broken) = support::safe_and_unsafe_release(&url);
    support::assert_unsafe_release_is_caught(&reference, &broken, &stale_release_plan(), 3);
}

/// The lease lives only while its holder renews: renewing keeps a rival out for many TTLs; a
/// holder that stops (as a paused worker does) loses the lease about one TTL later.
fn a_paused_holders_session_expires_and_the_next_owner_gets_a_newer_token(
    connection: &Arc<ZookeeperConnection>,
) {
    let lock = ZookeeperLock::new(Arc::clone(connection), ZookeeperLockRules::Reference);
    let name = format!("fencer/{}/pause", unique_tag(0));
    let ttl = Duration::from_millis(300);
    let (first, second) = (OwnerToken(1), OwnerToken(2));
    let runtime = fencer_harness::runtime::real_runtime().unwrap();
    runtime.block_on(async {
        let Acquired::Granted {
            fencing_token: token_one,
        } = lock.acquire(&name, first, ttl).await.unwrap()
        else {
            panic!("a fresh lock is free")
        };
        // Renewed every 100 ms for 1.2 s (4 TTLs): the rival stays out.
        for _ in 0..12 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert_eq!(lock.renew(&name, first, ttl).await.unwrap(), Owned::Done);
            assert_eq!(
                lock.acquire(&name, second, ttl).await.unwrap(),
                Acquired::Busy
            );
        }
        // The holder freezes: nothing renews, the server expires the session.
        tokio::time::sleep(Duration::from_millis(700)).await;
        let Acquired::Granted {
            fencing_token: token_two,
        } = lock.acquire(&name, second, ttl).await.unwrap()
        else {
            panic!("the frozen holder's session must have expired")
        };
        assert!(token_two > token_one, "{token_two} > {token_one}");
        assert_eq!(
            lock.renew(&name, first, ttl).await.unwrap(),
            Owned::NotOwner
        );
        assert_eq!(lock.release(&name, first).await.unwrap(), Owned::NotOwner);
        assert_eq!(lock.release(&name, second).await.unwrap(), Owned::Done);
        // Released: free at once, not one TTL later.
        let third = lock.acquire(&name, first, ttl).await.unwrap();
        assert!(
            matches!(third, Acquired::Granted { fencing_token } if fencing_token > token_two),
            "{third:?}"
        );
    });
}

/// tickTime 50 ms caps sessions at 1 s: a 5 s lease would silently end after 1 s, so it is
/// refused.
fn a_ttl_beyond_the_servers_clamp_is_refused(connection: &Arc<ZookeeperConnection>) {
    let lock = ZookeeperLock::new(Arc::clone(connection), ZookeeperLockRules::Reference);
    let runtime = fencer_harness::runtime::real_runtime().unwrap();
    let acquired = runtime.block_on(lock.acquire(
        &format!("fencer/{}/clamp", unique_tag(0)),
        OwnerToken(1),
        Duration::from_secs(5),
    ));
    match acquired {
        Err(CallError::NotApplied(why)) => {
            assert!(why.contains("at most 1000 ms"), "{why}");
        }
        other => panic!("a clamped session must not be granted: {other:?}"),
    }
}

#[test]
fn unreachable_zookeeper_answers_not_applied_at_once() {
    support::assert_unreachable_answers_not_applied_at_once(
        "zk://127.0.0.1:1",
        "cannot connect to ZooKeeper at zk://127.0.0.1:1",
        Duration::from_millis(300),
    );
}

#[test]
fn zookeeper_url_scheme_and_credentials_are_checked_and_hidden() {
    let error = ZookeeperConnection::open("postgres://u:hunter2@127.0.0.1/x")
        .err()
        .unwrap()
        .to_string();
    assert!(error.contains("expected a zk://host:port URL"), "{error}");
    assert!(!error.contains("hunter2"), "{error}");
    let error = ZookeeperConnection::open("zk://u:hunter2@127.0.0.1:2181")
        .err()
        .unwrap()
        .to_string();
    assert!(error.contains("no user"), "{error}");
    assert!(!error.contains("hunter2"), "{error}");
    let lock =
        fencer_backends::registry::lock_from_url("zk://127.0.0.1:2181?variant=unsafe-release");
    assert_eq!(
        lock.ok().unwrap().shown_url,
        "zk://127.0.0.1:2181?variant=unsafe-release"
    );
    let error = fencer_backends::registry::store_from_url("zk://127.0.0.1:2181?variant=sloppy")
        .err()
        .unwrap()
        .to_string();
    assert!(error.contains("unknown store variant `sloppy`"), "{error}");
}
