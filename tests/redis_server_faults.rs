//! Faults on a private Redis that fencer starts itself (free loopback port, temp dir, killed
//! on drop even when a test panics): the server frozen with SIGSTOP mid-run, and killed
//! mid-run. The run must end on time, record what it could not know as `info`, and never prove
//! an anomaly the correct adapter did not commit. And a jump of the server's clock, emulated
//! by rewriting every key's expiry (Debian's Redis hangs under libfaketime), on a server up,
//! down, or frozen (shown when it runs again).

#![cfg(feature = "redis")]

mod support;

use std::time::{Duration, Instant};

use fencer_harness::{Acquired, EventType, Op, OwnerToken};
use fencer_nemesis::{ServerAction, ServerFaults};
use fencer_run::drive::RunNames;
use fencer_run::real::{run_real, run_real_with_servers};
use fencer_servers::{PrivateBackend, ServerGuard};
use support::stale_release_plan;

/// A private Redis and its URL, or `None` (after the skip line) when `redis-server` is not
/// installed.
fn private_redis(test: &str) -> Option<(ServerGuard, String)> {
    support::private_guard(test, PrivateBackend::Redis, ServerGuard::redis())
}

#[test]
fn redis_frozen_mid_run_gives_unknown_calls_not_anomalies() {
    let Some((server, url)) = private_redis("redis_sigstop") else {
        return;
    };
    let freeze = (Duration::from_millis(200), Duration::from_millis(700));
    let deadline = Duration::from_secs(20);
    support::run_while_frozen(&server, &url, &stale_release_plan(), freeze, deadline);
}

