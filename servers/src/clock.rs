//! A server's wall clock under libfaketime (Debian package `libfaketime`), steppable while the
//! server runs.
//!
//! The server is started with libfaketime preloaded and pointed at an offset file in its
//! directory; a jump rewrites that file (atomically) and the server's next clock read sees it.
//! Only the wall clock (`CLOCK_REALTIME`) is faked — an NTP step does not move the monotonic
//! clock either — so this models the server's own clock being stepped. PostgreSQL's `now()`
//! honours it; ZooKeeper's session expiry runs on the monotonic clock and does not; Go's etcd
//! bypasses libc and ignores it; Debian's Redis hangs at start under it.

use crate::ServerError;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::Launch;

/// Where Debian installs the thread-safe libfaketime.
const LIBFAKETIME_MT: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

/// The handle that steps one server's wall clock.
#[derive(Debug)]
pub struct ServerClock {
    offset_file: PathBuf,
    /// Total offset from the true wall clock so far, in milliseconds.
    offset_ms: Mutex<i64>,
}

impl ServerClock {
    /// A clock at offset zero whose offset file lives in `dir`. Fails with the package to
    /// install when libfaketime is missing.
    pub fn new(dir: &Path) -> Result<ServerClock, ServerError> {
        ServerClock::available()?;
        let clock = ServerClock {
            offset_file: dir.join("faketime.offset"),
            offset_ms: Mutex::new(0),
        };
        clock.write(0)?;
        Ok(clock)
    }

    /// Whether libfaketime is installed; the error names the package to install.
    pub fn available() -> Result<(), ServerError> {
        if Path::new(LIBFAKETIME_MT).exists() {
            Ok(())
        } else {
            Err(ServerError::NotInstalled(format!(
                "libfaketime is not installed ({LIBFAKETIME_MT} missing): apt-get install libfaketime"
            )))
        }
    }

    /// `launch` with libfaketime preloaded and reading this clock's offset file on every clock
    /// read (no cache, so a jump takes effect at once).
    pub fn apply(&self, launch: Launch) -> Launch {
        self.env()
            .into_iter()
            .fold(launch, |launch, (name, value)| launch.env(name, value))
    }

    /// The environment that puts a process on this clock: libfaketime preloaded, reading the
    /// offset file on every clock read. For processes fencer starts some other way (an exec
    /// client child).
    pub fn env(&self) -> Vec<(String, String)> {
        [
            ("LD_PRELOAD", LIBFAKETIME_MT.to_string()),
            (
                "FAKETIME_TIMESTAMP_FILE",
                self.offset_file.to_string_lossy().into_owned(),
            ),
            ("FAKETIME_NO_CACHE", "1".to_string()),
            ("FAKETIME_DONT_FAKE_MONOTONIC", "1".to_string()),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_string(), value))
        .collect()
    }

    /// Steps the server's wall clock by `jump_ms` (negative: backwards) from where it is now.
    pub fn jump(&self, jump_ms: i64) -> Result<(), ServerError> {
        let mut offset_ms = self
            .offset_ms
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let next_ms = *offset_ms + jump_ms;
        self.write(next_ms)?;
        *offset_ms = next_ms;
        Ok(())
    }

    /// The total offset from the true wall clock, in milliseconds.
    pub fn offset_ms(&self) -> i64 {
        *self
            .offset_ms
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Writes the offset file atomically (temp file + rename): the server never reads half a
    /// line.
    pub fn write(&self, offset_ms: i64) -> Result<(), ServerError> {
        let seconds = offset_ms as f64 / 1000.0;
        let text = format!("{seconds:+.3}s\n");
        let temp = self.offset_file.with_extension("tmp");
        std::fs::write(&temp, text)
            .and_then(|()| std::fs::rename(&temp, &self.offset_file))
            .map_err(|error| {
                ServerError::Failed(format!(
                    "cannot write {}: {error}",
                    self.offset_file.display()
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `date +%s` under the clock, as a number of seconds.
    fn server_seconds(clock: &ServerClock) -> i64 {
        let launch = clock.apply(Launch::new("date").args(["+%s"]));
        let mut command = std::process::Command::new(&launch.program);
        command.args(&launch.args);
        for (name, value) in &launch.env {
            command.env(name, value);
        }
        let output = command.output().unwrap();
        String::from_utf8(output.stdout)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    fn true_seconds() -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
    }

    #[test]
    fn a_jump_moves_the_servers_wall_clock_both_ways() {
        let dir = tempfile::tempdir().unwrap();
        let Ok(clock) = ServerClock::new(dir.path()) else {
            eprintln!("FENCER-SKIPPED-BACKEND libfaketime: apt-get install libfaketime");
            assert!(std::env::var_os("FENCER_REQUIRE_BACKENDS").is_none());
            return;
        };
        assert!((server_seconds(&clock) - true_seconds()).abs() <= 2);
        clock.jump(3_600_000).unwrap();
        assert!((server_seconds(&clock) - true_seconds() - 3600).abs() <= 2);
        clock.jump(-7_200_000).unwrap();
        assert_eq!(clock.offset_ms(), -3_600_000);
        assert!((server_seconds(&clock) - true_seconds() + 3600).abs() <= 2);
    }
}
