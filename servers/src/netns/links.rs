//! A lab's member-to-member links as a cluster's faults reach them.

use std::sync::{Arc, Weak};

use fencer_nemesis::FaultFailed;

use super::NetLab;
use crate::ServerError;

/// The links of one cluster's lab, for its [`ClusterFaults`](fencer_nemesis::ClusterFaults).
/// The lab is held weakly: a run may keep its fault handles a moment longer than the cluster,
/// whose drop must still remove the namespaces, and a late partition then fails saying so.
#[derive(Clone, Debug)]
pub struct LabLinks {
    lab: Weak<NetLab>,
    /// What the cluster is, for that message (`the etcd cluster`).
    cluster: &'static str,
}

impl LabLinks {
    /// The links of `lab`, the lab of `cluster` (`the etcd cluster`).
    pub fn new(lab: &Arc<NetLab>, cluster: &'static str) -> LabLinks {
        LabLinks {
            lab: Arc::downgrade(lab),
            cluster,
        }
    }

    /// Whether the cluster still runs (its lab was not dropped).
    pub fn cluster_runs(&self) -> bool {
        self.lab.strong_count() > 0
    }

    /// The error for a fault that comes after the cluster stopped.
    pub fn stopped(&self) -> FaultFailed {
        FaultFailed(format!("{} is stopped", self.cluster))
    }

    /// Cuts the links between `groups` ([`NetLab::partition`]).
    pub async fn partition(&self, groups: &[Vec<String>]) -> Result<(), FaultFailed> {
        let groups = groups.to_vec();
        self.change(move |lab| lab.partition(&groups)).await
    }

    /// Restores every link ([`NetLab::heal`]).
    pub async fn heal(&self) -> Result<(), FaultFailed> {
        self.change(NetLab::heal).await
    }

    /// Runs `change` on tokio's blocking pool: it runs `iptables-restore` once per member.
    async fn change<F>(&self, change: F) -> Result<(), FaultFailed>
    where
        F: FnOnce(&NetLab) -> Result<(), ServerError> + Send + 'static,
    {
        let lab = self.lab.upgrade().ok_or_else(|| self.stopped())?;
        tokio::task::spawn_blocking(move || change(&lab))
            .await
            .map_err(|error| FaultFailed(format!("the link change failed: {error}")))?
            .map_err(|error| FaultFailed(error.to_string()))
    }
}
