//! A server fencer starts for one role of a run (`--lock private:redis`,
//! `--store private:postgres`), with fencer's fault proxy in front of it, as a target of the
//! real-tier nemesis.
//!
//! The adapters connect through the proxy, so partitions, delayed or lost replies and cuts hit
//! them; the nemesis pauses, kills and restarts the server process itself and steps its clock
//! (libfaketime for PostgreSQL; Redis, which hangs under libfaketime, gets every key's expiry
//! rewritten by the jump instead).

use fencer_nemesis::{FaultFailed, ServerAction, ServerFaults};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use super::ServerGuard;
use crate::error::ServerError;
use crate::proxy::FaultProxy;

/// The URL scheme of a server fencer starts itself (`private:redis`, `private:postgres`).
pub const PRIVATE_SCHEME: &str = "private:";

/// The servers fencer can start itself. Adding one is an arm in [`PrivateBackend::parse`],
/// `PrivateBackend::start` and `PrivateBackend::client_url`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrivateBackend {
    /// `redis-server`, no persistence: a restart loses every key.
    Redis,
    /// PostgreSQL under libfaketime: a restart keeps the data directory.
    Postgres,
    /// A single-member etcd: a restart keeps its data directory (keys and revisions). Go reads
    /// the clock without libc, so libfaketime cannot step it: it takes no clock jumps.
    Etcd,
    /// A standalone ZooKeeper (tick 50 ms: sessions of 100 ms to 1 s): a restart keeps its
    /// transaction log (czxids keep rising). Not under libfaketime: its session expiry runs on
    /// the monotonic clock, so a wall-clock jump would change nothing, and libfaketime slows
    /// the JVM enough to expire renewed sub-second sessions.
    Zookeeper,
}

impl PrivateBackend {
    /// Every `private:` URL fencer understands, single servers and clusters
    /// ([`crate::ClusterKind`]), for messages.
    pub const URLS: &str = "private:redis, private:postgres, private:etcd, private:zookeeper, \
                            private:redlock, private:etcd3, private:zookeeper3 or \
                            private:redis-sentinel";

    /// The backend a `private:NAME` URL names (`private:redis?variant=unfenced` too), with the
    /// query that follows it; `None` when `url` is not a `private:` URL.
    pub fn parse(url: &str) -> Option<Result<(PrivateBackend, String), ServerError>> {
        let rest = url.strip_prefix(PRIVATE_SCHEME)?;
        let (name, query) = rest.split_once('?').unwrap_or((rest, ""));
        let backend = match name {
            "redis" => PrivateBackend::Redis,
            "postgres" => PrivateBackend::Postgres,
            "etcd" => PrivateBackend::Etcd,
            "zookeeper" | "zk" => PrivateBackend::Zookeeper,
            other => {
                return Some(Err(ServerError::BadUrl(format!(
                    "unknown private server `{other}` in {url}: expected {}",
                    PrivateBackend::URLS
                ))));
            }
        };
        Some(Ok((backend, query.to_string())))
    }

    /// Starts one in a fresh temporary directory on a free port.
    fn start(self) -> Result<ServerGuard, ServerError> {
        match self {
            PrivateBackend::Redis => ServerGuard::redis(),
            PrivateBackend::Postgres => {
                ServerGuard::postgres(super::ServerClock::available().is_ok())
            }
            PrivateBackend::Etcd => ServerGuard::etcd(),
            PrivateBackend::Zookeeper => ServerGuard::zookeeper(false),
        }
    }

    /// Whether a jump of this server's clock can be made to happen: by libfaketime
    /// (PostgreSQL) or by rewriting expiries (Redis); etcd ignores libfaketime, and ZooKeeper
    /// expires sessions by the monotonic clock (see [`PrivateBackend::Zookeeper`]).
    pub fn takes_clock_jumps(self) -> bool {
        match self {
            PrivateBackend::Redis | PrivateBackend::Postgres => true,
            PrivateBackend::Etcd | PrivateBackend::Zookeeper => false,
        }
    }

    /// The URL an adapter uses to reach the server on `port` (the proxy's).
    fn client_url(self, port: u16) -> String {
        match self {
            PrivateBackend::Redis => format!("redis://127.0.0.1:{port}"),
            PrivateBackend::Postgres => {
                format!(
                    "postgres://postgres@127.0.0.1:{port}/{}",
                    super::POSTGRES_DATABASE
                )
            }
            PrivateBackend::Etcd => format!("etcd://127.0.0.1:{port}"),
            PrivateBackend::Zookeeper => format!("zk://127.0.0.1:{port}"),
        }
    }

    /// The Debian package that provides it, for messages.
    pub fn debian_package(self) -> &'static str {
        match self {
            PrivateBackend::Redis => "redis-server",
            PrivateBackend::Postgres => "postgresql",
            PrivateBackend::Etcd => "etcd-server",
            PrivateBackend::Zookeeper => "zookeeper",
        }
    }
}

