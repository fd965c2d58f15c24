//! A private Redis (`redis-server`, Debian package `redis-server`).

use super::{Launch, ServerGuard, free_port};
use crate::ServerError;

impl ServerGuard {
    /// Starts a private Redis on a free port, no persistence, in the foreground so the guard
    /// owns the process. A restart therefore loses every key, like a Redis without AOF/RDB in
    /// production; Redis ignores libfaketime (Debian's build hangs under it), so its clock
    /// jumps are emulated by rewriting key expiries instead.
    pub fn redis() -> Result<ServerGuard, ServerError> {
        let dir = tempfile::tempdir()
            .map_err(|error| ServerError::Failed(format!("temp dir: {error}")))?;
        let port =
            free_port().map_err(|error| ServerError::Failed(format!("free port: {error}")))?;
        let launch = Launch::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .args([std::ffi::OsString::from("--dir"), dir.path().into()])
            .log_to(dir.path().join("server.log"));
        ServerGuard::start("redis-server", launch, port, dir, None)
    }
}
