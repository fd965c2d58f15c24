//! Private servers fencer starts itself on a free loopback port in a temporary directory, so a
//! test can pause (SIGSTOP/SIGCONT) or kill them without touching anyone else's.
//!
//! Every server is owned by a guard that kills it when dropped, including when a test panics;
//! its directory goes with it.

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a starting server may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// A free TCP port on loopback (the OS picks one; it is released for the server to take).
pub fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A running server that dies with this guard.
pub struct ServerGuard {
    child: Option<Child>,
    port: u16,
    /// Kept so the server's directory lives exactly as long as the server.
    _dir: tempfile::TempDir,
}

impl ServerGuard {
    /// Starts a private Redis (`redis-server` from the Debian package) on a free port, no
    /// persistence, in the foreground so the guard owns the process.
    pub fn redis() -> Result<ServerGuard, String> {
        let dir = tempfile::tempdir().map_err(|error| format!("temp dir: {error}"))?;
        let port = free_port().map_err(|error| format!("free port: {error}"))?;
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|error| format!("cannot start redis-server: {error}"))?;
        let guard = ServerGuard {
            child: Some(child),
            port,
            _dir: dir,
        };
        guard.wait_until_listening()?;
        Ok(guard)
    }

    /// The loopback port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its temporary directory.
    pub fn dir(&self) -> &Path {
        self._dir.path()
    }

    fn wait_until_listening(&self) -> Result<(), String> {
        let started = Instant::now();
        while started.elapsed() < START_TIMEOUT {
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(format!(
            "server on port {} did not accept connections within {START_TIMEOUT:?}",
            self.port
        ))
    }

    fn signal(&self, signal: &str) -> Result<(), String> {
        let child = self.child.as_ref().ok_or("server already killed")?;
        let status = Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .map_err(|error| format!("kill {signal}: {error}"))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("kill {signal} {} failed: {status}", child.id()))
        }
    }

    /// Freezes the server (SIGSTOP): connections stay open, nothing is answered.
    pub fn pause(&self) -> Result<(), String> {
        self.signal("-STOP")
    }

    /// Thaws a paused server (SIGCONT).
    pub fn resume(&self) -> Result<(), String> {
        self.signal("-CONT")
    }

    /// Kills the server now (SIGKILL) and waits for it to be gone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for ServerGuard {
    fn drop(&mut self) {
        // A stopped process ignores SIGKILL until continued on some systems' tooling; SIGCONT
        // first costs nothing.
        let _ = self.signal("-CONT");
        self.kill();
    }
}
