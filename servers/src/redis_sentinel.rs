//! A Redis primary with two replicas, watched by three Redis Sentinels that fail it over, as
//! fencer starts it itself (`--lock private:redis-sentinel`): the classic highly available
//! Redis, whose replication is asynchronous, so a failover can lose a lease the old primary
//! granted and a second client can then be granted the same lock.
//!
//! Data nodes `n1` (the first primary), `n2`, `n3` each run in a network namespace of their
//! own ([`NetLab`]) with their client port behind a fault proxy of their own in the root
//! namespace, so each takes a private server's faults (pause, kill and restart, cuts and lost
//! replies between the clients and that node). Each node runs from a config file in its
//! directory, which Sentinel rewrites when it changes the node's role, so a restarted node
//! comes back as what Sentinel last made it; there is no persistence, so it comes back empty.
//!
//! Sentinel `i` runs in data node `i`'s namespace, as a sentinel beside each Redis host is
//! deployed: a partition that isolates a node isolates its sentinel with it, so the majority
//! side both sees the primary gone and has the quorum (2) to replace it, while the isolated
//! primary, whose host links are never cut, goes on accepting writes from clients: the
//! split-brain a Sentinel deployment without `min-replicas-to-write` allows. A member's own
//! faults (pause, kill, restart, client cuts) aim at its data node: its sentinel runs on.
//!
//! Clients reach the sentinels directly at their lab addresses and the data nodes through the
//! proxies: [`StartedCluster::client_url`] is
//! `redis-sentinel://S1,S2,S3/fencer?via=N1@P1,N2@P2,N3@P3`, where `Si` is sentinel `i`'s
//! address, `Ni` data node `i`'s lab address (as the sentinels announce it) and `Pi` its proxy.

mod resp;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fencer_nemesis::{ClusterFaults, FaultFailed};

use crate::cluster::{ClusterNode, StartedCluster};
use crate::{LabLinks, Launch, NetLab, PrivateBackend, PrivateServer, ServerError, ServerGuard};

/// The members' names, in order; `n1` is the first primary.
const MEMBERS: [&str; 3] = ["n1", "n2", "n3"];

/// The name the sentinels monitor the primary by (`sentinel monitor NAME …`).
pub const PRIMARY_NAME: &str = "fencer";

/// The port every data node listens on in its own namespace.
const DATA_PORT: u16 = 6379;

/// The port every sentinel listens on, beside its data node.
const SENTINEL_PORT: u16 = 26379;

/// How many sentinels must agree the primary is down before one may fail it over: a majority
/// of three, so one isolated sentinel can never start a failover alone.
const QUORUM: usize = 2;

/// How long the primary may not answer a sentinel's pings before that sentinel deems it down.
/// Sentinel pings every second, so a second of silence is one missed ping; on a loaded 2-core
/// machine a process starved for a few hundred milliseconds still answers in time.
const DOWN_AFTER_MS: u64 = 1_000;

/// Sentinel's failover timeout: a sentinel that voted for another's failover waits twice this
/// before trying one itself, and a stuck failover is abandoned after it. Three seconds lets a
/// failover that stalls be retried within seconds, well after a healthy one has finished.
const FAILOVER_TIMEOUT_MS: u64 = 3_000;

/// How long the nodes and sentinels may take, once listening, to replicate and to know one
/// another: the whole start takes 2.2 to 2.5 s measured on a 2-core machine (sentinels find
/// each other through hello messages every 2 s), so this bound only trips on a cluster that
/// cannot form.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long one question to one process may take: a paused node or an isolated sentinel must
/// not stall `leader()` for long, and a live one answers in milliseconds.
const QUERY_TIMEOUT: Duration = Duration::from_millis(300);

/// A member's addresses in the lab.
#[derive(Debug, Clone)]
struct Member {
    name: String,
    /// Its data node's client address (not its proxy's), as the sentinels announce it.
    data: SocketAddr,
    /// Its sentinel's address.
    sentinel: SocketAddr,
}

/// A running primary with two replicas and three sentinels. Dropping it stops every process
/// and removes the lab.
pub struct SentinelCluster {
    /// Each data node behind its own proxy, in name order.
    members: Vec<(String, Arc<PrivateServer>)>,
    /// Sentinel `i` beside data node `i`.
    sentinels: Vec<ServerGuard>,
    faults: Arc<SentinelLinks>,
    query: String,
    started_in: Duration,
    /// Last, so it goes after the processes: it removes the namespaces they ran in.
    lab: Arc<NetLab>,
}

