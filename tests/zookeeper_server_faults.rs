//! Faults on a private ZooKeeper that fencer starts itself (free loopback port, temp dir,
//! killed on drop even when a test panics): the server frozen with SIGSTOP mid-run, killed and
//! restarted (one server, one test function: a JVM starts slowly), and its wall clock jumped
//! under libfaketime (a second server).

#![cfg(feature = "zookeeper")]

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use fencer::{Acquired, LockService, Owned, OwnerToken};
use fencer_backends::{ZookeeperConnection, ZookeeperLock, ZookeeperLockRules};
use fencer_run::real::unique_tag;
use fencer_servers::{PrivateBackend, ServerGuard, ZOOKEEPER_TICK_MS};
use support::stale_release_plan;

const TTL: Duration = Duration::from_millis(300);

/// A private ZooKeeper ticking every `tick_ms` (its clock under libfaketime if `faked_clock`)
/// and its URL, or `None` (after the skip line) when it cannot start.
fn private_zookeeper(test: &str, tick_ms: u64, faked_clock: bool) -> Option<(ServerGuard, String)> {
    let started = ServerGuard::zookeeper_ticking(tick_ms, faked_clock);
    support::private_guard(test, PrivateBackend::Zookeeper, started)
}

#[test]
fn zookeeper_frozen_then_killed_and_restarted() {
    let test = "zookeeper_server_faults";
    let Some((mut server, url)) = private_zookeeper(test, ZOOKEEPER_TICK_MS, false) else {
        return;
    };
    // SIGSTOP for 700 ms mid-run: calls in flight end as `info`, the run ends on time, and no
    // anomaly is proved against the correct adapters.
    let freeze = (Duration::from_millis(200), Duration::from_millis(700));
    let deadline = Duration::from_secs(20);
    support::run_while_frozen(&server, &url, &stale_release_plan(), freeze, deadline);
    let connection = Arc::new(ZookeeperConnection::open(&url).unwrap());
    tokens_after_a_restart_exceed_every_token_before(&mut server, &connection);
}

/// ZooKeeper expires sessions on its monotonic clock: a renewed lease survives the server's wall
/// clock jumping an hour ahead (and back), and still expires once renewals stop. libfaketime
/// slows the JVM (a renewed 1 s session was seen to expire even without a jump), so this server
/// ticks every 500 ms and the lease is 4 s, renewed every 500 ms.
#[test]
fn zookeeper_wall_clock_jump_does_not_expire_sessions() {
    let test = "zookeeper_clock_jump";
    let faketime = fencer_servers::ServerClock::available();
    if support::started_or_skipped(test, "libfaketime", "libfaketime", faketime).is_none() {
        return;
    }
    let Some((server, url)) = private_zookeeper(test, 500, true) else {
        return;
    };
    let connection = Arc::new(ZookeeperConnection::open(&url).unwrap());
    let ttl = Duration::from_secs(4);
    let clock = server.clock().expect("started under libfaketime");
    let lock = ZookeeperLock::new(Arc::clone(&connection), ZookeeperLockRules::Reference);
    let name = format!("fencer/{}/jump", unique_tag(0));
    let (holder, rival) = (OwnerToken(1), OwnerToken(2));
    let runtime = fencer_harness::runtime::real_runtime().unwrap();
    runtime.block_on(async {
        let granted = lock.acquire(&name, holder, ttl).await.unwrap();
        assert!(matches!(granted, Acquired::Granted { .. }), "{granted:?}");
        // The server sees a jump within 1 s (libfaketime's cache): renew across 3 s.
        for jump_ms in [3_600_000, -3_600_000] {
            clock.jump(jump_ms).unwrap();
            for _ in 0..6 {
                tokio::time::sleep(Duration::from_millis(500)).await;
                assert_eq!(lock.renew(&name, holder, ttl).await.unwrap(), Owned::Done);
                assert_eq!(
                    lock.acquire(&name, rival, ttl).await.unwrap(),
                    Acquired::Busy
                );
            }
        }
        // Renewals stop: the session expires on the monotonic clock as usual.
        tokio::time::sleep(Duration::from_millis(5_500)).await;
        let next = lock.acquire(&name, rival, ttl).await.unwrap();
        assert!(matches!(next, Acquired::Granted { .. }), "{next:?}");
        assert_eq!(
            lock.renew(&name, holder, ttl).await.unwrap(),
            Owned::NotOwner
        );
    });
}

/// Killed while a lease is held, then restarted on the same data directory: calls meanwhile
/// fail fast, the server restores the holder's session from its log and expires it by its own
/// timer, and — zxids being on disk — the next grant's czxid exceeds every token before.
fn tokens_after_a_restart_exceed_every_token_before(
    server: &mut ServerGuard,
    connection: &Arc<ZookeeperConnection>,
) {
    let lock = ZookeeperLock::new(Arc::clone(connection), ZookeeperLockRules::Reference);
    let name = format!("fencer/{}/restart", unique_tag(0));
    let (holder, rival) = (OwnerToken(1), OwnerToken(2));
    let runtime = fencer_harness::runtime::real_runtime().unwrap();
    let mut before = Vec::new();
    runtime.block_on(async {
        for owner in [OwnerToken(10), OwnerToken(11), holder] {
            match lock.acquire(&name, owner, TTL).await.unwrap() {
                Acquired::Granted { fencing_token } => before.push(fencing_token),
                Acquired::Busy => panic!("the lock was released"),
            }
            if owner != holder {
                assert_eq!(lock.release(&name, owner).await.unwrap(), Owned::Done);
            }
        }
    });
    server.kill();
    runtime.block_on(async {
        let started = Instant::now();
        let refused = lock.acquire(&name, rival, TTL).await;
        assert!(refused.is_err(), "{refused:?}");
        assert!(started.elapsed() < Duration::from_secs(3), "fails fast");
    });
    server.restart().unwrap();
    fencer_servers::zookeeper_ready(server.port()).unwrap();
    runtime.block_on(async {
        let renewed = lock.renew(&name, holder, TTL).await;
        eprintln!("zookeeper restart: the holder's renew right after the restart: {renewed:?}");
        let deadline = Instant::now() + Duration::from_secs(10);
        let token = loop {
            match lock.acquire(&name, rival, TTL).await {
                Ok(Acquired::Granted { fencing_token }) => break fencing_token,
                other => {
                    assert!(Instant::now() < deadline, "never granted: {other:?}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        };
        support::assert_token_after_restart_outranks(token, &before);
        assert_eq!(
            lock.renew(&name, holder, TTL).await.unwrap(),
            Owned::NotOwner
        );
    });
}
