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

/// Everything the run printed, stdout then stderr, for assertions and failure messages.
pub fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}
