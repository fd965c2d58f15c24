//! A private three-member ZooKeeper ensemble fencer starts itself (`private:zookeeper3`):
//! it forms a quorum with one leader, grants locks through any member, keeps the lock
//! service and mutual exclusion when its leader is killed, and leaves no JVM or directory
//! behind. Three JVMs start slowly and two cores are shared, so the tests take turns.

#![cfg(feature = "zookeeper")]

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fencer::{Acquired, CallError, LockService, Owned, OwnerToken};
use fencer_backends::{ZookeeperConnection, ZookeeperLock, ZookeeperLockRules};
use fencer_nemesis::ServerAction;
use fencer_run::real::unique_tag;
use fencer_servers::{StartedCluster, Zookeeper3Cluster, zookeeper3};

/// One ensemble at a time: three at once would be nine JVMs on two cores.
static ONE_ENSEMBLE: Mutex<()> = Mutex::new(());

/// A started ensemble, or `None` after the skip line when ZooKeeper is missing.
fn ensemble(test: &str) -> Option<Zookeeper3Cluster> {
    let cluster = support::started_or_skipped(
        test,
        "a private ZooKeeper ensemble",
        "zookeeper",
        zookeeper3::start(""),
    )?;
    eprintln!(
        "{test}: ensemble serving {} ms after its JVMs started",
        cluster.startup().as_millis()
    );
    Some(cluster)
}

fn reference_lock(url: &str) -> ZookeeperLock {
    let connection = Arc::new(ZookeeperConnection::open(url).expect("a zk:// URL"));
    ZookeeperLock::new(connection, ZookeeperLockRules::Reference)
}