/// A server fencer started, behind its own fault proxy. Dropping it stops both.
pub struct PrivateServer {
    backend: PrivateBackend,
    query: String,
    /// Shared with the blocking tasks that kill and restart it.
    guard: Arc<Mutex<ServerGuard>>,
    server_address: SocketAddr,
    proxy: FaultProxy,
    /// While the server is frozen, the clock jumps (ms) it has taken since: a frozen Redis
    /// cannot be reached to shift its keys' expiries, so the shift waits until it runs again,
    /// when it would first read the stepped clock. `None` while it runs or is down.
    jumps_while_frozen_ms: std::sync::Mutex<Option<i64>>,
}

impl std::fmt::Debug for PrivateServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrivateServer")
            .field("backend", &self.backend)
            .field("server_address", &self.server_address)
            .field("proxy_port", &self.proxy.port())
            .finish()
    }
}

impl PrivateServer {
    /// Starts the server a `private:` URL names, and a proxy in front of it.
    pub fn start(url: &str) -> Result<PrivateServer, ServerError> {
        let (backend, query) = PrivateBackend::parse(url).ok_or_else(|| {
            ServerError::BadUrl(format!(
                "expected {} URL, found {url}",
                PrivateBackend::URLS
            ))
        })??;
        let guard = backend.start().map_err(|error| {
            ServerError::Failed(format!(
                "cannot start a private {backend:?} server ({error}); install the Debian package {}",
                backend.debian_package()
            ))
        })?;
        PrivateServer::behind_proxy(backend, &query, guard)
    }

    /// A proxy in front of a server already started another way than
    /// [`PrivateServer::start`]'s (a cluster member in its own network namespace, reached at
    /// its lab address; a Redis that persists its writes), with the faults of any private
    /// server.
    pub fn behind_proxy(
        backend: PrivateBackend,
        query: &str,
        guard: ServerGuard,
    ) -> Result<PrivateServer, ServerError> {
        let server_address = guard.address();
        let proxy = FaultProxy::start(server_address).map_err(|error| {
            ServerError::Failed(format!("cannot start the fault proxy: {error}"))
        })?;
        Ok(PrivateServer {
            backend,
            query: query.to_string(),
            guard: Arc::new(Mutex::new(guard)),
            server_address,
            proxy,
            jumps_while_frozen_ms: std::sync::Mutex::new(None),
        })
    }

    /// The URL adapters use: through the proxy, with the `private:` URL's query
    /// (`?variant=unfenced`) kept.
    pub fn url(&self) -> String {
        let url = self.backend.client_url(self.proxy.port());
        if self.query.is_empty() {
            url
        } else {
            format!("{url}?{}", self.query)
        }
    }

    /// The server's own port (behind the proxy).
    pub fn server_port(&self) -> u16 {
        self.server_address.port()
    }

    /// The server's own address (behind the proxy): loopback, or its address in a lab.
    pub fn server_address(&self) -> SocketAddr {
        self.server_address
    }

    /// The server's process id while it runs, so a caller can check it is gone after a kill
    /// or after the server was dropped.
    pub fn pid(&self) -> Option<u32> {
        self.lock_guard().pid()
    }

    /// Kills the server now, even while others still hold this handle: a cluster that is
    /// dropped stops its members though a run may not have dropped their fault handles yet.
    pub fn stop(&self) {
        self.lock_guard().kill();
    }

    /// The proxy's port, which adapters connect to.
    pub fn proxy_port(&self) -> u16 {
        self.proxy.port()
    }

    /// The server's temporary directory, removed when the server is dropped.
    pub fn dir(&self) -> std::path::PathBuf {
        self.lock_guard().dir().to_path_buf()
    }

    /// What it is, for the line fencer prints when it starts one.
    pub fn describe(&self) -> String {
        let guard = self.lock_guard();
        format!(
            "{:?} pid {} on {} in {}{}, behind fencer's proxy on 127.0.0.1:{}",
            self.backend,
            guard.pid().map_or("-".into(), |pid| pid.to_string()),
            self.server_address,
            guard.dir().display(),
            if guard.clock().is_some() {
                " (libfaketime clock)"
            } else {
                ""
            },
            self.proxy.port()
        )
    }

    fn lock_guard(&self) -> std::sync::MutexGuard<'_, ServerGuard> {
        self.guard
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Runs `work` on the guard on tokio's blocking pool (killing and restarting wait on the
    /// process), so the run's other tasks go on meanwhile.
    async fn on_guard<F, T>(&self, work: F) -> Result<T, ServerError>
    where
        F: FnOnce(&mut ServerGuard) -> Result<T, ServerError> + Send + 'static,
        T: Send + 'static,
    {
        let guard = Arc::clone(&self.guard);
        tokio::task::spawn_blocking(move || {
            let mut guard = guard.lock().unwrap_or_else(|poison| poison.into_inner());
            work(&mut guard)
        })
        .await
        .map_err(|error| ServerError::Failed(format!("server task failed: {error}")))?
    }

