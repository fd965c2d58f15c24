//! A private etcd (`etcd`, Debian package `etcd-server`): one member on a free client port and
//! a free peer port, its data dir inside the guard's directory.

use std::net::SocketAddr;

use super::{Launch, ServerGuard, free_port};
use crate::ServerError;

impl ServerGuard {
    /// Starts a private single-member etcd. Its data dir is in the guard's directory, so a
    /// [`restart`](ServerGuard::restart) keeps every key and the revision counter (fencing
    /// tokens stay monotonic across it), as a restarted production member would.
    ///
    /// It runs with a 10 ms heartbeat and a 100 ms election timeout, which lowers etcd's
    /// minimum lease TTL (`ceil(1.5 × election timeout)`) from 2 s to 1 s, so leases of one
    /// second are really one second. etcd is written in Go, which reads the clock without libc:
    /// libfaketime does not move its clock, so no [`ServerClock`](super::ServerClock) is offered.
    pub fn etcd() -> Result<ServerGuard, ServerError> {
        let dir = tempfile::tempdir()
            .map_err(|error| ServerError::Failed(format!("temp dir: {error}")))?;
        let client_port =
            free_port().map_err(|error| ServerError::Failed(format!("free port: {error}")))?;
        let peer_port = loop {
            let port =
                free_port().map_err(|error| ServerError::Failed(format!("free port: {error}")))?;
            if port != client_port {
                break port;
            }
        };
        let client_url = format!("http://127.0.0.1:{client_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let launch = Launch::new("etcd")
            .args(["--name", "fencer"])
            .args([
                std::ffi::OsString::from("--data-dir"),
                dir.path().join("data").into(),
            ])
            .args(["--listen-client-urls", &client_url])
            .args(["--advertise-client-urls", &client_url])
            .args(["--listen-peer-urls", &peer_url])
            .args(["--initial-advertise-peer-urls", &peer_url])
            .args(["--initial-cluster", &format!("fencer={peer_url}")])
            .args(["--heartbeat-interval", "10", "--election-timeout", "100"])
            .log_to(dir.path().join("server.log"));
        let guard = ServerGuard::start("etcd", launch, client_port, dir, None)?;
        // Listening is not serving: the member answers only once it has elected itself
        // leader, which on a loaded machine can come well after its port opens.
        crate::etcd3::wait_until_serving(&[SocketAddr::from(([127, 0, 0, 1], client_port))])?;
        Ok(guard)
    }
}
