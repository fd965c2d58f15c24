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

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use fencer_nemesis::{ClusterFaults, FaultFailed, ServerFaults};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::cluster::{ClusterNode, StartedCluster};
use crate::{Launch, NetLab, PrivateBackend, PrivateServer, ServerError, ServerGuard};

/// The ensemble's tick. Followers and leader give up on each other after
/// [`SYNC_LIMIT_TICKS`] ticks, so a tick of 100 ms notices a lost member within a second while
/// a JVM stalled for a few hundred milliseconds on a loaded two-core machine stays in.
pub const ZOOKEEPER3_TICK_MS: u64 = 100;

/// How many ticks a follower may lag (or stay silent) before leader and follower drop each
/// other: 1 s at [`ZOOKEEPER3_TICK_MS`].
const SYNC_LIMIT_TICKS: u64 = 10;

/// How many ticks a follower may take to connect to a new leader and sync with it: 5 s, for
/// a cold JVM catching up after a restart.
const INIT_LIMIT_TICKS: u64 = 50;

/// The shortest session (lease) the members grant: two ticks, ZooKeeper's own floor.
pub const ZOOKEEPER3_MIN_SESSION_MS: u64 = 2 * ZOOKEEPER3_TICK_MS;

/// The longest session (lease) the members grant. Raised above ZooKeeper's default (20
/// ticks) so a run's default 10 s TTL is granted as asked rather than refused.
pub const ZOOKEEPER3_MAX_SESSION_MS: u64 = 30_000;

/// The members' names: three, the smallest ensemble that survives the loss of one.
const MEMBERS: [&str; 3] = ["n1", "n2", "n3"];

/// ZooKeeper's usual ports, which every member can take since each has a namespace (and an
/// address) of its own: clients, followers to the leader, leader election.
const CLIENT_PORT: u16 = 2181;
const QUORUM_PORT: u16 = 2888;
const ELECTION_PORT: u16 = 3888;

/// How long the members may take, all together, to form a quorum and serve requests once
/// their client ports accept connections. Three cold JVMs on two busy cores are slow; an idle
/// machine takes about a second.
const QUORUM_TIMEOUT: Duration = Duration::from_secs(60);

/// How long one `srvr` question may take before the member counts as not answering (paused,
/// killed, or too busy).
const SRVR_TIMEOUT: Duration = Duration::from_secs(1);

/// Debian's server jar, a logger that writes to stderr (the member's log in its directory),
/// and Debian's configuration directory.
const CLASSPATH: &str =
    "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar:/etc/zookeeper/conf";

/// Where one member listens: its client port and the two ports the members talk on (quorum
/// traffic from followers to the leader, and leader election).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Seat {
    /// Its `myid` (1, 2, 3): the `server.N` line that is this member.
    id: u32,
    host: Ipv4Addr,
    client_port: u16,
    quorum_port: u16,
    election_port: u16,
}

impl Seat {
    fn name(&self) -> String {
        format!("n{}", self.id)
    }

    fn client_addr(&self) -> SocketAddr {
        (self.host, self.client_port).into()
    }
}

/// Each member's seat at its address in `lab`.
fn lab_seats(lab: &NetLab) -> Result<Vec<Seat>, ServerError> {
    (1..)
        .zip(MEMBERS)
        .map(|(id, name)| {
            Ok(Seat {
                id,
                host: lab.address(name)?,
                client_port: CLIENT_PORT,
                quorum_port: QUORUM_PORT,
                election_port: ELECTION_PORT,
            })
        })
        .collect()
}

/// The `zoo.cfg` of member `seat` of the ensemble `seats`, keeping its data in `data`. The
/// transaction log is written without fsync (`forceSync=no`): an fsync on a busy disk
/// outlasts short sessions; a killed JVM loses nothing by it, only a power cut would.
fn config(seat: &Seat, seats: &[Seat], data: &Path) -> String {
    let mut text = format!(
        "tickTime={ZOOKEEPER3_TICK_MS}\ninitLimit={INIT_LIMIT_TICKS}\nsyncLimit={SYNC_LIMIT_TICKS}\n\
         minSessionTimeout={ZOOKEEPER3_MIN_SESSION_MS}\nmaxSessionTimeout={ZOOKEEPER3_MAX_SESSION_MS}\n\
         dataDir={}\nclientPort={}\nclientPortAddress={}\n\
         admin.enableServer=false\n4lw.commands.whitelist=*\nmaxClientCnxns=0\nforceSync=no\n",
        data.display(),
        seat.client_port,
        seat.host,
    );
    for other in seats {
        text.push_str(&format!(
            "server.{}={}:{}:{}\n",
            other.id, other.host, other.quorum_port, other.election_port
        ));
    }
    text
}

