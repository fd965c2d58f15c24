//! The command line's bounds: settings and plans past a ceiling and inputs that never end are
//! refused with exit 254 at their line, a gate asked for more threads than it can use runs on
//! what it needs, and a reader that goes away (`| head -1`) stops the printing, not the run.

mod cli_support;
use cli_support::{fencer, fencer_command, text};

use std::io::BufRead;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `args` in `cwd` and asserts a bad-input exit, quickly and without a panic, whose
/// message contains `needle`.
fn assert_refused(args: &[&str], cwd: &Path, needle: &str) {
    let started = Instant::now();
    let output = fencer(args, cwd);
    let all = text(&output);
    assert_eq!(output.status.code(), Some(254), "{args:?}: {all}");
    assert!(
        all.contains(needle),
        "{args:?}: expected `{needle}` in: {all}"
    );
    assert!(!all.contains("panicked"), "{args:?}: {all}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{args:?} took {:?}",
        started.elapsed()
    );
}

#[test]
fn settings_past_a_ceiling_are_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    assert_refused(
        &["run", "--ttl", "1000000h"],
        cwd,
        "error: ttl must be at most 3600s (got 3600000000s)",
    );
    assert_refused(
        &["run", "--ttl", "2h", "--renew-every", "1h"],
        cwd,
        "ttl must be at most 3600s",
    );
    // Within every ceiling, but each lease renewed 3600000 times.
    assert_refused(
        &["run", "--ttl", "1h", "--renew-every", "1ms"],
        cwd,
        "renew-every (1ms) must be at least a thousandth of the ttl (3600s)",
    );
    assert_refused(
        &["run", "--call-timeout", "2h"],
        cwd,
        "call timeout must be at most 3600s",
    );
    // A gap this short over 5000 s of cycles would draw faults for ever.
    assert_refused(
        &["run", "--fault-gap", "1ns"],
        cwd,
        "more than the 1000000 a plan may hold",
    );
    assert_refused(
        &["gate", "--seeds", "0..2", "--fault-gap", "2h"],
        cwd,
        "fault-gap must be at most 3600s",
    );
    assert_refused(
        &["run", "--workers", "1000", "--ops", "1001"],
        cwd,
        "workers x ops must be at most 1000000 cycles",
    );
    assert_eq!(std::fs::read_dir(cwd).unwrap().count(), 0, "nothing saved");
}

/// A plan fencer wrote (seed 3, two workers, three cycles each), as text.
fn saved_plan(cwd: &Path) -> String {
    let run = fencer(
        &[
            "run",
            "--seed",
            "3",
            "--workers",
            "2",
            "--ops",
            "3",
            "--out",
            "saved",
        ],
        cwd,
    );
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    std::fs::read_to_string(cwd.join("saved/plan.json")).unwrap()
}

#[test]
fn a_plan_with_a_pause_to_the_end_of_time_is_refused_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let plan = saved_plan(dir.path());
    let line = 1 + plan
        .lines()
        .position(|line| line.contains("\"duration_ns\""))
        .expect("the saved plan has a fault with a duration");
    let edited: Vec<String> = plan
        .lines()
        .enumerate()
        .map(|(index, text)| {
            if index + 1 == line {
                let indent = &text[..text.len() - text.trim_start().len()];
                let comma = if text.trim_end().ends_with(',') {
                    ","
                } else {
                    ""
                };
                format!("{indent}\"duration_ns\": {}{comma}", u64::MAX)
            } else {
                text.to_string()
            }
        })
        .collect();
    std::fs::write(dir.path().join("p.json"), edited.join("\n")).unwrap();
    assert_refused(
        &["run", "--plan", "p.json"],
        dir.path(),
        &format!("p.json:{line}: expected duration_ns of at most 86400s"),
    );
}

#[test]
fn inputs_that_never_end_are_refused_at_their_first_line() {
    let dir = tempfile::tempdir().unwrap();
    assert_refused(
        &["check", "/dev/zero"],
        dir.path(),
        "/dev/zero:1: expected one history event per line, found a line longer than 4194304 bytes",
    );
    assert_refused(
        &["run", "--plan", "/dev/zero"],
        dir.path(),
        "/dev/zero:1: expected a plan of at most 536870912 bytes",
    );
}

#[test]
fn a_gate_asked_for_thousands_of_jobs_runs_one_per_seed() {
    let dir = tempfile::tempdir().unwrap();
    let output = fencer(
        &[
            "gate",
            "--seeds",
            "0..3",
            "--ops",
            "3",
            "--jobs",
            "3000",
            "--no-regressions",
            "--out",
            "g",
        ],
        dir.path(),
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(text(&output).contains("(3 jobs"), "{}", text(&output));
}

/// A stream whose reader has already gone away: every write to it fails with EPIPE.
fn closed_stream() -> Stdio {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    Stdio::from(writer)
}

/// Runs `args` in `cwd` with stdout and stderr closed before the first line.
fn with_streams_closed(args: &[&str], cwd: &Path) -> Output {
    fencer_command(args, cwd)
        .stdout(closed_stream())
        .stderr(closed_stream())
        .output()
        .expect("fencer runs")
}

#[test]
fn a_run_piped_into_head_still_finishes_saves_and_exits_with_its_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = fencer_command(&["run", "--ops", "20", "--out", "run"], dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // `head -1` has read its line and gone.
    let status = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(first.starts_with("fencer run: "), "{first}");
    assert_eq!(status.code(), Some(0), "{err}");
    assert_eq!(err, "", "a closed pipe is not worth a word");
    assert!(dir.path().join("run/history.jsonl").is_file());
}

#[test]
fn every_command_carries_on_when_its_output_streams_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    // A warning goes to the closed stderr first, then every line to the closed stdout.
    let run = with_streams_closed(
        &["run", "--ops", "5", "--renew-every", "6s", "--out", "r"],
        cwd,
    );
    assert_eq!(run.status.code(), Some(0));
    assert!(cwd.join("r/verdict.json").is_file(), "the run was saved");
    for args in [
        vec!["replay", "r"],
        vec!["check", "r/history.jsonl"],
        vec!["explain", "r"],
        vec!["bench", "--seeds", "1", "--ops", "3"],
        vec![
            "gate",
            "--seeds",
            "0..2",
            "--ops",
            "3",
            "--no-regressions",
            "--out",
            "g",
        ],
    ] {
        let output = with_streams_closed(&args, cwd);
        assert_eq!(output.status.code(), Some(0), "{args:?}");
    }
    assert!(
        cwd.join("g/gate.json").is_file(),
        "the gate wrote its summary"
    );
    let failing = with_streams_closed(
        &[
            "run",
            "--ops",
            "10",
            "--store",
            "sqlite-unfenced",
            "--on-renew-failure",
            "continue",
            "--nemesis",
            "pause",
            "--seed",
            "1",
            "--out",
            "f",
        ],
        cwd,
    );
    let verdict = std::fs::read_to_string(cwd.join("f/verdict.json")).unwrap();
    let expected = if verdict.contains("\"invalid\"") {
        1
    } else {
        0
    };
    assert_eq!(
        failing.status.code(),
        Some(expected),
        "the verdict's own code"
    );
}
