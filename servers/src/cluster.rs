//! A lock service of several server processes fencer starts and stops itself
//! (`--lock private:redlock`, `private:etcd3`, `private:zookeeper3`), as a run sees it: the
//! URL its adapter connects to, one fault handle per member, and the handle for faults on the
//! links between members.
//!
//! Every cluster kind implements [`StartedCluster`]; dropping it stops every member and
//! removes everything it made (processes, network namespaces, firewall rules, directories).

use std::sync::Arc;

use fencer_nemesis::{ClusterFaults, ServerFaults};

use crate::error::ServerError;

/// One member of a started cluster.
pub struct ClusterNode {
    /// Its name in plans and on the timeline (`n1`, `n2`, …); a member's faults aim at
    /// `ROLE.NAME` (`lock.n2`).
    pub name: String,
    /// Pause, kill and restart, clock jump, and cuts between the clients and this member.
    pub faults: Arc<dyn ServerFaults>,
}

impl ClusterNode {
    /// The member `name` whose faults are those of the private server `server` (its process
    /// and the proxy in front of it).
    pub fn new(name: impl Into<String>, server: &Arc<crate::PrivateServer>) -> ClusterNode {
        ClusterNode {
            name: name.into(),
            faults: Arc::clone(server) as Arc<dyn ServerFaults>,
        }
    }
}

impl std::fmt::Debug for ClusterNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterNode")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// A cluster fencer started for one role of a run. Dropping it tears the cluster down.
pub trait StartedCluster: Send + Sync + std::fmt::Debug {
    /// The URL the role's adapter connects to (every member's client address, through
    /// fencer's proxies where the cluster has them).
    fn client_url(&self) -> String;

    /// Its members, in name order.
    fn nodes(&self) -> Vec<ClusterNode>;

    /// Faults on the links between members, and the current leader.
    fn cluster_faults(&self) -> Arc<dyn ClusterFaults>;

    /// What it is, for the line fencer prints when it starts one (members, addresses, pids,
    /// directories).
    fn describe(&self) -> String;
}

/// The clusters fencer can start itself, by the name after `private:`. Adding one is a
/// variant, its name in [`ClusterKind::NAMES`], and one arm in each match below.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClusterKind {
    /// Redlock over independent private Redis masters (`private:redlock[?nodes=5]`), each
    /// behind its own fault proxy; the masters never talk to each other and none leads.
    Redlock,
    /// A three-member etcd cluster (`private:etcd3`), members in network namespaces so the
    /// links between them can be cut; Raft elects a leader.
    Etcd3,
    /// A three-member ZooKeeper ensemble (`private:zookeeper3`); Zab elects a leader.
    Zookeeper3,
    /// A Redis primary, two replicas and three sentinels (`private:redis-sentinel`), each data
    /// node in a network namespace with its sentinel; the sentinels fail over to a replica
    /// when the primary is gone, and replication is asynchronous.
    RedisSentinel,
}

/// What a cluster kind can be made to suffer, beyond what each member takes as a server:
/// what the plan generator draws for it and what a plan may aim at it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClusterTakes {
    /// Its members talk to each other, so a net partition between them means something.
    pub partitions: bool,
    /// It has a leader (`lock.leader` resolves through [`ClusterFaults::leader`]).
    pub leader: bool,
    /// A member's clock can be stepped (Redis: by rewriting expiries; Go's and the JVM's
    /// monotonic timers ignore libfaketime).
    pub clock_jumps: bool,
}

impl ClusterKind {
    /// Every cluster name, as after `private:`.
    pub const NAMES: [(&str, ClusterKind); 4] = [
        ("redlock", ClusterKind::Redlock),
        ("etcd3", ClusterKind::Etcd3),
        ("zookeeper3", ClusterKind::Zookeeper3),
        ("redis-sentinel", ClusterKind::RedisSentinel),
    ];

    /// The cluster a `private:NAME[?query]` URL names, with its query; `None` when `url` is no
    /// `private:` URL or names a single server ([`crate::PrivateBackend`]).
    pub fn parse(url: &str) -> Option<(ClusterKind, String)> {
        let rest = url.strip_prefix(crate::PRIVATE_SCHEME)?;
        let (name, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (_, kind) = ClusterKind::NAMES
            .iter()
            .find(|(known, _)| *known == name)?;
        Some((*kind, query.to_string()))
    }

    /// Its name after `private:`.
    pub fn name(self) -> &'static str {
        ClusterKind::NAMES
            .iter()
            .find(|(_, kind)| *kind == self)
            .map_or("?", |(name, _)| name)
    }

