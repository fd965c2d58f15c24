//! One member of the ensemble before it runs: where it listens, its `zoo.cfg` and `myid`,
//! and its launch inside its network namespace; and starting all three at once.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;

use crate::{Launch, NetLab, ServerError, ServerGuard};

/// The ensemble's tick. Followers and leader give up on each other after
/// ten ticks, so a tick of 100 ms notices a lost member within a second while
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
pub(super) const MEMBERS: [&str; 3] = ["n1", "n2", "n3"];

/// ZooKeeper's usual ports, which every member can take since each has a namespace (and an
/// address) of its own: clients, followers to the leader, leader election.
const CLIENT_PORT: u16 = 2181;
const QUORUM_PORT: u16 = 2888;
const ELECTION_PORT: u16 = 3888;

/// Debian's server jar, a logger that writes to stderr (the member's log in its directory),
/// and Debian's configuration directory.
const CLASSPATH: &str =
    "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar:/etc/zookeeper/conf";

/// Where one member listens: its client port and the two ports the members talk on (quorum
/// traffic from followers to the leader, and leader election).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Seat {
    /// Its `myid` (1, 2, 3): the `server.N` line that is this member.
    pub(super) id: u32,
    pub(super) host: Ipv4Addr,
    pub(super) client_port: u16,
    pub(super) quorum_port: u16,
    pub(super) election_port: u16,
}

impl Seat {
    pub(super) fn name(&self) -> String {
        format!("n{}", self.id)
    }

    pub(super) fn client_addr(&self) -> SocketAddr {
        (self.host, self.client_port).into()
    }
}

/// Each member's seat at its address in `lab`.
pub(super) fn lab_seats(lab: &NetLab) -> Result<Vec<Seat>, ServerError> {
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

/// Where every member directory's name starts, before its owner's pid.
const DIR_MARK: &str = "fencer-zk3-";

/// The start of member `name`'s directory name: it carries the owning process's id, so a
/// later start can tell what a killed process left (a SIGKILL runs no Drop) from the
/// directories of an ensemble that still runs.
fn dir_prefix(pid: u32, name: &str) -> String {
    format!("{DIR_MARK}{pid}-{name}-")
}

/// Removes the member directories under `root` (the temporary directory) whose owning
/// process is dead, and returns how many. Their JVMs died with their network namespaces,
/// which the [`NetLab`] sweeps.
pub(super) fn sweep_dead_dirs(root: &Path) -> usize {
    let dead = |name: &str| {
        let pid = name
            .strip_prefix(DIR_MARK)
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok());
        pid.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists())
    };
    let mut removed = 0;
    for entry in std::fs::read_dir(root).into_iter().flatten().flatten() {
        let name = entry.file_name();
        if dead(&name.to_string_lossy()) && std::fs::remove_dir_all(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
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
        .prefix(&dir_prefix(std::process::id(), &seat.name()))
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
pub(super) fn start_members(lab: &NetLab, seats: &[Seat]) -> Result<Vec<ServerGuard>, ServerError> {
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

/// The last lines of a member's log, for an error message.
pub(super) fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(3)..].join("\n  ");
    format!(" (last lines of {}:\n  {tail})", log.display())
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
    fn only_the_directories_of_dead_owners_are_swept() {
        let root = tempfile::tempdir().unwrap();
        let ours = root
            .path()
            .join(format!("{}abc", dir_prefix(std::process::id(), "n1")));
        // Beyond any pid_max Linux allows, so never a live process.
        let dead = root
            .path()
            .join(format!("{}abc", dir_prefix(u32::MAX, "n2")));
        let other = root.path().join("fencer-zk3-notapid-n3-abc");
        for dir in [&ours, &dead, &other] {
            std::fs::create_dir_all(dir.join("data")).unwrap();
        }
        assert_eq!(sweep_dead_dirs(root.path()), 1);
        assert!(ours.exists() && other.exists() && !dead.exists());
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
}
