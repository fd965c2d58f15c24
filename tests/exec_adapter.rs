//! `--lock exec:COMMAND --store exec:COMMAND`: a lock service and fenced store written in another
//! language, here the shipped Python example (`examples/exec/lease_service.py`), run as fencer's
//! child over the exec protocol. The example runs clean through the CLI under every fault it
//! can take (its journal keeps tokens across restarts); copies of it with one line broken are
//! caught, the owner check's loss from the example's own lock log; bad commands are one-line
//! errors; and the example answers the lock-log message the protocol documents.

#![cfg(feature = "exec")]

mod support;

mod cli_support;
use cli_support::{REAL_TIMING, fencer, fencer_command, gone, text};

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use fencer::{FaultKind, Settings};
use fencer_nemesis::Fault;
use fencer_run::real::{check_servers_take_faults, real_plan};
use support::{FencedVerdict, stale_release_plan, stale_write_plan};

/// The shipped example.
const EXAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/examples/exec/lease_service.py"
);

/// The example's fence comparison, and the same line with it dropped.
const FENCE: (&str, &str) = ("        if token < newest:\n", "        if False:\n");

/// The example's owner check (renew and release share it), and the same line without it.
const OWNER_CHECK: (&str, &str) = (
    "        if lease is None or lease[\"owner\"] != owner:\n",
    "        if lease is None:\n",
);

/// The real-time settings of the README's example runs, with faults `fault_gap` apart on
/// average.
fn quick(fault_gap: &str) -> Vec<&str> {
    [&REAL_TIMING[..], &["--ops", "5", "--fault-gap", fault_gap]].concat()
}

/// The mean gap between faults of the README's example runs.
const QUICK_FAULT_GAP: &str = "300ms";

/// Whether `python3` runs; when it does not, the skip line (or a failure under
/// `FENCER_REQUIRE_BACKENDS=1`).
fn python_or_skip(test: &str) -> bool {
    let version = Command::new("python3")
        .arg("--version")
        .output()
        .map_err(|error| error.to_string())
        .and_then(|output| {
            output
                .status
                .success()
                .then_some(())
                .ok_or_else(|| text(&output))
        });
    support::started_or_skipped(test, "python3", "python3", version).is_some()
}

/// `exec:python3 SCRIPT` and `extra` arguments.
fn exec(script: &Path, extra: &str) -> String {
    format!("exec:python3 '{}'{extra}", script.display())
}

/// A copy of the example in `dir` with `line` replaced (it must occur exactly once).
fn broken_copy(dir: &Path, (line, replacement): (&str, &str)) -> PathBuf {
    let script = std::fs::read_to_string(EXAMPLE).unwrap();
    assert_eq!(
        script.matches(line).count(),
        1,
        "the example has {line:?} once"
    );
    let broken = dir.join("broken_lease_service.py");
    std::fs::write(&broken, script.replacen(line, replacement, 1)).unwrap();
    broken
}

/// `fencer run` with `command` as lock and store, the quick settings, `nemesis` and `seed`, in
/// `dir`; the run directory is `dir/NAME`.
fn run(dir: &Path, command: &str, nemesis: &str, seed: u64, name: &str) -> Output {
    run_with_fault_gap(dir, command, nemesis, QUICK_FAULT_GAP, seed, name)
}

/// As [`run`], with faults `fault_gap` apart on average.
fn run_with_fault_gap(
    dir: &Path,
    command: &str,
    nemesis: &str,
    fault_gap: &str,
    seed: u64,
    name: &str,
) -> Output {
    let seed = seed.to_string();
    let mut args = vec![
        "run",
        "--lock",
        command,
        "--store",
        command,
        "--nemesis",
        nemesis,
        "--seed",
        &seed,
        "--out",
        name,
    ];
    args.extend(quick(fault_gap));
    fencer(&args, dir)
}

/// The pids of the "started exec child … (pid N)" lines.
fn started_pids(printed: &str) -> Vec<u32> {
    printed
        .lines()
        .filter(|line| line.starts_with("fencer: started exec child"))
        .map(|line| {
            let after = line.split("(pid ").nth(1).unwrap();
            after[..after.find(')').unwrap()].parse().unwrap()
        })
        .collect()
}

