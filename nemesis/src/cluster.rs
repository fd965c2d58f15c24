//! Faults on the links between the members of a cluster fencer started itself, as the nemesis
//! sees them.
//!
//! A member's own faults (pause, kill and restart, clock jump, a partition between the
//! clients and that member) go through the member's [`ServerFaults`](crate::ServerFaults),
//! aimed at `ROLE.NODE` (`lock.n2`). What no single member can take is a partition *between*
//! members, and a fault aimed at whichever member leads right now: those go through the
//! cluster's [`ClusterFaults`].

use crate::server::FaultFailed;

/// A cluster of server processes (Redis masters, etcd members, a ZooKeeper ensemble) whose
/// member-to-member links the nemesis can cut.
#[async_trait::async_trait]
pub trait ClusterFaults: Send + Sync + std::fmt::Debug {
    /// The members' names (`n1`, `n2`, …), in the order plans and the timeline list them.
    fn nodes(&self) -> Vec<String>;

    /// The member that leads now, for a cluster that has and exposes a leader (etcd's Raft
    /// leader, ZooKeeper's leader, Redis Sentinel's primary); `Ok(None)` when there is none
    /// right now (an election is under way) or the cluster has no leader at all (Redlock's
    /// independent masters).
    async fn leader(&self) -> Result<Option<String>, FaultFailed>;

    /// Cuts every link whose two ends share no group of `groups` (each a set of member names;
    /// groups may overlap, so a member in two groups bridges them; a member in no group is cut
    /// off from every other member), both directions, and keeps links inside a group. Replaces any partition already in place. Clients keep reaching
    /// every member: client-to-member cuts are the member's own faults.
    async fn partition(&self, groups: &[Vec<String>]) -> Result<(), FaultFailed>;

    /// Restores every member-to-member link.
    async fn heal(&self) -> Result<(), FaultFailed>;
}
