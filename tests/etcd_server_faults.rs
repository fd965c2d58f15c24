//! Faults on a private etcd that fencer starts itself (free loopback ports, temp dir, killed on
//! drop even when a test panics): frozen with SIGSTOP for longer than a lease, and killed and
//! restarted mid-run. Runs end on time, what could not be known is `info`, no anomaly is proved
//! against the correct adapter, and fencing tokens stay monotonic across the restart because
//! etcd's revision lives in its data dir. (libfaketime does not move Go's clock, so etcd's
//! clock is not faulted here.)

#![cfg(feature = "etcd")]

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use fencer::backends::{EtcdConnection, EtcdLock, EtcdLockRules, EtcdStore, EtcdStoreRules};
use fencer::drive::RunNames;
use fencer::real::run_real;
use fencer::servers::ServerGuard;
use fencer::{Acquired, FencedStore, LockService, OwnerToken};
use support::{stale_release_plan, stretched};

/// A private etcd, or `None` (after the skip line) when `etcd` is not installed.
fn private_etcd(test: &str) -> Option<ServerGuard> {
    support::started_or_skipped(test, "a private etcd", "etcd-server", ServerGuard::etcd())
}

fn adapters(port: u16) -> (Arc<EtcdLock>, Arc<dyn FencedStore>) {
    let connection = Arc::new(EtcdConnection::open(&format!("etcd://127.0.0.1:{port}")).unwrap());
    (
        Arc::new(EtcdLock::new(
            Arc::clone(&connection),
            EtcdLockRules::Reference,
        )),
        Arc::new(EtcdStore::new(connection, EtcdStoreRules::Fenced)),
    )
}

#[test]
fn etcd_frozen_longer_than_a_lease_gives_unknown_calls_not_anomalies() {
    let Some(server) = private_etcd("etcd_sigstop") else {
        return;
    };
    let (lock, store) = adapters(server.port());
    let plan = stretched(stale_release_plan(), 10, 3);
    let started = Instant::now();
    let history = std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(700));
            server.pause().unwrap();
            // 2.5 s frozen: longer than the 1 s lease.
            std::thread::sleep(Duration::from_millis(2_500));
            server.resume().unwrap();
        });
        run_real(&plan, lock, store, RunNames::tagged("sigstop")).unwrap()
    });
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the run must not hang"
    );
    support::assert_not_invalid(&history);
    support::assert_some_calls_unknown(&history, "calls sent to a frozen server must end as info");
}

#[test]
fn etcd_killed_and_restarted_mid_run_keeps_fencing_tokens_monotonic() {
    let Some(mut server) = private_etcd("etcd_restart") else {
        return;
    };
    let (lock, store) = adapters(server.port());
    let mut plan = stretched(stale_release_plan(), 10, 3);
    plan.faults.clear();
    let started = Instant::now();
    let history = std::thread::scope(|scope| {
        let restarter = scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(800));
            server.kill();
            std::thread::sleep(Duration::from_millis(500));
            server.restart().unwrap();
        });
        let history = run_real(
            &plan,
            Arc::clone(&lock) as Arc<dyn LockService>,
            store,
            RunNames::tagged("restart"),
        )
        .unwrap();
        restarter.join().unwrap();
        history
    });
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the run must not hang"
    );
    support::assert_not_invalid(&history);
    let before: Vec<u64> = support::granted_tokens(&history)
        .into_iter()
        .map(|(_, token)| token)
        .collect();
    assert!(
        !before.is_empty(),
        "w0 was granted the lease before the kill"
    );
    // The revision counter came back from the data dir: a grant now outranks every earlier one.
    let runtime = fencer_harness::runtime::real_runtime().unwrap();
    let after = runtime
        .block_on(lock.acquire(
            "fencer/restart/after",
            OwnerToken(9),
            Duration::from_secs(1),
        ))
        .unwrap();
    let Acquired::Granted { fencing_token } = after else {
        panic!("a fresh lock is free after the restart: {after:?}")
    };
    let newest_before = before.iter().max().copied().unwrap_or(0);
    assert!(
        fencing_token > newest_before,
        "first token after the restart {fencing_token} must exceed {newest_before}"
    );
}

#[test]
fn a_started_etcd_is_stopped_even_when_the_test_panics() {
    let Some(server) = private_etcd("etcd_guard") else {
        return;
    };
    let port = server.port();
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _server = server;
        panic!("a failing test");
    }));
    assert!(panicked.is_err());
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the guard killed etcd while unwinding"
    );
}
