//! Redlock (`redlock://`) on private Redis masters fencer starts itself (`private:redlock`),
//! at adapter level: a clean cluster grants, renews and releases correctly and keeps a rival
//! out; a majority down fails at once; and the known-unsafe cases of the published algorithm
//! happen as predicted: a clock jump or a restart without persistence on a majority of masters
//! lets a second client in while the first still counts positive validity. With the fence
//! counter the later holder's token is the larger one, across a restart of the counter too.
//! Dropping the cluster leaves no process or directory behind.

#![cfg(feature = "redis")]

mod support;

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fencer::{Acquired, CallError, LockService, Owned, OwnerToken};
use fencer_backends::registry::lock_from_url;
use fencer_nemesis::{ServerAction, ServerFaults};
use fencer_servers::StartedCluster;
use fencer_servers::redlock::{self, RedlockCluster};

/// The drift every test's client allows for: the published default.
const DRIFT_FACTOR: f64 = 0.01;

/// Long enough for the cluster's faults (a restart of a master takes 25–50 ms) to happen
/// inside one lease on a loaded machine, short enough to keep each test to a second or two.
const TTL: Duration = Duration::from_millis(500);

/// The lock every test takes.
const LOCK: &str = "fencer/redlock-test/lock";

/// A cluster started with `query`, or `None` after the skip line when `redis-server` is missing.
fn cluster(test: &str, query: &str) -> Option<RedlockCluster> {
    support::started_or_skipped(test, "redis-server", "redis-server", redlock::start(query))
}

/// The Redlock client for `cluster`, built from its URL as a run builds it, after a ping of
/// every master.
fn client(cluster: &RedlockCluster, runtime: &tokio::runtime::Runtime) -> Arc<dyn LockService> {
    let connected = lock_from_url(&cluster.client_url()).expect("the cluster's own URL");
    runtime
        .block_on(connected.ping())
        .expect("every master answers");
    connected.adapter
}

fn runtime() -> tokio::runtime::Runtime {
    fencer_harness::runtime::real_runtime().expect("a tokio runtime")
}

/// `action` on each named member, all at once.
fn on_members(
    cluster: &RedlockCluster,
    runtime: &tokio::runtime::Runtime,
    names: &[&str],
    action: ServerAction,
) {
    let nodes = cluster.nodes();
    let targets: Vec<Arc<dyn ServerFaults>> = nodes
        .iter()
        .filter(|node| names.contains(&node.name.as_str()))
        .map(|node| Arc::clone(&node.faults))
        .collect();
    assert_eq!(targets.len(), names.len(), "{names:?} are members");
    runtime.block_on(async {
        let tasks: Vec<_> = targets
            .into_iter()
            .map(|faults| tokio::spawn(async move { faults.apply(action).await }))
            .collect();
        for task in tasks {
            task.await
                .expect("the fault task ran")
                .unwrap_or_else(|error| panic!("{action:?}: {error}"));
        }
    });
}

/// Whether the Redis on `port` (a master's own port, behind its proxy) holds `key`: a raw
/// `EXISTS`, so the check shares nothing with the adapter under test.
fn holds_key(port: u16, key: &str) -> bool {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("the master listens");
    stream
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let command = format!("*2\r\n$6\r\nEXISTS\r\n${}\r\n{key}\r\n", key.len());
    stream.write_all(command.as_bytes()).unwrap();
    let mut reply = [0u8; 4];
    stream.read_exact(&mut reply).unwrap();
    match &reply {
        b":1\r\n" => true,
        b":0\r\n" => false,
        other => panic!("unexpected EXISTS reply {other:?}"),
    }
}

/// The fencing token of a granted acquire, failing the test on anything else.
fn granted(reply: Result<Acquired, CallError>, who: &str) -> u64 {
    match reply {
        Ok(Acquired::Granted { fencing_token }) => fencing_token,
        other => panic!("{who} should have been granted the lock: {other:?}"),
    }
}

