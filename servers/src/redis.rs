//! A private Redis (`redis-server`, Debian package `redis-server`).

use super::{Launch, ServerGuard, free_port};
use crate::ServerError;

/// What a private Redis keeps on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RedisPersistence {
    /// Nothing: a restart loses every key, like a Redis without AOF or RDB in production.
    None,
    /// Every write appended to its AOF and fsynced before it is answered
    /// (`appendonly yes`, `appendfsync always`): a kill loses no acknowledged write.
    EveryWrite,
}

impl ServerGuard {
    /// Starts a private Redis on a free port, no persistence, in the foreground so the guard
    /// owns the process. A restart therefore loses every key, like a Redis without AOF/RDB in
    /// production; Redis ignores libfaketime (Debian's build hangs under it), so its clock
    /// jumps are emulated by rewriting key expiries instead.
    pub fn redis() -> Result<ServerGuard, ServerError> {
        ServerGuard::redis_keeping(RedisPersistence::None)
    }

    /// Starts a private Redis as [`ServerGuard::redis`] does, keeping on disk what
    /// `persistence` says (in the guard's directory, so a restart finds it).
    pub fn redis_keeping(persistence: RedisPersistence) -> Result<ServerGuard, ServerError> {
        let dir = tempfile::tempdir()
            .map_err(|error| ServerError::Failed(format!("temp dir: {error}")))?;
        let port =
            free_port().map_err(|error| ServerError::Failed(format!("free port: {error}")))?;
        let kept: &[&str] = match persistence {
            RedisPersistence::None => &["--appendonly", "no"],
            RedisPersistence::EveryWrite => &["--appendonly", "yes", "--appendfsync", "always"],
        };
        let launch = Launch::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--daemonize", "no"])
            .args(kept.iter().copied())
            .args([std::ffi::OsString::from("--dir"), dir.path().into()])
            .log_to(dir.path().join("server.log"));
        ServerGuard::start("redis-server", launch, port, dir, None)
    }
}
