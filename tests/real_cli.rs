//! `fencer run --lock URL --store URL`: a real run from the command line, with passwords kept
//! out of every line printed and every file saved, and bad URLs refused in one line.

#![cfg(all(feature = "redis", feature = "postgres"))]

mod support;

mod cli_support;
use cli_support::{KillOnDrop, REAL_TIMING, fencer, text};

const SECRET: &str = "n0t-for-your-eyes";

/// Real-tier timing ([`REAL_TIMING`]) over three cycles of two workers, faults 300 ms apart.
fn quick() -> Vec<&'static str> {
    let rest = ["--ops", "3", "--workers", "2", "--fault-gap", "300ms"];
    [&REAL_TIMING[..], &rest].concat()
}

/// The shared Redis's URL, or `None` (after the skip line) when it does not answer.
fn redis(test: &str) -> Option<String> {
    let redis =
        std::env::var("FENCER_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let probe = fencer_backends::registry::lock_from_url(&redis).unwrap();
    support::reachable(test, "Redis", "redis-server", probe.ping()).then_some(redis)
}

#[test]
fn real_run_redacts_the_password_everywhere() {
    let Some(redis) = redis("real_cli") else {
        return;
    };
    // Trust authentication accepts any password, so the URL can carry one that must never show.
    let postgres = format!("postgres://postgres:{SECRET}@127.0.0.1:5432/test");
    let probe = fencer_backends::registry::store_from_url(&postgres).unwrap();
    if !support::reachable("real_cli", "PostgreSQL", "postgresql", probe.ping()) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec![
        "run",
        "--lock",
        redis.as_str(),
        "--store",
        postgres.as_str(),
    ];
    args.extend(quick());
    let output = fencer(&args, dir.path());
    let printed = text(&output);
    assert_eq!(output.status.code(), Some(0), "{printed}");
    assert!(
        printed.contains("postgres:***@127.0.0.1:5432/test"),
        "{printed}"
    );
    assert!(!printed.contains(SECRET), "{printed}");
    let mut files = 0;
    for entry in std::fs::read_dir(dir.path().join("runs/fenced-register")).unwrap() {
        for file in std::fs::read_dir(entry.unwrap().path()).unwrap() {
            let bytes = std::fs::read(file.unwrap().path()).unwrap();
            assert!(!String::from_utf8_lossy(&bytes).contains(SECRET));
            files += 1;
        }
    }
    assert!(files >= 4, "a run directory was saved");
    // `replay` is for the simulation; a real run says how to run its plan again instead.
    let output = fencer(&["replay", "runs/latest"], dir.path());
    let err = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(254), "{err}");
    assert!(err.contains("fencer run --plan"), "{err}");
    assert!(!err.contains(SECRET), "{err}");
}

#[test]
fn a_redis_lock_protects_a_sqlite_file() {
    let Some(redis) = redis("real_cli_sqlite") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("register.db");
    let store = format!("sqlite://{}", file.display());
    let mut args = vec!["run", "--lock", redis.as_str(), "--store", store.as_str()];
    args.extend(quick());
    let output = fencer(&args, dir.path());
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(file.is_file());
    let history = std::fs::read_to_string(dir.path().join("runs/latest/history.jsonl")).unwrap();
    assert!(
        history.contains(r#""process":"store","type":"log","f":"write""#),
        "the SQLite file's applied log is in the history"
    );
    let plan = std::fs::read_to_string(dir.path().join("runs/latest/plan.json")).unwrap();
    assert!(
        plan.contains(r#""cycle_shape": "real-time""#),
        "a real run draws real-time cycles and says so in its plan: {plan}"
    );
    // Its plan runs again as often as asked, each run saved, and the runs are counted.
    let replay = fencer(&["replay", "runs/latest", "--runs", "2"], dir.path());
    let said = text(&replay);
    assert_eq!(replay.status.code(), Some(0), "{said}");
    assert!(said.contains("run 2 of 2:"), "{said}");
    assert!(
        said.contains("of 2 runs: 2 valid, 0 invalid, 0 unknown (the saved run: valid)"),
        "{said}"
    );
    let saved = std::fs::read_dir(dir.path().join("runs/fenced-register")).unwrap();
    assert_eq!(saved.count(), 3, "the run and its two runs again");
}

#[test]
fn bad_urls_are_one_line_errors_with_exit_254() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &str, &str); 3] = [
        (
            "mysql://root:pw@h/x",
            "redis://127.0.0.1:6379",
            "unsupported lock URL scheme `mysql` in mysql://root:***@h/x",
        ),
        (
            "redis://127.0.0.1:1",
            "redis://127.0.0.1:1",
            "cannot connect to Redis at redis://127.0.0.1:1",
        ),
        (
            "redis://127.0.0.1:6379",
            "nosuch",
            "unknown store `nosuch`: expected one of sqlite",
        ),
    ];
    for (lock, store, needle) in cases {
        let mut args = vec!["run", "--lock", lock, "--store", store];
        args.extend(quick());
        let output = fencer(&args, dir.path());
        let err = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(output.status.code(), Some(254), "{lock} {store}: {err}");
        assert!(err.contains(needle), "{err}");
        assert!(!err.contains("pw@"), "{err}");
        assert!(
            !dir.path().join("runs").exists(),
            "nothing saved on bad input"
        );
    }
}