#[test]
fn redis_killed_mid_run_ends_on_time_with_honest_outcomes() {
    let Some((mut server, url)) = private_redis("redis_killed") else {
        return;
    };
    let (lock, store) = support::adapters(&url, &url);
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

/// The lock on one private Redis, restarted mid-run (which loses every key, the fence counter
/// and the lock log included), the store on another, as `fencer run --lock private:redis
/// --store private:redis --nemesis restart` runs them.
fn run_with_a_lock_restart(tag: &str) -> Option<fencer::History> {
    let lock_server = support::private_server(tag, "private:redis")?;
    let store_server = support::private_server(tag, "private:redis")?;
    let plan = support::lock_restart_plan();
    let (lock, store) = support::adapters(&lock_server.url(), &store_server.url());
    let targets = support::server_targets(&lock_server, &["lock"]);
    Some(run_real_with_servers(&plan, lock, store, RunNames::tagged(tag), targets).unwrap())
}

#[test]
fn a_restart_that_loses_the_fence_counter_is_reported_as_the_token_regression_it_is() {
    let Some(history) = run_with_a_lock_restart("redis_restart") else {
        return;
    };
    assert_eq!(support::nemesis_ops(&history), [Op::Restart, Op::Recover]);
    let granted = support::granted_tokens(&history);
    assert!(
        granted.windows(2).any(|pair| pair[1].1 <= pair[0].1),
        "the counter was lost with the restart: tokens {granted:?}"
    );
    // The log that survived holds only what came after the restart: not handed over.
    assert!(support::lock_log(&history).is_empty());
    // The regression is the finding: the rightful owners' renews and releases after it are
    // not foreign, no lease overlapped, and no reply is judged against half a log.
    let verdict = fencer::check(&history);
    let found: Vec<&str> = verdict.anomaly_counts.keys().map(String::as_str).collect();
    assert_eq!(found, ["token-regression"], "{}", verdict.summary_line());
    let story = fencer_checkers::story::tell(&history, &verdict, "stop", 5);
    let first = story
        .split("\nAnomaly ")
        .nth(1)
        .expect("an anomaly is told");
    assert!(first.contains(": token-regression\n"), "{story}");
    assert!(
        first.contains(
            "Defence that failed: fencing token monotonicity: the lock service restarted"
        ),
        "{story}"
    );
}

#[test]
fn a_started_server_is_stopped_even_when_the_test_panics() {
    let Some((server, _)) = private_redis("redis_guard") else {
        return;
    };
    support::assert_guard_stops_the_server_on_panic(server);
}

#[test]
fn an_emulated_clock_jump_expires_a_live_lease_and_only_the_fence_stops_the_stale_write() {
    let Some(server) = support::private_server("redis_clock_jump", "private:redis") else {
        return;
    };
    support::assert_clock_jump_is_stopped_only_by_the_fence(&server, "jump");
}

#[test]
fn a_clock_jump_finds_nothing_to_move_on_a_killed_redis_and_expires_a_restarted_ones_lease() {
    let Some(server) = support::private_server("redis_jump_down", "private:redis") else {
        return;
    };
    let ttl = Duration::from_secs(8);
    let jump = ServerAction::JumpClock(10_000_000_000);
    let runtime = fencer_harness::runtime::real_runtime().unwrap();
    runtime.block_on(async {
        server.apply(ServerAction::Kill).await.unwrap();
        assert_eq!(server.pid(), None);
        server
            .apply(jump)
            .await
            .expect("a server that is down keeps no keys: nothing to move, no error");
        server.apply(ServerAction::Start).await.unwrap();
        assert!(server.pid().is_some());
        let lock = fencer_backends::registry::lock_from_url(&server.url())
            .unwrap()
            .adapter;
        let first = lock.acquire("jumped", OwnerToken(1), ttl).await.unwrap();
        assert!(matches!(first, Acquired::Granted { .. }), "{first:?}");
        let held = lock.acquire("jumped", OwnerToken(2), ttl).await.unwrap();
        assert_eq!(held, Acquired::Busy, "the first lease runs for {ttl:?}");
        server.apply(jump).await.unwrap();
        let after = lock.acquire("jumped", OwnerToken(2), ttl).await.unwrap();
        assert!(
            matches!(after, Acquired::Granted { .. }),
            "a jump past the lease's end expires it on the restarted server: {after:?}"
        );
    });
}

/// A clock jump that comes while the Redis is frozen cannot reach it: it is taken at once (not
/// a connect that times out and fails the run) and shown when the server runs again, as a
/// frozen process first reads its stepped clock when it wakes. A second pause starts clean.
#[test]
fn a_clock_jump_on_a_frozen_redis_is_shown_when_it_runs_again() {
    let Some(server) = support::private_server("redis_jump_frozen", "private:redis") else {
        return;
    };
    let ttl = Duration::from_secs(8);
    let runtime = fencer_harness::runtime::real_runtime().unwrap();
    runtime.block_on(async {
        let lock = fencer_backends::registry::lock_from_url(&server.url())
            .unwrap()
            .adapter;
        let first = lock.acquire("frozen", OwnerToken(1), ttl).await.unwrap();
        assert!(matches!(first, Acquired::Granted { .. }), "{first:?}");
        server.apply(ServerAction::Pause).await.unwrap();
        let started = Instant::now();
        for _ in 0..2 {
            server
                .apply(ServerAction::JumpClock(5_000_000_000))
                .await
                .expect("a jump on a frozen server is taken");
        }
        assert!(started.elapsed() < Duration::from_secs(1), "nothing waited");
        server.apply(ServerAction::Resume).await.unwrap();
        let after = lock.acquire("frozen", OwnerToken(2), ttl).await.unwrap();
        assert!(
            matches!(after, Acquired::Granted { .. }),
            "two 5 s jumps taken while frozen expire an 8 s lease once it runs: {after:?}"
        );
        server.apply(ServerAction::Pause).await.unwrap();
        server.apply(ServerAction::Resume).await.unwrap();
        let held = lock.acquire("frozen", OwnerToken(3), ttl).await.unwrap();
        assert_eq!(
            held,
            Acquired::Busy,
            "no jump was left over for the next pause"
        );
    });
}