    /// Starts one (members in fresh temporary directories on free ports), configured by the
    /// URL's `query`.
    pub fn start(self, query: &str) -> Result<Box<dyn StartedCluster>, ServerError> {
        match self {
            #[cfg(feature = "redis")]
            ClusterKind::Redlock => {
                crate::redlock::start(query).map(|c| Box::new(c) as Box<dyn StartedCluster>)
            }
            #[cfg(not(feature = "redis"))]
            ClusterKind::Redlock => Err(ServerError::NotInstalled(format!(
                "this build of fencer has no Redis client (cargo feature `redis`) for \
                 private:redlock?{query}"
            ))),
            ClusterKind::Etcd3 => {
                crate::etcd3::start(query).map(|c| Box::new(c) as Box<dyn StartedCluster>)
            }
            ClusterKind::Zookeeper3 => {
                crate::zookeeper3::start(query).map(|c| Box::new(c) as Box<dyn StartedCluster>)
            }
            ClusterKind::RedisSentinel => {
                crate::redis_sentinel::start(query).map(|c| Box::new(c) as Box<dyn StartedCluster>)
            }
        }
    }

    /// What it takes besides its members' own faults.
    pub fn takes(self) -> ClusterTakes {
        match self {
            ClusterKind::Redlock => ClusterTakes {
                partitions: false,
                leader: false,
                clock_jumps: true,
            },
            // A Redis clock step rewrites expiries, which a replica refuses (`READONLY`).
            ClusterKind::Etcd3 | ClusterKind::Zookeeper3 | ClusterKind::RedisSentinel => {
                ClusterTakes {
                    partitions: true,
                    leader: true,
                    clock_jumps: false,
                }
            }
        }
    }

    /// Its members' names (`n1`, …) for a URL's `query`, known before it starts so a plan can
    /// be drawn and checked against them: Redlock's `nodes=N` (default 5), three otherwise.
    pub fn members(self, query: &str) -> Result<Vec<String>, ServerError> {
        #[cfg(feature = "redis")]
        let redlock_default = crate::redlock::DEFAULT_MASTERS;
        #[cfg(not(feature = "redis"))]
        let redlock_default = 5;
        let count = match self {
            ClusterKind::Redlock => query
                .split('&')
                .find_map(|pair| pair.strip_prefix("nodes="))
                .map_or(Ok(redlock_default), |count| {
                    count.parse::<usize>().map_err(|_| {
                        ServerError::BadUrl(format!(
                            "private:redlock?nodes={count}: expected an odd number of masters, \
                             3 to 9"
                        ))
                    })
                })?,
            ClusterKind::Etcd3 | ClusterKind::Zookeeper3 | ClusterKind::RedisSentinel => 3,
        };
        Ok((1..=count).map(|n| format!("n{n}")).collect())
    }

    /// The Debian package that provides its servers, for messages.
    pub fn debian_package(self) -> &'static str {
        match self {
            ClusterKind::Redlock | ClusterKind::RedisSentinel => "redis-server",
            ClusterKind::Etcd3 => "etcd-server",
            ClusterKind::Zookeeper3 => "zookeeper",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_names_parse_with_their_query_and_single_servers_are_not_clusters() {
        assert_eq!(
            ClusterKind::parse("private:redlock?nodes=3"),
            Some((ClusterKind::Redlock, "nodes=3".to_string()))
        );
        assert_eq!(
            ClusterKind::parse("private:etcd3"),
            Some((ClusterKind::Etcd3, String::new()))
        );
        assert_eq!(
            ClusterKind::parse("private:zookeeper3").map(|(kind, _)| kind.name()),
            Some("zookeeper3")
        );
        assert_eq!(ClusterKind::parse("private:redis"), None);
        assert_eq!(ClusterKind::parse("redlock"), None);
        let members = ClusterKind::Redlock.members("nodes=3&fence=none").unwrap();
        assert_eq!(members, ["n1", "n2", "n3"]);
        assert_eq!(ClusterKind::Redlock.members("").unwrap().len(), 5);
        assert!(ClusterKind::Redlock.members("nodes=x").is_err());
        assert_eq!(ClusterKind::Etcd3.members("").unwrap(), ["n1", "n2", "n3"]);
        assert_eq!(
            ClusterKind::parse("private:redis-sentinel?variant=unfenced"),
            Some((ClusterKind::RedisSentinel, "variant=unfenced".to_string()))
        );
        assert_eq!(ClusterKind::RedisSentinel.members("").unwrap().len(), 3);
    }

    #[test]
    fn an_unknown_private_name_lists_every_server_and_cluster() {
        let error = crate::PrivateBackend::parse("private:redlok")
            .unwrap()
            .unwrap_err()
            .to_string();
        for (name, _) in ClusterKind::NAMES {
            assert!(error.contains(&format!("private:{name}")), "{error}");
        }
        assert!(error.contains("private:redis,"), "{error}");
    }
}
