//! A three-member etcd cluster fencer starts itself (`private:etcd3`), each member in a network
//! namespace of its own behind its own fault proxy: locks are shared by every member, a
//! partition that isolates the leader gets the majority a new leader while the isolated member
//! grants nothing, a killed and restarted member rejoins, the multi-member client URL fails over,
//! and dropping the cluster leaves nothing behind.

#![cfg(feature = "etcd")]

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use fencer::Settings;
use fencer::{Acquired, CallError, LockService, Owned, OwnerToken};
use fencer_backends::EtcdConnection;
use fencer_backends::registry::lock_from_url;
use fencer_harness::{EventType, Op};
use fencer_nemesis::{ServerAction, ServerFaults};
use fencer_run::drive::RunNames;
use fencer_run::real::{real_plan, run_real, unique_tag};
use fencer_servers::{Etcd3Cluster, StartedCluster};
use tokio::runtime::Runtime;

/// Leases of 1 s: etcd's minimum with the cluster's 500 ms election timeout.
const TTL: Duration = Duration::from_secs(1);

/// A started cluster, or `None` after the skip line.
fn cluster(test: &str) -> Option<Etcd3Cluster> {
    let started = Instant::now();
    let cluster = support::started_or_skipped(
        test,
        "a private etcd cluster",
        "etcd-server, iproute2 and iptables (and run as root)",
        fencer_servers::etcd3::start(""),
    )?;
    eprintln!(
        "{test}: etcd cluster ready in {} ms ({} ms inside start)",
        started.elapsed().as_millis(),
        cluster.started_in().as_millis()
    );
    Some(cluster)
}

/// The lock service talking to member `name` only, through its proxy.
fn lock_through(cluster: &Etcd3Cluster, name: &str) -> Arc<dyn LockService> {
    lock_from_url(&cluster.member(name).unwrap().url())
        .unwrap()
        .adapter
}

/// The leader the cluster names now.
fn leader(runtime: &Runtime, cluster: &Etcd3Cluster) -> Option<String> {
    runtime.block_on(cluster.cluster_faults().leader()).unwrap()
}

