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

use fencer::{Acquired, CallError, LockService, Owned, OwnerToken, Validity};
use fencer_backends::registry::lock_from_url;
use fencer_harness::{EventType, Op};
use fencer_nemesis::{ServerAction, ServerFaults};
use fencer_servers::StartedCluster;
use fencer_servers::redlock::{self, RedlockCluster};

/// The drift every test's client allows for: the published default.
const DRIFT_FACTOR: f64 = 0.01;

/// Long enough for a clock jump on three masters to happen inside one lease on a loaded
/// machine, short enough to keep each test to a second or two.
const TTL: Duration = Duration::from_millis(500);

/// The lock every test takes.
const LOCK: &str = "fencer/redlock-test/lock";

/// How long the tests' clients wait for one master: four times the adapter's default, since
/// the tests share a loaded machine, and still well inside [`TTL`].
const NODE_TIMEOUT_MS: u64 = 200;

/// A cluster started with `query` (and [`NODE_TIMEOUT_MS`]), or `None` after the skip line when
/// `redis-server` is missing.
fn cluster(test: &str, query: &str) -> Option<RedlockCluster> {
    let query = format!("node_timeout_ms={NODE_TIMEOUT_MS}&{query}");
    support::started_or_skipped(test, "redis-server", "redis-server", redlock::start(&query))
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

/// When the validity of a lease of `ttl` whose acquire began at `started` ends, at the
/// earliest: `ttl − drift` after it. The adapter starts its own clock later than `started`, so
/// the validity it computes ends no earlier than this.
fn validity_end(started: Instant, ttl: Duration) -> Instant {
    started + ttl - ttl.mul_f64(DRIFT_FACTOR) - Duration::from_millis(2)
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
    let Some(cluster) = cluster("redlock_majority_down", "") else {
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
    a_ttl: Duration,
    fault: &dyn Fn(&[&str]),
) -> (u64, u64) {
    let runtime = runtime();
    let lock = client(cluster, &runtime);
    let (a, b) = (OwnerToken(0xa), OwnerToken(0xb));
    let a_started = Instant::now();
    let a_token = granted(runtime.block_on(lock.acquire(LOCK, a, a_ttl)), "a");

    fault(&["n1", "n2"]);
    // Busy, or unknown when a master's connection, cut by a restart, fails the call.
    let kept_out = runtime.block_on(lock.acquire(LOCK, b, TTL));
    assert!(
        matches!(kept_out, Ok(Acquired::Busy) | Err(CallError::Unknown(_))),
        "a minority forgetting a's key lets nobody in: {kept_out:?}"
    );
    fault(&["n3"]);
    let b_token = granted_retrying(&runtime, &*lock, b, "b");
    let b_granted = Instant::now();
    let a_valid_until = validity_end(a_started, a_ttl);
    assert!(
        b_granted < a_valid_until,
        "b was granted {} ms after a's acquire began, later than the {} ms a's validity is sure \
         to last: no overlap shown",
        (b_granted - a_started).as_millis(),
        (a_valid_until - a_started).as_millis()
    );
    eprintln!(
        "two holders: b granted {} ms after a's acquire began, {} ms before a's validity ended",
        (b_granted - a_started).as_millis(),
        (a_valid_until - b_granted).as_millis()
    );
    // `a` finds out only when it next talks to the masters.
    assert_eq!(
        runtime.block_on(lock.renew(LOCK, a, a_ttl)),
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
    second_holder_while_first_is_valid(&cluster, TTL, &|names| {
        on_members(&cluster, &runtime, names, jump);
    });
}

#[test]
fn redlock_restart_of_a_majority_without_persistence_lets_a_second_holder_in() {
    let Some(cluster) = cluster("redlock_restart", "") else {
        return;
    };
    let runtime = runtime();
    // Three restarts take 50–100 ms on an idle machine, several hundred on a loaded one.
    let a_ttl = 3 * TTL;
    second_holder_while_first_is_valid(&cluster, a_ttl, &|names| {
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
    let (a_token, b_token) = second_holder_while_first_is_valid(&cluster, TTL, &|names| {
        on_members(&cluster, &runtime, names, jump);
    });
    assert!(
        b_token > a_token,
        "the later holder carries the larger token ({a_token}, then {b_token}): a fenced store \
         refuses the earlier one"
    );

    let lock = client(&cluster, &runtime);
    let counter = cluster.fence_counter().expect("fence=counter starts one");
    // A frozen counter, not a killed one: a killed server's port is free for any server another
    // test starts meanwhile, which would answer the `INCR` in its place.
    runtime
        .block_on(counter.apply(ServerAction::Pause))
        .expect("pause");
    let unanswered = runtime.block_on(lock.acquire(LOCK, OwnerToken(0xc), TTL));
    runtime
        .block_on(counter.apply(ServerAction::Resume))
        .expect("resume");
    assert!(
        unanswered.is_err(),
        "no token, no grant: the counter does not answer: {unanswered:?}"
    );
    for master in cluster.masters() {
        assert!(
            !holds_key(master.server_port(), LOCK),
            "the acquire that found no token undid its keys"
        );
    }
    runtime
        .block_on(counter.apply(ServerAction::Kill))
        .expect("kill");
    runtime
        .block_on(counter.apply(ServerAction::Start))
        .expect("restart");
    let c_token = granted_retrying(&runtime, &*lock, OwnerToken(0xc), "c");
    assert!(
        c_token > b_token,
        "the counter kept its count across its restart ({b_token}, then {c_token})"
    );
}

/// The control for the counter's persistence: the same masters with a counter that keeps
/// nothing on disk (a plain private Redis) hand out token 1 again after its restart, which a
/// fenced store would refuse as older, or admit for the wrong holder.
#[test]
fn redlock_fence_counter_without_persistence_starts_again_after_its_restart() {
    let Some(cluster) = cluster("redlock_volatile_counter", "nodes=3") else {
        return;
    };
    let Some(counter) = support::private_server("redlock_volatile_counter", "private:redis") else {
        return;
    };
    let url = support::with_query(&cluster.client_url(), &format!("fence={}", counter.url()));
    let runtime = runtime();
    let connected = lock_from_url(&url).expect("a Redlock URL with a counter");
    runtime
        .block_on(connected.ping())
        .expect("masters and counter answer");
    let lock = connected.adapter;
    let mut tokens = Vec::new();
    for owner in [0xa, 0xb] {
        tokens.push(granted(
            runtime.block_on(lock.acquire(LOCK, OwnerToken(owner), TTL)),
            "a holder before the restart",
        ));
        assert_eq!(
            runtime.block_on(lock.release(LOCK, OwnerToken(owner))),
            Ok(Owned::Done)
        );
    }
    runtime
        .block_on(counter.apply(ServerAction::Kill))
        .expect("kill");
    runtime
        .block_on(counter.apply(ServerAction::Start))
        .expect("restart");
    tokens.push(granted_retrying(&runtime, &*lock, OwnerToken(0xc), "c"));
    assert_eq!(
        tokens,
        [1, 2, 1],
        "the counter forgot its count: c's token is not above b's"
    );
}

#[test]
fn redlock_cluster_leaves_no_process_or_directory_behind() {
    let Some(cluster) = cluster("redlock_teardown", "nodes=3&fence=counter") else {
        return;
    };
    let processes = cluster.processes();
    assert_eq!(processes.len(), 4, "three masters and the counter");
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
}

#[test]
fn redlock_on_a_healthy_cluster_proves_no_anomaly_under_worker_faults() {
    let Some(cluster) = cluster("redlock_worker_faults", "") else {
        return;
    };
    let Some(store) = support::private_server("redlock_worker_faults", "private:redis") else {
        return;
    };
    // Paused holders, lost replies and skewed worker clocks, three seeds: the masters keep
    // their keys for the whole TTL, so Redlock keeps its promises, and the grant numbers of
    // `fence=none` order the holders well enough for a fenced store in one process.
    let (lock, store) = support::adapters(&cluster.client_url(), &store.url());
    support::assert_clean_under_faults("redlock_worker_faults", lock, store);
}

/// Runs `plan` (w0 frozen past its lease while w1 takes the lock and writes) until the
/// scenario played out: w0 sent a write after w1's write with a newer token was acknowledged.
/// On a loaded machine a first acquire through six fresh connections can outlast the plan's
/// timing, and then nothing was stale to refuse; three tries are plenty. Returns the verdict
/// and history of the run where it did play out.
fn stale_write_played_out(
    adapters: &support::Adapters,
    plan: &fencer_run::plan::Plan,
) -> (fencer::Verdict, fencer::History) {
    let mut tried = Vec::new();
    for _ in 0..3 {
        let (verdict, history) = support::run_and_check(adapters, plan);
        let newer = history
            .events
            .iter()
            .find(|e| e.process == "w1" && e.is(EventType::Ok, Op::Write))
            .map(|e| (e.time_ns, e.token));
        let stale_sent = newer.is_some_and(|(acked_ns, newer_token)| {
            history.events.iter().any(|e| {
                e.process == "w0"
                    && e.is(EventType::Invoke, Op::Write)
                    && e.time_ns > acked_ns
                    && e.token < newer_token
            })
        });
        if stale_sent {
            return (verdict, history);
        }
        let calls: Vec<String> = history
            .events
            .iter()
            .filter(|e| e.process == "w0" || e.process == "w1")
            .map(|e| {
                let error = e.error.as_deref().unwrap_or("");
                format!(
                    "{}ms {} {:?} {:?} {error}",
                    e.time_ns / 1_000_000,
                    e.process,
                    e.kind,
                    e.f
                )
            })
            .collect();
        tried.push(format!("{}: {calls:?}", verdict.summary_line()));
    }
    panic!("w0's stale write never followed w1's newer one: {tried:?}");
}

#[test]
fn redlock_fence_counter_lets_a_fenced_store_refuse_a_paused_holder_the_unfenced_one_admits() {
    let Some(cluster) = cluster("redlock_stale_write", "fence=counter") else {
        return;
    };
    let Some(store) = support::private_server("redlock_stale_write", "private:redis") else {
        return;
    };
    let (fenced, unfenced) = support::fenced_and_unfenced(&cluster.client_url(), &store.url());
    let plan = support::stale_write_plan();

    let (verdict, history) = stale_write_played_out(&fenced, &plan);
    assert_eq!(
        verdict.validity,
        Validity::Valid,
        "{}",
        verdict.summary_line()
    );
    assert!(
        history.events.iter().any(|e| e.process == "w0"
            && e.is(EventType::Fail, Op::Write)
            && e.error.as_deref() == Some("rejected")),
        "the fenced store refuses w0's write: the counter's token for w1 is newer"
    );
    let (verdict, _) = stale_write_played_out(&unfenced, &plan);
    assert!(
        verdict.anomaly_counts.contains_key("stale-write-accepted"),
        "the unfenced store accepts w0's stale write and is caught: {}",
        verdict.summary_line()
    );
}
