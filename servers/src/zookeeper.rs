//! A private ZooKeeper (Debian package `zookeeper`, run on the JVM).

use crate::ServerError;
use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::{Launch, ServerClock, ServerGuard, free_port};

/// The server's tick: ZooKeeper clamps session timeouts to `[2, 20] × tickTime`, so 50 ms lets
/// leases (sessions) of 100 ms to 1 s through unchanged — the range fencer's real tier uses.
pub const ZOOKEEPER_TICK_MS: u64 = 50;

/// Debian's server jar (its manifest names the jars it needs), a logger that writes to stderr
/// (so the server's log lands in the guard's directory) and Debian's configuration directory.
const CLASSPATH: &str =
    "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar:/etc/zookeeper/conf";

/// How long a started JVM may take to serve requests after it accepts connections.
const READY_TIMEOUT: Duration = Duration::from_secs(20);

impl ServerGuard {
    /// Starts a private standalone ZooKeeper on a free port with its data (snapshots and
    /// transaction log) in the guard's directory, so a restart keeps every znode and zxid — and
    /// every session, which the server restores and then expires by its own timers. The log is
    /// written without fsync (`forceSync=no`: an fsync on a busy disk outlasts a 300 ms
    /// session's 120 ms connection timeout); a killed process loses nothing by it, only a power
    /// cut would. With
    /// `faked_clock`, the JVM runs under libfaketime (see [`ServerClock`]); a jump takes effect
    /// within a second.
    pub fn zookeeper(faked_clock: bool) -> Result<ServerGuard, ServerError> {
        ServerGuard::zookeeper_ticking(ZOOKEEPER_TICK_MS, faked_clock)
    }

    /// [`ServerGuard::zookeeper`] with a tick of `tick_ms` (sessions of 2 to 20 ticks). Under
    /// libfaketime the JVM answers slowly enough that sub-second sessions expire even while
    /// renewed, so clock tests use a longer tick.
    pub fn zookeeper_ticking(tick_ms: u64, faked_clock: bool) -> Result<ServerGuard, ServerError> {
        if !std::path::Path::new("/usr/share/java/zookeeper.jar").exists() {
            return Err(ServerError::NotInstalled(
                "ZooKeeper is not installed (/usr/share/java/zookeeper.jar missing): \
                        apt-get install zookeeper"
                    .to_string(),
            ));
        }
        let dir = tempfile::tempdir()
            .map_err(|error| ServerError::Failed(format!("temp dir: {error}")))?;
        let port =
            free_port().map_err(|error| ServerError::Failed(format!("free port: {error}")))?;
        let config = dir.path().join("zoo.cfg");
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data)
            .map_err(|error| ServerError::Failed(format!("data dir: {error}")))?;
        let text = format!(
            "tickTime={tick_ms}\ndataDir={}\nclientPort={port}\n\
             clientPortAddress=127.0.0.1\nadmin.enableServer=false\n\
             4lw.commands.whitelist=*\nmaxClientCnxns=0\nforceSync=no\n",
            data.display()
        );
        std::fs::write(&config, text)
            .map_err(|error| ServerError::Failed(format!("zoo.cfg: {error}")))?;
        let launch = Launch::new("java")
            .args(["-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"])
            .args(["-cp", CLASSPATH])
            .args(["org.apache.zookeeper.server.ZooKeeperServerMain"])
            .args([config.as_os_str()])
            .log_to(dir.path().join("server.log"));
        let clock = if faked_clock {
            Some(ServerClock::new(dir.path())?)
        } else {
            None
        };
        // A JVM reads the clock constantly: re-reading the offset file on every read (the
        // clock's default) makes each request take longer than a short session's connection
        // timeout, so the offset is cached for up to a second (a jump lands within 1 s).
        let launch = match &clock {
            Some(clock) => clock
                .apply(launch)
                .env("FAKETIME_NO_CACHE", "0")
                .env("FAKETIME_CACHE_DURATION", "1"),
            None => launch,
        };
        let guard = ServerGuard::start("zookeeper", launch, port, dir, clock)?;
        wait_until_ok(port)?;
        Ok(guard)
    }
}

/// Waits until the server on `port` serves requests: the `srvr` four-letter word reports its
/// mode. (`ruok` is no use: it answers `imok` while the server is still loading its data and
/// closes client sessions with "ZooKeeperServer not running".)
pub fn wait_until_ok(port: u16) -> Result<(), ServerError> {
    let started = Instant::now();
    while started.elapsed() < READY_TIMEOUT {
        if four_letter_word(port, b"srvr").is_ok_and(|answer| answer.contains("Mode: ")) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(ServerError::Failed(format!(
        "zookeeper on port {port} did not serve requests within {READY_TIMEOUT:?}"
    )))
}

fn four_letter_word(port: u16, word: &[u8]) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(1)))?;
    stream.write_all(word)?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    Ok(answer)
}
