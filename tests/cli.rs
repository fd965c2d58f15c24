//! The command line as a user meets it: exit codes, one-line errors for bad input, atomic run
//! directories, replay, demo.

mod cli_support;
use cli_support::fencer;

use std::process::Output;

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Asserts a bad-input exit: code 254, no panic, a message containing `needle`, nothing written.
fn assert_bad_input(args: &[&str], needle: &str) {
    let dir = tempfile::tempdir().unwrap();
    let output = fencer(args, dir.path());
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(254), "{args:?}: {err}");
    assert!(
        err.contains(needle),
        "{args:?}: expected `{needle}` in: {err}"
    );
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "{args:?} left files behind"
    );
}

#[test]
fn bad_flag_values_exit_254_with_a_reason() {
    assert_bad_input(
        &["run", "--store", "mysql"],
        "unknown store `mysql`: expected one of sqlite",
    );
    assert_bad_input(&["run", "--lock", "zk"], "unknown lock `zk`");
    assert_bad_input(&["run", "--nemesis", "pause,gc"], "unknown nemesis `gc`");
    assert_bad_input(
        &["run", "--on-renew-failure", "retry"],
        "expected stop or continue",
    );
    assert_bad_input(&["run", "--ttl", "0s"], "a duration must be positive");
    assert_bad_input(&["run", "--ttl", "-5s"], "a duration must be positive");
    assert_bad_input(&["run", "--ttl", "ten"], "unknown unit `ten`");
    assert_bad_input(&["run", "--ttl", "10"], "has no unit");
    assert_bad_input(&["run", "--workers", "0"], "workers must be 1 to 1000");
    assert_bad_input(&["run", "--frobnicate"], "unexpected argument");
    assert_bad_input(
        &["run", "--ttl", "10s", "--renew-every", "10s"],
        "must be shorter than ttl",
    );
}

#[test]
fn unwritable_out_exits_255_and_leaves_nothing_half_written() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a-file"), b"x").unwrap();
    let output = fencer(&["run", "--ops", "2", "--out", "a-file/run"], dir.path());
    // The run happened; only the machine refused to keep it: fencer's failure, not the input's.
    assert_eq!(output.status.code(), Some(255), "{}", stderr(&output));
    assert!(stderr(&output).contains("a-file"), "{}", stderr(&output));
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert_eq!(names, ["a-file"]);
}

#[test]
fn run_then_replay_is_byte_identical_and_keeps_the_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let run = fencer(&["run", "--seed", "5", "--ops", "20"], dir.path());
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}{}",
        stdout(&run),
        stderr(&run)
    );
    let latest = dir.path().join("runs/latest");
    for file in ["run.json", "plan.json", "history.jsonl", "verdict.json"] {
        assert!(latest.join(file).is_file(), "{file} missing");
    }
    let replay = fencer(&["replay", "runs/latest"], dir.path());
    let out = stdout(&replay);
    assert_eq!(replay.status.code(), Some(0), "{out}{}", stderr(&replay));
    let hashes: Vec<&str> = out
        .lines()
        .filter(|line| line.contains("history sha256"))
        .map(|line| line.rsplit(' ').next().unwrap())
        .collect();
    assert_eq!(hashes.len(), 2, "{out}");
    assert_eq!(hashes[0], hashes[1]);
    assert!(out.contains("identical:"), "{out}");
}

#[test]
fn mutant_run_exits_1_and_its_replay_agrees() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "run",
        "--seed",
        "1",
        "--ops",
        "20",
        "--store",
        "sqlite-unfenced",
        "--nemesis",
        "pause",
        "--on-renew-failure",
        "continue",
        "--out",
        "r",
    ];
    let run = fencer(&args, dir.path());
    assert_eq!(
        run.status.code(),
        Some(1),
        "{}{}",
        stdout(&run),
        stderr(&run)
    );
    assert!(
        stdout(&run).contains("stale-write-accepted"),
        "{}",
        stdout(&run)
    );
    let replay = fencer(&["replay", "r"], dir.path());
    assert_eq!(replay.status.code(), Some(1), "{}", stderr(&replay));
    let check = fencer(&["check", "r/history.jsonl"], dir.path());
    assert_eq!(check.status.code(), Some(1), "{}", stderr(&check));
}

#[test]
fn replay_of_missing_or_corrupt_directory_exits_254_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let missing = fencer(&["replay", "no-such-run"], dir.path());
    assert_eq!(missing.status.code(), Some(254));
    assert_eq!(stderr(&missing).lines().count(), 1, "{}", stderr(&missing));
    assert!(stderr(&missing).contains("not a run directory"));

    let run = fencer(&["run", "--ops", "2", "--out", "r"], dir.path());
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));

    std::fs::write(
        dir.path().join("r/plan.json"),
        b"{\n \"format\": 1,\n oops\n}",
    )
    .unwrap();
    let corrupt = fencer(&["replay", "r"], dir.path());
    assert_eq!(corrupt.status.code(), Some(254));
    assert_eq!(stderr(&corrupt).lines().count(), 1, "{}", stderr(&corrupt));
    assert!(
        stderr(&corrupt).contains("r/plan.json:3:"),
        "{}",
        stderr(&corrupt)
    );

    std::fs::remove_file(dir.path().join("r/run.json")).unwrap();
    let no_record = fencer(&["replay", "r"], dir.path());
    assert_eq!(no_record.status.code(), Some(254));
    assert!(
        stderr(&no_record).contains("run.json: missing"),
        "{}",
        stderr(&no_record)
    );
}

#[test]
fn tampered_history_is_refused_before_replaying() {
    let dir = tempfile::tempdir().unwrap();
    let run = fencer(&["run", "--ops", "2", "--out", "r"], dir.path());
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    let path = dir.path().join("r/history.jsonl");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.truncate(bytes.len() / 2);
    std::fs::write(&path, bytes).unwrap();
    let replay = fencer(&["replay", "r"], dir.path());
    assert_eq!(replay.status.code(), Some(254));
    assert!(
        stderr(&replay).contains("was modified"),
        "{}",
        stderr(&replay)
    );
}

#[test]
fn check_reports_malformed_history_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("h.jsonl"),
        "{\"index\":0,\"time_ns\":0,\"process\":\"w0\",\"type\":\"invoke\",\"f\":\"read\"}\n{broken\n",
    )
    .unwrap();
    let output = fencer(&["check", "h.jsonl"], dir.path());
    assert_eq!(output.status.code(), Some(254));
    assert!(
        stderr(&output).contains("h.jsonl:2:"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn demo_prints_the_articles_three_lines_and_points_at_both_runs() {
    let dir = tempfile::tempdir().unwrap();
    let output = fencer(&["demo"], dir.path());
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let out = stdout(&output);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[..3],
        [
            "owner comparison: B lease survives",
            "unprotected resource: late A result",
            "fenced resource: B result",
        ]
    );
    assert!(
        lines[3].starts_with("unfenced run: runs/demo/unfenced-"),
        "{out}"
    );
    assert!(
        lines[4].starts_with("fenced run: runs/demo/fenced-"),
        "{out}"
    );
    assert!(lines[3].contains("invalid"), "{out}");
}
