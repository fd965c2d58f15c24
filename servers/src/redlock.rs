//! `private:redlock`: N independent Redis masters fencer starts itself, each behind its own
//! fault proxy, for the Redlock lock (`redlock://`, `fencer_backends::redlock`).
//!
//! Each member is a whole [`PrivateServer`], so each takes every fault one private Redis
//! takes: pause, kill and restart (no persistence: a restart forgets every key, as Redlock's
//! published analysis assumes an unpersisted master may), a clock jump (every key's expiry
//! rewritten), a partition between the clients and it, lost or delayed replies. The masters
//! never talk to each other, so there is no link between members to cut and no leader.
//!
//! With `fence=counter` the cluster also starts one more Redis, persisting every write
//! (`appendfsync always`), whose `INCR` hands out the fencing tokens Redlock itself lacks; its
//! counter survives a restart of that server.
//!
//! Query (`private:redlock?…`): `nodes=N` (odd, 3 to 9, default 5), `fence=none|counter`
//! (default none), and the adapter's own `drift_factor=F` and `node_timeout_ms=MS`, passed on
//! in [`RedlockCluster::client_url`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use fencer_backends::redlock::RedlockOptions;
use fencer_nemesis::{ClusterFaults, FaultFailed};

use crate::ServerGuard;
use crate::cluster::{ClusterNode, StartedCluster};
use crate::error::ServerError;
use crate::private::{PrivateBackend, PrivateServer};
use crate::redis::RedisPersistence;

/// How many masters a `private:redlock` starts when its query names no `nodes=`.
pub const DEFAULT_MASTERS: usize = 5;

/// The member counts a `private:redlock` accepts: odd, so a majority is a clear half plus one,
/// and few enough to start on a laptop.
pub const MASTERS_RANGE: std::ops::RangeInclusive<usize> = 3..=9;

/// What a `private:redlock` query asked for.
#[derive(Clone, Debug, PartialEq)]
struct Query {
    masters: usize,
    fence_counter: bool,
    /// `drift_factor=…` and `node_timeout_ms=…`, as given, for the adapter's URL.
    adapter_params: Vec<String>,
}

impl Query {
    fn parse(query: &str) -> Result<Query, ServerError> {
        let bad = |what: String| ServerError::BadUrl(format!("{what} in private:redlock?{query}"));
        let mut parsed = Query {
            masters: DEFAULT_MASTERS,
            fence_counter: false,
            adapter_params: Vec::new(),
        };
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let (name, value) = pair
                .split_once('=')
                .ok_or_else(|| bad(format!("expected NAME=VALUE, found `{pair}`")))?;
            match name {
                "nodes" => {
                    parsed.masters = value
                        .parse::<usize>()
                        .ok()
                        .filter(|n| MASTERS_RANGE.contains(n) && n % 2 == 1)
                        .ok_or_else(|| {
                            bad(format!(
                                "nodes must be odd, from {} to {}, found `{value}`",
                                MASTERS_RANGE.start(),
                                MASTERS_RANGE.end()
                            ))
                        })?;
                }
                "fence" => {
                    parsed.fence_counter = match value {
                        "none" => false,
                        "counter" => true,
                        _ => {
                            return Err(bad(format!(
                                "fence must be `none` or `counter`, found `{value}`"
                            )));
                        }
                    };
                }
                "drift_factor" | "node_timeout_ms" => {
                    // The adapter's own rules judge its parameters, before any server starts.
                    RedlockOptions::check_parameter(name, value)
                        .map_err(|error| bad(error.to_string()))?;
                    parsed.adapter_params.push(pair.into());
                }
                other => {
                    return Err(bad(format!(
                        "unknown parameter `{other}`: expected nodes, fence, drift_factor or \
                         node_timeout_ms"
                    )));
                }
            }
        }
        Ok(parsed)
    }
}

/// N private Redis masters and, with `fence=counter`, the fence counter. Dropping it stops
/// every server and proxy and removes their directories.
pub struct RedlockCluster {
    /// `n1` … `nN`, in name order.
    masters: Vec<Arc<PrivateServer>>,
    counter: Option<Arc<PrivateServer>>,
    adapter_params: Vec<String>,
    faults: Arc<IndependentMasters>,
    started_in: Duration,
}