/// Polls `leader` until `wanted` accepts its answer, for at most `limit`; returns the answer
/// and how long it took.
fn leader_when(
    runtime: &Runtime,
    cluster: &Etcd3Cluster,
    limit: Duration,
    wanted: impl Fn(&Option<String>) -> bool,
) -> (Option<String>, Duration) {
    let started = Instant::now();
    loop {
        let now = leader(runtime, cluster);
        if wanted(&now) || started.elapsed() > limit {
            return (now, started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The leader id each member reports itself, asked through its proxy.
fn reported_leaders(runtime: &Runtime, cluster: &Etcd3Cluster) -> Vec<Option<String>> {
    ["n1", "n2", "n3"]
        .iter()
        .map(|name| {
            let connection = EtcdConnection::open(&cluster.member(name).unwrap().url()).unwrap();
            runtime
                .block_on(connection.post("/v3/maintenance/status", &serde_json::json!({})))
                .ok()
                .and_then(|status| status.get("leader")?.as_str().map(str::to_string))
        })
        .collect()
}

fn granted(answer: &Result<Acquired, CallError>) -> Option<u64> {
    match answer {
        Ok(Acquired::Granted { fencing_token }) => Some(*fencing_token),
        _ => None,
    }
}

#[test]
fn etcd3_starts_and_a_lock_taken_through_one_member_is_held_through_every_other() {
    let Some(cluster) = cluster("etcd3_start") else {
        return;
    };
    let runtime = fencer_harness::runtime::real_runtime().unwrap();
    let leader = leader(&runtime, &cluster);
    assert!(
        matches!(leader.as_deref(), Some("n1" | "n2" | "n3")),
        "{leader:?}"
    );
    let names: Vec<String> = cluster.nodes().into_iter().map(|node| node.name).collect();
    assert_eq!(names, ["n1", "n2", "n3"]);
    assert_eq!(cluster.cluster_faults().nodes(), names);

    let first = runtime.block_on(lock_through(&cluster, "n1").acquire("l", OwnerToken(1), TTL));
    let first_token = granted(&first).unwrap_or_else(|| panic!("{first:?}"));
    for member in ["n2", "n3"] {
        let other =
            runtime.block_on(lock_through(&cluster, member).acquire("l", OwnerToken(2), TTL));
        assert!(matches!(other, Ok(Acquired::Busy)), "{member}: {other:?}");
    }
    let released = runtime.block_on(lock_through(&cluster, "n3").release("l", OwnerToken(1)));
    assert!(matches!(released, Ok(Owned::Done)), "{released:?}");

    // The cluster URL names every member's proxy; a dead first address is skipped within the
    // same call, since nothing was sent to it.
    let url = cluster.client_url();
    assert_eq!(url.matches(',').count(), 2, "{url}");
    let with_dead_first = url.replacen("etcd://", "etcd://127.0.0.1:1,", 1);
    let next = runtime.block_on(lock_from_url(&with_dead_first).unwrap().adapter.acquire(
        "l",
        OwnerToken(3),
        TTL,
    ));
    let next_token = granted(&next).unwrap_or_else(|| panic!("{next:?}"));
    assert!(next_token > first_token);
    let description = cluster.describe();
    assert!(description.contains("n3: Etcd pid"), "{description}");
}

#[test]
fn etcd3_client_url_leaves_a_call_lost_after_sending_unknown_and_starts_the_next_elsewhere() {
    let Some(cluster) = cluster("etcd3_failover") else {
        return;
    };
    let runtime = fencer_harness::runtime::real_runtime().unwrap();
    let connection = EtcdConnection::open(&cluster.client_url()).unwrap();
    let first = cluster.member("n1").unwrap();
    // n1 gets the put and applies it, but its reply is held, then the connection is cut.
    runtime
        .block_on(first.apply(ServerAction::DelayReplies(Duration::from_secs(2))))
        .unwrap();
    let put = serde_json::json!({ "key": "ZmVuY2VyLWs=", "value": "MQ==" }); // fencer-k = 1
    let answer = std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(300));
            let runtime = fencer_harness::runtime::real_runtime().unwrap();
            runtime.block_on(first.apply(ServerAction::Cut)).unwrap();
        });
        runtime.block_on(connection.post("/v3/kv/put", &put))
    });
    // Not retried on n2: the put may have been applied (it was), so the call is unknown.
    assert!(matches!(answer, Err(CallError::Unknown(_))), "{answer:?}");
    // The next call goes to n2 at once (n1 still holds replies for 2 s) and sees the put.
    let started = Instant::now();
    let read = runtime
        .block_on(connection.post(
            "/v3/kv/range",
            &serde_json::json!({ "key": "ZmVuY2VyLWs=" }),
        ))
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(read["kvs"][0]["value"], "MQ==", "{read}");
}