/// Writes member `seat`'s directory (config, `myid`) and its launch inside its namespace.
fn prepare(
    lab: &NetLab,
    seat: &Seat,
    seats: &[Seat],
) -> Result<(tempfile::TempDir, Launch), ServerError> {
    let failed = |what: &str, error: std::io::Error| {
        ServerError::Failed(format!("zookeeper {}: {what}: {error}", seat.name()))
    };
    let dir = tempfile::Builder::new()
        .prefix(&format!("fencer-zk3-{}-", seat.name()))
        .tempdir()
        .map_err(|error| failed("temp dir", error))?;
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).map_err(|error| failed("data dir", error))?;
    std::fs::write(data.join("myid"), format!("{}\n", seat.id))
        .map_err(|error| failed("myid", error))?;
    let zoo_cfg = dir.path().join("zoo.cfg");
    std::fs::write(&zoo_cfg, config(seat, seats, &data))
        .map_err(|error| failed("zoo.cfg", error))?;
    let launch = Launch::new("java")
        .args(["-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"])
        .args(["-cp", CLASSPATH])
        .args(["org.apache.zookeeper.server.quorum.QuorumPeerMain"])
        .args([zoo_cfg.as_os_str()])
        .log_to(dir.path().join("server.log"));
    Ok((dir, lab.launch_in(&seat.name(), launch)?))
}

/// Starts every member at once (each JVM takes seconds to come up; one after another would
/// add them up) and returns their guards in seat order once every client port accepts
/// connections. If one fails, the others are killed as their guards drop.
fn start_members(lab: &NetLab, seats: &[Seat]) -> Result<Vec<ServerGuard>, ServerError> {
    let prepared = seats
        .iter()
        .map(|seat| prepare(lab, seat, seats))
        .collect::<Result<Vec<_>, _>>()?;
    let started: Vec<Result<ServerGuard, ServerError>> = std::thread::scope(|scope| {
        let starts: Vec<_> = prepared
            .into_iter()
            .zip(seats)
            .map(|((dir, launch), seat)| {
                scope.spawn(move || {
                    ServerGuard::start_at("zookeeper", launch, seat.client_addr(), dir, None)
                })
            })
            .collect();
        starts
            .into_iter()
            .map(|start| {
                start.join().unwrap_or_else(|_| {
                    Err(ServerError::Failed("a member's start panicked".into()))
                })
            })
            .collect()
    });
    let mut guards = Vec::with_capacity(seats.len());
    for (seat, started) in seats.iter().zip(started) {
        match started {
            Ok(guard) => guards.push(guard),
            Err(error) => {
                return Err(ServerError::Failed(format!(
                    "zookeeper3 member {}: {error}",
                    seat.name()
                )));
            }
        }
    }
    Ok(guards)
}

/// What one member says it is, from its `srvr` answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// `Mode: leader`, in the epoch its zxid carries (the high 32 bits): a leader cut off
    /// from the quorum may still say so for a moment, in an older epoch than the new one.
    Leader { epoch: u64 },
    /// `Mode: follower` (or `observer`): in the quorum, not leading.
    Follower,
    /// Not serving: electing, cut off, paused, down, or not answering in time.
    Absent,
}

/// Reads a `srvr` answer.
fn role_of(answer: &str) -> Role {
    let field = |name: &str| {
        answer
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .map(str::trim)
    };
    let epoch = field("Zxid:")
        .and_then(|zxid| u64::from_str_radix(zxid.trim_start_matches("0x"), 16).ok())
        .map_or(0, |zxid| zxid >> 32);
    match field("Mode:") {
        Some("leader") => Role::Leader { epoch },
        Some("follower" | "observer") => Role::Follower,
        _ => Role::Absent,
    }
}

/// Asks the member at `addr` `srvr` (async: a paused member must not hold a thread).
async fn srvr(addr: SocketAddr) -> Role {
    let ask = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream.write_all(b"srvr").await?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await?;
        Ok::<_, std::io::Error>(answer)
    };
    match tokio::time::timeout(SRVR_TIMEOUT, ask).await {
        Ok(Ok(answer)) => role_of(&answer),
        Ok(Err(_)) | Err(_) => Role::Absent,
    }
}

/// Every member's role, asked all at once.
async fn roles(addrs: &[SocketAddr]) -> Vec<Role> {
    let mut asked = tokio::task::JoinSet::new();
    for (index, &addr) in addrs.iter().enumerate() {
        asked.spawn(async move { (index, srvr(addr).await) });
    }
    let mut roles = vec![Role::Absent; addrs.len()];
    while let Some(answer) = asked.join_next().await {
        if let Ok((index, role)) = answer {
            roles[index] = role;
        }
    }
    roles
}

/// The index of the member that leads: among those saying `leader`, the one in the newest
/// epoch (a deposed leader that has not noticed yet is in an older one).
fn leading(roles: &[Role]) -> Option<usize> {
    roles
        .iter()
        .enumerate()
        .filter_map(|(index, role)| match role {
            Role::Leader { epoch } => Some((*epoch, index)),
            Role::Follower | Role::Absent => None,
        })
        .max()
        .map(|(_, index)| index)
}