impl std::fmt::Debug for RedlockCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedlockCluster")
            .field("masters", &self.masters)
            .field("counter", &self.counter)
            .finish_non_exhaustive()
    }
}

/// Starts the cluster a `private:redlock` query asks for (the text after `?`, maybe empty).
/// Every server starts at once, on its own thread, so start-up takes about as long as the
/// slowest one; if any fails, those already started are stopped and the error names it.
pub fn start(query: &str) -> Result<RedlockCluster, ServerError> {
    let query = Query::parse(query)?;
    let started = Instant::now();
    let servers = std::thread::scope(|scope| {
        let masters: Vec<_> = (0..query.masters)
            .map(|_| scope.spawn(|| PrivateServer::start("private:redis")))
            .collect();
        let counter = query.fence_counter.then(|| scope.spawn(start_counter));
        let masters: Vec<Result<PrivateServer, ServerError>> =
            masters.into_iter().map(joined).collect();
        (masters, counter.map(joined))
    });
    let (masters, counter) = servers;
    let masters = masters.into_iter().collect::<Result<Vec<_>, _>>()?;
    let counter = counter.transpose()?;
    let names: Vec<String> = (1..=masters.len()).map(|n| format!("n{n}")).collect();
    Ok(RedlockCluster {
        masters: masters.into_iter().map(Arc::new).collect(),
        counter: counter.map(Arc::new),
        adapter_params: query.adapter_params,
        faults: Arc::new(IndependentMasters { names }),
        started_in: started.elapsed(),
    })
}

/// The fence counter: a Redis that fsyncs every write before answering it.
fn start_counter() -> Result<PrivateServer, ServerError> {
    let guard = ServerGuard::redis_keeping(RedisPersistence::EveryWrite).map_err(|error| {
        ServerError::Failed(format!(
            "cannot start the Redlock fence counter ({error}); install the Debian package {}",
            PrivateBackend::Redis.debian_package()
        ))
    })?;
    PrivateServer::behind_proxy(PrivateBackend::Redis, "", guard)
}

/// A start-up thread's result; a panic in one is that server's failure.
fn joined(
    thread: std::thread::ScopedJoinHandle<'_, Result<PrivateServer, ServerError>>,
) -> Result<PrivateServer, ServerError> {
    thread
        .join()
        .unwrap_or_else(|_| Err(ServerError::Failed("a server's start-up panicked".into())))
}

impl RedlockCluster {
    /// The masters, `n1` first: each a private Redis behind its own proxy, for a caller that
    /// needs more than [`StartedCluster::nodes`]' fault handles (its ports, to look inside).
    pub fn masters(&self) -> &[Arc<PrivateServer>] {
        &self.masters
    }

    /// The fence counter, when the cluster was started with `fence=counter`: a target of its
    /// own for kill and restart (it is no Redlock member, so it is not among
    /// [`StartedCluster::nodes`]).
    pub fn fence_counter(&self) -> Option<Arc<PrivateServer>> {
        self.counter.clone()
    }

    /// How long starting every server took.
    pub fn started_in(&self) -> Duration {
        self.started_in
    }

    /// Every server's process id and directory (the masters in name order, then the counter),
    /// so a caller can check nothing of the cluster outlives it.
    pub fn processes(&self) -> Vec<(Option<u32>, std::path::PathBuf)> {
        self.masters
            .iter()
            .chain(&self.counter)
            .map(|server| (server.pid(), server.dir()))
            .collect()
    }
}

impl StartedCluster for RedlockCluster {
    /// `redlock://127.0.0.1:P1,…` through each master's proxy, with the counter (through its
    /// proxy too) as `fence=redis://…` and the adapter's parameters from the query.
    fn client_url(&self) -> String {
        let masters: Vec<String> = self
            .masters
            .iter()
            .map(|master| format!("127.0.0.1:{}", master.proxy_port()))
            .collect();
        let mut params = self.adapter_params.clone();
        if let Some(counter) = &self.counter {
            params.push(format!("fence={}", counter.url()));
        }
        let mut url = format!("redlock://{}", masters.join(","));
        if !params.is_empty() {
            url = format!("{url}?{}", params.join("&"));
        }
        url
    }