/// The lock and store `command` names, built and checked the way `fencer run` does before a
/// run, so the child is up (and its start-up time spent) before the scenario's clock starts.
fn started(command: &str) -> support::Adapters {
    let lock = fencer_backends::registry::lock_from_url(command).unwrap();
    let store = fencer_backends::registry::store_from_url(command).unwrap();
    let runtime = fencer_harness::runtime::real_runtime().unwrap();
    runtime
        .block_on(async {
            lock.ping().await?;
            store.ping().await
        })
        .unwrap();
    (lock.adapter, store.adapter)
}

/// The `f` of every nemesis event in the history saved in `run_dir`, and how many store log
/// events (the applied log) it has.
fn nemesis_and_applied(run_dir: &Path) -> (Vec<String>, usize) {
    let history = std::fs::read_to_string(run_dir.join("history.jsonl")).unwrap();
    let mut nemesis = Vec::new();
    let mut applied = 0;
    for line in history.lines() {
        let event: serde_json::Value = serde_json::from_str(line).unwrap();
        match (event["type"].as_str(), event["process"].as_str()) {
            (Some("nemesis"), _) => nemesis.push(event["f"].as_str().unwrap().to_string()),
            (Some("log"), Some("store")) => applied += 1,
            _ => {}
        }
    }
    (nemesis, applied)
}

#[test]
fn the_example_runs_clean_through_the_cli_under_every_fault_it_can_take() {
    if !python_or_skip("exec_clean") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut faults = Vec::new();
    let wanted = [
        "server-pause",
        "server-resume",
        "restart",
        "recover",
        "pause",
    ];
    // Real-time seeds are short: run seeds until every fault the child takes has come.
    for seed in 0..8 {
        if wanted.iter().all(|fault| faults.iter().any(|f| f == fault)) {
            break;
        }
        let journal = dir.path().join(format!("journal-{seed}.jsonl"));
        let command = exec(
            Path::new(EXAMPLE),
            &format!(" --journal '{}'", journal.display()),
        );
        let name = format!("seed-{seed}");
        let output = run(
            dir.path(),
            &command,
            "pause,drop-renew,drop-acquire,drop-write,delay-write,server-pause,restart",
            seed,
            &name,
        );
        let printed = text(&output);
        assert!(
            matches!(output.status.code(), Some(0 | 2)),
            "seed {seed}: valid or unknown, never invalid: {printed}"
        );
        let (nemesis, applied) = nemesis_and_applied(&dir.path().join(&name));
        assert!(
            applied > 0,
            "seed {seed}: the applied log came back: {printed}"
        );
        let pids = started_pids(&printed);
        let restarts = nemesis.iter().filter(|f| *f == "restart").count();
        assert_eq!(
            pids.len(),
            1 + restarts,
            "one child for lock and store, started again after each restart: {printed}"
        );
        for pid in pids {
            assert!(
                gone(pid),
                "seed {seed}: child {pid} was stopped with the run"
            );
        }
        faults.extend(nemesis);
    }
    for fault in wanted {
        assert!(
            faults.iter().any(|f| f == fault),
            "{fault} happened: {faults:?}"
        );
    }
}

#[test]
fn a_dropped_fence_comparison_is_caught_within_a_few_seeds() {
    if !python_or_skip("exec_unfenced") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let broken = exec(&broken_copy(dir.path(), FENCE), "");
    let mut tried = Vec::new();
    // Real time: a pause only exposes the store when it stops a holder past its lease, and a
    // fast machine finishes five cycles before many faults at the example's gap have come, so
    // faults come three times as often here.
    for seed in 0..10 {
        let output = run_with_fault_gap(
            dir.path(),
            &broken,
            "pause,delay-write",
            "100ms",
            seed,
            &format!("s{seed}"),
        );
        let printed = text(&output);
        if output.status.code() == Some(1) && printed.contains("stale-write-accepted") {
            return;
        }
        assert_ne!(output.status.code(), Some(254), "{printed}");
        tried.push(
            printed
                .lines()
                .find(|l| l.starts_with("verdict:"))
                .map(String::from),
        );
    }
    panic!("ten seeds of late and frozen writers never caught the unfenced store: {tried:?}");
}

