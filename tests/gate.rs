//! `fencer gate` as CI meets it: exit codes, replay commands that reproduce, shrunk plans that
//! still fail, results independent of jobs and shards, determinism checking, SIGINT and
//! SIGTERM.

mod cli_support;
use cli_support::{KillOnDrop, MUTANT, fencer_ci as fencer, text};

use std::collections::BTreeSet;
use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn json(path: &Path) -> Value {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap()
}

fn gate(cwd: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["gate"];
    args.extend_from_slice(extra);
    fencer(&args, cwd)
}

fn failing_seeds(summary: &Value) -> BTreeSet<u64> {
    summary["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|failure| failure["seed"].as_u64().unwrap())
        .collect()
}

#[test]
fn gate_over_the_reference_backend_passes() {
    let dir = tempfile::tempdir().unwrap();
    let output = gate(
        dir.path(),
        &[
            "--seeds", "0..8", "--ops", "10", "--jobs", "2", "--out", "g",
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let summary = json(&dir.path().join("g/gate.json"));
    assert_eq!(summary["seeds_run"], 8);
    assert_eq!(summary["complete"], true);
    assert!(summary["failures"].as_array().unwrap().is_empty());
    assert!(summary["events"].as_u64().unwrap() > 8 * 40);
    assert!(text(&output).contains("runs/s"), "{}", text(&output));
    assert!(!dir.path().join("fencer-regressions").exists());
}

/// A passing gate says which race windows its runs reached and which they never did, in its
/// summary and in `gate.json`; `fencer coverage` adds up gates and saved runs alike, and every
/// count it prints for a single gate is the gate's.
#[test]
fn a_gate_reports_the_race_windows_its_runs_reached() {
    let dir = tempfile::tempdir().unwrap();
    let output = gate(
        dir.path(),
        &[
            "--seeds",
            "0..4",
            "--jobs",
            "2",
            "--no-regressions",
            "--out",
            "g",
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let printed = text(&output);
    assert!(
        printed.contains("coverage (race windows reached)"),
        "{printed}"
    );
    assert!(
        printed.contains(
            "rival's grant after the previous lease's expiry, ≤ TTL: reached in 4 of 4 seeds"
        ),
        "{printed}"
    );
    let summary = json(&dir.path().join("g/gate.json"));
    assert_eq!(summary["coverage"]["runs"], 4);
    let reached = summary["coverage"]["reached"].as_array().unwrap();
    assert_eq!(reached.len(), 40, "ten kinds, four widths each");
    assert!(
        reached
            .iter()
            .all(|entry| entry["count"].as_u64().unwrap() <= 4)
    );
    let added = fencer(&["coverage", "g", "g"], dir.path());
    assert_eq!(added.status.code(), Some(0), "{}", text(&added));
    assert!(
        text(&added).contains("coverage over 8 runs:"),
        "{}",
        text(&added)
    );
    let run = fencer(
        &["run", "--seed", "1", "--ops", "10", "--out", "r"],
        dir.path(),
    );
    assert!(run.status.code().is_some(), "{}", text(&run));
    let one = fencer(&["coverage", "r"], dir.path());
    assert_eq!(one.status.code(), Some(0), "{}", text(&one));
    assert!(
        text(&one).contains("coverage over 1 run:"),
        "{}",
        text(&one)
    );
    let neither = fencer(&["coverage", "."], dir.path());
    assert_eq!(neither.status.code(), Some(254), "{}", text(&neither));
}

/// A lock whose renew revives an expired lease nobody took breaks a promise without harming
/// anyone yet: its warnings pass the gate, and the summary still names them.
#[test]
fn a_passing_gate_names_the_warnings_its_runs_found() {
    let dir = tempfile::tempdir().unwrap();
    let output = gate(
        dir.path(),
        &[
            "--lock",
            "sim-revive-expired",
            "--workload",
            "mutex",
            "--nemesis",
            "pause",
            "--fault-gap",
            "2s",
            "--seeds",
            "0..4",
            "--no-regressions",
            "--out",
            "g",
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let summary = json(&dir.path().join("g/gate.json"));
    let renewed = summary["warnings"]["expired-lease-renewed"].as_u64();
    assert!(renewed.is_some_and(|count| count > 0), "{summary}");
    let printed = text(&output);
    assert!(
        printed.contains("warnings") && printed.contains("expired-lease-renewed"),
        "{printed}"
    );
}

/// A failing run that also shows warnings listed before its failure (fencing's documented
/// limit comes early in the class order) is reported and shrunk as the failure, not as the
/// warning, which does not fail the run and so cannot be shrunk for.
#[test]
fn a_failure_behind_a_warning_is_reported_and_shrunk_as_the_failure() {
    let dir = tempfile::tempdir().unwrap();
    let output = gate(
        dir.path(),
        &[
            "--store",
            "sqlite-stale-cache",
            "--seeds",
            "0..1",
            "--no-regressions",
            "--out",
            "g",
        ],
    );
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let printed = text(&output);
    let summary = json(&dir.path().join("g/gate.json"));
    assert!(
        summary["warnings"]["superseded-write-accepted"].as_u64() > Some(0),
        "{summary}"
    );
    assert_eq!(summary["failures"][0]["class"], "stale-read", "{summary}");
    assert!(printed.contains("FAIL seed 0: stale-read: "), "{printed}");
    assert!(printed.contains("shrunk (stale-read, "), "{printed}");
    assert!(!printed.contains("cannot shrink"), "{printed}");
}

#[test]
fn gate_over_a_mutant_fails_and_its_replay_command_and_shrunk_plan_reproduce() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["--seeds", "0..20", "--jobs", "2", "--out", "g"];
    args.extend_from_slice(&MUTANT);
    args.extend_from_slice(&["--shrink-time", "120s", "--shrink-candidates", "300"]);
    let output = gate(dir.path(), &args);
    let out = text(&output);
    assert_eq!(output.status.code(), Some(1), "{out}");

    let summary = json(&dir.path().join("g/gate.json"));
    let failures = summary["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "stops at the first failure: {out}");
    let failure = &failures[0];
    let class = failure["class"].as_str().unwrap().to_string();
    let run_dir = failure["run_dir"].as_str().unwrap();

    // The printed one-line run command reproduces the same anomaly class.
    let command = out
        .lines()
        .find_map(|line| line.trim().strip_prefix("reproduce: fencer run "))
        .unwrap_or_else(|| panic!("no run command in: {out}"));
    let mut replay_args: Vec<&str> = command.split(' ').collect();
    replay_args.insert(0, "run");
    replay_args.extend_from_slice(&["--out", "again"]);
    let again = fencer(&replay_args, dir.path());
    assert_eq!(again.status.code(), Some(1), "{}", text(&again));
    let verdict = json(&dir.path().join("again/verdict.json"));
    assert!(verdict["anomaly_counts"][&class].as_u64().unwrap() > 0);
    // ... and so does `fencer replay` of the kept run directory, byte for byte.
    assert!(
        out.contains(&format!("reproduce: fencer replay {run_dir}")),
        "{out}"
    );
    let replay = fencer(&["replay", run_dir], dir.path());
    assert_eq!(replay.status.code(), Some(1), "{}", text(&replay));
    assert!(text(&replay).contains("identical:"));

    // The shrunk plan still fails with the class and is no larger than the original.
    let shrunk = &failure["shrunk"];
    for part in ["faults", "cycles", "workers"] {
        let (before, after) = (
            shrunk["before"][part].as_u64().unwrap(),
            shrunk["after"][part].as_u64().unwrap(),
        );
        assert!(after <= before, "{part}: {after} > {before}");
    }
    assert!(
        shrunk["after"]["cycles"].as_u64() < shrunk["before"]["cycles"].as_u64(),
        "shrinking removed nothing: {shrunk}"
    );
    assert!(shrunk["events_after"].as_u64() <= shrunk["events_before"].as_u64());
    let minimal = fencer(
        &[
            "run",
            "--plan",
            &format!("{run_dir}/plan.min.json"),
            "--out",
            "min",
        ],
        dir.path(),
    );
    assert_eq!(minimal.status.code(), Some(1), "{}", text(&minimal));
    let verdict = json(&dir.path().join("min/verdict.json"));
    assert!(verdict["anomaly_counts"][&class].as_u64().unwrap() > 0);
    // `fencer shrink` does the same on demand.
    std::fs::remove_file(dir.path().join(run_dir).join("plan.min.json")).unwrap();
    let on_demand = fencer(
        &["shrink", run_dir, "--shrink-candidates", "300"],
        dir.path(),
    );
    assert_eq!(on_demand.status.code(), Some(1), "{}", text(&on_demand));
    assert!(
        text(&on_demand).contains(&format!("shrunk ({class}")),
        "{}",
        text(&on_demand)
    );
    let again = std::fs::read(dir.path().join(run_dir).join("plan.min.json")).unwrap();
    let from_gate = std::fs::read(dir.path().join("min/plan.json")).unwrap();
    assert_eq!(again, from_gate, "shrinking is deterministic");
    // It tells the minimal plan in words and saves the run that confirmed it, timeline and
    // all: the same history as running the minimal plan.
    let told = text(&on_demand);
    assert!(told.contains("in the minimal plan: "), "{told}");
    assert!(told.contains("the run ends by "), "{told}");
    // A simulated plan fails every time it runs: it is not run again to count.
    assert!(!told.contains("run again "), "{told}");
    let record = json(&dir.path().join(run_dir).join("shrink.json"));
    assert!(record.get("reran").is_none(), "{record}");
    let confirmed = dir.path().join(run_dir).join("min");
    assert!(
        told.contains(&format!("timeline: {run_dir}/min/timeline.html")),
        "{told}"
    );
    assert!(confirmed.join("timeline.html").is_file());
    assert_eq!(
        std::fs::read(confirmed.join("history.jsonl")).unwrap(),
        std::fs::read(dir.path().join("min/history.jsonl")).unwrap()
    );
    let explained = fencer(&["explain", &format!("{run_dir}/min")], dir.path());
    assert!(text(&explained).contains(&class), "{}", text(&explained));

    // The minimal plan was saved as a regression; the next gate of the same system replays it
    // first and fails on it, a gate of another system does not.
    let saved: Vec<_> = std::fs::read_dir(dir.path().join("fencer-regressions"))
        .unwrap()
        .collect();
    assert_eq!(saved.len(), 1);
    let mut args = vec!["--seeds", "100..101", "--out", "g2", "--no-shrink"];
    args.extend_from_slice(&MUTANT);
    let second = gate(dir.path(), &args);
    assert_eq!(second.status.code(), Some(1), "{}", text(&second));
    assert!(text(&second).contains("replaying 1 saved regression"));
    let summary = json(&dir.path().join("g2/gate.json"));
    assert_eq!(summary["regressions_run"], 1);
    assert_eq!(summary["seeds_run"], 0, "stops at the failing regression");
    let reference = gate(
        dir.path(),
        &["--seeds", "0..2", "--ops", "10", "--out", "g3"],
    );
    assert_eq!(reference.status.code(), Some(0), "{}", text(&reference));
}

#[test]
fn failing_seeds_do_not_depend_on_jobs_or_shards() {
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str, extra: &[&str]| {
        let mut args = vec![
            "--seeds",
            "0..24",
            "--keep-going",
            "--no-shrink",
            "--no-regressions",
            "--out",
            name,
        ];
        args.extend_from_slice(&MUTANT);
        args.extend_from_slice(extra);
        let output = gate(dir.path(), &args);
        assert_eq!(output.status.code(), Some(1), "{}", text(&output));
        json(&dir.path().join(name).join("gate.json"))
    };
    let one = failing_seeds(&run("j1", &["--jobs", "1"]));
    assert!(
        one.len() >= 2,
        "the mutant must fail on several seeds: {one:?}"
    );
    assert_eq!(failing_seeds(&run("j2", &["--jobs", "2"])), one);
    let first = run("s1", &["--shard", "1/2", "--jobs", "2"]);
    let second = run("s2", &["--shard", "2/2", "--jobs", "1"]);
    assert_eq!(
        first["seeds_run"].as_u64().unwrap() + second["seeds_run"].as_u64().unwrap(),
        24
    );
    let union: BTreeSet<u64> = failing_seeds(&first)
        .union(&failing_seeds(&second))
        .copied()
        .collect();
    assert_eq!(union, one);

    let merged = fencer(
        &[
            "merge",
            "s1",
            "s2",
            "--out",
            "merged.json",
            "--junit",
            "junit.xml",
        ],
        dir.path(),
    );
    assert_eq!(merged.status.code(), Some(1), "{}", text(&merged));
    let summary = json(&dir.path().join("merged.json"));
    assert_eq!(failing_seeds(&summary), one);
    assert_eq!(summary["seeds_run"], 24);
    let junit = std::fs::read_to_string(dir.path().join("junit.xml")).unwrap();
    assert_eq!(junit.matches("<failure ").count(), one.len(), "{junit}");
    for seed in &one {
        assert!(junit.contains(&format!("name=\"seed {seed}\"")), "{junit}");
    }
    assert!(junit.contains("fencer run --seed"), "{junit}");
    // The 0..24 gate's one chunk is named by the seeds it ran, not by the chunk's width.
    assert!(junit.contains("name=\"seeds 0..24\""), "{junit}");
    assert!(!junit.contains("0..100"), "{junit}");

    // Without --keep-going, the first failure is the same whatever the job count.
    let first_failure = |name: &str, jobs: &str| {
        let mut args = vec![
            "--seeds",
            "0..24",
            "--no-shrink",
            "--no-regressions",
            "--jobs",
            jobs,
            "--out",
            name,
        ];
        args.extend_from_slice(&MUTANT);
        let output = gate(dir.path(), &args);
        assert_eq!(output.status.code(), Some(1), "{}", text(&output));
        failing_seeds(&json(&dir.path().join(name).join("gate.json")))
    };
    let lowest: BTreeSet<u64> = one.iter().take(1).copied().collect();
    assert_eq!(first_failure("f1", "1"), lowest);
    assert_eq!(first_failure("f2", "2"), lowest);
}

#[test]
fn swarm_seeds_choose_their_fault_mix_and_replay_from_the_printed_command() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec![
        "--seeds",
        "0..40",
        "--swarm",
        "--keep-going",
        "--no-shrink",
        "--no-regressions",
        "--nemesis",
        "pause,skew,drop-renew",
        "--out",
        "g",
    ];
    args.extend_from_slice(&MUTANT[..2]);
    args.extend_from_slice(&MUTANT[4..]);
    let output = gate(dir.path(), &args);
    let out = text(&output);
    assert_eq!(output.status.code(), Some(1), "{out}");
    let summary = json(&dir.path().join("g/gate.json"));
    let mut mixes = BTreeSet::new();
    for failure in summary["failures"].as_array().unwrap() {
        let plan = json(
            &Path::new(dir.path())
                .join(failure["run_dir"].as_str().unwrap())
                .join("plan.json"),
        );
        mixes.insert(plan["settings"]["nemesis"].to_string());
    }
    assert!(
        mixes.len() >= 2,
        "failing seeds should differ in fault mix: {mixes:?}"
    );
    let command = out
        .lines()
        .find_map(|line| line.trim().strip_prefix("reproduce: fencer run "))
        .unwrap();
    assert!(command.ends_with(" --swarm"), "{command}");
    let mut replay_args: Vec<&str> = command.split(' ').collect();
    replay_args.insert(0, "run");
    replay_args.extend_from_slice(&["--out", "again"]);
    let again = fencer(&replay_args, dir.path());
    assert_eq!(again.status.code(), Some(1), "{}", text(&again));
    let seed = summary["failures"][0]["run_dir"].as_str().unwrap();
    assert_eq!(
        std::fs::read(dir.path().join("again/history.jsonl")).unwrap(),
        std::fs::read(dir.path().join(seed).join("history.jsonl")).unwrap()
    );
}

#[test]
fn check_determinism_catches_a_nondeterministic_backend_and_passes_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    let bad = gate(
        dir.path(),
        &[
            "--seeds",
            "0..3",
            "--ops",
            "5",
            "--check-determinism",
            "--lock",
            "test-nondeterministic",
            "--out",
            "bad",
        ],
    );
    let out = text(&bad);
    assert_eq!(bad.status.code(), Some(255), "{out}");
    assert!(out.contains("histories diverge at event"), "{out}");
    assert!(
        out.contains("first run:") && out.contains("second run:"),
        "{out}"
    );
    let summary = json(&dir.path().join("bad/gate.json"));
    assert_eq!(summary["failures"][0]["kind"], "nondeterministic");
    assert!(summary["failures"][0]["divergence"]["index"].is_u64());

    let good = gate(
        dir.path(),
        &[
            "--seeds",
            "0..3",
            "--ops",
            "5",
            "--check-determinism",
            "--out",
            "good",
        ],
    );
    assert_eq!(good.status.code(), Some(0), "{}", text(&good));
}

#[test]
fn bad_gate_arguments_exit_254() {
    let dir = tempfile::tempdir().unwrap();
    for (args, needle) in [
        (vec!["gate", "--seeds", "5..5"], "is empty"),
        (vec!["gate", "--seeds", "5.."], "has no end"),
        (vec!["gate", "--shard", "3/2"], "expected K/N"),
        (vec!["gate", "--jobs", "0"], "--jobs must be at least 1"),
        (vec!["gate", "--store", "mysql"], "unknown store"),
    ] {
        let output = fencer(&args, dir.path());
        assert_eq!(
            output.status.code(),
            Some(254),
            "{args:?}: {}",
            text(&output)
        );
        assert!(
            text(&output).contains(needle),
            "{args:?}: {}",
            text(&output)
        );
    }
}

#[test]
fn run_plan_refuses_bad_plans_at_their_line_and_flags_it_would_ignore_but_takes_backends() {
    let dir = tempfile::tempdir().unwrap();
    let run = fencer(&["run", "--ops", "2", "--out", "r"], dir.path());
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    let plan = std::fs::read_to_string(dir.path().join("r/plan.json")).unwrap();
    let target_line = 1 + plan
        .lines()
        .position(|l| l.contains("\"target\": \"w"))
        .unwrap();
    std::fs::write(
        dir.path().join("bad.json"),
        plan.replacen("\"target\": \"w", "\"target\": \"x", 1),
    )
    .unwrap();
    let bad = fencer(&["run", "--plan", "bad.json"], dir.path());
    assert_eq!(bad.status.code(), Some(254), "{}", text(&bad));
    let err = String::from_utf8_lossy(&bad.stderr).into_owned();
    let line: usize = err
        .strip_prefix("error: bad.json:")
        .and_then(|rest| rest.split(':').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{err}"));
    assert!(
        (target_line - 3..target_line).contains(&line),
        "{err} (target at {target_line})"
    );
    assert!(err.contains("expected fault target"), "{err}");

    // A setting the plan carries would be ignored: refused.
    let conflict = fencer(&["run", "--plan", "r/plan.json", "--ttl", "5s"], dir.path());
    assert_eq!(conflict.status.code(), Some(254), "{}", text(&conflict));
    // Backends are not ignored: the saved plan runs against the one named now.
    let other = fencer(
        &[
            "run",
            "--plan",
            "r/plan.json",
            "--store",
            "sqlite-unfenced",
            "--out",
            "r3",
        ],
        dir.path(),
    );
    assert!(
        matches!(other.status.code(), Some(0 | 1)),
        "{}",
        text(&other)
    );
    let rerun = std::fs::read_to_string(dir.path().join("r3/plan.json")).unwrap();
    assert!(rerun.contains("\"store\": \"sqlite-unfenced\""), "{rerun}");

    let good = fencer(&["run", "--plan", "r/plan.json", "--out", "r2"], dir.path());
    assert_eq!(good.status.code(), Some(0), "{}", text(&good));
    assert_eq!(
        std::fs::read(dir.path().join("r/history.jsonl")).unwrap(),
        std::fs::read(dir.path().join("r2/history.jsonl")).unwrap()
    );
}

#[cfg(unix)]
#[test]
fn sigint_leaves_complete_run_dirs_and_an_incomplete_summary_and_exits_2() {
    interrupted_by("INT");
}

/// CI runners and Kubernetes stop a job with SIGTERM: the gate ends as on Ctrl-C.
#[cfg(unix)]
#[test]
fn sigterm_stops_a_gate_as_sigint_does() {
    interrupted_by("TERM");
}

/// Runs a long failing gate, sends it `signal` (`INT`, `TERM`) after its first failure, and
/// checks it stopped with complete run directories, an incomplete `gate.json` and exit 2.
#[cfg(unix)]
fn interrupted_by(signal: &str) {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec![
        "gate",
        "--seeds",
        "0..100000",
        "--keep-going",
        "--no-shrink",
        "--no-regressions",
        "--jobs",
        "2",
        "--out",
        "g",
    ];
    args.extend_from_slice(&MUTANT);
    let mut child = Command::new(env!("CARGO_BIN_EXE_fencer"))
        .args(&args)
        .current_dir(dir.path())
        .env("CI", "true")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait for the first failure to be reported, then interrupt.
    let stdout = child.stdout.take().unwrap();
    let mut child = KillOnDrop(child);
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = sender.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let line = receiver
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("the gate reports a failure within 2 minutes");
        if line.starts_with("FAIL seed") {
            break;
        }
    }
    // The shell's builtin `kill`, so the test needs no extra package.
    let status = Command::new("sh")
        .args(["-c", &format!("kill -{signal} {}", child.0.id())])
        .status()
        .unwrap();
    assert!(status.success());
    let started = Instant::now();
    let code = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            break status.code();
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the gate did not stop"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(code, Some(2));
    let summary = json(&dir.path().join("g/gate.json"));
    assert_eq!(summary["complete"], false);
    assert_eq!(summary["ended"], "interrupted");
    let seeds_run = summary["seeds_run"].as_u64().unwrap();
    assert!((1..100_000).contains(&seeds_run), "{seeds_run}");
    let failures = summary["failures"].as_array().unwrap();
    assert!(!failures.is_empty());
    for failure in failures {
        let run_dir = dir.path().join(failure["run_dir"].as_str().unwrap());
        for file in ["run.json", "plan.json", "history.jsonl", "verdict.json"] {
            assert!(
                run_dir.join(file).is_file(),
                "{} lacks {file}",
                run_dir.display()
            );
        }
    }
    let leftovers: Vec<String> = std::fs::read_dir(dir.path().join("g"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_time_budget_ends_an_open_range_as_finished_work_not_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    let output = gate(
        dir.path(),
        &["--time", "1s", "--ops", "5", "--jobs", "2", "--out", "g"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let summary = json(&dir.path().join("g/gate.json"));
    assert_eq!(summary["ended"], "out-of-time");
    assert_eq!(summary["complete"], true);
    assert_eq!(summary["seeds"]["end"], Value::Null);
    assert!(summary["seeds_run"].as_u64().unwrap() > 0);
}