#[test]
fn faults_a_plain_url_cannot_take_are_printed_and_recorded_as_left_out() {
    let Some(redis) = redis("real_cli_left_out") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("register.db").display());
    let mut args = vec!["run", "--lock", redis.as_str(), "--store", store.as_str()];
    // quick()'s 300 ms gap over 2 workers x 3 cycles of 300 ms leases draws a few faults.
    args.extend(quick());
    args.extend(["--nemesis", "skew,restart", "--seed", "3"]);
    let output = fencer(&args, dir.path());
    let printed = text(&output);
    assert!(matches!(output.status.code(), Some(0..=2)), "{printed}");
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("runs/latest/run.json")).unwrap())
            .unwrap();
    let left_out = record["left_out"].as_array().expect("left_out in run.json");
    let families: Vec<&str> = left_out
        .iter()
        .map(|left| left["family"].as_str().unwrap())
        .collect();
    assert!(families.contains(&"restart"), "{left_out:?}");
    for left in left_out {
        let line = format!(
            "left out: {} {} fault",
            left["faults"],
            left["family"].as_str().unwrap()
        );
        assert!(printed.contains(&line), "{line} not in:\n{printed}");
        assert!(
            left["why"]
                .as_str()
                .unwrap()
                .contains("is not fencer's own server"),
            "{left}"
        );
    }
    let plan: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("runs/latest/plan.json")).unwrap())
            .unwrap();
    assert_eq!(plan["left_out"], record["left_out"]);
}

