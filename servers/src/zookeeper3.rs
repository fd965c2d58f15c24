//! A private three-member ZooKeeper ensemble (`--lock private:zookeeper3`): one quorum, one
//! session service, so a lease outlives the loss of any one member and the nemesis can take the
//! leader away, or cut it off from the other two.
//!
//! Each member is a JVM (`QuorumPeerMain`) with its own `zoo.cfg`, `myid` and data directory,
//! in its own network namespace of a [`NetLab`] (so the links between members can be cut),
//! started as a [`ServerGuard`] and put behind its own fault proxy in the root namespace as a
//! [`PrivateServer`], so a member takes every fault a standalone private server takes (pause,
//! kill and restart keeping its data directory, client partition, dropped or delayed replies).
//! Adapters connect through the three proxies (`zk://p1,p2,p3`); the leader is read from each
//! member's `srvr` answer, straight from the member (never through its proxy, which a client
//! fault may have cut).

mod member;
mod srvr;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fencer_nemesis::{ClusterFaults, FaultFailed};

use crate::cluster::{ClusterNode, StartedCluster};
use crate::{LabLinks, NetLab, PrivateBackend, PrivateServer, ServerError, ServerGuard};
use member::{MEMBERS, Seat, lab_seats, log_tail, start_members, sweep_dead_dirs};
pub use member::{ZOOKEEPER3_MAX_SESSION_MS, ZOOKEEPER3_MIN_SESSION_MS, ZOOKEEPER3_TICK_MS};
use srvr::{Role, leading, roles};

/// How long the members may take, all together, to form a quorum and serve requests once
/// their client ports accept connections. Three cold JVMs on two busy cores are slow; an idle
/// machine takes about a second.
const QUORUM_TIMEOUT: Duration = Duration::from_secs(60);

/// Waits until every member serves (one leads, the others follow), within [`QUORUM_TIMEOUT`].
/// The members are asked from a thread of its own, with a runtime of its own, so a caller on a
/// runtime's thread can wait too.
fn wait_for_quorum(seats: &[Seat], guards: &[ServerGuard]) -> Result<(), ServerError> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| ask_until_quorum(seats, guards))
            .join()
            .unwrap_or_else(|_| Err(ServerError::Failed("the quorum wait panicked".into())))
    })
}