    fn nodes(&self) -> Vec<ClusterNode> {
        self.faults
            .names
            .iter()
            .zip(&self.masters)
            .map(|(name, master)| ClusterNode::new(name, master))
            .collect()
    }

    fn cluster_faults(&self) -> Arc<dyn ClusterFaults> {
        Arc::clone(&self.faults) as Arc<dyn ClusterFaults>
    }

    fn describe(&self) -> String {
        let members: Vec<String> = self
            .faults
            .names
            .iter()
            .zip(&self.masters)
            .map(|(name, master)| format!("{name}: {}", master.describe()))
            .collect();
        let counter = match &self.counter {
            Some(counter) => format!(
                "; fence counter (every write fsynced): {}",
                counter.describe()
            ),
            None => "; no fence counter (Redlock has no fencing token)".into(),
        };
        format!(
            "Redlock over {} independent Redis masters, started in {} ms: {}{counter}",
            self.masters.len(),
            self.started_in.as_millis(),
            members.join("; ")
        )
    }
}

/// The links between Redlock's members: there are none (each master knows only its clients),
/// and so no leader either.
#[derive(Debug)]
struct IndependentMasters {
    names: Vec<String>,
}

impl IndependentMasters {
    fn no_links(&self, what: &str) -> FaultFailed {
        FaultFailed(format!(
            "cannot {what} Redlock's masters: they never talk to each other, so there is no \
             link between members to cut; cut the clients off a member with a partition aimed \
             at it (lock.{})",
            self.names.first().map_or("n1", String::as_str)
        ))
    }
}

#[async_trait::async_trait]
impl ClusterFaults for IndependentMasters {
    fn nodes(&self) -> Vec<String> {
        self.names.clone()
    }

    /// Always `None`: every master is the equal of every other.
    async fn leader(&self) -> Result<Option<String>, FaultFailed> {
        Ok(None)
    }

    async fn partition(&self, _groups: &[Vec<String>]) -> Result<(), FaultFailed> {
        Err(self.no_links("partition"))
    }

    async fn heal(&self) -> Result<(), FaultFailed> {
        Err(self.no_links("heal a partition between"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_names_members_fence_and_adapter_parameters() {
        assert_eq!(
            Query::parse("").unwrap(),
            Query {
                masters: DEFAULT_MASTERS,
                fence_counter: false,
                adapter_params: vec![],
            }
        );
        assert_eq!(
            Query::parse("nodes=3&fence=counter&drift_factor=0.05&node_timeout_ms=80").unwrap(),
            Query {
                masters: 3,
                fence_counter: true,
                adapter_params: vec!["drift_factor=0.05".into(), "node_timeout_ms=80".into()],
            }
        );
    }

    #[test]
    fn a_bad_query_is_refused_before_any_server_starts() {
        let error = |query: &str| Query::parse(query).unwrap_err().to_string();
        assert_eq!(
            error("nodes=4"),
            "nodes must be odd, from 3 to 9, found `4` in private:redlock?nodes=4"
        );
        assert!(error("nodes=11").contains("from 3 to 9"));
        assert!(error("fence=redis://h:1").contains("`none` or `counter`"));
        assert!(error("drift_factor=3").contains("from 0 up to 1"));
        assert!(error("ttl=3").contains("unknown parameter `ttl`"));
    }

    #[test]
    fn masters_have_no_links_to_cut_and_no_leader() {
        let faults = IndependentMasters {
            names: vec!["n1".into(), "n2".into(), "n3".into()],
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        assert_eq!(runtime.block_on(faults.leader()), Ok(None));
        let groups = [vec!["n1".to_string()], vec!["n2".into(), "n3".into()]];
        let error = runtime.block_on(faults.partition(&groups)).unwrap_err();
        assert!(error.0.contains("never talk to each other"), "{}", error.0);
        assert!(runtime.block_on(faults.heal()).is_err());
        assert_eq!(faults.nodes(), ["n1", "n2", "n3"]);
    }
}
