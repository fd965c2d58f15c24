//! Network faults between workers and Redis, through fencer's TCP fault proxy: replies
//! black-holed after the server applied the requests, connections cut, a partition. The run
//! ends on time, the unknown stays `info`, and the correct adapters show no anomaly.

#![cfg(feature = "redis")]

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use fencer::{FencedStore, LockService, Validity, check};
use fencer_backends::{RedisConnection, RedisLock, RedisLockRules, RedisStore, RedisStoreRules};
use fencer_harness::{EventType, Op};
use fencer_run::drive::RunNames;
use fencer_run::real::{run_real, unique_tag};
use fencer_servers::proxy::FaultProxy;

/// The proxy (alive as long as this is) and the adapters connected through it.
type Proxied = (FaultProxy, Arc<dyn LockService>, Arc<dyn FencedStore>);

fn through_proxy(test: &str) -> Option<Proxied> {
    let direct = Arc::new(RedisConnection::open("redis://127.0.0.1:6379").unwrap());
    if !support::reachable(test, "Redis", "redis-server", direct.ping()) {
        return None;
    }
    let proxy = FaultProxy::start("127.0.0.1:6379".parse().unwrap()).unwrap();
    let url = format!("redis://127.0.0.1:{}", proxy.port());
    let connection = Arc::new(RedisConnection::open(&url).unwrap());
    let lock: Arc<dyn LockService> = Arc::new(RedisLock::new(
        Arc::clone(&connection),
        RedisLockRules::Reference,
    ));
    let store: Arc<dyn FencedStore> =
        Arc::new(RedisStore::new(connection, RedisStoreRules::Fenced));
    Some((proxy, lock, store))
}

#[test]
fn the_proxy_forwards_faithfully_when_healthy() {
    let Some((_proxy, lock, store)) = through_proxy("proxy_healthy") else {
        return;
    };
    let history = run_real(
        &support::stale_write_plan(),
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
    assert!(
        history
            .events
            .iter()
            .any(|e| e.is(EventType::Log, Op::Write))
    );
}

#[test]
fn lost_replies_cuts_and_a_partition_give_info_not_anomalies() {
    let Some((proxy, lock, store)) = through_proxy("proxy_faults") else {
        return;
    };
    let plan = support::stale_write_plan();
    let started = Instant::now();
    let history = std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(20));
            proxy.black_hole_replies();
            std::thread::sleep(Duration::from_millis(250));
            proxy.heal_replies();
            std::thread::sleep(Duration::from_millis(300));
            proxy.partition_for(Duration::from_millis(300));
            std::thread::sleep(Duration::from_millis(400));
            proxy.cut_connections();
        });
        run_real(&plan, lock, store, RunNames::tagged(&unique_tag(0))).unwrap()
    });
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the run must not hang"
    );
    support::assert_not_invalid(&history);
    support::assert_some_calls_unknown(
        &history,
        "calls whose replies were black-holed must end as info",
    );
}
