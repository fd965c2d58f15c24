//! The etcd adapters against a private etcd each test starts itself (free loopback ports, temp
//! dir, killed on drop): the reference lock and fenced store show no anomaly under faults, and
//! each broken variant is caught. etcd leases are whole seconds, so the scenarios written for
//! 300 ms leases run stretched to 1 s leases.

#![cfg(feature = "etcd")]

mod support;

use std::sync::Arc;
use std::time::Duration;

use fencer::{Acquired, FencedStore, LockService, Owned, OwnerToken, Written};
use fencer_backends::{EtcdConnection, EtcdLock, EtcdLockRules, EtcdStore, EtcdStoreRules};
use fencer_run::real::unique_tag;
use fencer_servers::{PrivateBackend, ServerGuard};
use support::{FencedVerdict, stale_release_plan, stale_write_plan, stretched};

/// A private etcd and its URL, or `None` (after the skip line) when `etcd` is not installed.
fn private_etcd(test: &str) -> Option<(ServerGuard, String)> {
    let (server, url) = support::private_guard(test, PrivateBackend::Etcd, ServerGuard::etcd())?;
    support::url_reachable(test, "a private etcd", "etcd-server", &url).then_some((server, url))
}

#[test]
fn etcd_reference_lock_and_fenced_store_show_no_anomaly_under_faults() {
    let Some((_server, url)) = private_etcd("etcd_reference") else {
        return;
    };
    let (lock, store) = support::adapters(&url, &url);
    support::assert_clean_under_faults_at(
        "etcd_reference_lock_and_fenced_store_show_no_anomaly_under_faults",
        lock,
        store,
        Duration::from_secs(1),
    );
}

#[test]
fn etcd_fenced_store_refuses_the_stale_write_the_unfenced_one_accepts() {
    let Some((_server, url)) = private_etcd("etcd_stale_write") else {
        return;
    };
    // w0's renewal (two round trips on etcd: owner check, keep-alive) may be cut off when its
    // worker moves on, which leaves the checker honestly unsure: never invalid, not always valid.
    let (fenced, unfenced) = support::fenced_and_unfenced(&url, &url);
    support::assert_fence_refuses_the_stale_write(
        &fenced,
        &unfenced,
        &stretched(stale_write_plan(), 10, 3),
        FencedVerdict::NotInvalid,
    );
}

#[test]
fn etcd_release_without_owner_compare_is_caught() {
    let Some((_server, url)) = private_etcd("etcd_unsafe_release") else {
        return;
    };
    let (reference, broken) = support::safe_and_unsafe_release(&url);
    let plan = stretched(stale_release_plan(), 10, 3);
    support::assert_unsafe_release_is_caught(&reference, &broken, &plan, 1);
}

#[test]
fn etcd_lease_token_and_fence_follow_the_contract_call_by_call() {
    let Some((_server, url)) = private_etcd("etcd_contract") else {
        return;
    };
    let connection = Arc::new(EtcdConnection::open(&url).unwrap());
    let lock = EtcdLock::new(Arc::clone(&connection), EtcdLockRules::Reference);
    let store = EtcdStore::new(connection, EtcdStoreRules::Fenced);
    let name = format!("fencer/{}/lock", unique_tag(0));
    let key = format!("fencer/{}/register", unique_tag(0));
    let ttl = Duration::from_millis(300); // rounded up to etcd's 1 s
    let runtime = fencer_harness::runtime::real_runtime().unwrap();
    runtime.block_on(async {
        let Acquired::Granted {
            fencing_token: first,
        } = lock.acquire(&name, OwnerToken(1), ttl).await.unwrap()
        else {
            panic!("a fresh lock is free")
        };
        assert_eq!(
            lock.acquire(&name, OwnerToken(2), ttl).await.unwrap(),
            Acquired::Busy
        );
        assert_eq!(
            lock.renew(&name, OwnerToken(2), ttl).await.unwrap(),
            Owned::NotOwner
        );
        assert_eq!(
            lock.release(&name, OwnerToken(2),).await.unwrap(),
            Owned::NotOwner
        );
        assert_eq!(
            lock.renew(&name, OwnerToken(1), ttl).await.unwrap(),
            Owned::Done
        );
        // Without renewals the 1 s lease dies on etcd's clock (checked every 500 ms).
        tokio::time::sleep(Duration::from_millis(2_500)).await;
        assert_eq!(
            lock.renew(&name, OwnerToken(1), ttl).await.unwrap(),
            Owned::NotOwner
        );
        let Acquired::Granted {
            fencing_token: second,
        } = lock.acquire(&name, OwnerToken(3), ttl).await.unwrap()
        else {
            panic!("an expired lease frees the lock")
        };
        assert!(second > first, "{second} > {first}");
        assert_eq!(
            lock.release(&name, OwnerToken(3)).await.unwrap(),
            Owned::Done
        );
        assert_eq!(
            lock.release(&name, OwnerToken(3)).await.unwrap(),
            Owned::NotOwner
        );

        // Fences compare as numbers although etcd compares bytes: 10 after 9, then 9 refused.
        assert_eq!(
            store.write(&key, 9, "a", "x").await.unwrap(),
            Written::Applied
        );
        assert_eq!(
            store.write(&key, 10, "b", "y").await.unwrap(),
            Written::Applied
        );
        assert_eq!(
            store.write(&key, 10, "c", "z").await.unwrap(),
            Written::Applied
        );
        assert_eq!(
            store.write(&key, 9, "d", "w").await.unwrap(),
            Written::Rejected { current_token: 10 }
        );
        let read = store.read(&key).await.unwrap();
        assert_eq!(
            (
                read.fencing_token,
                read.write_id.as_deref(),
                read.value.as_deref()
            ),
            (10, Some("c"), Some("z"))
        );
        let log = store.applied_log().await.unwrap();
        let ids: Vec<(u64, &str)> = log
            .iter()
            .map(|entry| (entry.seq, entry.write_id.as_str()))
            .collect();
        assert_eq!(ids, [(1, "a"), (2, "b"), (3, "c")]);
    });
}

#[test]
fn unreachable_etcd_answers_not_applied_at_once() {
    support::assert_unreachable_answers_not_applied_at_once(
        "etcd://127.0.0.1:1",
        "cannot connect to etcd at etcd://127.0.0.1:1",
        Duration::from_secs(1),
    );
}