impl std::fmt::Debug for SentinelCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentinelCluster")
            .field("lab", &self.lab.name())
            .field("members", &self.members)
            .finish_non_exhaustive()
    }
}

/// Starts the data nodes and sentinels. `query` is what followed `private:redis-sentinel?`
/// (kept on the client URL, e.g. `variant=unsafe-release`). Returns once both replicas are in
/// sync with `n1` and every sentinel names `n1`, knows both replicas and both other sentinels;
/// fails within 30 s of each step otherwise.
pub fn start(query: &str) -> Result<SentinelCluster, ServerError> {
    let started = Instant::now();
    if !crate::netns::on_path("redis-server") {
        return Err(ServerError::NotInstalled(format!(
            "`redis-server` is not on PATH: a private Redis Sentinel cluster needs the Debian \
             package {}",
            PrivateBackend::Redis.debian_package()
        )));
    }
    let lab = Arc::new(NetLab::new(&MEMBERS)?);
    let addresses: Vec<Member> = MEMBERS
        .iter()
        .map(|name| {
            let address = lab.address(name)?;
            Ok(Member {
                name: name.to_string(),
                data: SocketAddr::from((address, DATA_PORT)),
                sentinel: SocketAddr::from((address, SENTINEL_PORT)),
            })
        })
        .collect::<Result<_, ServerError>>()?;
    let primary = addresses[0].data;
    let mut members = Vec::new();
    for (index, member) in addresses.iter().enumerate() {
        let replica_of = (index > 0).then_some(primary);
        let guard = start_data_node(&lab, member, replica_of).map_err(failed)?;
        let server = PrivateServer::behind_proxy(PrivateBackend::Redis, query, guard)?;
        members.push((member.name.clone(), Arc::new(server)));
    }
    // Sentinels learn the replicas from the primary's INFO on their first look: starting them
    // once both replicas are attached spares a wait for the next INFO, ten seconds later.
    wait_for("both replicas to sync with n1", || replicated(primary))?;
    let sentinels = addresses
        .iter()
        .map(|member| start_sentinel(&lab, member, primary).map_err(failed))
        .collect::<Result<Vec<_>, _>>()?;
    wait_for(
        "every sentinel to watch n1 with its replicas and peers",
        || {
            addresses
                .iter()
                .try_for_each(|member| watching(member.sentinel, primary))
        },
    )?;
    Ok(SentinelCluster {
        members,
        sentinels,
        faults: Arc::new(SentinelLinks {
            links: LabLinks::new(&lab, "the Redis Sentinel cluster"),
            members: addresses,
        }),
        query: query.to_string(),
        started_in: started.elapsed(),
        lab,
    })
}

/// A start failure, with the package that provides Redis.
fn failed(error: ServerError) -> ServerError {
    match error {
        ServerError::NotInstalled(_) => error,
        other => ServerError::Failed(format!(
            "cannot start the Redis Sentinel cluster ({other}); install the Debian package {}",
            PrivateBackend::Redis.debian_package()
        )),
    }
}

/// Writes `text` to `file` in `dir`, returning its path.
fn write_config(
    dir: &tempfile::TempDir,
    file: &str,
    text: &str,
) -> Result<std::path::PathBuf, ServerError> {
    let path = dir.path().join(file);
    std::fs::write(&path, text)
        .map_err(|error| ServerError::Failed(format!("writing {}: {error}", path.display())))?;
    Ok(path)
}

fn temp_dir() -> Result<tempfile::TempDir, ServerError> {
    tempfile::tempdir().map_err(|error| ServerError::Failed(format!("temp dir: {error}")))
}

/// Starts data node `member` in its namespace, a replica of `replica_of` if given. No
/// persistence: a restart loses every key. Diskless sync without delay: a replica (re)attaches
/// in milliseconds instead of after a disk snapshot.
fn start_data_node(
    lab: &NetLab,
    member: &Member,
    replica_of: Option<SocketAddr>,
) -> Result<ServerGuard, ServerError> {
    let dir = temp_dir()?;
    let mut config = format!(
        "port {DATA_PORT}\nbind {}\nprotected-mode no\ndaemonize no\nsave \"\"\n\
         appendonly no\ndir {}\nrepl-diskless-sync yes\nrepl-diskless-sync-delay 0\n",
        member.data.ip(),
        dir.path().display()
    );
    if let Some(primary) = replica_of {
        config.push_str(&format!("replicaof {} {}\n", primary.ip(), primary.port()));
    }
    let config = write_config(&dir, "redis.conf", &config)?;
    let launch = Launch::new("redis-server")
        .args([config])
        .log_to(dir.path().join("server.log"));
    let launch = lab.launch_in(&member.name, launch)?;
    ServerGuard::start_at("redis-server", launch, member.data, dir, None)
}

