//! Faults on a private Redis that fencer starts itself (free loopback port, temp dir, killed
//! on drop even when a test panics): the server frozen with SIGSTOP mid-run, and killed
//! mid-run. The run must end on time, record what it could not know as `info`, and never prove
//! an anomaly the correct adapter did not commit. And a jump of the server's clock, emulated
//! by rewriting every key's expiry (Debian's Redis hangs under libfaketime).

#![cfg(feature = "redis")]

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use fencer::backends::{RedisConnection, RedisLock, RedisLockRules, RedisStore, RedisStoreRules};
use fencer::connect::{lock_from_url, store_from_url};
use fencer::drive::RunNames;
use fencer::real::{run_real, run_real_with_servers};
use fencer::servers::{PrivateServer, ServerGuard};
use fencer::{FencedStore, LockService, Validity, check};
use fencer_harness::{EventType, Op};
use support::{
    assert_jump_let_a_second_worker_in_early, clock_jump_plan, server_targets, stale_release_plan,
};

/// A private Redis, or `None` (after the skip line) when `redis-server` is not installed.
fn private_redis(test: &str) -> Option<ServerGuard> {
    support::started_or_skipped(
        test,
        "a private Redis",
        "redis-server",
        ServerGuard::redis(),
    )
}

fn adapters(port: u16) -> (Arc<dyn LockService>, Arc<dyn FencedStore>) {
    let connection = Arc::new(RedisConnection::open(&format!("redis://127.0.0.1:{port}")).unwrap());
    (
        Arc::new(RedisLock::new(
            Arc::clone(&connection),
            RedisLockRules::Reference,
        )),
        Arc::new(RedisStore::new(connection, RedisStoreRules::Fenced)),
    )
}

#[test]
fn redis_frozen_mid_run_gives_unknown_calls_not_anomalies() {
    let Some(server) = private_redis("redis_sigstop") else {
        return;
    };
    let (lock, store) = adapters(server.port());
    let plan = stale_release_plan();
    let history = std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(200));
            server.pause().unwrap();
            std::thread::sleep(Duration::from_millis(700));
            server.resume().unwrap();
        });
        run_real(&plan, lock, store, RunNames::tagged("sigstop")).unwrap()
    });
    support::assert_not_invalid(&history);
    support::assert_some_calls_unknown(&history, "calls sent to a frozen server must end as info");
}

#[test]
fn redis_killed_mid_run_ends_on_time_with_honest_outcomes() {
    let Some(mut server) = private_redis("redis_killed") else {
        return;
    };
    let (lock, store) = adapters(server.port());
    // One worker holding the lease when the server dies (a second would retry its acquire
    // against a dead server until its attempts run out).
    let mut plan = stale_release_plan();
    plan.faults.clear();
    plan.workers.truncate(1);
    plan.settings.workers = 1;
    let started = Instant::now();
    let history = std::thread::scope(|scope| {
        let killer = scope.spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            server.kill();
        });
        let history = run_real(&plan, lock, store, RunNames::tagged("killed")).unwrap();
        killer.join().unwrap();
        history
    });
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the run must not hang"
    );
    support::assert_not_invalid(&history);
    // After the kill nothing can be confirmed: calls fail (refused) or stay unknown.
    assert!(
        history
            .events
            .iter()
            .any(|e| e.f == Op::Release && matches!(e.kind, EventType::Fail | EventType::Info)),
        "the release after the kill cannot have succeeded"
    );
    // The dead store cannot hand over its log, and fencer does not invent one.
    assert!(!history.events.iter().any(|e| e.kind == EventType::Log));
}

#[test]
fn a_started_server_is_stopped_even_when_the_test_panics() {
    let Some(server) = private_redis("redis_guard") else {
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
        "the guard killed the server while unwinding"
    );
}

#[test]
fn an_emulated_clock_jump_expires_a_live_lease_and_only_the_fence_stops_the_stale_write() {
    let server = match PrivateServer::start("private:redis") {
        Ok(server) => Arc::new(server),
        Err(error) => {
            let probe = async move { Err(error) };
            assert!(!support::reachable(
                "redis_clock_jump",
                "a private Redis",
                "redis-server",
                probe
            ));
            return;
        }
    };
    let plan = clock_jump_plan();
    let run = |variant: &str, tag: &str| {
        let lock = lock_from_url(&server.url()).unwrap();
        let store = store_from_url(&format!("{}{variant}", server.url())).unwrap();
        run_real_with_servers(
            &plan,
            lock.adapter,
            store.adapter,
            RunNames::tagged(tag),
            server_targets(&server, &["lock"]),
        )
        .unwrap()
    };
    let fenced = run("", "jump-fenced");
    let verdict = check(&fenced);
    assert_eq!(
        verdict.validity,
        Validity::Valid,
        "{}",
        verdict.summary_line()
    );
    assert!(
        fenced
            .events
            .iter()
            .any(|e| e.kind == EventType::Nemesis && e.f == Op::ClockJump)
    );
    assert_jump_let_a_second_worker_in_early(&fenced, plan.settings.ttl_ns);
    let unfenced = run("?variant=unfenced", "jump-unfenced");
    let verdict = check(&unfenced);
    assert_eq!(
        verdict.validity,
        Validity::Invalid,
        "{}",
        verdict.summary_line()
    );
}