#[test]
fn the_example_refuses_the_stale_write_that_the_unfenced_copy_accepts() {
    if !python_or_skip("exec_stale_write") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let example = exec(Path::new(EXAMPLE), "");
    let broken = exec(&broken_copy(dir.path(), FENCE), "");
    support::assert_fence_refuses_the_stale_write(
        &started(&example),
        &started(&broken),
        &stale_write_plan(),
        FencedVerdict::Valid,
    );
}

#[test]
fn the_lock_log_judges_the_leases_and_shows_a_dropped_owner_check() {
    if !python_or_skip("exec_lock_log_judged") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let example = exec(Path::new(EXAMPLE), "");
    let broken = exec(&broken_copy(dir.path(), OWNER_CHECK), "");
    // The example keeps expiries in the nanoseconds it logs them in.
    support::assert_lock_log_judges_the_leases(
        &started(&example),
        &started(&broken),
        &stale_release_plan(),
        0,
        3,
    );
}

#[test]
fn bad_commands_are_one_line_errors_with_exit_254() {
    let dir = tempfile::tempdir().unwrap();
    let store_only = r#"exec:sh -c "read hello; echo '{\"id\":0,\"result\":\"hello\",\"protocol\":1,\"roles\":[\"store\"]}'; cat >/dev/null""#;
    for (lock, expected) in [
        ("exec:", "exec: needs a command"),
        ("exec:   ", "exec: needs a command"),
        (
            "exec:no-such-lock-service --port 1",
            "cannot start exec:no-such-lock-service --port 1: No such file or directory",
        ),
        ("exec:sleep 30", "did not answer hello within 500ms"),
        (
            "exec:sh -c 'exit 7'",
            "exited (exit status: 7) before answering hello",
        ),
        (
            store_only,
            "does not serve the lock role (its hello names store): check --lock",
        ),
    ] {
        let mut args = vec!["run", "--lock", lock, "--store", "sqlite://register.db"];
        args.extend(quick(QUICK_FAULT_GAP));
        let output = fencer_command(&args, dir.path())
            .env("FENCER_EXEC_HELLO_TIMEOUT_MS", "500")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(254), "{lock}: {}", text(&output));
        let error = stderr.lines().last().unwrap_or("");
        assert!(
            error.starts_with("error: ") && error.contains(expected),
            "{lock}: expected {expected:?}, got {stderr}"
        );
    }
}

#[test]
fn plans_aim_only_pauses_and_restarts_at_an_exec_child() {
    let settings = Settings {
        seed: 3,
        mean_fault_gap_ns: 50_000_000,
        nemesis: [
            FaultKind::ServerPause,
            FaultKind::Restart,
            FaultKind::Skew,
            FaultKind::Partition,
            FaultKind::Cut,
        ]
        .into_iter()
        .collect(),
        lock: "exec:python3 lease_service.py".into(),
        store: "exec:python3 lease_service.py".into(),
        ..support::real_settings(3, 3, 5)
    };
    settings
        .validate()
        .expect("server faults are allowed on exec children");
    let mut plan = real_plan(&settings);
    let aimed: Vec<&str> = plan
        .faults
        .iter()
        .filter(|fault| fault.aims_at_server())
        .map(|fault| fault.kind().name())
        .collect();
    assert!(
        aimed.contains(&"server-pause") && aimed.contains(&"restart"),
        "{aimed:?}"
    );
    assert!(
        aimed
            .iter()
            .all(|kind| ["server-pause", "restart"].contains(kind)),
        "partitions, cuts and clock jumps are left out: {aimed:?}"
    );
    check_servers_take_faults(&plan).unwrap();
    plan.faults.push(Fault::Cut {
        at_ns: u64::MAX,
        target: "store".into(),
    });
    let refused = check_servers_take_faults(&plan).unwrap_err().to_string();
    assert!(
        refused.contains("`cut`") && refused.contains("takes only server-pause and restart"),
        "{refused}"
    );
}

