//! A three-member etcd cluster fencer starts itself (`--lock private:etcd3`): each member in a
//! network namespace of its own ([`NetLab`]), so the links between members can be cut, and each
//! member's client port behind a fault proxy of its own in the root namespace, so each member
//! takes a private server's faults (pause, kill and restart keeping its data dir, cuts and lost
//! replies between the clients and that member).
//!
//! Members are `n1`, `n2`, `n3`, bootstrapped statically (`--initial-cluster`), with a 50 ms
//! heartbeat and a 500 ms election timeout: a lost leader is replaced within about a second,
//! ten heartbeats fit in an election timeout as etcd advises (so a briefly starved process on a
//! loaded machine does not depose its leader), and etcd's minimum lease TTL
//! (`ceil(1.5 × election timeout)`) stays one second, as on fencer's single-member etcd.

mod status;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fencer_nemesis::{ClusterFaults, FaultFailed};

use crate::cluster::{ClusterNode, StartedCluster};
use crate::{LabLinks, Launch, NetLab, PrivateBackend, PrivateServer, ServerError, ServerGuard};
use status::{MemberStatus, current_leader};

/// The members' names, in order.
const MEMBERS: [&str; 3] = ["n1", "n2", "n3"];

/// The client port every member listens on in its own namespace.
const CLIENT_PORT: u16 = 2379;

/// The peer (Raft) port every member listens on in its own namespace.
const PEER_PORT: u16 = 2380;

/// etcd's Raft heartbeat.
const HEARTBEAT_MS: u64 = 50;

/// etcd's election timeout: ten heartbeats.
const ELECTION_TIMEOUT_MS: u64 = 500;

/// How long the members may take, once listening, to elect a leader and serve reads: 0.3 to
/// 0.6 s measured on a 2-core machine, so this bound only trips on a cluster that cannot form.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long one status question to one member may take: a paused member must not stall
/// `leader()` for long, and a live one answers in milliseconds.
const STATUS_TIMEOUT: Duration = Duration::from_millis(300);

/// A member as the cluster's link faults see it.
#[derive(Debug, Clone)]
struct Member {
    name: String,
    /// Its client address in the lab (not its proxy's).
    address: SocketAddr,
    /// Its etcd member id, as status answers name the leader.
    id: u64,
}

/// A running three-member etcd cluster. Dropping it stops every member and removes the lab.
pub struct Etcd3Cluster {
    /// Each member behind its own proxy, in name order.
    members: Vec<(String, Arc<PrivateServer>)>,
    faults: Arc<Etcd3Links>,
    query: String,
    started_in: Duration,
    /// Last, so it goes after the members: it removes the namespaces they ran in.
    lab: Arc<NetLab>,
}

impl std::fmt::Debug for Etcd3Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Etcd3Cluster")
            .field("lab", &self.lab.name())
            .field("members", &self.members)
            .finish()
    }
}

/// Starts a three-member etcd cluster. `query` is what followed `private:etcd3?` (kept on the
/// client URL, e.g. `variant=unfenced`). Returns once every member serves linearizable reads
/// and all agree on one leader, or fails within 30 s after the members listen.
pub fn start(query: &str) -> Result<Etcd3Cluster, ServerError> {
    let started = Instant::now();
    if !crate::netns::on_path("etcd") {
        return Err(ServerError::NotInstalled(format!(
            "`etcd` is not on PATH: a private etcd cluster needs the Debian package {}",
            PrivateBackend::Etcd.debian_package()
        )));
    }
    let lab = Arc::new(NetLab::new(&MEMBERS)?);
    let peers: Vec<String> = MEMBERS
        .iter()
        .map(|name| Ok(format!("{name}=http://{}:{PEER_PORT}", lab.address(name)?)))
        .collect::<Result<_, ServerError>>()?;
    let initial_cluster = peers.join(",");
    let mut members = Vec::new();
    for name in MEMBERS {
        let guard = start_member(&lab, name, &initial_cluster).map_err(|error| match error {
            ServerError::NotInstalled(_) => error,
            other => ServerError::Failed(format!(
                "cannot start etcd member {name} ({other}); install the Debian package {}",
                PrivateBackend::Etcd.debian_package()
            )),
        })?;
        let server = PrivateServer::behind_proxy(PrivateBackend::Etcd, query, guard)?;
        members.push((name.to_string(), Arc::new(server)));
    }
    let addresses: Vec<SocketAddr> = members
        .iter()
        .map(|(_, server)| server.server_address())
        .collect();
    let statuses = wait_until_ready(&addresses)?;
    let faults = Arc::new(Etcd3Links {
        links: LabLinks::new(&lab, "the etcd cluster"),
        members: members
            .iter()
            .zip(statuses)
            .map(|((name, server), status)| Member {
                name: name.clone(),
                address: server.server_address(),
                id: status.member_id,
            })
            .collect(),
    });
    Ok(Etcd3Cluster {
        members,
        faults,
        query: query.to_string(),
        started_in: started.elapsed(),
        lab,
    })
}

