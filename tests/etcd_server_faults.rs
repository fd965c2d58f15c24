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

use fencer::{Acquired, OwnerToken};
use fencer_run::drive::RunNames;
use fencer_run::real::run_real;
use fencer_servers::{PrivateBackend, ServerGuard};
use support::{stale_release_plan, stretched};

/// A private etcd and its URL, or `None` (after the skip line) when `etcd` is not installed.
fn private_etcd(test: &str) -> Option<(ServerGuard, String)> {
    support::private_guard(test, PrivateBackend::Etcd, ServerGuard::etcd())
}

#[test]
fn etcd_frozen_longer_than_a_lease_gives_unknown_calls_not_anomalies() {
    let Some((server, url)) = private_etcd("etcd_sigstop") else {
        return;
    };
    let plan = stretched(stale_release_plan(), 10, 3);
    // 2.5 s frozen: longer than the 1 s lease.
    let freeze = (Duration::from_millis(700), Duration::from_millis(2_500));
    support::run_while_frozen(&server, &url, &plan, freeze, Duration::from_secs(30));
}

#[test]
fn etcd_killed_and_restarted_mid_run_keeps_fencing_tokens_monotonic() {
    let Some((mut server, url)) = private_etcd("etcd_restart") else {
        return;
    };
    let (lock, store) = support::adapters(&url, &url);
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
        let history =
            run_real(&plan, Arc::clone(&lock), store, RunNames::tagged("restart")).unwrap();
        restarter.join().unwrap();
        history
    });
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the run must not hang"
    );
    support::assert_not_invalid(&history);
    // w0 was granted the lease before the kill.
    let before: Vec<u64> = support::granted_tokens(&history)
        .into_iter()
        .map(|(_, token)| token)
        .collect();
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
    support::assert_token_after_restart_outranks(fencing_token, &before);
}

#[test]
fn a_started_etcd_is_stopped_even_when_the_test_panics() {
    let Some((server, _)) = private_etcd("etcd_guard") else {
        return;
    };
    support::assert_guard_stops_the_server_on_panic(server);
}
