//! A private PostgreSQL (Debian package `postgresql`), optionally under libfaketime.
//!
//! PostgreSQL refuses to run as root, so the cluster is initialised and run as the `postgres`
//! user (when fencer itself runs as root) in the guard's directory. The server runs in the
//! foreground as the guard's child, so pause, kill and restart act on the postmaster itself,
//! and a restart reopens the same data directory: committed rows (lease generations, the
//! register's fence) survive it, as they would in production.

use crate::ServerError;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::{Launch, ServerClock, ServerGuard, free_port};

/// Where Debian installs the server binaries, one directory per major version.
const POSTGRES_LIB: &str = "/usr/lib/postgresql";

/// How many times a private PostgreSQL start is tried, each on a fresh port and directory.
const START_ATTEMPTS: usize = 3;

/// The database a private server creates for the adapters (`postgres://…/test`).
pub const POSTGRES_DATABASE: &str = "test";

impl ServerGuard {
    /// Starts a private PostgreSQL on a free port with trust authentication for user
    /// `postgres` and a database [`POSTGRES_DATABASE`]; with `faketime`, under a libfaketime
    /// clock ([`ServerGuard::clock`]) so its `now()`, which decides lease expiry, can be
    /// stepped.
    ///
    /// A free port is only free until someone takes it: a server started at the same moment
    /// (tests run in parallel) can win it, and PostgreSQL then exits while the other answers
    /// the readiness check. Such a start fails at `createdb`, and is tried again on a new port.
    pub fn postgres(faketime: bool) -> Result<ServerGuard, ServerError> {
        let mut failure = ServerError::Failed("no start attempted".into());
        for _ in 0..START_ATTEMPTS {
            match ServerGuard::postgres_once(faketime) {
                Ok(guard) => return Ok(guard),
                Err(error) => failure = error,
            }
        }
        Err(failure)
    }

    fn postgres_once(faketime: bool) -> Result<ServerGuard, ServerError> {
        let bin = postgres_bin_dir()?;
        let dir = tempfile::tempdir()
            .map_err(|error| ServerError::Failed(format!("temp dir: {error}")))?;
        let port =
            free_port().map_err(|error| ServerError::Failed(format!("free port: {error}")))?;
        let run_as = postgres_user()?;
        let data = dir.path().join("data");
        if let Some((uid, gid)) = run_as {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).map_err(|error| {
                ServerError::Failed(format!("chown {}: {error}", dir.path().display()))
            })?;
        }
        let mut initdb = Launch::new(bin.join("initdb"))
            .args(["-A", "trust", "-U", "postgres", "--no-sync", "-D"])
            .args([data.as_os_str()]);
        initdb.run_as = run_as;
        run_to_end(&initdb, "initdb")?;
        let clock = if faketime {
            Some(ServerClock::new(dir.path())?)
        } else {
            None
        };
        let mut launch = Launch::new(bin.join("postgres"))
            .args([std::ffi::OsString::from("-D"), data.clone().into()])
            .args([std::ffi::OsString::from("-k"), dir.path().into()])
            .args(["-h", "127.0.0.1", "-p", &port.to_string()])
            // No fsync: a killed process's writes still reach the kernel, only an OS crash
            // would lose them. Commits stay synchronous: with synchronous_commit=off a kill
            // loses the last commits, lease generations included, and tokens go backwards
            // (fencer's restart test catches exactly that).
            .args(["-c", "fsync=off"])
            .log_to(dir.path().join("server.log"));
        launch.run_as = run_as;
        if let Some(clock) = &clock {
            launch = clock.apply(launch);
        }
        let guard = ServerGuard::start("postgres", launch, port, dir, clock)?;
        let mut createdb = Launch::new(bin.join("createdb")).args([
            "-h",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-U",
            "postgres",
            POSTGRES_DATABASE,
        ]);
        createdb.run_as = run_as;
        run_to_end(&createdb, "createdb")?;
        Ok(guard)
    }

    /// The URL of a private PostgreSQL's database, for the adapters.
    pub fn postgres_url(&self) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/{POSTGRES_DATABASE}",
            self.port()
        )
    }
}

/// The newest `/usr/lib/postgresql/<version>/bin` holding `postgres` and `initdb`.
fn postgres_bin_dir() -> Result<PathBuf, ServerError> {
    let entries = std::fs::read_dir(POSTGRES_LIB).map_err(|error| {
        ServerError::NotInstalled(format!(
            "PostgreSQL is not installed ({POSTGRES_LIB}: {error}): apt-get install postgresql"
        ))
    })?;
    let mut versions: Vec<(u32, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            (bin.join("postgres").exists() && bin.join("initdb").exists()).then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin).ok_or_else(|| {
        ServerError::NotInstalled(format!(
            "no PostgreSQL server under {POSTGRES_LIB}/*/bin: apt-get install postgresql"
        ))
    })
}

/// The `postgres` user's ids when we run as root (PostgreSQL refuses root); `None` otherwise
/// (the server then runs as us).
fn postgres_user() -> Result<Option<(u32, u32)>, ServerError> {
    // /proc/self belongs to our effective user.
    let root = std::fs::metadata("/proc/self")
        .map(|meta| std::os::unix::fs::MetadataExt::uid(&meta) == 0)
        .unwrap_or(false);
    if !root {
        return Ok(None);
    }
    let passwd = std::fs::read_to_string("/etc/passwd")
        .map_err(|error| ServerError::Failed(format!("cannot read /etc/passwd: {error}")))?;
    passwd_ids(&passwd, "postgres").map(Some).ok_or_else(|| {
        ServerError::NotInstalled(
            "running as root and there is no `postgres` user to run PostgreSQL as: \
             apt-get install postgresql"
                .to_string(),
        )
    })
}

/// `user`'s uid and gid from the text of `/etc/passwd`.
fn passwd_ids(passwd: &str, user: &str) -> Option<(u32, u32)> {
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        (fields.len() >= 4 && fields[0] == user)
            .then(|| Some((fields[2].parse().ok()?, fields[3].parse().ok()?)))
            .flatten()
    })
}

/// Runs a setup command (initdb, createdb) to its end, with its output in the error.
fn run_to_end(launch: &Launch, what: &str) -> Result<(), ServerError> {
    use std::os::unix::process::CommandExt;
    let mut command = Command::new(&launch.program);
    command.args(&launch.args).stdin(Stdio::null());
    if let Some((uid, gid)) = launch.run_as {
        command.uid(uid).gid(gid);
    }
    // The server's files are private to it; the setup tools must not inherit our cwd (root's).
    command.current_dir(Path::new("/"));
    let output = command.output().map_err(|error| {
        ServerError::Failed(format!("cannot run {}: {error}", launch.program.display()))
    })?;
    if output.status.success() {
        Ok(())
    } else {
        Err(ServerError::Failed(format!(
            "{what} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwd_lines_give_the_users_ids() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\n\
                      postgres:x:104:110:PostgreSQL administrator:/var/lib/postgresql:/bin/bash\n";
        assert_eq!(passwd_ids(passwd, "postgres"), Some((104, 110)));
        assert_eq!(passwd_ids(passwd, "redis"), None);
    }
}