/// Starts sentinel `member` in its data node's namespace, watching `primary`.
fn start_sentinel(
    lab: &NetLab,
    member: &Member,
    primary: SocketAddr,
) -> Result<ServerGuard, ServerError> {
    let dir = temp_dir()?;
    let config = format!(
        "port {SENTINEL_PORT}\nbind {}\nprotected-mode no\ndaemonize no\ndir {}\n\
         sentinel monitor {PRIMARY_NAME} {} {} {QUORUM}\n\
         sentinel down-after-milliseconds {PRIMARY_NAME} {DOWN_AFTER_MS}\n\
         sentinel failover-timeout {PRIMARY_NAME} {FAILOVER_TIMEOUT_MS}\n\
         sentinel parallel-syncs {PRIMARY_NAME} 2\n",
        member.sentinel.ip(),
        dir.path().display(),
        primary.ip(),
        primary.port()
    );
    // Sentinel rewrites its config file as it learns replicas, peers and new primaries.
    let config = write_config(&dir, "sentinel.conf", &config)?;
    let launch = Launch::new("redis-server")
        .args([config.into_os_string(), "--sentinel".into()])
        .log_to(dir.path().join("server.log"));
    let launch = lab.launch_in(&member.name, launch)?;
    ServerGuard::start_at("redis-sentinel", launch, member.sentinel, dir, None)
}

