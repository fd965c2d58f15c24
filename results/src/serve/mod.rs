//! `fencer serve`: a small local web viewer over the run archive. It lists runs and serves their
//! files (timelines, plots, histories, verdicts), read-only, and never a file outside the archive.
//!
//! Plain `std::net` with one short-lived thread per connection (at most [`MAX_CONNECTIONS`] at
//! once, idle ones giving way to new ones: [`slots`]): a local viewer for one person needs no
//! async runtime or HTTP framework, and this keeps the build small.
//!
//! It listens on loopback only unless told [`Exposure::Network`]: an archive holds every
//! history, plan and setting its runs recorded (server URLs among them).

pub mod csp;
mod http;
pub mod listing;
pub mod resolve;
pub mod slots;

use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use self::http::{BadRequest, read_request, respond, respond_error};
use self::slots::{Slots, Waiting};

/// Connections held at once; when every one is being answered, more get 503 straight away.
pub const MAX_CONNECTIONS: usize = 64;

/// Who may reach the viewer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exposure {
    /// Loopback addresses only (`127.0.0.1`, `::1`, `localhost`): this machine's users.
    Loopback,
    /// Any address, network interfaces included: everyone who can reach the machine.
    Network,
}

/// Why the viewer cannot serve.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The archive is not a directory, or the address cannot be listened on.
    #[error("{0}")]
    Bind(String),
    /// The address reaches beyond this machine and [`Exposure::Network`] was not given.
    #[error(
        "refusing to serve the run archive on {listen} ({addr} is not a loopback address): \
         anyone who can reach it could read every run; listen on 127.0.0.1 or ::1, or pass \
         --allow-remote to serve it to the network"
    )]
    NotLoopback {
        /// The address as given.
        listen: String,
        /// The first address it resolved to that is not loopback.
        addr: SocketAddr,
    },
}

/// A server bound to its address, ready to [`Server::run`].
pub struct Server {
    listener: TcpListener,
    root: PathBuf,
}

impl Server {
    /// Binds `listen` (e.g. `127.0.0.1:8484`, port 0 for any free port) over the archive `root`;
    /// an address that is not loopback needs [`Exposure::Network`].
    pub fn bind(root: &Path, listen: &str, exposure: Exposure) -> Result<Server, ServeError> {
        let root = root.canonicalize().map_err(|error| {
            ServeError::Bind(format!(
                "{}: cannot serve this archive: {error}",
                root.display()
            ))
        })?;
        if !root.is_dir() {
            return Err(ServeError::Bind(format!(
                "{}: expected a run archive directory",
                root.display()
            )));
        }
        let cannot =
            |error: std::io::Error| ServeError::Bind(format!("cannot listen on {listen}: {error}"));
        let addrs: Vec<SocketAddr> = listen.to_socket_addrs().map_err(cannot)?.collect();
        if exposure == Exposure::Loopback
            && let Some(&addr) = addrs.iter().find(|addr| !is_loopback(addr))
        {
            return Err(ServeError::NotLoopback {
                listen: listen.to_string(),
                addr,
            });
        }
        let listener = TcpListener::bind(&addrs[..]).map_err(cannot)?;
        Ok(Server { listener, root })
    }

    /// Whether the bound address is loopback (false: the network can reach it).
    pub fn is_loopback(&self) -> bool {
        self.listener
            .local_addr()
            .is_ok_and(|addr| is_loopback(&addr))
    }

    /// The URL the server answers on.
    pub fn url(&self) -> String {
        match self.listener.local_addr() {
            Ok(addr) => format!("http://{addr}/"),
            Err(_) => "http://(unknown address)/".into(),
        }
    }

    /// Serves until the process ends.
    pub fn run(self) {
        let root = Arc::new(self.root);
        let slots = Slots::new(MAX_CONNECTIONS);
        for stream in self.listener.incoming() {
            let Ok(mut stream) = stream else {
                continue;
            };
            let Some(waiting) = slots.admit(&stream) else {
                let _ = respond_error(&mut stream, 503, false);
                continue;
            };
            let root = Arc::clone(&root);
            // Kept to answer 503 if the system refuses another thread, rather than panic.
            let spare = stream.try_clone();
            let spawned = std::thread::Builder::new()
                .name("serve-connection".into())
                .spawn(move || {
                    let _ = handle(&root, stream, waiting);
                });
            if let (Err(_), Ok(mut spare)) = (spawned, spare) {
                let _ = respond_error(&mut spare, 503, false);
            }
        }
    }
}

/// Loopback, IPv4-mapped IPv6 loopback (`::ffff:127.0.0.1`) included.
fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().to_canonical().is_loopback()
}

/// The `Content-Type` for a file, by extension.
fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|ext| ext.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("json") => "application/json",
        Some("jsonl" | "txt" | "log") => "text/plain; charset=utf-8",
        Some("png") => "image/png",
        _ => "application/octet-stream",
    }
}

fn query_verdict(target: &str) -> Option<&str> {
    let query = target.split_once('?')?.1;
    query
        .split('&')
        .find_map(|pair| pair.strip_prefix("verdict="))
        .filter(|value| matches!(*value, "valid" | "invalid" | "unknown"))
}

/// A client that stops reading its response for this long is dropped.
const WRITE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

fn handle(root: &Path, mut stream: TcpStream, waiting: Waiting) -> std::io::Result<()> {
    stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
    let request = match read_request(&stream) {
        Ok(request) => request,
        Err(BadRequest::Gone) => return Ok(()),
        Err(BadRequest::Status(status)) => return respond_error(&mut stream, status, false),
    };
    let Some(_serving) = waiting.into_serving() else {
        return Ok(()); // It gave way to a newer connection while its head arrived.
    };
    let head_only = request.method == "HEAD";
    if request.method != "GET" && !head_only {
        return respond_error(&mut stream, 405, head_only);
    }
    let path_part = request.target.split(['?', '#']).next().unwrap_or_default();
    if path_part == "/" {
        let runs = listing::find_runs(root);
        let page = listing::index_page(&runs, query_verdict(&request.target));
        let html = "text/html; charset=utf-8";
        return respond(
            &mut stream,
            200,
            html,
            &mut page.as_bytes(),
            page.len() as u64,
            head_only,
        );
    }
    let Some(path) = resolve::resolve(root, &request.target) else {
        return respond_error(&mut stream, 404, head_only);
    };
    if path.is_dir() {
        let page = listing::directory_page(&path, path_part);
        let html = "text/html; charset=utf-8";
        return respond(
            &mut stream,
            200,
            html,
            &mut page.as_bytes(),
            page.len() as u64,
            head_only,
        );
    }
    let Ok(mut file) = std::fs::File::open(&path) else {
        return respond_error(&mut stream, 404, head_only);
    };
    let length = file.metadata().map(|meta| meta.len()).unwrap_or(0);
    respond(
        &mut stream,
        200,
        content_type(&path),
        &mut file,
        length,
        head_only,
    )
}
