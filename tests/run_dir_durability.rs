//! A saved run survives a power loss: `fencer run` syncs the staging directory before renaming
//! it into place and the parent directory after, watched through the system calls strace sees
//! (where strace is missing or may not trace, the test skips with CI's skip marker, and fails
//! outright under `FENCER_REQUIRE_BACKENDS=1`).

mod cli_support;
mod support;

use std::process::Command;

use cli_support::on_path;

/// The test's name on a skip line.
const TEST: &str = "run_dir_durability";

/// The descriptor an `openat` of a path containing `path` returned, in `line`.
fn opened(line: &str, path: &str) -> Option<String> {
    let rest = line.split_once("openat(")?.1;
    if !rest.contains(&format!("\"{path}\"")) {
        return None;
    }
    Some(rest.rsplit_once("= ")?.1.trim().to_string())
}

/// Whether, from `lines[from..]`, a directory open of `path` is followed by an fsync of it.
fn synced_after(lines: &[&str], from: usize, path: &str) -> bool {
    lines[from..].iter().enumerate().any(|(at, line)| {
        opened(line, path).is_some_and(|fd| {
            lines[from + at..]
                .iter()
                .any(|later| later.contains(&format!("fsync({fd})")))
        })
    })
}

#[test]
fn a_saved_run_syncs_its_staging_dir_before_the_rename_and_its_parent_after() {
    let Some(strace) = on_path("strace") else {
        support::started_or_skipped(TEST, "strace", "strace", Err::<(), _>("not installed"));
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(strace)
        .args([
            "-f",
            "-o",
            "trace",
            "-e",
            "trace=openat,rename,renameat,renameat2,fsync",
        ])
        .arg(env!("CARGO_BIN_EXE_fencer"))
        .args(["run", "--workers", "1", "--ops", "2", "--out", "r"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let trace = std::fs::read_to_string(dir.path().join("trace")).unwrap_or_default();
    if !dir.path().join("r").is_dir() && trace.is_empty() {
        let why = format!(
            "cannot trace here: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        support::started_or_skipped(TEST, "strace", "strace", Err::<(), _>(why));
        return;
    }
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        cli_support::text(&output)
    );
    let lines: Vec<&str> = trace.lines().collect();
    let rename = lines
        .iter()
        .position(|line| line.contains("rename") && line.contains(".r.partial-"))
        .unwrap_or_else(|| panic!("no rename of the staging dir in {trace}"));
    let staging = lines[rename]
        .split('"')
        .nth(1)
        .expect("the rename names the staging dir");
    assert!(
        synced_after(&lines[..rename], 0, staging),
        "{staging} was not synced before its rename:\n{trace}"
    );
    assert!(
        synced_after(&lines, rename, "."),
        "the parent was not synced after the rename:\n{trace}"
    );
}