/// Polls `ready` every 50 ms until it succeeds, for at most [`READY_TIMEOUT`].
fn wait_for(what: &str, ready: impl Fn() -> Result<(), NotReady>) -> Result<(), ServerError> {
    let started = Instant::now();
    loop {
        let last = match ready() {
            Ok(()) => return Ok(()),
            Err(why) => why,
        };
        if started.elapsed() > READY_TIMEOUT {
            return Err(ServerError::Failed(format!(
                "the Redis Sentinel cluster timed out after {READY_TIMEOUT:?} waiting for \
                 {what}: {last}"
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether `primary` has both replicas attached and in sync.
fn replicated(primary: SocketAddr) -> Result<(), NotReady> {
    let info = resp::command(primary, &["INFO", "replication"], Duration::from_secs(1))?;
    let info = info.text().unwrap_or_default();
    let online = info
        .lines()
        .filter(|line| line.starts_with("slave") && line.contains("state=online"))
        .count();
    if online == MEMBERS.len() - 1 {
        Ok(())
    } else {
        Err(NotReady::Replicas {
            online,
            info: info.to_string(),
        })
    }
}

/// Why the cluster is not ready yet: asked again until it is, or the wait times out.
#[derive(Debug, thiserror::Error)]
enum NotReady {
    /// A member did not answer.
    #[error(transparent)]
    Unanswered(#[from] resp::Unanswered),
    /// The primary has fewer replicas in sync than the cluster's members less one.
    #[error("{online} replicas online: {info}")]
    Replicas {
        /// How many are.
        online: usize,
        /// The primary's `INFO replication`.
        info: String,
    },
    /// A sentinel does not yet name the primary, see it up, or know every replica and peer.
    #[error("sentinel {sentinel} is not watching yet: {state:?}")]
    NotWatching {
        /// The sentinel.
        sentinel: SocketAddr,
        /// Its `SENTINEL master` answer.
        state: resp::Reply,
    },
}

/// Whether the sentinel at `sentinel` names `primary`, sees it up, and knows both replicas
/// and both other sentinels: only then can it take part in a failover.
fn watching(sentinel: SocketAddr, primary: SocketAddr) -> Result<(), NotReady> {
    let state = resp::command(
        sentinel,
        &["SENTINEL", "master", PRIMARY_NAME],
        Duration::from_secs(1),
    )?;
    let others = (MEMBERS.len() - 1).to_string();
    let named = (state.field("ip"), state.field("port"));
    let expected = (primary.ip().to_string(), primary.port().to_string());
    if named != (Some(expected.0.as_str()), Some(expected.1.as_str()))
        || state.field("flags") != Some("master")
        || state.field("num-slaves") != Some(&others)
        || state.field("num-other-sentinels") != Some(&others)
    {
        return Err(NotReady::NotWatching { sentinel, state });
    }
    Ok(())
}

impl SentinelCluster {
    /// Data node `name`'s server and proxy (`n1`…`n3`).
    pub fn member(&self, name: &str) -> Option<&Arc<PrivateServer>> {
        self.members
            .iter()
            .find(|(member, _)| member == name)
            .map(|(_, server)| server)
    }

    /// The sentinels' process ids, in member order, while they run.
    pub fn sentinel_pids(&self) -> Vec<Option<u32>> {
        self.sentinels.iter().map(ServerGuard::pid).collect()
    }

    /// The lab the processes run in.
    pub fn lab(&self) -> &NetLab {
        &self.lab
    }

    /// How long [`start`] took, from making the lab to a watched, replicated primary.
    pub fn started_in(&self) -> Duration {
        self.started_in
    }
}

impl StartedCluster for SentinelCluster {
    fn client_url(&self) -> String {
        let sentinels: Vec<String> = self
            .faults
            .members
            .iter()
            .map(|member| member.sentinel.to_string())
            .collect();
        let via: Vec<String> = self
            .faults
            .members
            .iter()
            .zip(&self.members)
            .map(|(member, (_, server))| {
                format!("{}@127.0.0.1:{}", member.data, server.proxy_port())
            })
            .collect();
        let url = format!(
            "redis-sentinel://{}/{PRIMARY_NAME}?via={}",
            sentinels.join(","),
            via.join(",")
        );
        if self.query.is_empty() {
            url
        } else {
            format!("{url}&{}", self.query)
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
            .zip(&self.sentinels)
            .map(|((name, server), sentinel)| {
                format!(
                    "{name}: {}, sentinel pid {} on {}",
                    server.describe(),
                    sentinel.pid().map_or("-".into(), |pid| pid.to_string()),
                    sentinel.address()
                )
            })
            .collect();
        format!(
            "Redis primary with {} replicas and {} sentinels (quorum {QUORUM}, down after \
             {DOWN_AFTER_MS} ms) in {} ({}), ready in {} ms; {}",
            self.members.len() - 1,
            self.sentinels.len(),
            self.lab.name(),
            self.lab.describe(),
            self.started_in.as_millis(),
            members.join("; ")
        )
    }
}

impl Drop for SentinelCluster {
    fn drop(&mut self) {
        // A run may still hold the data nodes' fault handles: the processes go now regardless.
        for (_, server) in &self.members {
            server.stop();
        }
        for sentinel in &mut self.sentinels {
            sentinel.kill();
        }
    }
}

/// The links between the members, and which one is primary.
#[derive(Debug)]
struct SentinelLinks {
    links: LabLinks,
    members: Vec<Member>,
}

/// The member a majority of the sentinels names as primary, if any: an isolated sentinel may
/// still name the primary the others replaced, and a paused or cut-off one answers nothing.
fn named_primary(members: &[Member]) -> Option<String> {
    let named: Vec<String> = members
        .iter()
        .filter_map(|member| {
            let answer = resp::command(
                member.sentinel,
                &["SENTINEL", "get-master-addr-by-name", PRIMARY_NAME],
                QUERY_TIMEOUT,
            )
            .ok()?;
            let [host, port] = answer.items() else {
                return None;
            };
            let address = format!("{}:{}", host.text()?, port.text()?);
            members
                .iter()
                .find(|candidate| candidate.data.to_string() == address)
                .map(|candidate| candidate.name.clone())
        })
        .collect();
    let majority = members.len() / 2 + 1;
    members
        .iter()
        .map(|member| &member.name)
        .find(|name| named.iter().filter(|named| named == name).count() >= majority)
        .cloned()
}

#[async_trait::async_trait]
impl ClusterFaults for SentinelLinks {
    fn nodes(&self) -> Vec<String> {
        self.members
            .iter()
            .map(|member| member.name.clone())
            .collect()
    }

    async fn leader(&self) -> Result<Option<String>, FaultFailed> {
        if !self.links.cluster_runs() {
            return Err(self.links.stopped());
        }
        let members = self.members.clone();
        tokio::task::spawn_blocking(move || named_primary(&members))
            .await
            .map_err(|error| FaultFailed(format!("primary query failed: {error}")))
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
    fn the_primary_is_the_member_a_majority_of_sentinels_names() {
        // No sentinel listens on these addresses: none names anyone, so nobody is primary.
        let members: Vec<Member> = MEMBERS
            .iter()
            .map(|name| Member {
                name: name.to_string(),
                data: "127.0.0.1:1".parse().unwrap(),
                sentinel: "127.0.0.1:1".parse().unwrap(),
            })
            .collect();
        assert_eq!(named_primary(&members), None);
    }
}
