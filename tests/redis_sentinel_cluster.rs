//! A Redis primary with two replicas and three sentinels that fencer starts itself
//! (`private:redis-sentinel`), each data node in a network namespace of its own behind its own
//! fault proxy, its sentinel beside it: locks go through the `redis-sentinel://` URL to the
//! primary, a killed primary is replaced and the adapter follows, a primary cut from its
//! replicas goes on granting while the others elect a new one, so two clients hold one lock
//! (Redis replicates asynchronously), and dropping the cluster leaves nothing behind.

#![cfg(feature = "redis")]

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use fencer::{Acquired, CallError, LockService, Owned, OwnerToken};
use fencer_backends::registry::lock_from_url;
use fencer_backends::{RedisConnection, RedisLock, RedisLockRules};
use fencer_harness::{EventType, Op};
use fencer_nemesis::{ServerAction, ServerFaults};
use fencer_run::drive::RunNames;
use fencer_run::real::{real_plan, run_real, unique_tag};
use fencer_servers::{SentinelCluster, StartedCluster};
use tokio::runtime::Runtime;

/// A lease long enough to outlive every step of a test.
const LONG_TTL: Duration = Duration::from_secs(30);

/// A started cluster, or `None` after the skip line.
fn cluster(test: &str) -> Option<SentinelCluster> {
    let started = Instant::now();
    let cluster = support::started_or_skipped(
        test,
        "a private Redis Sentinel cluster",
        "redis-server, iproute2 and iptables (and run as root)",
        fencer_servers::redis_sentinel::start(""),
    )?;
    eprintln!(
        "{test}: Redis Sentinel cluster ready in {} ms ({} ms inside start)",
        started.elapsed().as_millis(),
        cluster.started_in().as_millis()
    );
    Some(cluster)
}

/// A lock adapter on the cluster URL, with its connection for the primaries it used.
fn sentinel_lock(cluster: &SentinelCluster) -> (Arc<RedisConnection>, RedisLock) {
    sentinel_lock_at(&cluster.client_url())
}

/// A lock adapter on `url`, with its connection.
fn sentinel_lock_at(url: &str) -> (Arc<RedisConnection>, RedisLock) {
    let connection = Arc::new(RedisConnection::open(url).unwrap());
    let lock = RedisLock::new(Arc::clone(&connection), RedisLockRules::Reference);
    (connection, lock)
}

/// The lock service talking to data node `name` only, through its proxy.
fn lock_through(cluster: &SentinelCluster, name: &str) -> Arc<dyn LockService> {
    lock_from_url(&cluster.member(name).unwrap().url())
        .unwrap()
        .adapter
}

fn leader(runtime: &Runtime, cluster: &SentinelCluster) -> Option<String> {
    runtime.block_on(cluster.cluster_faults().leader()).unwrap()
}

/// Asserts that a replica leads once n1 is back, `first` having taken over from n1: the
/// sentinels may still move the lead between the replicas (a later epoch can promote the other
/// one), never back to the demoted n1.
fn assert_a_replica_leads(runtime: &Runtime, cluster: &SentinelCluster, first: &str) {
    let leading = leader(runtime, cluster);
    assert!(
        matches!(leading.as_deref(), Some("n2" | "n3")),
        "{leading:?} leads; {first} took over from n1 first"
    );
}