fn ask_until_quorum(seats: &[Seat], guards: &[ServerGuard]) -> Result<(), ServerError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| ServerError::Failed(format!("a tokio runtime: {error}")))?;
    let addrs: Vec<SocketAddr> = seats.iter().map(Seat::client_addr).collect();
    let started = Instant::now();
    loop {
        let roles = runtime.block_on(roles(&addrs));
        let serving = roles.iter().all(|role| *role != Role::Absent);
        if serving && leading(&roles).is_some() {
            return Ok(());
        }
        if started.elapsed() >= QUORUM_TIMEOUT {
            let states: Vec<String> = seats
                .iter()
                .zip(&roles)
                .zip(guards)
                .map(|((seat, role), guard)| {
                    format!(
                        "{} {role:?}{}",
                        seat.name(),
                        log_tail(&guard.dir().join("server.log"))
                    )
                })
                .collect();
            return Err(ServerError::Failed(format!(
                "the zookeeper3 members did not form a quorum within {QUORUM_TIMEOUT:?}: {}",
                states.join("; ")
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `zk://` through `hosts`, with the `private:zookeeper3?…` query (`variant=…`) passed on to
/// the adapter.
fn zk_url(hosts: &[String], query: &str) -> String {
    if query.is_empty() {
        format!("zk://{}", hosts.join(","))
    } else {
        format!("zk://{}?{query}", hosts.join(","))
    }
}

/// One member of a started ensemble.
#[derive(Debug)]
struct Member {
    seat: Seat,
    server: Arc<PrivateServer>,
    /// Its temporary directory (config, `myid`, data, log), removed with it.
    dir: PathBuf,
}

impl Member {
    /// `host:port` of its proxy, where adapters reach it.
    fn proxy_host(&self) -> String {
        format!("127.0.0.1:{}", self.server.proxy_port())
    }
}

/// A three-member ZooKeeper ensemble fencer started. Dropping it kills every member and
/// removes their directories.
#[derive(Debug)]
pub struct Zookeeper3Cluster {
    members: Vec<Member>,
    links: Arc<EnsembleLinks>,
    /// The `private:zookeeper3?…` query, passed on to the adapter's URL.
    query: String,
    /// How long the ensemble took from the first JVM's start to a serving quorum.
    startup: Duration,
    /// The members' namespaces. Last, so it goes once every member is dead.
    lab: Arc<NetLab>,
}

/// Starts a private three-member ensemble, each member in its own network namespace and
/// behind its own fault proxy; `query` (`variant=unsafe-release`) is passed on to the
/// adapter's URL. Returns once every member serves, or fails within 60 s (plus
/// each JVM's start) naming the member that did not come up. Blocks: from async code, call it
/// on the blocking pool.
pub fn start(query: &str) -> Result<Zookeeper3Cluster, ServerError> {
    if !Path::new("/usr/share/java/zookeeper.jar").exists() {
        return Err(ServerError::NotInstalled(
            "ZooKeeper is not installed (/usr/share/java/zookeeper.jar missing): \
             apt-get install zookeeper"
                .to_string(),
        ));
    }
    let lab = Arc::new(NetLab::new(&MEMBERS)?);
    sweep_dead_dirs(&std::env::temp_dir());
    let seats = lab_seats(&lab)?;
    let began = Instant::now();
    let guards = start_members(&lab, &seats)?;
    wait_for_quorum(&seats, &guards)?;
    let startup = began.elapsed();
    let mut members = Vec::with_capacity(seats.len());
    for (seat, guard) in seats.iter().zip(guards) {
        let dir = guard.dir().to_path_buf();
        let server = PrivateServer::behind_proxy(PrivateBackend::Zookeeper, query, guard)?;
        members.push(Member {
            seat: *seat,
            server: Arc::new(server),
            dir,
        });
    }
    let links = Arc::new(EnsembleLinks {
        names: seats.iter().map(Seat::name).collect(),
        addrs: seats.iter().map(Seat::client_addr).collect(),
        links: LabLinks::new(&lab, "the zookeeper3 ensemble"),
    });
    Ok(Zookeeper3Cluster {
        members,
        links,
        query: query.to_string(),
        startup,
        lab,
    })
}

impl Zookeeper3Cluster {
    /// How long the start took, from launching the JVMs to a serving quorum.
    pub fn startup(&self) -> Duration {
        self.startup
    }

    /// Each member's process id while it runs, in name order (`None` for a killed member).
    pub fn pids(&self) -> Vec<Option<u32>> {
        self.members
            .iter()
            .map(|member| member.server.pid())
            .collect()
    }

    /// Each member's temporary directory, in name order (removed with the ensemble).
    pub fn dirs(&self) -> Vec<PathBuf> {
        self.members
            .iter()
            .map(|member| member.dir.clone())
            .collect()
    }

    /// The members' network namespaces and the links between them.
    pub fn net_lab(&self) -> &NetLab {
        &self.lab
    }

    /// The adapter URL that reaches only the members `names` (through their proxies): a
    /// client whose session must stay on one side of a partition. `None` when a name is not a
    /// member's.
    pub fn url_of(&self, names: &[&str]) -> Option<String> {
        let hosts = names
            .iter()
            .map(|name| {
                let member = self.members.iter().find(|m| m.seat.name() == *name)?;
                Some(member.proxy_host())
            })
            .collect::<Option<Vec<_>>>()?;
        Some(self.url_through(&hosts))
    }

    fn url_through(&self, hosts: &[String]) -> String {
        zk_url(hosts, &self.query)
    }
}

impl StartedCluster for Zookeeper3Cluster {
    fn client_url(&self) -> String {
        let hosts: Vec<String> = self.members.iter().map(Member::proxy_host).collect();
        self.url_through(&hosts)
    }

    fn nodes(&self) -> Vec<ClusterNode> {
        self.members
            .iter()
            .map(|member| ClusterNode::new(member.seat.name(), &member.server))
            .collect()
    }

    fn cluster_faults(&self) -> Arc<dyn ClusterFaults> {
        Arc::clone(&self.links) as Arc<dyn ClusterFaults>
    }

    fn describe(&self) -> String {
        let members: Vec<String> = self
            .members
            .iter()
            .map(|member| {
                format!(
                    "{}: {} (quorum port {}, election port {})",
                    member.seat.name(),
                    member.server.describe(),
                    member.seat.quorum_port,
                    member.seat.election_port
                )
            })
            .collect();
        format!(
            "ZooKeeper ensemble of {} (tick {ZOOKEEPER3_TICK_MS} ms, sessions {} ms to {} ms, \
             quorum in {} ms): {}; {}",
            self.members.len(),
            ZOOKEEPER3_MIN_SESSION_MS,
            ZOOKEEPER3_MAX_SESSION_MS,
            self.startup.as_millis(),
            members.join("; "),
            self.lab.describe()
        )
    }
}

impl Drop for Zookeeper3Cluster {
    fn drop(&mut self) {
        // Killed here, not when the last handle to each member goes: a run may still hold
        // the members' fault handles while it tears the cluster down.
        for member in &self.members {
            member.server.stop();
        }
    }
}

/// The ensemble as the nemesis sees it: its members' names, who leads, and the links
/// between members.
#[derive(Debug)]
struct EnsembleLinks {
    names: Vec<String>,
    /// Each member's own client address (not its proxy's), for `srvr`.
    addrs: Vec<SocketAddr>,
    links: LabLinks,
}

#[async_trait::async_trait]
impl ClusterFaults for EnsembleLinks {
    fn nodes(&self) -> Vec<String> {
        self.names.clone()
    }

    async fn leader(&self) -> Result<Option<String>, FaultFailed> {
        let roles = roles(&self.addrs).await;
        Ok(leading(&roles).map(|index| self.names[index].clone()))
    }

    async fn partition(&self, groups: &[Vec<String>]) -> Result<(), FaultFailed> {
        self.links.partition(groups).await
    }

    async fn heal(&self) -> Result<(), FaultFailed> {
        self.links.heal().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_adapter_url_lists_every_member_and_keeps_the_query() {
        let hosts = ["127.0.0.1:1".to_string(), "127.0.0.1:2".to_string()];
        assert_eq!(zk_url(&hosts, ""), "zk://127.0.0.1:1,127.0.0.1:2");
        assert_eq!(
            zk_url(&hosts, "variant=unsafe-release"),
            "zk://127.0.0.1:1,127.0.0.1:2?variant=unsafe-release"
        );
    }
}