/// Starts member `name` in its namespace, its data dir in the guard's directory (a restart
/// rejoins with its log and keys; the `--initial-*` flags only matter for an empty data dir).
fn start_member(
    lab: &NetLab,
    name: &str,
    initial_cluster: &str,
) -> Result<ServerGuard, ServerError> {
    let dir =
        tempfile::tempdir().map_err(|error| ServerError::Failed(format!("temp dir: {error}")))?;
    let address = lab.address(name)?;
    let client_url = format!("http://{address}:{CLIENT_PORT}");
    let peer_url = format!("http://{address}:{PEER_PORT}");
    let launch = Launch::new("etcd")
        .args(["--name", name])
        .args([
            std::ffi::OsString::from("--data-dir"),
            dir.path().join("data").into(),
        ])
        .args(["--listen-client-urls", &client_url])
        .args(["--advertise-client-urls", &client_url])
        .args(["--listen-peer-urls", &peer_url])
        .args(["--initial-advertise-peer-urls", &peer_url])
        .args(["--initial-cluster", initial_cluster])
        .args(["--initial-cluster-state", "new"])
        // Unique per lab, so members of two labs could never join each other.
        .args(["--initial-cluster-token", &lab.name()])
        .args(["--heartbeat-interval", &HEARTBEAT_MS.to_string()])
        .args(["--election-timeout", &ELECTION_TIMEOUT_MS.to_string()])
        .log_to(dir.path().join("server.log"));
    let launch = lab.launch_in(name, launch)?;
    ServerGuard::start_at(
        "etcd",
        launch,
        SocketAddr::from((address, CLIENT_PORT)),
        dir,
        None,
    )
}

/// Waits until the etcd members at `addresses` serve ([`wait_until_ready`]): a single member
/// too, which listens before it has elected itself leader.
pub(crate) fn wait_until_serving(addresses: &[SocketAddr]) -> Result<(), ServerError> {
    wait_until_ready(addresses).map(drop)
}