/// A real-time failure shrinks to its story as a simulated one does: a watchdog that renews a
/// cancelled lease for nobody, against Redis, leaves the worker's next cycle polling a lock
/// that is never freed until it gives up (seconds of busy answers); the shrunk plan keeps the
/// one worker, its two cycles and the cancellation, ends its run soon after the renewal that
/// shows the anomaly, and its saved confirming run still shows it.
#[test]
fn a_real_time_failure_shrinks_to_its_story_and_ends_its_run_after_it() {
    let Some(redis) = redis("real_cli_shrink") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // One worker whose watchdog renews its lease until it is released, against Redis.
    let system = [
        "--lock",
        redis.as_str(),
        "--workload",
        "mutex",
        "--client",
        "eternal-watchdog",
        "--nemesis",
        "none",
        "--workers",
        "1",
    ];
    let mut args = vec!["run"];
    args.extend(system);
    args.extend(["--ops", "2", "--out", "drawn"]);
    args.extend(REAL_TIMING);
    let drawn = fencer(&args, dir.path());
    assert_eq!(drawn.status.code(), Some(0), "{}", text(&drawn));
    // w0 holds its first lease for 600 ms and its work is cancelled 150 ms in.
    let mut plan: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("drawn/plan.json")).unwrap())
            .unwrap();
    let first = &mut plan["workers"][0]["cycles"][0];
    for field in ["delay_ns", "think_ns", "prepare_ns"] {
        first[field] = 0.into();
    }
    first["hold_ns"] = 600_000_000u64.into();
    plan["faults"] =
        serde_json::json!([{"fault": "cancel", "at_ns": 150_000_000u64, "target": "w0"}]);
    std::fs::write(
        dir.path().join("cancelled.json"),
        serde_json::to_vec_pretty(&plan).unwrap(),
    )
    .unwrap();
    let run = fencer(
        &[
            "run",
            "--plan",
            "cancelled.json",
            "--strict",
            "--out",
            "failed",
        ],
        dir.path(),
    );
    assert_eq!(run.status.code(), Some(1), "{}", text(&run));
    // Every command it prints judges as it did: without --strict the plan would run valid.
    assert!(
        text(&run).contains("run the same plan again: fencer run --plan failed/plan.json --lock ")
            && text(&run).contains("--store sqlite --strict\n"),
        "{}",
        text(&run)
    );
    // The run saved its cycle starts beside its history: a shrink reads the story from them
    // rather than running the plan again, which may not fail again in real time.
    let failed = dir.path().join("failed");
    let plan = fencer_run::plan::Plan::from_json(
        &std::fs::read(failed.join("plan.json")).unwrap(),
        "plan.json",
    )
    .unwrap();
    let backends = fencer::Backends::new();
    let story = fencer_gate::minimize::saved_real_time_run(&failed, &plan, &backends).unwrap();
    assert_eq!(story.cycle_starts_ns.len(), 1);
    assert_eq!(story.cycle_starts_ns[0].len(), 2);
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(failed.join("run.json")).unwrap()).unwrap();
    assert_eq!(
        record["history_sha256"].as_str(),
        Some(story.history.sha256_hex().as_str())
    );
    let simulated = fencer_run::plan::Plan::generate(&fencer::Settings::default());
    assert!(fencer_gate::minimize::saved_real_time_run(&failed, &simulated, &backends).is_none());
    // The class is a warning: a shrink that does not count warnings says so, and runs nothing.
    let lenient = fencer(
        &["shrink", "failed", "--class", "abandoned-lease"],
        dir.path(),
    );
    assert_eq!(lenient.status.code(), Some(254), "{}", text(&lenient));
    assert!(
        text(&lenient).contains(
            "the plan does not show abandoned-lease (nothing to shrink); it shows it as a \
             warning, which --strict counts"
        ),
        "{}",
        text(&lenient)
    );
    assert!(!dir.path().join("failed/shrink.json").exists());
    let shrink = fencer(
        &["shrink", "failed", "--class", "abandoned-lease", "--strict"],
        dir.path(),
    );
    let told = text(&shrink);
    assert_eq!(shrink.status.code(), Some(1), "{told}");
    assert!(told.contains("w0's work cancelled at "), "{told}");
    assert!(
        told.contains("(run it: fencer run --plan failed/plan.min.json --strict)"),
        "{told}"
    );
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("failed/shrink.json")).unwrap())
            .unwrap();
    let events = |field: &str| record[field].as_u64().unwrap();
    // In real time the minimal plan is run again, and the count of runs that showed the class
    // is told: every one completed here, and the one-worker story fails in most.
    assert_eq!(record["reran"]["runs"], 5, "{record}");
    let showed = record["reran"]["showed"].as_u64().unwrap();
    assert!((1..=5).contains(&showed), "{record}");
    assert!(
        told.contains(&format!(
            "run again 5 times (real time: timing decides what its faults hit), the minimal plan \
             showed abandoned-lease in {showed} of them"
        )),
        "{told}"
    );
    assert_eq!(record["after"]["workers"], 1, "{record}");
    assert_eq!(record["after"]["faults"], 1, "{record}");
    assert!(
        events("events_after") * 5 < events("events_before"),
        "the stop cut the busy polling short: {record}"
    );
    let shrunk: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("failed/plan.min.json")).unwrap())
            .unwrap();
    assert!(shrunk["stop_at_ns"].as_u64().is_some(), "{shrunk}");
    let verdict: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("failed/min/verdict.json")).unwrap())
            .unwrap();
    assert!(
        verdict["anomaly_counts"]["abandoned-lease"].as_u64() > Some(0),
        "{verdict}"
    );
    // A gate of the same system replays the shrunk plan as a saved regression; a real-time
    // failure is not replayed from its history, so the gate offers to run its plan again and
    // does not call that a reproduction.
    std::fs::create_dir(dir.path().join("fencer-regressions")).unwrap();
    std::fs::copy(
        dir.path().join("failed/plan.min.json"),
        dir.path().join("fencer-regressions/abandoned.json"),
    )
    .unwrap();
    let mut args = vec!["gate"];
    args.extend(system);
    args.extend([
        "--ops",
        "1",
        "--seeds",
        "0..1",
        "--strict",
        "--no-shrink",
        "--out",
        "g",
    ]);
    args.extend(REAL_TIMING);
    let gate = fencer(&args, dir.path());
    let said = text(&gate);
    assert_eq!(gate.status.code(), Some(1), "{said}");
    assert!(
        said.contains("run again (real time: it may not fail again): fencer run --plan g/"),
        "{said}"
    );
    let again = said
        .lines()
        .filter(|line| line.contains("run again (real time"))
        .collect::<Vec<_>>();
    assert!(
        !again.is_empty() && again.iter().all(|line| line.ends_with(" --strict")),
        "{said}"
    );
    assert!(
        again.iter().any(
            |line| line.contains(": fencer replay g/") && line.ends_with(" --runs 10 --strict")
        ),
        "{said}"
    );
    assert!(!said.contains("reproduce: fencer replay"), "{said}");
}

