//! A private three-member ZooKeeper ensemble fencer starts itself (`private:zookeeper3`):
//! it forms a quorum with one leader, grants locks through any member (and whole runs through
//! it show no anomaly, while the broken release is caught), keeps the lock service and mutual
//! exclusion when its leader is killed or cut off from the majority, and leaves no JVM,
//! directory or network namespace behind. Three JVMs start slowly and two cores are shared, so the tests take turns.

#![cfg(feature = "zookeeper")]

mod support;

use std::cell::{Cell, RefCell};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fencer::{Acquired, CallError, FencedStore, LockService, Owned, OwnerToken, Written};
use fencer_backends::{
    ZookeeperConnection, ZookeeperLock, ZookeeperLockRules, ZookeeperStore, ZookeeperStoreRules,
};
use fencer_nemesis::ServerAction;
use fencer_run::real::unique_tag;
use fencer_servers::{StartedCluster, Zookeeper3Cluster, zookeeper3};
use support::stale_release_plan;

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
        // Built as a run builds it, from the cluster's URL.
        let holder = fencer_backends::registry::lock_from_url(&url).unwrap();
        holder.ping().await.unwrap();
        let holder = holder.adapter;
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
    // Whole runs through the ensemble: the reference adapters prove no anomaly under faults,
    // and a release that deletes whoever holds the lock is caught.
    let (lock, store) = support::adapters(&url, &url);
    support::assert_clean_under_faults("zookeeper3_reference_adapters", lock, store);
    let (reference, broken) = support::safe_and_unsafe_release(&url);
    support::assert_unsafe_release_is_caught(&reference, &broken, &stale_release_plan(), 3);
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
        let Acquired::Granted { fencing_token } = granted else {
            panic!("{granted:?}");
        };
        lease.confirmed(sent, ttl);

        // The store's one session over the ensemble, and a fence it holds.
        let store = ZookeeperStore::new(
            Arc::new(ZookeeperConnection::open(&url).unwrap()),
            ZookeeperStoreRules::Fenced,
        );
        let key = format!("fencer/{}/register", unique_tag(0));
        let written = store.write(&key, 10, "w10", "before").await.unwrap();
        assert_eq!(written, Written::Applied);

        let nodes = cluster.nodes();
        let node = nodes.iter().find(|node| node.name == old).unwrap();
        let killed_at = Instant::now();
        node.faults.apply(ServerAction::Kill).await.unwrap();
        // Whichever member the store's session was on, its connection breaks now: the
        // session must move to a surviving member.
        for survivor in nodes.iter().filter(|node| node.name != old) {
            survivor.faults.apply(ServerAction::Cut).await.unwrap();
        }
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

        // The fence outlived the leader: an older token is refused, a newer one applies.
        let started = Instant::now();
        let stale = loop {
            match store.write(&key, 9, "w9", "stale").await {
                Ok(written) => break written,
                Err(error) if started.elapsed() > Duration::from_secs(20) => {
                    panic!("the store never failed over: {error}")
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        };
        assert_eq!(stale, Written::Rejected { current_token: 10 });
        let written = store.write(&key, 11, "w11", "after").await.unwrap();
        assert_eq!(written, Written::Applied);
        assert_eq!(
            store.read(&key).await.unwrap().value.as_deref(),
            Some("after")
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
        // Its data directory kept the zxids: tokens go on rising past the first holder's.
        let Acquired::Granted {
            fencing_token: later,
        } = granted
        else {
            panic!("{granted:?}");
        };
        assert!(later > fencing_token, "{later} after {fencing_token}");
        eprintln!(
            "restarted {old} serves locks {} ms after its start",
            started.elapsed().as_millis()
        );
    });
    assert_torn_down(cluster);
}

/// Milliseconds from `from` to `to` (negative when `to` comes first), for the report lines.
fn ms_between(from: Instant, to: Instant) -> i128 {
    if to >= from {
        (to - from).as_millis() as i128
    } else {
        -((from - to).as_millis() as i128)
    }
}