/// Waits until every member serves (one leads, the others follow), within [`QUORUM_TIMEOUT`].
fn wait_for_quorum(seats: &[Seat], guards: &[ServerGuard]) -> Result<(), ServerError> {
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

/// The last lines of a member's log, for an error message.
fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(3)..].join("\n  ");
    format!(" (last lines of {}:\n  {tail})", log.display())
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
/// behind its own fault proxy. `query` (`variant=unsafe-release`) is passed on to the adapter's URL. Returns once
/// every member serves, or fails within [`QUORUM_TIMEOUT`] (plus each JVM's start) naming the
/// member that did not come up.
pub fn start(query: &str) -> Result<Zookeeper3Cluster, ServerError> {
    if !Path::new("/usr/share/java/zookeeper.jar").exists() {
        return Err(ServerError::NotInstalled(
            "ZooKeeper is not installed (/usr/share/java/zookeeper.jar missing): \
             apt-get install zookeeper"
                .to_string(),
        ));
    }
    let lab = Arc::new(NetLab::new(&MEMBERS)?);
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
        lab: Arc::downgrade(&lab),
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
                Some(format!("127.0.0.1:{}", member.server.proxy_port()))
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
        let hosts: Vec<String> = self
            .members
            .iter()
            .map(|member| format!("127.0.0.1:{}", member.server.proxy_port()))
            .collect();
        self.url_through(&hosts)
    }

    fn nodes(&self) -> Vec<ClusterNode> {
        self.members
            .iter()
            .map(|member| ClusterNode {
                name: member.seat.name(),
                faults: Arc::clone(&member.server) as Arc<dyn ServerFaults>,
            })
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
    /// Weak: a run may hold these faults a moment longer than the ensemble, whose drop must
    /// still remove the namespaces.
    lab: Weak<NetLab>,
}

impl EnsembleLinks {
    /// Rewrites the links with `change` on the blocking pool (it runs `iptables-restore`).
    async fn relink<F>(&self, change: F) -> Result<(), FaultFailed>
    where
        F: FnOnce(&NetLab) -> Result<(), ServerError> + Send + 'static,
    {
        let lab = self.lab.upgrade().ok_or_else(|| {
            FaultFailed("the zookeeper3 ensemble is gone: no links to cut or heal".into())
        })?;
        tokio::task::spawn_blocking(move || change(&lab))
            .await
            .map_err(|error| FaultFailed(format!("the link change failed: {error}")))?
            .map_err(|error| FaultFailed(error.to_string()))
    }
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
        let groups = groups.to_vec();
        self.relink(move |lab| lab.partition(&groups)).await
    }

    async fn heal(&self) -> Result<(), FaultFailed> {
        self.relink(NetLab::heal).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seat(id: u32) -> Seat {
        Seat {
            id,
            host: Ipv4Addr::new(10, 0, 0, id as u8),
            client_port: 2181,
            quorum_port: 2888,
            election_port: 3888,
        }
    }

    #[test]
    fn each_member_config_lists_the_whole_ensemble() {
        let seats = [seat(1), seat(2), seat(3)];
        let text = config(&seats[1], &seats, Path::new("/d/data"));
        assert!(
            text.contains("clientPort=2181\nclientPortAddress=10.0.0.2\n"),
            "{text}"
        );
        assert!(text.contains("dataDir=/d/data\n"), "{text}");
        assert!(text.contains("syncLimit=10\n"), "{text}");
        assert!(text.contains("maxSessionTimeout=30000\n"), "{text}");
        for id in 1..=3 {
            assert!(
                text.contains(&format!("server.{id}=10.0.0.{id}:2888:3888\n")),
                "{text}"
            );
        }
    }

    #[test]
    fn the_adapter_url_lists_every_member_and_keeps_the_query() {
        let hosts = ["127.0.0.1:1".to_string(), "127.0.0.1:2".to_string()];
        assert_eq!(zk_url(&hosts, ""), "zk://127.0.0.1:1,127.0.0.1:2");
        assert_eq!(
            zk_url(&hosts, "variant=unsafe-release"),
            "zk://127.0.0.1:1,127.0.0.1:2?variant=unsafe-release"
        );
    }

    #[test]
    fn the_leader_is_the_newest_epoch_that_says_so() {
        let answer = |mode: &str, zxid: &str| {
            format!(
                "Zookeeper version: 3.8.0\nLatency min/avg/max: 0/0.0/0\nZxid: {zxid}\nMode: {mode}\nNode count: 5\n"
            )
        };
        assert_eq!(
            role_of(&answer("leader", "0x200000003")),
            Role::Leader { epoch: 2 }
        );
        assert_eq!(role_of(&answer("follower", "0x2")), Role::Follower);
        assert_eq!(
            role_of("This ZooKeeper instance is not currently serving requests\n"),
            Role::Absent
        );
        let deposed_and_new = [
            Role::Leader { epoch: 1 },
            Role::Follower,
            Role::Leader { epoch: 2 },
        ];
        assert_eq!(leading(&deposed_and_new), Some(2));
        assert_eq!(leading(&[Role::Follower, Role::Absent]), None);
    }
}