/// The processes whose parent is `pid` and whose command is `name`, from `/proc`.
fn children_named(pid: u32, name: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| {
            let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
            // `pid (comm) state ppid …`: the command may hold spaces, so split after its `)`.
            let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
                return false;
            };
            let parent = stat[close + 1..].split_whitespace().nth(1);
            &stat[open + 1..close] == name && parent == Some(pid.to_string().as_str())
        })
        .collect()
}

/// Interrupting a real-time gate stops the seeds under way at once and tears down the servers
/// they started, rather than waiting for runs that can take their whole budget (a stuck lock
/// polled for minutes); the summary says interrupted and counts none of them as run, and what
/// each had recorded is saved.
#[test]
fn an_interrupted_real_time_gate_stops_its_running_seeds_and_their_servers() {
    if redis("gate_interrupt").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_fencer"))
        .args([
            "gate",
            "--lock",
            "private:redis",
            "--workload",
            "mutex",
            "--workers",
            "2",
            "--ops",
            "1000",
            "--nemesis",
            "pause",
            "--seeds",
            "0..4",
            "--jobs",
            "2",
            "--no-shrink",
            "--no-regressions",
            "--out",
            "g",
        ])
        .args(&REAL_TIMING[..])
        .current_dir(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(child);
    let pid = child.0.id();
    let started = std::time::Instant::now();
    let servers = loop {
        let servers = children_named(pid, "redis-server");
        if servers.len() == 2 {
            break servers;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "two seeds did not start their servers: {servers:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    std::thread::sleep(std::time::Duration::from_millis(500));
    // The interrupt twice at once, as GNU `timeout` delivers it (to the command, then to its
    // process group): one interrupt, not a second request to exit without tearing down.
    let status = std::process::Command::new("sh")
        .args(["-c", &format!("kill -INT {pid}; kill -INT {pid}")])
        .status()
        .unwrap();
    assert!(status.success());
    let interrupted = std::time::Instant::now();
    let code = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            break status.code();
        }
        assert!(
            interrupted.elapsed() < std::time::Duration::from_secs(20),
            "the gate waited for its running seeds"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(code, Some(2));
    for server in servers {
        assert!(
            !std::path::Path::new(&format!("/proc/{server}")).exists(),
            "redis-server {server} outlived the gate"
        );
    }
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("g/gate.json")).unwrap()).unwrap();
    assert_eq!(summary["ended"], "interrupted", "{summary}");
    assert_eq!(summary["seeds_run"], 0, "{summary}");
    // What each stopped seed recorded is kept beside the summary, marked as interrupted.
    let mut kept: Vec<String> = std::fs::read_dir(dir.path().join("g"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with("-interrupted"))
        .collect();
    kept.sort();
    assert_eq!(kept, ["seed-0-interrupted", "seed-1-interrupted"]);
    for name in kept {
        let record: serde_json::Value = serde_json::from_slice(
            &std::fs::read(dir.path().join("g").join(&name).join("run.json")).unwrap(),
        )
        .unwrap();
        assert!(record["interrupted_at_ns"].as_u64().is_some(), "{record}");
        assert!(record["events"].as_u64().unwrap() > 0, "{record}");
    }
}