/// Cuts the leader off from the other two. A client whose session lives on the old leader
/// alone keeps renewing; a rival on the majority waits for the lock. ZooKeeper's promise:
/// the cut-off leader commits no write, the majority elects a new leader, and the holder's
/// lease is over — its renewals refused — before the majority grants the lock to the rival.
#[test]
fn zookeeper3_cut_off_leader_serves_no_write_and_its_client_loses_the_lock_to_the_majority() {
    let _turn = ONE_ENSEMBLE.lock().unwrap_or_else(|p| p.into_inner());
    let Some(cluster) = ensemble("zookeeper3_partition") else {
        return;
    };
    let ttl = Duration::from_secs(1);
    let name = format!("fencer/{}/partition", unique_tag(0));
    let (first, second) = (OwnerToken(1), OwnerToken(2));
    let runtime = fencer_harness::runtime::real_runtime().unwrap();
    runtime.block_on(async {
        let old = leader_other_than(&cluster, None, Duration::from_secs(5))
            .await
            .expect("a leader");
        let others: Vec<String> = cluster
            .cluster_faults()
            .nodes()
            .into_iter()
            .filter(|node| *node != old)
            .collect();
        let minority_url = cluster.url_of(&[&old]).unwrap();
        let majority_url = cluster.url_of(&[&others[0], &others[1]]).unwrap();
        let holder = reference_lock(&minority_url);
        let rival = reference_lock(&majority_url);
        let writer = reference_lock(&minority_url);
        let mut lease = Lease::default();
        let sent = Instant::now();
        let granted = holder.acquire(&name, first, ttl).await.unwrap();
        assert!(matches!(granted, Acquired::Granted { .. }), "{granted:?}");
        lease.confirmed(sent, ttl);

        let faults = cluster.cluster_faults();
        let cut_at = Instant::now();
        faults
            .partition(&[vec![old.clone()], others.clone()])
            .await
            .unwrap();
        // Four clients at once, each at its own pace (a call to the cut-off member may take
        // its whole deadline), until the majority has a leader and has granted the lock.
        let watch_until = cut_at + Duration::from_secs(15);
        let rival_granted: Cell<Option<Instant>> = Cell::new(None);
        let new_leader: RefCell<Option<(String, Instant)>> = RefCell::new(None);
        let done = || {
            Instant::now() >= watch_until
                || (rival_granted.get().is_some() && new_leader.borrow().is_some())
        };
        let lease = RefCell::new(lease);
        let (renewals_after_cut, renewed_after_rival, minority_writes) =
            (Cell::new(0u32), Cell::new(false), Cell::new(0u32));
        let renewing = async {
            while !done() {
                let sent = Instant::now();
                let given_away = rival_granted.get().is_some();
                match holder.renew(&name, first, ttl).await {
                    Ok(Owned::Done) => {
                        lease.borrow_mut().confirmed(sent, ttl);
                        renewals_after_cut.set(renewals_after_cut.get() + 1);
                        renewed_after_rival.set(renewed_after_rival.get() || given_away);
                    }
                    Ok(Owned::NotOwner) => {
                        lease.borrow_mut().lost_at.get_or_insert_with(Instant::now);
                    }
                    Err(_) => {}
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        // Writes through the cut-off member: each a new session and node, which need a quorum.
        let writing = async {
            while !done() {
                let fresh = format!("fencer/{}/minority-write", unique_tag(0));
                if let Ok(Acquired::Granted { .. }) =
                    writer.acquire(&fresh, OwnerToken(3), ttl).await
                {
                    minority_writes.set(minority_writes.get() + 1);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        let contending = async {
            while !done() {
                if rival_granted.get().is_none() {
                    if let Ok(Acquired::Granted { .. }) = rival.acquire(&name, second, ttl).await {
                        rival_granted.set(Some(Instant::now()));
                    }
                } else if let Err(error) = rival.renew(&name, second, ttl).await {
                    eprintln!("the rival's renew failed: {error}");
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            // At once: the other clients may still be waiting out a call to the cut-off member.
            match rival_granted.get() {
                Some(_) => Some(rival.release(&name, second).await),
                None => None,
            }
        };
        let watching = async {
            while !done() {
                if new_leader.borrow().is_none()
                    && let Some(leader) = faults.leader().await.unwrap()
                    && leader != old
                {
                    *new_leader.borrow_mut() = Some((leader, Instant::now()));
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        let ((), (), released, ()) = tokio::join!(renewing, writing, contending, watching);
        let lease = lease.into_inner();
        let (leader, elected_at) = new_leader
            .into_inner()
            .expect("the majority elects a leader");
        assert!(
            others.contains(&leader),
            "{leader} leads, not one of {others:?}"
        );
        let granted_at = rival_granted
            .get()
            .expect("the majority grants the lock once the lease ends");
        let valid_until = lease.valid_until.unwrap();
        eprintln!(
            "cut {old} off: {leader} seen leading at +{} ms; the holder renewed through {old} \
             {} times, its lease valid until +{} ms; renewals refused (not owner) from {}; \
             the rival got the lock at +{} ms ({} ms after the holder's lease ended); \
             writes through {old} that succeeded: {}",
            ms_between(cut_at, elected_at),
            renewals_after_cut.get(),
            ms_between(cut_at, valid_until),
            lease.lost_at.map_or("never".into(), |at| format!(
                "+{} ms",
                ms_between(cut_at, at)
            )),
            ms_between(cut_at, granted_at),
            ms_between(valid_until, granted_at),
            minority_writes.get(),
        );
        assert_eq!(
            minority_writes.get(),
            0,
            "the cut-off leader committed writes"
        );
        assert!(
            !renewed_after_rival.get(),
            "the cut-off leader renewed a lease the majority had given away"
        );
        assert!(
            granted_at >= valid_until,
            "the rival got the lock {} ms before the holder's lease ended",
            ms_between(granted_at, valid_until)
        );

        // The rival held the lock through the majority until it released it.
        assert_eq!(released.map(Result::unwrap), Some(Owned::Done));

        // Healed, the old leader rejoins and serves again; through it, the holder learns its
        // lease is gone.
        faults.heal().await.unwrap();
        let healed_at = Instant::now();
        let served = loop {
            let fresh = format!("fencer/{}/healed", unique_tag(0));
            match writer.acquire(&fresh, OwnerToken(4), ttl).await {
                Ok(Acquired::Granted { .. }) => break true,
                _ if healed_at.elapsed() > Duration::from_secs(20) => break false,
                _ => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        };
        assert!(served, "{old} never served again after the heal");
        eprintln!(
            "healed: {old} serves writes again {} ms later",
            healed_at.elapsed().as_millis()
        );
        assert_eq!(
            holder.renew(&name, first, ttl).await.unwrap(),
            Owned::NotOwner
        );
    });
    assert_torn_down(cluster);
}
