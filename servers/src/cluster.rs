//! A lock service of several server processes fencer starts and stops itself
//! (`--lock private:redlock`, `private:etcd3`, `private:zookeeper3`), as a run sees it: the
//! URL its adapter connects to, one fault handle per member, and the handle for faults on the
//! links between members.
//!
//! Every cluster kind implements [`StartedCluster`]; dropping it stops every member and
//! removes everything it made (processes, network namespaces, firewall rules, directories).

use std::sync::Arc;

use fencer_nemesis::{ClusterFaults, ServerFaults};

/// One member of a started cluster.
pub struct ClusterNode {
    /// Its name in plans and on the timeline (`n1`, `n2`, …); a member's faults aim at
    /// `ROLE.NAME` (`lock.n2`).
    pub name: String,
    /// Pause, kill and restart, clock jump, and cuts between the clients and this member.
    pub faults: Arc<dyn ServerFaults>,
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