#[test]
fn etcd3_partitioned_leader_is_replaced_and_grants_nothing_while_the_majority_keeps_its_lease() {
    let Some(cluster) = cluster("etcd3_partition") else {
        return;
    };
    let runtime = fencer_harness::runtime::real_runtime().unwrap();
    let old = leader(&runtime, &cluster).expect("a leader after start");
    let majority: Vec<String> = ["n1", "n2", "n3"]
        .iter()
        .filter(|name| **name != old)
        .map(|name| name.to_string())
        .collect();
    let holder = lock_through(&cluster, &majority[0]);
    let taken = runtime.block_on(holder.acquire("held", OwnerToken(1), TTL));
    assert!(granted(&taken).is_some(), "{taken:?}");

    let faults = cluster.cluster_faults();
    runtime
        .block_on(faults.partition(&[vec![old.clone()], majority.clone()]))
        .unwrap();
    let (new, took) = leader_when(&runtime, &cluster, Duration::from_secs(10), |now| {
        now.as_ref().is_some_and(|name| *name != old)
    });
    let new = new.unwrap_or_else(|| panic!("no new leader within {took:?}"));
    assert!(
        majority.contains(&new),
        "{new} leads, not one of {majority:?}"
    );
    eprintln!(
        "etcd3_partition: {new} replaced {old} in {} ms",
        took.as_millis()
    );

    // The holder renews through the majority all along, every 300 ms; the lease must outlive
    // several TTLs of partition, and the heal.
    let isolated = lock_through(&cluster, &old);
    let (healed, finished) = (AtomicBool::new(false), AtomicBool::new(false));
    let renewals = std::thread::scope(|scope| {
        let renewer = scope.spawn(|| {
            let runtime = fencer_harness::runtime::real_runtime().unwrap();
            let mut during_partition = Vec::new();
            while !finished.load(Ordering::Relaxed) {
                let renewed = runtime.block_on(holder.renew("held", OwnerToken(1), TTL));
                // A renewal racing the heal's re-election may fail: only those that ended
                // before the heal began count.
                if !healed.load(Ordering::Relaxed) {
                    during_partition.push(renewed);
                }
                std::thread::sleep(Duration::from_millis(300));
            }
            during_partition
        });
        let second = runtime.block_on(lock_through(&cluster, &majority[1]).acquire(
            "held",
            OwnerToken(2),
            TTL,
        ));
        assert!(matches!(second, Ok(Acquired::Busy)), "{second:?}");
        // The isolated old leader cannot commit: nothing it is asked succeeds.
        for lock in ["held", "free"] {
            let answer = runtime.block_on(async {
                tokio::time::timeout(
                    Duration::from_secs(2),
                    isolated.acquire(lock, OwnerToken(3), TTL),
                )
                .await
            });
            assert!(
                !matches!(answer, Ok(Ok(_))),
                "an isolated member answered {lock}: {answer:?}"
            );
        }

        healed.store(true, Ordering::Relaxed);
        runtime.block_on(faults.heal()).unwrap();
        let started = Instant::now();
        let agreed = loop {
            let reports = reported_leaders(&runtime, &cluster);
            if reports[0].is_some() && reports.iter().all(|report| *report == reports[0]) {
                break true;
            }
            if started.elapsed() > Duration::from_secs(10) {
                break false;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(agreed, "{:?}", reported_leaders(&runtime, &cluster));
        // Healed, the old leader sees the lease the majority kept.
        let after = runtime.block_on(isolated.acquire("held", OwnerToken(4), TTL));
        assert!(matches!(after, Ok(Acquired::Busy)), "{after:?}");
        finished.store(true, Ordering::Relaxed);
        renewer.join().unwrap()
    });
    assert!(renewals.len() >= 10, "{} renewals", renewals.len());
    assert!(
        renewals
            .iter()
            .all(|renewed| matches!(renewed, Ok(Owned::Done))),
        "{renewals:?}"
    );
}

#[test]
fn etcd3_killed_and_restarted_member_rejoins_and_the_cluster_keeps_granting() {
    let Some(cluster) = cluster("etcd3_restart") else {
        return;
    };
    let runtime = fencer_harness::runtime::real_runtime().unwrap();
    let victim = leader(&runtime, &cluster).expect("a leader after start");
    let node = cluster
        .nodes()
        .into_iter()
        .find(|node| node.name == victim)
        .unwrap();
    let whole = lock_from_url(&cluster.client_url()).unwrap().adapter;
    let before = runtime.block_on(whole.acquire("before", OwnerToken(1), Duration::from_secs(30)));
    let before_token = granted(&before).unwrap_or_else(|| panic!("{before:?}"));

    runtime
        .block_on(node.faults.apply(ServerAction::Kill))
        .unwrap();
    // Through the cluster URL, calls move on from the dead member (an unknown call or two on
    // the way) and the survivors elect a leader and grant.
    let started = Instant::now();
    let during = loop {
        let answer = runtime.block_on(whole.acquire("during", OwnerToken(2), TTL));
        if granted(&answer).is_some() || started.elapsed() > Duration::from_secs(15) {
            break answer;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(granted(&during).is_some(), "{during:?}");
    let (new, _) = leader_when(&runtime, &cluster, Duration::from_secs(10), |now| {
        now.as_ref().is_some_and(|name| *name != victim)
    });
    assert!(new.is_some_and(|name| name != victim));

    runtime
        .block_on(node.faults.apply(ServerAction::Start))
        .unwrap();
    // The restarted member kept its data dir: it catches up and sees both locks.
    let rejoined = lock_through(&cluster, &victim);
    let started = Instant::now();
    let seen = loop {
        let answer = runtime.block_on(rejoined.acquire("before", OwnerToken(3), TTL));
        if matches!(answer, Ok(Acquired::Busy)) || started.elapsed() > Duration::from_secs(15) {
            break answer;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(matches!(seen, Ok(Acquired::Busy)), "{seen:?}");
    let fresh = runtime.block_on(rejoined.acquire("after", OwnerToken(4), TTL));
    let fresh_token = granted(&fresh).unwrap_or_else(|| panic!("{fresh:?}"));
    assert!(fresh_token > before_token);
}

#[test]
fn etcd3_dropped_cluster_leaves_no_process_namespace_interface_or_rule() {
    let Some(cluster) = cluster("etcd3_teardown") else {
        return;
    };
    let pids: Vec<u32> = ["n1", "n2", "n3"]
        .iter()
        .map(|name| cluster.member(name).unwrap().pid().unwrap())
        .collect();
    let namespaces = cluster.lab().namespaces();
    let links = cluster.lab().links();
    let faults = cluster.cluster_faults();
    for pid in &pids {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
        assert_eq!(comm.trim(), "etcd");
    }
    drop(cluster);
    for pid in &pids {
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "etcd {pid} outlived its cluster"
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
    // The rules lived in the members' namespaces; the root's firewall never had any.
    assert!(!listed(&["iptables", "-S"]).contains("FENCER"));
    // A fault handle that outlived the cluster says so instead of acting.
    let runtime = fencer_harness::runtime::real_runtime().unwrap();
    let late = runtime.block_on(faults.heal());
    assert!(late.is_err_and(|error| error.0.contains("stopped")));
}

#[test]
fn etcd3_reference_adapters_prove_no_anomaly_while_the_leader_is_partitioned_away() {
    let Some(cluster) = cluster("etcd3_run") else {
        return;
    };
    let url = cluster.client_url();
    let (lock, store) = support::adapters(&url, &url);
    let plan = real_plan(&Settings {
        nemesis: Default::default(),
        ttl_ns: 1_000_000_000,
        renew_every_ns: 333_000_000,
        call_timeout_ns: 500_000_000,
        ..support::real_settings(0, 3, 6)
    });
    let faults = cluster.cluster_faults();
    let (partitioned_at, healed_at) = (Duration::from_millis(1_000), Duration::from_millis(3_500));
    let started = Instant::now();
    let (history, old, new) = std::thread::scope(|scope| {
        let nemesis = scope.spawn(|| {
            let runtime = fencer_harness::runtime::real_runtime().unwrap();
            std::thread::sleep(partitioned_at);
            let old = runtime
                .block_on(faults.leader())
                .unwrap()
                .expect("a leader");
            let rest: Vec<String> = ["n1", "n2", "n3"]
                .iter()
                .filter(|name| **name != old)
                .map(|name| name.to_string())
                .collect();
            runtime
                .block_on(faults.partition(&[vec![old.clone()], rest]))
                .unwrap();
            std::thread::sleep(healed_at - partitioned_at);
            let new = runtime.block_on(faults.leader()).unwrap();
            runtime.block_on(faults.heal()).unwrap();
            (old, new)
        });
        let history = run_real(&plan, lock, store, RunNames::tagged(&unique_tag(0))).unwrap();
        let (old, new) = nemesis.join().unwrap();
        (history, old, new)
    });
    assert!(
        started.elapsed() > healed_at,
        "the run outlasted the partition"
    );
    assert!(
        new.as_ref().is_some_and(|new| *new != old),
        "{old} → {new:?}"
    );
    support::assert_not_invalid(&history);
    let grants = history
        .events
        .iter()
        .filter(|e| e.is(EventType::Ok, Op::Acquire))
        .count();
    assert!(grants >= 6, "{grants} grants");
}

#[test]
fn etcd3_release_without_owner_compare_is_caught_through_the_cluster() {
    let Some(cluster) = cluster("etcd3_unsafe_release") else {
        return;
    };
    // The stale-release scenario through the three members: the reference lock proves no
    // anomaly, the lock that deletes whoever holds the key is proved invalid.
    let (reference, broken) = support::safe_and_unsafe_release(&cluster.client_url());
    let plan = support::stretched(support::stale_release_plan(), 10, 3);
    support::assert_unsafe_release_is_caught(&reference, &broken, &plan, 2);
}