/// Acquires as a Redlock client does after a fault: a few attempts a moment apart, since the
/// first call through a connection the fault cut fails on that master. Returns the token of
/// the first grant.
fn granted_retrying(
    runtime: &tokio::runtime::Runtime,
    lock: &dyn LockService,
    owner: OwnerToken,
    who: &str,
) -> u64 {
    let mut replies = Vec::new();
    for _ in 0..5 {
        match runtime.block_on(lock.acquire(LOCK, owner, TTL)) {
            Ok(Acquired::Granted { fencing_token }) => return fencing_token,
            other => replies.push(other),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{who} should have been granted the lock: {replies:?}");
}

/// When the validity of a lease of [`TTL`] whose acquire began at `started` ends, at the
/// earliest: `ttl − drift` after it. The adapter starts its own clock later than `started`, so
/// the validity it computes ends no earlier than this.
fn validity_end(started: Instant) -> Instant {
    started + TTL - TTL.mul_f64(DRIFT_FACTOR) - Duration::from_millis(2)
}

#[test]
fn redlock_grants_renews_and_releases_on_five_masters_and_keeps_a_rival_out() {
    let Some(cluster) = cluster("redlock_clean", "") else {
        return;
    };
    eprintln!(
        "private:redlock: {} masters started in {} ms",
        cluster.masters().len(),
        cluster.started_in().as_millis()
    );
    assert_eq!(cluster.masters().len(), 5);
    let runtime = runtime();
    let lock = client(&cluster, &runtime);
    let (a, b) = (OwnerToken(0xa), OwnerToken(0xb));

    let first = granted(runtime.block_on(lock.acquire(LOCK, a, TTL)), "a");
    for master in cluster.masters() {
        assert!(holds_key(master.server_port(), LOCK), "every master took a");
    }
    assert_eq!(
        runtime.block_on(lock.acquire(LOCK, b, TTL)),
        Ok(Acquired::Busy),
        "a rival cannot acquire while a holds the lock"
    );
    assert_eq!(runtime.block_on(lock.renew(LOCK, a, TTL)), Ok(Owned::Done));
    assert_eq!(
        runtime.block_on(lock.renew(LOCK, b, TTL)),
        Ok(Owned::NotOwner),
        "only the holder renews"
    );
    assert_eq!(
        runtime.block_on(lock.release(LOCK, b)),
        Ok(Owned::NotOwner),
        "only the holder releases"
    );
    assert_eq!(runtime.block_on(lock.release(LOCK, a)), Ok(Owned::Done));
    for master in cluster.masters() {
        assert!(
            !holds_key(master.server_port(), LOCK),
            "released everywhere"
        );
    }
    assert_eq!(
        runtime.block_on(lock.renew(LOCK, a, TTL)),
        Ok(Owned::NotOwner)
    );

    let second = granted(runtime.block_on(lock.acquire(LOCK, b, TTL)), "b");
    assert!(
        second > first,
        "later grants are numbered higher: {first}, {second}"
    );
    assert_eq!(runtime.block_on(lock.release(LOCK, b)), Ok(Owned::Done));

    // The lease ends by itself after its TTL, on every master.
    granted(
        runtime.block_on(lock.acquire(LOCK, a, Duration::from_millis(200))),
        "a",
    );
    std::thread::sleep(Duration::from_millis(300));
    granted(
        runtime.block_on(lock.acquire(LOCK, b, TTL)),
        "b after a expired",
    );
    assert!(
        cluster.client_url().starts_with("redlock://127.0.0.1:"),
        "{}",
        cluster.client_url()
    );
}

#[test]
fn redlock_with_a_majority_of_masters_down_fails_at_once_and_leaves_no_key() {
    let Some(cluster) = cluster("redlock_majority_down", "node_timeout_ms=100") else {
        return;
    };
    let runtime = runtime();
    let lock = client(&cluster, &runtime);
    on_members(&cluster, &runtime, &["n1", "n2", "n3"], ServerAction::Kill);

    let started = Instant::now();
    let reply = runtime.block_on(lock.acquire(LOCK, OwnerToken(0xa), TTL));
    let took = started.elapsed();
    assert!(
        matches!(reply, Err(CallError::NotApplied(_) | CallError::Unknown(_))),
        "two of five masters grant nothing: {reply:?}"
    );
    // Each master is asked at once and bounded by its timeout: the set and the undo.
    assert!(
        took < Duration::from_secs(1),
        "the acquire must not hang: {took:?}"
    );
    eprintln!(
        "three of five masters down: the acquire failed in {} ms: {reply:?}",
        took.as_millis()
    );
    for master in &cluster.masters()[3..] {
        assert!(
            !holds_key(master.server_port(), LOCK),
            "the failed acquire undid its keys on the masters that took them"
        );
    }

    on_members(&cluster, &runtime, &["n1", "n2", "n3"], ServerAction::Start);
    granted_retrying(
        &runtime,
        &*lock,
        OwnerToken(0xb),
        "b once the masters are back",
    );
}

/// The published algorithm's known hole, shown on a clean cluster: `a` holds the lock with
/// positive validity, something makes a majority of masters forget `a`'s key early (`fault`,
/// on `n1`…`n3`), and `b` is granted the lock while `a` still counts itself the holder.
/// Before the fault reaches a majority (`n1`, `n2` only) `b` is still kept out. Both release
/// at the end, leaving the lock free. Returns the tokens of `a` and `b`.
fn second_holder_while_first_is_valid(
    cluster: &RedlockCluster,
    fault: &dyn Fn(&[&str]),
) -> (u64, u64) {
    let runtime = runtime();
    let lock = client(cluster, &runtime);
    let (a, b) = (OwnerToken(0xa), OwnerToken(0xb));
    let a_started = Instant::now();
    let a_token = granted(runtime.block_on(lock.acquire(LOCK, a, TTL)), "a");

    fault(&["n1", "n2"]);
    assert_eq!(
        runtime.block_on(lock.acquire(LOCK, b, TTL)),
        Ok(Acquired::Busy),
        "a minority forgetting a's key lets nobody in"
    );
    fault(&["n3"]);
    let b_token = granted_retrying(&runtime, &*lock, b, "b");
    let b_granted = Instant::now();
    let a_valid_until = validity_end(a_started);
    assert!(
        b_granted < a_valid_until,
        "b was granted {:?} before a's validity ended: two holders at once",
        a_valid_until - b_granted
    );
    eprintln!(
        "two holders: b granted {} ms after a's acquire began, {} ms before a's validity ended",
        (b_granted - a_started).as_millis(),
        (a_valid_until - b_granted).as_millis()
    );
    // `a` finds out only when it next talks to the masters.
    assert_eq!(
        runtime.block_on(lock.renew(LOCK, a, TTL)),
        Ok(Owned::NotOwner),
        "a's renew reaches only the two masters that still hold its key"
    );
    assert_eq!(
        runtime.block_on(lock.release(LOCK, a)),
        Ok(Owned::NotOwner),
        "a no longer holds a majority, though its release removes what is left of its keys"
    );
    assert_eq!(runtime.block_on(lock.release(LOCK, b)), Ok(Owned::Done));
    (a_token, b_token)
}

#[test]
fn redlock_clock_jump_on_a_majority_lets_a_second_holder_in_during_the_first_lease() {
    let Some(cluster) = cluster("redlock_clock_jump", "") else {
        return;
    };
    let runtime = runtime();
    let jump = ServerAction::JumpClock(2 * TTL.as_nanos() as i64);
    second_holder_while_first_is_valid(&cluster, &|names| {
        on_members(&cluster, &runtime, names, jump);
    });
}

#[test]
fn redlock_restart_of_a_majority_without_persistence_lets_a_second_holder_in() {
    let Some(cluster) = cluster("redlock_restart", "") else {
        return;
    };
    let runtime = runtime();
    second_holder_while_first_is_valid(&cluster, &|names| {
        let started = Instant::now();
        on_members(&cluster, &runtime, names, ServerAction::Kill);
        on_members(&cluster, &runtime, names, ServerAction::Start);
        eprintln!(
            "restarted {names:?} in {} ms",
            started.elapsed().as_millis()
        );
    });
}

#[test]
fn redlock_fence_counter_orders_the_two_holders_and_survives_its_restart() {
    let Some(cluster) = cluster("redlock_fence_counter", "fence=counter") else {
        return;
    };
    assert!(
        cluster.client_url().contains("&fence=redis://127.0.0.1:")
            || cluster.client_url().contains("?fence=redis://127.0.0.1:"),
        "{}",
        cluster.client_url()
    );
    let runtime = runtime();
    let jump = ServerAction::JumpClock(2 * TTL.as_nanos() as i64);
    let (a_token, b_token) = second_holder_while_first_is_valid(&cluster, &|names| {
        on_members(&cluster, &runtime, names, jump);
    });
    assert!(
        b_token > a_token,
        "the later holder carries the larger token ({a_token}, then {b_token}): a fenced store \
         refuses the earlier one"
    );

    let lock = client(&cluster, &runtime);
    let counter = cluster.fence_counter().expect("fence=counter starts one");
    runtime
        .block_on(counter.apply(ServerAction::Kill))
        .expect("kill");
    assert!(
        runtime
            .block_on(lock.acquire(LOCK, OwnerToken(0xc), TTL))
            .is_err(),
        "no token, no grant: the counter is down"
    );
    for master in cluster.masters() {
        assert!(
            !holds_key(master.server_port(), LOCK),
            "the acquire that found no token undid its keys"
        );
    }
    runtime
        .block_on(counter.apply(ServerAction::Start))
        .expect("restart");
    let c_token = granted_retrying(&runtime, &*lock, OwnerToken(0xc), "c");
    assert!(
        c_token > b_token,
        "the counter kept its count across its restart ({b_token}, then {c_token})"
    );
}

#[test]
fn redlock_cluster_leaves_no_process_or_directory_behind() {
    let Some(cluster) = cluster("redlock_teardown", "nodes=3&fence=counter") else {
        return;
    };
    let processes = cluster.processes();
    assert_eq!(processes.len(), 4, "three masters and the counter");
    let ports: Vec<u16> = cluster
        .masters()
        .iter()
        .flat_map(|master| [master.server_port(), master.proxy_port()])
        .collect();
    for (pid, dir) in &processes {
        let pid = pid.expect("every server runs");
        assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
        assert!(dir.exists());
    }
    let described = cluster.describe();
    assert!(
        described.contains("3 independent Redis masters") && described.contains("n3: Redis pid"),
        "{described}"
    );
    drop(cluster);
    for (pid, dir) in &processes {
        let pid = pid.unwrap();
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        assert!(
            !comm.starts_with("redis-server"),
            "redis-server {pid} outlived its cluster"
        );
        assert!(!dir.exists(), "{} outlived its cluster", dir.display());
    }
    for port in ports {
        assert!(
            TcpStream::connect(("127.0.0.1", port)).is_err(),
            "port {port} still listens"
        );
    }
}