#[test]
fn the_example_answers_the_documented_lock_log() {
    if !python_or_skip("exec_lock_log") {
        return;
    }
    let mut child = Command::new("python3")
        .arg(EXAMPLE)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut ask = |request: &str| -> serde_json::Value {
        writeln!(stdin, "{request}").unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    };
    let hello = ask(r#"{"id":0,"op":"hello","protocol":1}"#);
    assert_eq!(
        hello["offers"],
        serde_json::json!(["applied-log", "lock-log"])
    );
    let owner = "0".repeat(31) + "a";
    let other = "0".repeat(31) + "b";
    let acquire = |id: u64, owner: &str, ttl_ms: u64| {
        format!(r#"{{"id":{id},"op":"acquire","lock":"L","owner":"{owner}","ttl_ms":{ttl_ms}}}"#)
    };
    assert_eq!(ask(&acquire(1, &owner, 1))["fencing_token"], 1);
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(ask(&acquire(2, &other, 60_000))["fencing_token"], 2);
    let renew = format!(r#"{{"id":3,"op":"renew","lock":"L","owner":"{other}","ttl_ms":500}}"#);
    assert_eq!(ask(&renew)["result"], "done");
    let release = format!(r#"{{"id":4,"op":"release","lock":"L","owner":"{other}"}}"#);
    assert_eq!(ask(&release)["result"], "done");
    let log = ask(r#"{"id":5,"op":"lock-log"}"#);
    assert_eq!(log["id"], 5);
    assert_eq!(log["result"], "lock-log");
    let entries = log["entries"].as_array().unwrap();
    let ops: Vec<&str> = entries.iter().map(|e| e["op"].as_str().unwrap()).collect();
    assert_eq!(ops, ["grant", "expire", "grant", "renew", "release"]);
    for (position, entry) in entries.iter().enumerate() {
        assert_eq!(entry["seq"], position as u64 + 1);
        assert_eq!(entry["lock"], "L");
        assert!(entry["at_ns"].is_u64(), "{entry}");
    }
    assert_eq!(entries[1]["holder"], owner.as_str());
    assert_eq!(entries[1]["holder_token"], 1);
    let renewed = &entries[3];
    assert_eq!(renewed["holder_token"], 2);
    assert_eq!(
        renewed["expires_ns"].as_u64().unwrap(),
        renewed["at_ns"].as_u64().unwrap() + 500_000_000
    );
    assert_eq!(entries[4]["owner"], other.as_str());
    drop(stdin);
    assert!(
        child.wait().unwrap().success(),
        "it exits when its stdin closes"
    );
}

#[test]
fn the_example_runs_from_cargo_test_through_the_harness() {
    if !python_or_skip("exec_harness") {
        return;
    }
    use fencer::backends::{ExecConnection, ExecLock, ExecStore};
    use std::sync::Arc;
    let child =
        Arc::new(ExecConnection::open(&exec(Path::new(EXAMPLE), "")["exec:".len()..]).unwrap());
    let report = fencer::Harness::from_shared(
        Arc::new(ExecLock::new(Arc::clone(&child))),
        Arc::new(ExecStore::new(child)),
    )
    .name("the_example_runs_from_cargo_test_through_the_harness")
    .real_time()
    .workers(3)
    .ops(3)
    .nemesis([FaultKind::Pause, FaultKind::DropRenew, FaultKind::DropWrite])
    .seeds(0..3)
    .run();
    report.assert_valid();
    for run in &report.runs {
        let (history, _) = run.outcome.as_ref().expect("ran");
        assert!(
            history
                .events
                .iter()
                .any(|e| e.process == "store" && e.f == fencer_harness::Op::Write),
            "seed {}: the applied log came back",
            run.seed
        );
    }
}

#[test]
fn faults_a_group_drew_but_the_child_cannot_take_are_recorded_and_printed_on_request() {
    if !python_or_skip("exec_left_out") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let command = exec(Path::new(EXAMPLE), "");
    let printed_left_out = |output: &Output| -> Vec<String> {
        assert!(
            matches!(output.status.code(), Some(0 | 2)),
            "{}",
            text(output)
        );
        text(output)
            .lines()
            .filter_map(|line| line.strip_prefix("left out: "))
            .map(String::from)
            .collect()
    };
    // `all` on an exec child draws proxy faults it cannot take: the user named none of them.
    let all = run(dir.path(), &command, "all", 0, "all");
    assert!(
        text(&all).contains(" s on the wall clock (real time)\n")
            && !text(&all).contains("simulated s"),
        "a real-time run is timed by the wall clock: {}",
        text(&all)
    );
    assert_eq!(printed_left_out(&all), Vec::<String>::new());
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("all/run.json")).unwrap()).unwrap();
    let recorded: Vec<&str> = record["left_out"]
        .as_array()
        .expect("recorded in run.json")
        .iter()
        .map(|left| left["family"].as_str().unwrap())
        .collect();
    assert!(recorded.contains(&"partition"), "{recorded:?}");
    let explained = fencer(&["explain", "all"], dir.path());
    assert_eq!(
        text(&explained).matches("  left out: ").count(),
        recorded.len(),
        "{}",
        text(&explained)
    );

    // Named one by one, partitions are asked for: their left-out faults are printed, alone.
    let named = run(dir.path(), &command, "all,partition", 0, "named");
    let lines = printed_left_out(&named);
    assert!(
        !lines.is_empty() && lines.iter().all(|line| line.contains(" partition fault")),
        "{lines:?}"
    );
    let mut args = vec![
        "run",
        "--lock",
        &command,
        "--store",
        &command,
        "--nemesis",
        "all",
        "--verbose",
    ];
    args.extend(quick(QUICK_FAULT_GAP));
    let verbose = fencer(&args, dir.path());
    assert_eq!(printed_left_out(&verbose).len(), recorded.len());
}

/// A write event of `process` carrying fencing token `token`.
fn write_event(
    process: &str,
    kind: fencer_harness::EventType,
    token: u64,
) -> fencer_harness::Event {
    fencer_harness::Event {
        token: Some(token),
        ..fencer_harness::Event::new(process, kind, fencer_harness::Op::Write)
    }
}

#[test]
fn a_stale_write_is_staged_only_when_sent_after_a_newer_accepted_one_and_its_outcome_is_known() {
    use fencer_harness::EventType::{Fail, Info, Invoke, Ok};
    let staged = |writes: &[(&str, fencer_harness::EventType, u64)]| {
        let events = writes
            .iter()
            .map(|&(process, kind, token)| write_event(process, kind, token))
            .collect();
        support::stale_write_staged(&fencer_harness::History { events })
    };
    let (newer_sent, newer_accepted) = (("w1", Invoke, 2), ("w1", Ok, 2));
    let stale_sent = ("w0", Invoke, 1);
    assert!(staged(&[
        newer_sent,
        newer_accepted,
        stale_sent,
        ("w0", Fail, 1)
    ]));
    assert!(staged(&[
        newer_sent,
        newer_accepted,
        stale_sent,
        ("w0", Ok, 1)
    ]));
    // The stale write's outcome is unknown: nothing is judged by it.
    assert!(!staged(&[
        newer_sent,
        newer_accepted,
        stale_sent,
        ("w0", Info, 1)
    ]));
    // w0 wrote first: nothing was stale when it was sent.
    assert!(!staged(&[
        stale_sent,
        ("w0", Ok, 1),
        newer_sent,
        newer_accepted
    ]));
    // The other write was not newer.
    assert!(!staged(&[
        ("w1", Invoke, 1),
        ("w1", Ok, 1),
        stale_sent,
        ("w0", Ok, 1)
    ]));
    // w0 never wrote.
    assert!(!staged(&[newer_sent, newer_accepted]));
}
