//! Private servers fencer starts itself on a free loopback port in a temporary directory, so a
//! test or a run can pause (SIGSTOP/SIGCONT), kill and restart them, or jump their clock,
//! without touching anyone else's.
//!
//! Every server is owned by a [`ServerGuard`] that kills it when dropped, including when a test
//! panics; its directory goes with it. A server is described once as a [`Launch`] (program,
//! arguments, environment, user), so a restart is "the same launch again, on the same port and
//! directory": whatever the server keeps on disk survives, which is exactly what a restart
//! fault must expose.
//!
//! A cluster's members ([`etcd3`], [`zookeeper3`], [`redis_sentinel`]) run the same way, each
//! in a network namespace of its own ([`netns`]) so the links between members can be cut, each
//! still owned by one guard.

mod clock;
pub mod cluster;
mod error;
mod etcd;
pub mod etcd3;
pub mod netns;
mod postgres;
mod private;
pub mod proxy;
mod redis;
pub mod redis_sentinel;
#[cfg(feature = "redis")]
pub mod redlock;
mod zookeeper;
pub mod zookeeper3;

pub use clock::ServerClock;
pub use cluster::{ClusterKind, ClusterNode, ClusterTakes, StartedCluster};
pub use error::ServerError;
pub use etcd3::Etcd3Cluster;
pub use netns::{LabLinks, NetLab};
pub use postgres::POSTGRES_DATABASE;
pub use private::{PRIVATE_SCHEME, PrivateBackend, PrivateServer};
pub use proxy::FaultProxy;
pub use redis::RedisPersistence;
pub use redis_sentinel::SentinelCluster;
#[cfg(feature = "redis")]
pub use redlock::RedlockCluster;
pub use zookeeper::{ZOOKEEPER_TICK_MS, wait_until_ok as zookeeper_ready};
pub use zookeeper3::Zookeeper3Cluster;

use std::ffi::OsString;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a starting server may take to accept connections (a cold JVM is the slowest).
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// How long one probe of a starting server's port may take: an address on a lab bridge that
/// drops packets would otherwise stall the probe for the kernel's whole connect timeout.
const CONNECT_PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// A free TCP port on loopback (the OS picks one; it is released for the server to take).
pub fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// How to start (and start again) one server process in the foreground.
#[derive(Clone, Debug)]
pub struct Launch {
    /// The executable.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Extra environment variables (e.g. libfaketime's, added by [`ServerClock::apply`]).
    pub env: Vec<(OsString, OsString)>,
    /// Run as this user id and group id instead of ours (PostgreSQL refuses to run as root).
    pub run_as: Option<(u32, u32)>,
    /// Where the server's output goes (a log file in its directory), for the error message
    /// when it does not come up.
    pub log: Option<PathBuf>,
}

impl Launch {
    /// `program` with no arguments yet.
    pub fn new(program: impl Into<PathBuf>) -> Launch {
        Launch {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            run_as: None,
            log: None,
        }
    }

    /// Appends arguments.
    pub fn args<I, S>(mut self, args: I) -> Launch
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets an environment variable for the server.
    pub fn env(mut self, name: impl Into<OsString>, value: impl Into<OsString>) -> Launch {
        self.env.push((name.into(), value.into()));
        self
    }

    /// Sends the server's stdout and stderr to `log`.
    pub fn log_to(mut self, log: impl Into<PathBuf>) -> Launch {
        self.log = Some(log.into());
        self
    }

    fn spawn(&self) -> Result<Child, ServerError> {
        use std::os::unix::process::CommandExt;
        let mut command = Command::new(&self.program);
        // In fencer's process group on purpose: a Ctrl-C at the terminal reaches the server
        // too, so it stops even when fencer is interrupted before it can stop it itself.
        command.args(&self.args).stdin(Stdio::null());
        for (name, value) in &self.env {
            command.env(name, value);
        }
        if let Some((uid, gid)) = self.run_as {
            command.uid(uid).gid(gid);
        }
        match &self.log {
            Some(log) => {
                let file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(log)
                    .map_err(|error| {
                        ServerError::Failed(format!("cannot open {}: {error}", log.display()))
                    })?;
                let copy = file.try_clone().map_err(|error| {
                    ServerError::Failed(format!("cannot open {}: {error}", log.display()))
                })?;
                command.stdout(file).stderr(copy);
            }
            None => {
                command.stdout(Stdio::null()).stderr(Stdio::null());
            }
        }
        command.spawn().map_err(|error| {
            ServerError::Failed(format!("cannot start {}: {error}", self.program.display()))
        })
    }
}

/// A running server that dies with this guard.
pub struct ServerGuard {
    name: &'static str,
    launch: Launch,
    child: Option<Child>,
    /// Where it accepts connections: loopback, or its address in a [`NetLab`] namespace.
    address: SocketAddr,
    clock: Option<ServerClock>,
    /// Kept so the server's directory lives exactly as long as the server.
    dir: tempfile::TempDir,
}

impl ServerGuard {
    /// Starts `launch` (which must listen on 127.0.0.1:`port`, keeping its files in `dir`) and
    /// waits until it accepts connections. `name` is for messages (`etcd`, `redis-server`).
    /// `clock` is the handle to the libfaketime clock the launch was given, if any.
    pub fn start(
        name: &'static str,
        launch: Launch,
        port: u16,
        dir: tempfile::TempDir,
        clock: Option<ServerClock>,
    ) -> Result<ServerGuard, ServerError> {
        ServerGuard::start_at(name, launch, ([127, 0, 0, 1], port).into(), dir, clock)
    }