/// Waits until every member follows one and the same leader and answers a linearizable read
/// (which goes through the leader), and returns each member's status.
fn wait_until_ready(addresses: &[SocketAddr]) -> Result<Vec<MemberStatus>, ServerError> {
    let started = Instant::now();
    let mut last = None;
    while started.elapsed() < READY_TIMEOUT {
        match ready(addresses) {
            Ok(statuses) => return Ok(statuses),
            Err(why) => last = Some(why),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let last = last.map_or_else(|| "never asked".to_string(), |why| why.to_string());
    Err(ServerError::Failed(format!(
        "{} was not ready within {READY_TIMEOUT:?}: {last}",
        if addresses.len() == 1 {
            "the etcd member"
        } else {
            "the etcd cluster"
        }
    )))
}

/// Why the cluster is not ready yet: asked again until it is, or the wait times out.
#[derive(Debug, thiserror::Error)]
enum NotReady {
    /// A member did not answer.
    #[error(transparent)]
    Member(#[from] status::StatusError),
    /// The members follow no leader, or different ones.
    #[error("no leader all members follow yet: {0:?}")]
    NoCommonLeader(Vec<MemberStatus>),
}

fn ready(addresses: &[SocketAddr]) -> Result<Vec<MemberStatus>, NotReady> {
    let statuses = addresses
        .iter()
        .map(|&address| status::status(address, Duration::from_secs(1)))
        .collect::<Result<Vec<_>, _>>()?;
    let leader = statuses[0].leader_id;
    if leader == 0 || statuses.iter().any(|status| status.leader_id != leader) {
        return Err(NotReady::NoCommonLeader(statuses));
    }
    let read = serde_json::json!({ "key": "ZmVuY2VyLXJlYWR5" }); // "fencer-ready"
    for &address in addresses {
        status::post(address, "/v3/kv/range", &read, Duration::from_secs(1))?;
    }
    Ok(statuses)
}

impl Etcd3Cluster {
    /// Member `name`'s server and proxy (`n1`…`n3`).
    pub fn member(&self, name: &str) -> Option<&Arc<PrivateServer>> {
        self.members
            .iter()
            .find(|(member, _)| member == name)
            .map(|(_, server)| server)
    }

    /// The lab the members run in.
    pub fn lab(&self) -> &NetLab {
        &self.lab
    }

    /// How long [`start`] took, from making the lab to a ready cluster.
    pub fn started_in(&self) -> Duration {
        self.started_in
    }
}

impl StartedCluster for Etcd3Cluster {
    fn client_url(&self) -> String {
        let endpoints: Vec<String> = self
            .members
            .iter()
            .map(|(_, server)| format!("127.0.0.1:{}", server.proxy_port()))
            .collect();
        let url = format!("etcd://{}", endpoints.join(","));
        if self.query.is_empty() {
            url
        } else {
            format!("{url}?{}", self.query)
        }
    }

    fn nodes(&self) -> Vec<ClusterNode> {
        self.members
            .iter()
            .map(|(name, server)| ClusterNode::new(name, server))
            .collect()
    }

    fn cluster_faults(&self) -> Arc<dyn ClusterFaults> {
        self.faults.clone()
    }

    fn describe(&self) -> String {
        let members: Vec<String> = self
            .members
            .iter()
            .map(|(name, server)| format!("{name}: {}", server.describe()))
            .collect();
        format!(
            "etcd cluster of {} members in {} ({}), ready in {} ms; {}",
            self.members.len(),
            self.lab.name(),
            self.lab.describe(),
            self.started_in.as_millis(),
            members.join("; ")
        )
    }
}

impl Drop for Etcd3Cluster {
    fn drop(&mut self) {
        // A run may still hold the members' fault handles: the processes go now regardless.
        for (_, server) in &self.members {
            server.stop();
        }
    }
}

/// The links between the members, and who leads.
#[derive(Debug)]
struct Etcd3Links {
    links: LabLinks,
    members: Vec<Member>,
}

#[async_trait::async_trait]
impl ClusterFaults for Etcd3Links {
    fn nodes(&self) -> Vec<String> {
        self.members
            .iter()
            .map(|member| member.name.clone())
            .collect()
    }

    async fn leader(&self) -> Result<Option<String>, FaultFailed> {
        let members = self.members.clone();
        let leader = tokio::task::spawn_blocking(move || {
            // A paused or killed member does not answer: the others decide.
            let reports: Vec<MemberStatus> = members
                .iter()
                .filter_map(|member| status::status(member.address, STATUS_TIMEOUT).ok())
                .collect();
            current_leader(&reports).and_then(|id| {
                members
                    .iter()
                    .find(|member| member.id == id)
                    .map(|member| member.name.clone())
            })
        })
        .await
        .map_err(|error| FaultFailed(format!("leader query failed: {error}")))?;
        Ok(leader)
    }

    async fn partition(&self, groups: &[Vec<String>]) -> Result<(), FaultFailed> {
        self.links.partition(groups).await
    }

    async fn heal(&self) -> Result<(), FaultFailed> {
        self.links.heal().await
    }
}
