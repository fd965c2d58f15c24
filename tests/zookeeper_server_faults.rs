//! Faults on a private ZooKeeper that fencer starts itself (free loopback port, temp dir,
//! killed on drop even when a test panics): the server frozen with SIGSTOP mid-run, killed and
//! restarted (one server, one test function: a JVM starts slowly), and its wall clock jumped
//! under libfaketime (a second server).

#![cfg(feature = "zookeeper")]

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use fencer::backends::{
    ZookeeperConnection, ZookeeperLock, ZookeeperLockRules, ZookeeperStore, ZookeeperStoreRules,
};
use fencer::drive::RunNames;
use fencer::real::{run_real, unique_tag};
use fencer::servers::{ServerGuard, ZOOKEEPER_TICK_MS};
use fencer::{Acquired, FencedStore, LockService, Owned, OwnerToken};
use support::stale_release_plan;

const TTL: Duration = Duration::from_millis(300);

fn connection(port: u16) -> Arc<ZookeeperConnection> {
    Arc::new(ZookeeperConnection::open(&format!("zk://127.0.0.1:{port}")).unwrap())
}

/// A private ZooKeeper, or `None` (after the skip line) when it cannot start.
fn private_zookeeper(test: &str, tick_ms: u64, faked_clock: bool) -> Option<ServerGuard> {
    let started = ServerGuard::zookeeper_ticking(tick_ms, faked_clock);
    let package = "zookeeper (and libfaketime)";
    support::started_or_skipped(test, "a private ZooKeeper", package, started)
}

#[test]
fn zookeeper_frozen_then_killed_and_restarted() {
    let Some(mut server) = private_zookeeper("zookeeper_server_faults", ZOOKEEPER_TICK_MS, false)
    else {
        return;
    };
    let connection = connection(server.port());
    frozen_mid_run_gives_unknown_calls_not_anomalies(&server, &connection);
    tokens_after_a_restart_exceed_every_token_before(&mut server, &connection);
}

/// ZooKeeper expires sessions on its monotonic clock: a renewed lease survives the server's wall
/// clock jumping an hour ahead (and back), and still expires once renewals stop. libfaketime
/// slows the JVM (a renewed 1 s session was seen to expire even without a jump), so this server
/// ticks every 500 ms and the lease is 4 s, renewed every 500 ms.
#[test]
fn zookeeper_wall_clock_jump_does_not_expire_sessions() {
    let Some(server) = private_zookeeper("zookeeper_clock_jump", 500, true) else {
        return;
    };
    let connection = connection(server.port());
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

fn adapters(connection: &Arc<ZookeeperConnection>) -> (Arc<dyn LockService>, Arc<dyn FencedStore>) {
    (
        Arc::new(ZookeeperLock::new(
            Arc::clone(connection),
            ZookeeperLockRules::Reference,
        )),
        Arc::new(ZookeeperStore::new(
            Arc::clone(connection),
            ZookeeperStoreRules::Fenced,
        )),
    )
}

/// SIGSTOP for 700 ms mid-run: calls in flight end as `info`, the run ends on time, and no
/// anomaly is proved against the correct adapters.
fn frozen_mid_run_gives_unknown_calls_not_anomalies(
    server: &ServerGuard,
    connection: &Arc<ZookeeperConnection>,
) {
    let (lock, store) = adapters(connection);
    let plan = stale_release_plan();
    let started = Instant::now();
    let history = std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(200));
            server.pause().unwrap();
            std::thread::sleep(Duration::from_millis(700));
            server.resume().unwrap();
        });
        run_real(&plan, lock, store, RunNames::tagged(&unique_tag(0))).unwrap()
    });
    assert!(started.elapsed() < Duration::from_secs(20), "no hang");
    support::assert_not_invalid(&history);
    support::assert_some_calls_unknown(&history, "calls sent to a frozen server must end as info");
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
    fencer::servers::zookeeper_ready(server.port()).unwrap();
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
        let newest = *before.iter().max().unwrap();
        assert!(
            token > newest,
            "{token} after the restart, {before:?} before"
        );
        assert_eq!(
            lock.renew(&name, holder, TTL).await.unwrap(),
            Owned::NotOwner
        );
    });
}