/// The current leader, waiting (up to `within`) for one that is not `not`.
async fn leader_other_than(
    cluster: &Zookeeper3Cluster,
    not: Option<&str>,
    within: Duration,
) -> Option<String> {
    let faults = cluster.cluster_faults();
    let started = Instant::now();
    while started.elapsed() < within {
        if let Some(leader) = faults.leader().await.expect("srvr answers or not")
            && Some(leader.as_str()) != not
        {
            return Some(leader);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

/// Asserts that after the ensemble is dropped, none of its JVMs runs, and none of its
/// directories, network namespaces or interfaces exists.
fn assert_torn_down(cluster: Zookeeper3Cluster) {
    let pids: Vec<u32> = cluster.pids().into_iter().flatten().collect();
    let dirs = cluster.dirs();
    let namespaces = cluster.net_lab().namespaces();
    let links = cluster.net_lab().links();
    assert_eq!((dirs.len(), namespaces.len()), (3, 3));
    assert!(dirs.iter().all(|dir| dir.exists()));
    drop(cluster);
    for pid in pids {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // A reaped pid is gone; a zombie (state Z) would mean nobody waited for it.
        assert!(stat.is_empty(), "member pid {pid} still exists: {stat}");
    }
    for dir in dirs {
        assert!(!dir.exists(), "{} still exists", dir.display());
    }
    let ip = |args: &[&str]| {
        let output = std::process::Command::new("ip")
            .args(args)
            .output()
            .unwrap();
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
        )
    };
    let (_, listed) = ip(&["netns", "list"]);
    for namespace in namespaces {
        assert!(
            !listed.contains(&namespace),
            "{namespace} remains:\n{listed}"
        );
    }
    for link in links {
        assert!(!ip(&["link", "show", &link]).0, "interface {link} remains");
    }
}

#[test]
fn zookeeper3_starts_with_one_leader_grants_locks_through_any_member_and_tears_down() {
    let _turn = ONE_ENSEMBLE.lock().unwrap_or_else(|p| p.into_inner());
    let Some(cluster) = ensemble("zookeeper3_starts") else {
        return;
    };
    let names: Vec<String> = cluster.nodes().into_iter().map(|node| node.name).collect();
    assert_eq!(names, ["n1", "n2", "n3"]);
    assert_eq!(cluster.cluster_faults().nodes(), names);
    let url = cluster.client_url();
    assert_eq!(url.matches(',').count(), 2, "{url}");
    assert!(
        cluster.describe().contains("n3: Zookeeper pid"),
        "{}",
        cluster.describe()
    );
    let runtime = fencer_harness::runtime::real_runtime().unwrap();
    runtime.block_on(async {
        let leader = leader_other_than(&cluster, None, Duration::from_secs(5)).await;
        let leader = leader.expect("a serving ensemble has a leader");
        assert!(names.contains(&leader), "{leader}");

        // Held through the whole ensemble, seen as held through each member alone.
        let name = format!("fencer/{}/start", unique_tag(0));
        let ttl = Duration::from_secs(2);
        let holder = reference_lock(&url);
        let granted = holder.acquire(&name, OwnerToken(1), ttl).await.unwrap();
        let Acquired::Granted { fencing_token } = granted else {
            panic!("{granted:?}");
        };
        for (index, member) in names.iter().enumerate() {
            let rival = reference_lock(&cluster.url_of(&[member]).unwrap());
            let owner = OwnerToken(10 + index as u128);
            let busy = rival.acquire(&name, owner, ttl).await.unwrap();
            assert_eq!(busy, Acquired::Busy, "through {member}");
        }
        assert_eq!(
            holder.renew(&name, OwnerToken(1), ttl).await.unwrap(),
            Owned::Done
        );
        assert_eq!(
            holder.release(&name, OwnerToken(1)).await.unwrap(),
            Owned::Done
        );
        let next = reference_lock(&cluster.url_of(&[&names[2]]).unwrap());
        let again = next.acquire(&name, OwnerToken(2), ttl).await.unwrap();
        let Acquired::Granted {
            fencing_token: newer,
        } = again
        else {
            panic!("{again:?}");
        };
        assert!(newer > fencing_token, "{newer} after {fencing_token}");
        assert_eq!(
            next.release(&name, OwnerToken(2)).await.unwrap(),
            Owned::Done
        );
    });
    assert_torn_down(cluster);
}

/// What one client saw of its lease, on the test's clock.
#[derive(Debug, Default)]
struct Lease {
    /// When the last acquire or renew that the service confirmed was sent, plus the TTL: the
    /// holder may act on the lease until then.
    valid_until: Option<Instant>,
    /// When a renew first said the lease was gone.
    lost_at: Option<Instant>,
}

impl Lease {
    /// Records a confirmed grant or renew sent at `sent`.
    fn confirmed(&mut self, sent: Instant, ttl: Duration) {
        self.valid_until = Some(sent + ttl);
    }
}

#[test]
fn zookeeper3_leader_killed_a_new_leader_serves_and_no_two_hold_the_lock() {
    let _turn = ONE_ENSEMBLE.lock().unwrap_or_else(|p| p.into_inner());
    let Some(cluster) = ensemble("zookeeper3_leader_killed") else {
        return;
    };
    let url = cluster.client_url();
    let ttl = Duration::from_secs(2);
    let name = format!("fencer/{}/kill", unique_tag(0));
    let (first, second) = (OwnerToken(1), OwnerToken(2));
    let runtime = fencer_harness::runtime::real_runtime().unwrap();
    runtime.block_on(async {
        let old = leader_other_than(&cluster, None, Duration::from_secs(5))
            .await
            .expect("a leader");
        let holder = reference_lock(&url);
        let rival = reference_lock(&url);
        let mut lease = Lease::default();
        let sent = Instant::now();
        let granted = holder.acquire(&name, first, ttl).await.unwrap();
        assert!(matches!(granted, Acquired::Granted { .. }), "{granted:?}");
        lease.confirmed(sent, ttl);

        let node = cluster
            .nodes()
            .into_iter()
            .find(|node| node.name == old)
            .unwrap();
        let killed_at = Instant::now();
        node.faults.apply(ServerAction::Kill).await.unwrap();
        let new = leader_other_than(&cluster, Some(&old), Duration::from_secs(20))
            .await
            .expect("the two left elect a leader");
        eprintln!(
            "leader {old} killed: {new} leads {} ms later",
            killed_at.elapsed().as_millis()
        );

        // The holder renews, a rival tries: for 1.5 TTLs after the election, or until the
        // rival gets in. Whichever way the session went, never both at once.
        let mut rival_granted = None;
        let watch_until = Instant::now() + ttl + ttl / 2;
        while Instant::now() < watch_until && rival_granted.is_none() {
            if lease.lost_at.is_none() {
                let sent = Instant::now();
                match holder.renew(&name, first, ttl).await {
                    Ok(Owned::Done) => lease.confirmed(sent, ttl),
                    Ok(Owned::NotOwner) => lease.lost_at = Some(Instant::now()),
                    Err(CallError::Unknown(_) | CallError::NotApplied(_)) => {}
                }
            }
            match rival.acquire(&name, second, ttl).await {
                Ok(Acquired::Granted { .. }) => rival_granted = Some(Instant::now()),
                Ok(Acquired::Busy) | Err(_) => {}
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        if let Some(granted_at) = rival_granted {
            let valid_until = lease.valid_until.unwrap();
            assert!(
                granted_at >= valid_until,
                "the rival got the lock {} ms before the holder's lease ended",
                (valid_until - granted_at).as_millis()
            );
            assert_eq!(
                holder.renew(&name, first, ttl).await.unwrap(),
                Owned::NotOwner,
                "the holder renewed a lease the rival holds"
            );
        } else {
            assert!(
                lease.lost_at.is_none(),
                "{lease:?}: lost, yet nobody got in"
            );
            assert_eq!(holder.renew(&name, first, ttl).await.unwrap(), Owned::Done);
        }
        eprintln!(
            "after the kill: holder's session {}",
            if rival_granted.is_some() {
                "expired and the rival got the lock"
            } else {
                "survived the election"
            }
        );

        // The killed member comes back on its data directory and the service goes on.
        node.faults.apply(ServerAction::Start).await.unwrap();
        let fresh = format!("fencer/{}/after", unique_tag(0));
        let through_restarted = reference_lock(&cluster.url_of(&[&old]).unwrap());
        let started = Instant::now();
        let granted = loop {
            match through_restarted.acquire(&fresh, OwnerToken(3), ttl).await {
                Ok(granted) => break granted,
                Err(error) if started.elapsed() > Duration::from_secs(20) => {
                    panic!("the restarted {old} never served: {error}")
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        };
        assert!(matches!(granted, Acquired::Granted { .. }), "{granted:?}");
        eprintln!(
            "restarted {old} serves locks {} ms after its start",
            started.elapsed().as_millis()
        );
    });
    assert_torn_down(cluster);
}