/// Polls `leader` until it names someone other than `old`, for at most 20 s; returns the new
/// one and how long it took.
fn new_leader(runtime: &Runtime, cluster: &SentinelCluster, old: &str) -> (String, Duration) {
    let started = Instant::now();
    loop {
        let now = leader(runtime, cluster);
        if let Some(new) = now.filter(|name| name != old) {
            return (new, started.elapsed());
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{old} still primary after {:?}",
            started.elapsed()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn granted(answer: &Result<Acquired, CallError>) -> Option<u64> {
    match answer {
        Ok(Acquired::Granted { fencing_token }) => Some(*fencing_token),
        _ => None,
    }
}

/// Repeats `call` every 100 ms until `done` accepts its answer, for at most 15 s.
fn eventually<'a, T>(
    runtime: &Runtime,
    mut call: impl FnMut() -> std::pin::Pin<Box<dyn std::future::Future<Output = T> + 'a>>,
    done: impl Fn(&T) -> bool,
) -> T {
    let started = Instant::now();
    loop {
        let answer = runtime.block_on(call());
        if done(&answer) || started.elapsed() > Duration::from_secs(15) {
            return answer;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn sentinel_cluster_starts_with_n1_primary_and_grants_through_the_sentinel_url() {
    let Some(cluster) = cluster("sentinel_start") else {
        return;
    };
    let runtime = fencer_harness::runtime::real_runtime().unwrap();
    assert_eq!(leader(&runtime, &cluster).as_deref(), Some("n1"));
    let names: Vec<String> = cluster.nodes().into_iter().map(|node| node.name).collect();
    assert_eq!(names, ["n1", "n2", "n3"]);
    assert_eq!(cluster.cluster_faults().nodes(), names);
    let url = cluster.client_url();
    assert!(url.starts_with("redis-sentinel://"), "{url}");
    assert_eq!(url.matches('@').count(), 3, "{url}");

    let (connection, lock) = sentinel_lock(&cluster);
    let first = runtime.block_on(lock.acquire("l", OwnerToken(1), LONG_TTL));
    assert!(granted(&first).is_some(), "{first:?}");
    let (_, other) = sentinel_lock(&cluster);
    let second = runtime.block_on(other.acquire("l", OwnerToken(2), LONG_TTL));
    assert!(matches!(second, Ok(Acquired::Busy)), "{second:?}");
    // The adapter went through n1's proxy: n1 holds the lease, under the same name.
    let direct =
        runtime.block_on(lock_through(&cluster, "n1").acquire("l", OwnerToken(3), LONG_TTL));
    assert!(matches!(direct, Ok(Acquired::Busy)), "{direct:?}");
    // A replica refuses the write: definitely not applied.
    let replica =
        runtime.block_on(lock_through(&cluster, "n2").acquire("m", OwnerToken(4), LONG_TTL));
    assert!(
        matches!(&replica, Err(CallError::NotApplied(why)) if why.contains("READONLY")),
        "{replica:?}"
    );
    let released = runtime.block_on(lock.release("l", OwnerToken(1)));
    assert!(matches!(released, Ok(Owned::Done)), "{released:?}");
    assert_eq!(connection.primaries_used().len(), 1);
    // One primary all along: the lock log is whole (the grant and the release).
    let log = runtime.block_on(lock.lock_log()).expect("a lock log");
    assert_eq!(log.len(), 2, "{log:?}");
    // One sentinel of three unreachable: the other two still make a majority.
    let first_sentinel = url
        .trim_start_matches("redis-sentinel://")
        .split(',')
        .next()
        .unwrap()
        .to_string();
    let with_dead_first = url.replacen(&first_sentinel, "127.0.0.1:1", 1);
    let (_, two_of_three) = sentinel_lock_at(&with_dead_first);
    let answer = runtime.block_on(two_of_three.acquire("l", OwnerToken(8), LONG_TTL));
    assert!(granted(&answer).is_some(), "{answer:?}");

    // A variant rides on the cluster URL: the unsafe release deletes another owner's lease.
    let unsafe_release = lock_from_url(&format!("{url}&variant=unsafe-release"))
        .unwrap()
        .adapter;
    let taken = runtime.block_on(lock.acquire("u", OwnerToken(6), LONG_TTL));
    assert!(granted(&taken).is_some(), "{taken:?}");
    let stolen = runtime.block_on(unsafe_release.release("u", OwnerToken(7)));
    assert!(matches!(stolen, Ok(Owned::Done)), "{stolen:?}");
    let description = cluster.describe();
    assert!(description.contains("sentinel pid"), "{description}");

    // A client partition of the primary's proxy bites the sentinel URL's calls.
    runtime
        .block_on(
            cluster
                .member("n1")
                .unwrap()
                .apply(ServerAction::Partition(Duration::from_secs(2))),
        )
        .unwrap();
    let (_, cut) = sentinel_lock(&cluster);
    let answer = runtime.block_on(async {
        tokio::time::timeout(
            Duration::from_millis(1_500),
            cut.acquire("c", OwnerToken(5), LONG_TTL),
        )
        .await
    });
    assert!(!matches!(answer, Ok(Ok(_))), "{answer:?}");
}

#[test]
fn sentinel_killed_primary_is_replaced_and_the_adapter_follows() {
    let Some(cluster) = cluster("sentinel_failover") else {
        return;
    };
    let runtime = fencer_harness::runtime::real_runtime().unwrap();
    let (connection, lock) = sentinel_lock(&cluster);
    let before = runtime.block_on(lock.acquire("before", OwnerToken(1), LONG_TTL));
    assert!(granted(&before).is_some(), "{before:?}");
    // Replication is asynchronous; let it reach the replicas before the kill.
    std::thread::sleep(Duration::from_millis(300));

    let n1 = cluster.member("n1").unwrap();
    runtime.block_on(n1.apply(ServerAction::Kill)).unwrap();
    let (new, took) = new_leader(&runtime, &cluster, "n1");
    eprintln!(
        "sentinel_failover: {new} replaced the killed n1 in {} ms",
        took.as_millis()
    );
    assert!(new == "n2" || new == "n3", "{new}");

    let during = eventually(
        &runtime,
        || Box::pin(lock.acquire("during", OwnerToken(2), LONG_TTL)),
        |answer| granted(answer).is_some(),
    );
    assert!(granted(&during).is_some(), "{during:?}");
    // The new primary has the lease granted on n1 before the kill.
    let seen = runtime.block_on(lock.acquire("before", OwnerToken(3), LONG_TTL));
    assert!(matches!(seen, Ok(Acquired::Busy)), "{seen:?}");
    let used = connection.primaries_used();
    assert_eq!(used.len(), 2, "{used:?}");
    // Two primaries: a failover may have lost acknowledged writes, so no log is offered.
    assert!(runtime.block_on(lock.lock_log()).is_none());

    // Restarted, n1 comes back empty and the sentinels make it a replica of the new primary.
    runtime.block_on(n1.apply(ServerAction::Start)).unwrap();
    let on_n1 = lock_through(&cluster, "n1");
    let demoted = eventually(
        &runtime,
        || Box::pin(on_n1.acquire("x", OwnerToken(4), LONG_TTL)),
        |answer| matches!(answer, Err(CallError::NotApplied(why)) if why.contains("READONLY")),
    );
    assert!(
        matches!(&demoted, Err(CallError::NotApplied(why)) if why.contains("READONLY")),
        "{demoted:?}"
    );
    assert_a_replica_leads(&runtime, &cluster, &new);
}

#[test]
fn sentinel_paused_primary_is_replaced_and_demoted_once_it_resumes() {
    let Some(cluster) = cluster("sentinel_pause") else {
        return;
    };
    let runtime = fencer_harness::runtime::real_runtime().unwrap();
    let (connection, lock) = sentinel_lock(&cluster);
    let before = runtime.block_on(lock.acquire("before", OwnerToken(1), LONG_TTL));
    assert!(granted(&before).is_some(), "{before:?}");
    std::thread::sleep(Duration::from_millis(300));

    let n1 = cluster.member("n1").unwrap();
    runtime.block_on(n1.apply(ServerAction::Pause)).unwrap();
    // A call to the paused n1 hangs until its caller gives up, as a run's call timeout does.
    let hung = runtime.block_on(async {
        tokio::time::timeout(
            Duration::from_millis(300),
            lock.acquire("before", OwnerToken(2), LONG_TTL),
        )
        .await
    });
    assert!(hung.is_err(), "{hung:?}");
    let (new, took) = new_leader(&runtime, &cluster, "n1");
    eprintln!(
        "sentinel_pause: {new} replaced the paused n1 in {} ms",
        took.as_millis()
    );
    // The call given up on sends the very next one back to the sentinels, to the new primary,
    // which has the lease.
    let seen = runtime.block_on(lock.acquire("before", OwnerToken(2), LONG_TTL));
    assert!(matches!(seen, Ok(Acquired::Busy)), "{seen:?}");
    assert_eq!(connection.primaries_used().len(), 2);

    // Resumed, n1 still believes it is primary until the sentinels reconfigure it.
    runtime.block_on(n1.apply(ServerAction::Resume)).unwrap();
    let on_n1 = lock_through(&cluster, "n1");
    let demoted = eventually(
        &runtime,
        || Box::pin(on_n1.acquire("x", OwnerToken(3), LONG_TTL)),
        |answer| matches!(answer, Err(CallError::NotApplied(why)) if why.contains("READONLY")),
    );
    assert!(
        matches!(&demoted, Err(CallError::NotApplied(why)) if why.contains("READONLY")),
        "{demoted:?}"
    );
    assert_a_replica_leads(&runtime, &cluster, &new);
}

#[test]
fn sentinel_failover_of_a_primary_cut_from_its_replicas_gives_one_lock_two_holders() {
    let Some(cluster) = cluster("sentinel_split_brain") else {
        return;
    };
    let runtime = fencer_harness::runtime::real_runtime().unwrap();
    let (first_connection, first) = sentinel_lock(&cluster);
    // The first client finds n1 while every sentinel still names it.
    let warm = runtime.block_on(first.acquire("warm", OwnerToken(1), LONG_TTL));
    assert!(granted(&warm).is_some(), "{warm:?}");

    // n1 and its sentinel are cut from the rest; clients still reach n1.
    let faults = cluster.cluster_faults();
    let rest = vec!["n2".to_string(), "n3".to_string()];
    runtime
        .block_on(faults.partition(&[vec!["n1".to_string()], rest.clone()]))
        .unwrap();
    let held = runtime.block_on(first.acquire("split", OwnerToken(1), LONG_TTL));
    let first_token = granted(&held).unwrap_or_else(|| panic!("{held:?}"));

    let (new, took) = new_leader(&runtime, &cluster, "n1");
    eprintln!(
        "sentinel_split_brain: {new} replaced the isolated n1 in {} ms",
        took.as_millis()
    );
    assert!(rest.contains(&new), "{new}");

    // A second client asks the sentinels, gets the new primary, which never saw the grant.
    let (second_connection, second) = sentinel_lock(&cluster);
    let stolen = eventually(
        &runtime,
        || Box::pin(second.acquire("split", OwnerToken(2), LONG_TTL)),
        |answer| granted(answer).is_some(),
    );
    let second_token = granted(&stolen).unwrap_or_else(|| panic!("{stolen:?}"));
    // Meanwhile the first client still holds the lock on n1, which still thinks it is primary.
    let renewed = runtime.block_on(first.renew("split", OwnerToken(1), LONG_TTL));
    assert!(matches!(renewed, Ok(Owned::Done)), "{renewed:?}");
    eprintln!(
        "sentinel_split_brain: two holders of `split`: owner 1 on n1 (token {first_token}), \
         owner 2 on {new} (token {second_token})"
    );
    assert_eq!(first_connection.primaries_used().len(), 1);
    assert_eq!(
        second_connection.primaries_used(),
        [cluster.member(&new).unwrap().server_address().to_string()]
    );

    // Healed, n1 is demoted and loses its grant: the first client learns it is no owner.
    runtime.block_on(faults.heal()).unwrap();
    let lost = eventually(
        &runtime,
        || Box::pin(first.renew("split", OwnerToken(1), LONG_TTL)),
        |answer| matches!(answer, Ok(Owned::NotOwner)),
    );
    assert!(matches!(lost, Ok(Owned::NotOwner)), "{lost:?}");
}

#[test]
fn sentinel_dropped_cluster_leaves_no_process_namespace_interface_or_rule() {
    let Some(cluster) = cluster("sentinel_teardown") else {
        return;
    };
    let mut pids: Vec<u32> = ["n1", "n2", "n3"]
        .iter()
        .map(|name| cluster.member(name).unwrap().pid().unwrap())
        .collect();
    let sentinels: Vec<u32> = cluster.sentinel_pids().into_iter().flatten().collect();
    assert_eq!(sentinels.len(), 3);
    pids.extend(&sentinels);
    for pid in &pids {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
        assert!(comm.starts_with("redis-"), "{pid}: {comm}");
    }
    let namespaces = cluster.lab().namespaces();
    let links = cluster.lab().links();
    let faults = cluster.cluster_faults();
    drop(cluster);
    for pid in &pids {
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "redis process {pid} outlived its cluster"
        );
    }
    let listed = |args: &[&str]| {
        let out = std::process::Command::new(args[0])
            .args(&args[1..])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let netns = listed(&["ip", "netns", "list"]);
    let link = listed(&["ip", "-o", "link", "show"]);
    for namespace in &namespaces {
        assert!(!netns.contains(namespace.as_str()), "{namespace} remains");
    }
    for name in &links {
        assert!(!link.contains(&format!(" {name}:")) && !link.contains(&format!(" {name}@")));
    }
    assert!(!listed(&["iptables", "-S"]).contains("FENCER"));
    let runtime = fencer_harness::runtime::real_runtime().unwrap();
    let late = runtime.block_on(faults.heal());
    assert!(late.is_err_and(|error| error.0.contains("stopped")));
    assert!(runtime.block_on(faults.leader()).is_err());
}

/// Three workers, one lock, leases of 1 s renewed every 333 ms: what both runs below use.
fn run_settings(ops: usize) -> fencer::Settings {
    fencer::Settings {
        nemesis: Default::default(),
        ttl_ns: 1_000_000_000,
        renew_every_ns: 333_000_000,
        call_timeout_ns: 500_000_000,
        ..support::real_settings(0, 3, ops)
    }
}

#[test]
fn sentinel_runs_are_valid_when_quiet_and_caught_across_a_failover_of_a_cut_off_primary() {
    let Some(cluster) = cluster("sentinel_runs") else {
        return;
    };
    let url = cluster.client_url();
    let plan = real_plan(&run_settings(8));
    let (lock, store) = support::adapters(&url, &url);
    let started = Instant::now();
    let quiet = run_real(&plan, lock, store, RunNames::tagged(&unique_tag(0))).unwrap();
    eprintln!(
        "sentinel_runs: quiet run of {} events in {} ms",
        quiet.events.len(),
        started.elapsed().as_millis()
    );
    let verdict = support::assert_not_invalid(&quiet);
    assert!(
        quiet
            .events
            .iter()
            .any(|e| e.is(EventType::Ok, Op::Acquire)),
        "{}",
        verdict.summary_line()
    );

    // n1 is cut from its replicas while it grants; once the others have promoted one of them,
    // the clients' connections to n1 are cut and they follow the sentinels to the new primary,
    // which never saw n1's last grants.
    let plan = real_plan(&run_settings(50));
    let (lock, store) = support::adapters(&url, &url);
    let faults = cluster.cluster_faults();
    let n1 = cluster.member("n1").unwrap();
    let (history, new) = std::thread::scope(|scope| {
        let nemesis = scope.spawn(|| {
            let runtime = fencer_harness::runtime::real_runtime().unwrap();
            std::thread::sleep(Duration::from_millis(500));
            runtime
                .block_on(faults.partition(&[
                    vec!["n1".to_string()],
                    vec!["n2".to_string(), "n3".to_string()],
                ]))
                .unwrap();
            let (new, took) = new_leader(&runtime, &cluster, "n1");
            runtime.block_on(n1.apply(ServerAction::Cut)).unwrap();
            eprintln!(
                "sentinel_runs: {new} replaced n1 in {} ms",
                took.as_millis()
            );
            new
        });
        let history = run_real(&plan, lock, store, RunNames::tagged(&unique_tag(1))).unwrap();
        (history, nemesis.join().unwrap())
    });
    runtime_heal(&cluster);
    assert_ne!(new, "n1");
    // Both ends of the split granted the lock under the same counter: the checker says so
    // from the replies alone (neither log is offered across a failover).
    let verdict = fencer::check(&history);
    eprintln!("sentinel_runs: split brain: {}", verdict.summary_line());
    assert_eq!(
        verdict.validity,
        fencer::Validity::Invalid,
        "{}",
        verdict.summary_line()
    );
}

fn runtime_heal(cluster: &SentinelCluster) {
    let runtime = fencer_harness::runtime::real_runtime().unwrap();
    runtime.block_on(cluster.cluster_faults().heal()).unwrap();
}
