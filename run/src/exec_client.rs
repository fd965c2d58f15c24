//! `--client exec:COMMAND`: one client child per worker (protocol 2's client role), each
//! talking to the run's lock server through a fault proxy of its own (one per member when the
//! lock is a cluster: Redlock's masters, an etcd or ZooKeeper ensemble).
//!
//! The children start before the run (the client's probe), so a command that cannot start or
//! a child that does not speak protocol 2 is a one-line error before any worker runs. Each
//! worker's child and proxy are a nemesis target under the worker's name: a pause of the worker
//! freezes its child too, a clock step of the worker steps the child's wall clock (libfaketime),
//! and the proxy faults (partition, delay-replies, drop-replies, cut) aimed at the worker act on
//! its proxies alone, every member's at once: the worker's own network.

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, OnceLock};

use fencer_backends::registry::Probe;
use fencer_backends::{BackendError, ClientSpec, ExecClient, ExecLibrary};
use fencer_harness::{LibraryContext, LockLibrary};
use fencer_nemesis::{FaultFailed, ServerAction, ServerFaults};
use fencer_servers::{FaultProxy, ServerClock};

use crate::backends::RunContext;
use crate::clients::{BuiltClient, LibraryBuilder};

/// One worker's client: its proxies (one per server the lock's URL names), its clock when
/// libfaketime is there, and its child once started.
struct WorkerClient {
    worker: String,
    command: String,
    proxies: Vec<FaultProxy>,
    /// The lock server's URL with the proxies' addresses in it: what the child is told.
    server: String,
    clock: Option<ServerClock>,
    child: OnceLock<Arc<ExecClient>>,
}

impl std::fmt::Debug for WorkerClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the exec client of {}", self.worker)
    }
}

impl WorkerClient {
    /// Starts the child if it is not running yet.
    async fn start(&self) -> Result<(), BackendError> {
        if self.child.get().is_some() {
            return Ok(());
        }
        let env = self
            .clock
            .as_ref()
            .map(ServerClock::env)
            .unwrap_or_default();
        let spec = ClientSpec {
            worker: self.worker.clone(),
            server: self.server.clone(),
            env,
        };
        let child = ExecClient::start(&self.command, spec)
            .await
            .map_err(|error| BackendError::Unreachable(error.to_string()))?;
        let _ = self.child.set(Arc::new(child));
        Ok(())
    }

    fn child(&self) -> Result<&Arc<ExecClient>, FaultFailed> {
        self.child
            .get()
            .ok_or_else(|| FaultFailed(format!("the exec client of {} never started", self.worker)))
    }
}

#[async_trait::async_trait]
impl ServerFaults for WorkerClient {
    async fn apply(&self, action: ServerAction) -> Result<(), FaultFailed> {
        let failed = |error: &dyn std::fmt::Display| FaultFailed(error.to_string());
        match action {
            ServerAction::Pause => self.child()?.pause().await.map_err(|e| failed(&e)),
            ServerAction::Resume => self.child()?.resume().await.map_err(|e| failed(&e)),
            ServerAction::JumpClock(jump_ns) => match &self.clock {
                Some(clock) => clock.jump(jump_ns / 1_000_000).map_err(|e| failed(&e)),
                None => Err(FaultFailed(format!(
                    "the exec client of {} runs without libfaketime: its clock cannot be stepped",
                    self.worker
                ))),
            },
            ServerAction::Partition(_)
            | ServerAction::DelayReplies(_)
            | ServerAction::DropReplies
            | ServerAction::HealReplies
            | ServerAction::Cut => {
                for proxy in &self.proxies {
                    let taken = proxy.take(&action);
                    debug_assert!(taken, "a fault of the network");
                }
                Ok(())
            }
            ServerAction::Kill | ServerAction::Start => Err(FaultFailed(format!(
                "the exec client of {} takes no restarts",
                self.worker
            ))),
        }
    }
}

/// Starts every worker's child (the client's probe, before the run), all at once: a child's
/// start is mostly its interpreter loading its library, and the run waits for the slowest.
struct StartAll(Vec<Arc<WorkerClient>>);

#[async_trait::async_trait]
impl Probe for StartAll {
    /// Every start is waited for, so a child that did start is kept (and stopped with the
    /// run) rather than abandoned mid-greeting; the first worker's error is the one told.
    async fn ping(&self) -> Result<(), BackendError> {
        let started = futures::future::join_all(self.0.iter().map(|client| client.start())).await;
        started.into_iter().collect()
    }
}

