//! Running the `fencer` binary from a test, as a user's shell would.

#![allow(dead_code)] // each test file uses a different part

use std::path::Path;
use std::process::{Command, Output};

/// The built `fencer` binary with `args`, run in `cwd`, not started yet (to add environment).
pub fn fencer_command(args: &[&str], cwd: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_fencer"));
    command.args(args).current_dir(cwd);
    command
}

/// Runs the `fencer` binary with `args` in `cwd` and waits for it.
pub fn fencer(args: &[&str], cwd: &Path) -> Output {
    fencer_command(args, cwd).output().expect("fencer runs")
}

/// Runs `fencer` as CI runs it (`CI=true`: no progress bar) and waits for it.
pub fn fencer_ci(args: &[&str], cwd: &Path) -> Output {
    fencer_command(args, cwd)
        .env("CI", "true")
        .output()
        .expect("fencer runs")
}

/// Real-tier timing short enough for a test, as the README's example runs use it: leases of
/// 300 ms renewed every 100 ms, calls given up after 100 ms.
pub const REAL_TIMING: [&str; 6] = [
    "--ttl",
    "300ms",
    "--renew-every",
    "100ms",
    "--call-timeout",
    "100ms",
];

/// The flags of the mutant a failing gate runs: an unfenced store whose workers keep writing
/// after a failed renewal, paused by the nemesis.
pub const MUTANT: [&str; 8] = [
    "--store",
    "sqlite-unfenced",
    "--nemesis",
    "pause",
    "--on-renew-failure",
    "continue",
    "--ops",
    "10",
];

/// Everything the run printed, stdout then stderr, for assertions and failure messages.
pub fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// A spawned fencer that is killed and reaped when dropped, so a failing assertion never
/// leaves a long gate running.
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Whether process `pid` is gone, or dead and waiting to be reaped by whoever adopted it.
pub fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

/// Where `name` is on `PATH`, if it is: to run a program by its full path, or to skip a test
/// that needs one.
pub fn on_path(name: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|path| path.is_file())
    })
}