    fn frozen_jumps(&self) -> std::sync::MutexGuard<'_, Option<i64>> {
        self.jumps_while_frozen_ms
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Moves every key's expiry of the private Redis by `jump_ms`, as a clock step would.
    #[cfg(feature = "redis")]
    async fn shift_redis_expiries(&self, jump_ms: i64) -> Result<(), ServerError> {
        let direct =
            fencer_backends::RedisConnection::open(&format!("redis://{}", self.server_address))?;
        Ok(direct.shift_expiries(jump_ms).await.map(drop)?)
    }

    async fn jump_clock(&self, jump_ns: i64) -> Result<(), ServerError> {
        let jump_ms = jump_ns / 1_000_000;
        match self.backend {
            PrivateBackend::Redis => {
                #[cfg(feature = "redis")]
                {
                    // A Redis that is down keeps no keys, having no persistence: the jump
                    // has nothing to move. A restart under way holds the guard, so this waits
                    // for it and then shifts the keys of a server that came back empty.
                    let up = self.on_guard(|guard| Ok(guard.pid().is_some())).await?;
                    if !up {
                        return Ok(());
                    }
                    if let Some(pending_ms) = self.frozen_jumps().as_mut() {
                        *pending_ms += jump_ms;
                        return Ok(());
                    }
                    self.shift_redis_expiries(jump_ms).await
                }
                #[cfg(not(feature = "redis"))]
                {
                    Err(ServerError::Failed(format!(
                        "this build has no Redis client to shift expiries by {jump_ms} ms"
                    )))
                }
            }
            PrivateBackend::Postgres => {
                self.on_guard(move |guard| match guard.clock() {
                    Some(clock) => clock.jump(jump_ms),
                    None => Err(ServerError::NotInstalled(
                        "the server runs without libfaketime: apt-get install libfaketime".into(),
                    )),
                })
                .await
            }
            PrivateBackend::Etcd | PrivateBackend::Zookeeper => Err(ServerError::Failed(format!(
                "a private {:?} takes no clock jump ({jump_ms} ms): see \
                 PrivateBackend::takes_clock_jumps",
                self.backend
            ))),
        }
    }
}

#[async_trait::async_trait]
impl ServerFaults for PrivateServer {
    async fn apply(&self, action: ServerAction) -> Result<(), FaultFailed> {
        self.take(action)
            .await
            .map_err(|error| FaultFailed(error.to_string()))
    }
}

impl PrivateServer {
    /// Does `action` now.
    async fn take(&self, action: ServerAction) -> Result<(), ServerError> {
        match action {
            // Faults on one server may overlap: a pause or resume that finds the server down
            // (a restart is under way) has nothing to freeze or thaw, and the restart brings
            // it back running.
            ServerAction::Pause => {
                let frozen = self
                    .on_guard(|guard| {
                        guard
                            .pid()
                            .map_or(Ok(false), |_| guard.pause().map(|()| true))
                    })
                    .await?;
                if frozen {
                    self.frozen_jumps().get_or_insert(0);
                }
                Ok(())
            }
            ServerAction::Resume => {
                self.on_guard(|guard| guard.pid().map_or(Ok(()), |_| guard.resume()))
                    .await?;
                let pending_ms = self.frozen_jumps().take();
                match pending_ms {
                    #[cfg(feature = "redis")]
                    Some(jump_ms) if jump_ms != 0 && self.backend == PrivateBackend::Redis => {
                        self.shift_redis_expiries(jump_ms).await
                    }
                    _ => Ok(()),
                }
            }
            ServerAction::Kill => {
                // Nothing of a killed Redis survives for a jump to move.
                self.frozen_jumps().take();
                self.on_guard(|guard| {
                    guard.kill();
                    Ok(())
                })
                .await
            }
            ServerAction::Start => {
                self.on_guard(ServerGuard::restart).await?;
                // Connections opened to the old process are dead; close them at the proxy so
                // clients reconnect at once.
                self.proxy.cut_connections();
                Ok(())
            }
            ServerAction::JumpClock(jump_ns) => self.jump_clock(jump_ns).await,
            ServerAction::Partition(_)
            | ServerAction::DelayReplies(_)
            | ServerAction::DropReplies
            | ServerAction::HealReplies
            | ServerAction::Cut => {
                let taken = self.proxy.take(&action);
                debug_assert!(taken, "a fault of the network");
                Ok(())
            }
        }
    }
}