/// Builds the exec client `command` for one run of `cx.workers` workers, each with a proxy to
/// each server the run's lock URL names (`cx.lock_url`). A lock with no server URL (fencer's
/// simulated one, an exec lock service) has nothing for a child to connect to, and is refused.
pub(crate) fn build(command: &str, cx: &RunContext<'_>) -> Result<BuiltClient, BackendError> {
    fencer_backends::ExecCommand::parse(command)
        .map_err(|error| BackendError::BadUrl(error.to_string()))?;
    let Some(url) = cx.lock_url else {
        return Err(BackendError::BadUrl(format!(
            "client `exec:{command}` connects to the lock server itself, and this lock has no \
             server address to give it: use --lock with a server URL (redis://127.0.0.1:6379) \
             or one fencer starts (private:redis)"
        )));
    };
    let upstreams = Upstreams::parse(url)?;
    let dir = tempfile::tempdir()
        .map_err(|error| BackendError::Unreachable(format!("cannot make a directory: {error}")))?;
    let clocks = ServerClock::available().is_ok();
    let mut workers = Vec::with_capacity(cx.workers);
    for index in 0..cx.workers {
        let worker = format!("w{index}");
        let proxies = upstreams
            .addresses
            .iter()
            .map(|&upstream| {
                FaultProxy::start(upstream).map_err(|error| {
                    BackendError::Unreachable(format!(
                        "cannot start the proxy of {worker} to {upstream}: {error}"
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let ports: Vec<u16> = proxies.iter().map(FaultProxy::port).collect();
        let clock = if clocks {
            let own = dir.path().join(&worker);
            std::fs::create_dir_all(&own)
                .map_err(|error| BackendError::Unreachable(error.to_string()))?;
            Some(
                ServerClock::new(&own)
                    .map_err(|error| BackendError::Unreachable(error.to_string()))?,
            )
        } else {
            None
        };
        workers.push(Arc::new(WorkerClient {
            server: upstreams.through(&ports),
            worker,
            command: command.to_string(),
            proxies,
            clock,
            child: OnceLock::new(),
        }));
    }
    let by_worker: BTreeMap<String, Arc<WorkerClient>> = workers
        .iter()
        .map(|client| (client.worker.clone(), Arc::clone(client)))
        .collect();
    let library: LibraryBuilder = Arc::new(move |cx: &LibraryContext| {
        let client = by_worker
            .get(cx.worker())
            .and_then(|client| client.child.get())
            .ok_or_else(|| {
                BackendError::Unreachable(format!("no exec client was started for {}", cx.worker()))
            })?;
        let library = ExecLibrary::new(Arc::clone(client), cx)
            .map_err(|error| BackendError::Unreachable(error.to_string()))?;
        Ok(Arc::new(library) as Arc<dyn LockLibrary>)
    });
    let targets = workers
        .iter()
        .map(|client| {
            (
                client.worker.clone(),
                Arc::clone(client) as Arc<dyn ServerFaults>,
            )
        })
        .collect();
    Ok(BuiltClient {
        library,
        probe: Some(Arc::new(StartAll(workers))),
        targets,
        guard: Some(Box::new(dir)),
    })
}

/// The servers a lock URL names (`scheme://[user@]host:port[,host:port…][/rest]`: one, or a
/// cluster's members), and how to name them again through other loopback ports.
struct Upstreams {
    addresses: Vec<SocketAddr>,
    /// The URL before its hosts (`scheme://user@`) and after them (`/rest?query`).
    before: String,
    after: String,
}

impl Upstreams {
    fn parse(url: &str) -> Result<Upstreams, BackendError> {
        let bad = || {
            BackendError::BadUrl(format!(
                "the lock server's URL `{}` names no host:port for a client to connect to",
                fencer_backends::redact_url(url)
            ))
        };
        let (scheme, rest) = url.split_once("://").ok_or_else(bad)?;
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, after) = rest.split_at(end);
        let (user, hosts) = match authority.rsplit_once('@') {
            Some((user, hosts)) => (format!("{user}@"), hosts),
            None => (String::new(), authority),
        };
        let addresses = hosts
            .split(',')
            .map(|host_port| {
                host_port
                    .to_socket_addrs()
                    .ok()
                    .and_then(|mut addresses| addresses.next())
                    .ok_or_else(bad)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Upstreams {
            addresses,
            before: format!("{scheme}://{user}"),
            after: after.to_string(),
        })
    }

    /// The URL with the loopback `ports`, in order, in place of its hosts.
    fn through(&self, ports: &[u16]) -> String {
        let hosts: Vec<String> = ports
            .iter()
            .map(|port| format!("127.0.0.1:{port}"))
            .collect();
        format!("{}{}{}", self.before, hosts.join(","), self.after)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_url_names_each_member_and_gets_each_its_proxy_in_order() {
        let cluster =
            Upstreams::parse("redlock://127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003?fence=x")
                .unwrap();
        let ports: Vec<u16> = cluster.addresses.iter().map(SocketAddr::port).collect();
        assert_eq!(ports, [7001, 7002, 7003]);
        assert_eq!(
            cluster.through(&[9, 8, 7]),
            "redlock://127.0.0.1:9,127.0.0.1:8,127.0.0.1:7?fence=x"
        );
        let one = Upstreams::parse("redis://me@127.0.0.1:6379/2").unwrap();
        assert_eq!(one.addresses.len(), 1);
        assert_eq!(one.through(&[5]), "redis://me@127.0.0.1:5/2");
        assert!(Upstreams::parse("redis://127.0.0.1:6379,nowhere").is_err());
        assert!(Upstreams::parse("127.0.0.1:6379").is_err());
    }
}