    /// [`ServerGuard::start`] for a server that listens on `address` rather than on loopback:
    /// a cluster member inside its [`NetLab`] namespace, reached at its lab address.
    pub fn start_at(
        name: &'static str,
        launch: Launch,
        address: SocketAddr,
        dir: tempfile::TempDir,
        clock: Option<ServerClock>,
    ) -> Result<ServerGuard, ServerError> {
        let child = launch.spawn()?;
        let mut guard = ServerGuard {
            name,
            launch,
            child: Some(child),
            address,
            clock,
            dir,
        };
        guard.wait_until_listening()?;
        Ok(guard)
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.address.port()
    }

    /// The address it listens on (loopback unless it runs in a [`NetLab`] namespace).
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Its temporary directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The server's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The server's clock, when it was started under libfaketime (see [`ServerClock`]).
    pub fn clock(&self) -> Option<&ServerClock> {
        self.clock.as_ref()
    }

    fn wait_until_listening(&mut self) -> Result<(), ServerError> {
        let started = Instant::now();
        while started.elapsed() < START_TIMEOUT {
            if TcpStream::connect_timeout(&self.address, CONNECT_PROBE_TIMEOUT).is_ok() {
                return Ok(());
            }
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                return Err(ServerError::Failed(format!(
                    "{} exited before accepting connections ({status}){}",
                    self.name,
                    self.log_tail()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(ServerError::Failed(format!(
            "{} on {} did not accept connections within {START_TIMEOUT:?}{}",
            self.name,
            self.address,
            self.log_tail()
        )))
    }

    /// The last lines of the server's log, for an error message.
    fn log_tail(&self) -> String {
        let Some(log) = &self.launch.log else {
            return String::new();
        };
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(5)..].join("\n  ");
        format!("; last lines of {}:\n  {tail}", log.display())
    }

    /// Sends `signal` to the server and every process it started (PostgreSQL serves each
    /// connection from a child of the postmaster, each in a session of its own, so neither the
    /// pid nor the process group reaches them all). The server first, so it forks no new
    /// child that the signal would miss while it is stopped.
    fn signal(&self, signal: &str) -> Result<(), ServerError> {
        let child = self
            .child
            .as_ref()
            .ok_or_else(|| ServerError::Failed("server is not running".into()))?;
        let send = |pids: &[u32]| -> Result<(), ServerError> {
            let status = Command::new("kill")
                .arg(signal)
                .args(pids.iter().map(u32::to_string))
                .stderr(Stdio::null())
                .status()
                .map_err(|error| ServerError::Failed(format!("kill {signal}: {error}")))?;
            // A child may exit between listing and signalling; only the server itself counts.
            if status.success() || pids[0] != child.id() {
                Ok(())
            } else {
                Err(ServerError::Failed(format!(
                    "kill {signal} {} failed: {status}",
                    child.id()
                )))
            }
        };
        send(&[child.id()])?;
        let children = descendants(child.id());
        if !children.is_empty() {
            send(&children)?;
        }
        Ok(())
    }

    /// Freezes the server, every process of it (SIGSTOP): connections stay open, nothing is
    /// answered.
    pub fn pause(&self) -> Result<(), ServerError> {
        self.signal("-STOP")
    }

    /// Thaws a paused server (SIGCONT).
    pub fn resume(&self) -> Result<(), ServerError> {
        self.signal("-CONT")
    }

    /// Kills the server now, every process of it (SIGKILL), and waits for it to be gone.
    /// Nothing it had not written to disk survives.
    pub fn kill(&mut self) {
        if self.child.is_some() {
            let _ = self.signal("-KILL");
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again with the same launch, port and directory (after [`kill`]
    /// or on its own: a running server is killed first), and waits until it accepts
    /// connections. What it kept on disk decides what survives the restart.
    ///
    /// [`kill`]: ServerGuard::kill
    pub fn restart(&mut self) -> Result<(), ServerError> {
        self.kill();
        // The old process's listening socket may linger for a moment after it is reaped.
        let started = Instant::now();
        loop {
            match self.launch.spawn() {
                Ok(child) => {
                    self.child = Some(child);
                    match self.wait_until_listening() {
                        Ok(()) => return Ok(()),
                        Err(error) if started.elapsed() >= START_TIMEOUT => return Err(error),
                        Err(_) => self.kill(),
                    }
                }
                Err(error) => return Err(error),
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Every live descendant of `root`, from `/proc` (Linux).
fn descendants(root: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // `pid (comm) state ppid ...`; comm may hold spaces and parentheses.
            let after_comm = &stat[stat.rfind(')')? + 1..];
            let ppid = after_comm.split_whitespace().nth(1)?.parse().ok()?;
            Some((pid, ppid))
        })
        .collect();
    let mut found = vec![root];
    let mut next = 0;
    while next < found.len() {
        let parent = found[next];
        found.extend(
            parents
                .iter()
                .filter(|&&(_, ppid)| ppid == parent)
                .map(|&(pid, _)| pid),
        );
        next += 1;
    }
    found.remove(0);
    found
}

impl Drop for ServerGuard {
    fn drop(&mut self) {
        self.kill();
    }
}
