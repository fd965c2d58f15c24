//! `--client exec:COMMAND`: one client child per worker (protocol 2's client role), each
//! talking to the run's lock server through a fault proxy of its own.
//!
//! The children start before the run (the client's probe), so a command that cannot start or
//! a child that does not speak protocol 2 is a one-line error before any worker runs. Each
//! worker's child and proxy are a nemesis target under the worker's name: a pause of the worker
//! freezes its child too, a clock step of the worker steps the child's wall clock (libfaketime),
//! and the proxy faults (partition, delay-replies, drop-replies, cut) aimed at the worker act on
//! its proxy alone.

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

/// One worker's client: its proxy, its clock when libfaketime is there, and its child once
/// started.
struct WorkerClient {
    worker: String,
    command: String,
    proxy: FaultProxy,
    /// The lock server's URL with the proxy's address in it: what the child is told.
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
                let taken = self.proxy.take(&action);
                debug_assert!(taken, "a fault of the network");
                Ok(())
            }
            ServerAction::Kill | ServerAction::Start => Err(FaultFailed(format!(
                "the exec client of {} takes no restarts",
                self.worker
            ))),
        }
    }
}

/// Starts every worker's child (the client's probe, before the run).
struct StartAll(Vec<Arc<WorkerClient>>);

#[async_trait::async_trait]
impl Probe for StartAll {
    async fn ping(&self) -> Result<(), BackendError> {
        for client in &self.0 {
            client.start().await?;
        }
        Ok(())
    }
}

/// Builds the exec client `command` for one run of `cx.workers` workers, each with a proxy to
/// the run's lock server (`cx.lock_url`). A lock with no server URL (fencer's simulated one, an
/// exec lock service) has nothing for a child to connect to, and is refused.
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
    let (upstream, with_proxy) = upstream_of(url)?;
    let dir = tempfile::tempdir()
        .map_err(|error| BackendError::Unreachable(format!("cannot make a directory: {error}")))?;
    let clocks = ServerClock::available().is_ok();
    let mut workers = Vec::with_capacity(cx.workers);
    for index in 0..cx.workers {
        let worker = format!("w{index}");
        let proxy = FaultProxy::start(upstream).map_err(|error| {
            BackendError::Unreachable(format!("cannot start the proxy of {worker}: {error}"))
        })?;
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
            server: with_proxy(proxy.port()),
            worker,
            command: command.to_string(),
            proxy,
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

/// The address a server URL (`scheme://[user@]host:port[/rest]`) names, and the URL with
/// another loopback port in its place.
fn upstream_of(url: &str) -> Result<(SocketAddr, impl Fn(u16) -> String + use<>), BackendError> {
    let bad = || {
        BackendError::BadUrl(format!(
            "the lock server's URL `{}` names no host:port for a client to connect to",
            fencer_backends::redact_url(url)
        ))
    };
    let (scheme, rest) = url.split_once("://").ok_or_else(bad)?;
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (user, host_port) = match authority.rsplit_once('@') {
        Some((user, host_port)) => (format!("{user}@"), host_port),
        None => (String::new(), authority),
    };
    let address = host_port
        .to_socket_addrs()
        .ok()
        .and_then(|mut addresses| addresses.next())
        .ok_or_else(bad)?;
    let (scheme, tail) = (scheme.to_string(), tail.to_string());
    Ok((address, move |port: u16| {
        format!("{scheme}://{user}127.0.0.1:{port}{tail}")
    }))
}
