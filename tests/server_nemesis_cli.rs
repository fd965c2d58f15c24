//! `fencer run --lock private:postgres --store private:redis --nemesis …`: fencer starts the
//! servers itself, the plan's server and proxy faults run at their times and land in the
//! history, the servers are gone afterwards, and `fencer replay` runs the plan again against
//! fresh ones. Server faults on servers fencer did not start are refused.

#![cfg(all(feature = "redis", feature = "postgres"))]

mod support;

mod cli_support;
use cli_support::{REAL_TIMING, fencer, text};

use std::process::Output;

const SERVER_FAULTS: &str = "server-pause,restart,skew,partition,delay-replies,drop-replies,cut";

/// Real-tier timing ([`REAL_TIMING`]) over four cycles of three workers, faults 250 ms apart.
fn quick() -> Vec<&'static str> {
    let rest = [
        "--ops",
        "4",
        "--workers",
        "3",
        "--fault-gap",
        "250ms",
        "--seed",
        "3",
    ];
    [&REAL_TIMING[..], &rest].concat()
}

/// The server ports of the "started the … server: … on 127.0.0.1:PORT" lines.
fn started_ports(printed: &str) -> Vec<u16> {
    printed
        .lines()
        .filter(|line| line.starts_with("started the "))
        .map(|line| {
            let after = line.split(" on 127.0.0.1:").nth(1).unwrap();
            after.split(' ').next().unwrap().parse().unwrap()
        })
        .collect()
}

/// Whether fencer could start its private servers (what `printed` says); when it could not,
/// the skip line, or a failure under `FENCER_REQUIRE_BACKENDS=1`.
fn servers_started(printed: &str, what: &str, packages: &str) -> bool {
    let started = if printed.contains("cannot start a private") {
        Err(printed.lines().last().unwrap_or("").to_string())
    } else {
        Ok(())
    };
    support::started_or_skipped("server_nemesis_cli", what, packages, started).is_some()
}

/// Asserts the run printed two servers it started and that both are gone now.
fn assert_two_servers_started_and_stopped(printed: &str) {
    let ports = started_ports(printed);
    assert_eq!(ports.len(), 2, "{printed}");
    for port in &ports {
        assert!(
            std::net::TcpStream::connect(("127.0.0.1", *port)).is_err(),
            "the server on {port} was stopped: {printed}"
        );
    }
}

fn nemesis_ops(history: &str) -> Vec<String> {
    history
        .lines()
        .filter(|line| line.contains(r#""type":"nemesis""#))
        .map(|line| {
            let value: serde_json::Value = serde_json::from_str(line).unwrap();
            value["f"].as_str().unwrap().to_string()
        })
        .collect()
}

#[test]
fn private_servers_take_the_plans_faults_are_stopped_and_the_plan_replays() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec![
        "run",
        "--lock",
        "private:postgres",
        "--store",
        "private:redis",
        "--nemesis",
        SERVER_FAULTS,
        "--out",
        "first",
    ];
    args.extend(quick());
    let output = fencer(&args, dir.path());
    let printed = text(&output);
    let packages = "postgresql redis-server libfaketime";
    if !servers_started(&printed, "private servers", packages) {
        return;
    }
    assert_eq!(output.status.code(), Some(0), "{printed}");
    assert_two_servers_started_and_stopped(&printed);
    assert!(printed.contains("stopped the lock server"), "{printed}");

    let history = std::fs::read_to_string(dir.path().join("first/history.jsonl")).unwrap();
    let ops = nemesis_ops(&history);
    let server_ops = [
        "server-pause",
        "restart",
        "partition",
        "delay-replies",
        "drop-replies",
        "cut",
    ];
    assert!(
        ops.iter()
            .filter(|op| server_ops.contains(&op.as_str()))
            .count()
            >= 3,
        "server and proxy faults are in the history: {ops:?}"
    );
    let plan: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("first/plan.json")).unwrap())
            .unwrap();
    assert!(
        plan["faults"]
            .as_array()
            .unwrap()
            .iter()
            .any(|fault| fault["target"] == "store"),
        "the store's server takes faults too: {plan}"
    );

    let replay = fencer(&["replay", "first"], dir.path());
    let replayed = text(&replay);
    assert_eq!(replay.status.code(), Some(0), "{replayed}");
    assert!(replayed.contains("against fresh ones"), "{replayed}");
    assert_two_servers_started_and_stopped(&replayed);
    let run_dir = replayed
        .lines()
        .find_map(|line| line.strip_prefix("run directory: "))
        .unwrap();
    let again: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join(run_dir).join("plan.json")).unwrap())
            .unwrap();
    assert_eq!(again["faults"], plan["faults"], "the same plan ran again");
}

#[test]
fn server_faults_are_refused_where_fencer_did_not_start_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let urls = [
        "run",
        "--lock",
        "redis://127.0.0.1:1",
        "--store",
        "redis://127.0.0.1:1",
    ];
    let mut args = urls.to_vec();
    args.extend(["--nemesis", "server-pause"]);
    let output = fencer(&args, dir.path());
    let printed = text(&output);
    assert_eq!(output.status.code(), Some(254), "{printed}");
    assert!(
        printed.contains("`server-pause` needs a server fencer starts itself"),
        "{printed}"
    );

    let simulated = fencer(&["run", "--nemesis", "partition"], dir.path());
    assert_eq!(simulated.status.code(), Some(254), "{}", text(&simulated));
    assert!(text(&simulated).contains("simulation has no server process"));

    let plan = r#"{"fault":"restart","at_ns":1,"target":"lock","duration_ns":5}"#;
    let mut saved: serde_json::Value = serde_json::from_slice(
        &fencer::Plan::generate(&fencer::Settings {
            nemesis: Default::default(),
            ..fencer::Settings::default()
        })
        .to_json(),
    )
    .unwrap();
    saved["faults"] = serde_json::json!([serde_json::from_str::<serde_json::Value>(plan).unwrap()]);
    std::fs::write(dir.path().join("plan.json"), saved.to_string()).unwrap();
    let mut args = urls.to_vec();
    args.extend(["--plan", "plan.json"]);
    let output = fencer(&args, dir.path());
    let printed = text(&output);
    assert_eq!(output.status.code(), Some(254), "{printed}");
    assert!(
        printed.contains(
            "aims at the lock, which cannot take it: `redis://127.0.0.1:1` is not fencer's own \
             server, and its adapter offers no restart hook"
        ),
        "{printed}"
    );
}

/// Exit code of a run whose backends are correct: valid (0) or, when a fault left a call's
/// outcome unknown, unknown (2) — never invalid or an error.
fn honest(output: &Output) -> bool {
    matches!(output.status.code(), Some(0 | 2))
}

#[cfg(all(feature = "etcd", feature = "zookeeper"))]
#[test]
fn private_etcd_and_zookeeper_take_server_faults_but_no_clock_jumps() {
    let dir = tempfile::tempdir().unwrap();
    // etcd leases are whole seconds and the private ZooKeeper's sessions reach 1 s at most.
    let mut args = vec![
        "run",
        "--lock",
        "private:etcd",
        "--store",
        "private:zookeeper",
        "--nemesis",
        "server-pause,restart,skew,partition,pause",
        "--out",
        "run",
    ];
    args.extend(quick());
    for (flag, value) in [("--ttl", "1s"), ("--renew-every", "300ms")] {
        let at = args.iter().position(|arg| *arg == flag).unwrap();
        args[at + 1] = value;
    }
    let output = fencer(&args, dir.path());
    let printed = text(&output);
    if !servers_started(
        &printed,
        "private etcd and ZooKeeper",
        "etcd-server zookeeper",
    ) {
        return;
    }
    assert!(honest(&output), "{printed}");
    assert_two_servers_started_and_stopped(&printed);
    let ops = nemesis_ops(&std::fs::read_to_string(dir.path().join("run/history.jsonl")).unwrap());
    assert!(
        ops.iter().any(|op| op == "server-pause" || op == "restart"),
        "{ops:?}"
    );
    let plan: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("run/plan.json")).unwrap()).unwrap();
    assert!(
        !plan["faults"]
            .as_array()
            .unwrap()
            .iter()
            .any(|fault| fault["fault"] == "clock-jump" && fault["target"] == "lock"),
        "etcd ignores libfaketime: no jump of its clock is planned: {plan}"
    );

    // A hand-written plan that jumps the private etcd's clock is refused, not run half-way.
    let mut saved = plan.clone();
    saved["faults"] = serde_json::json!([
        {"fault": "clock-jump", "at_ns": 1, "target": "lock", "jump_ns": 5_000_000_000i64}
    ]);
    std::fs::write(dir.path().join("jump.json"), saved.to_string()).unwrap();
    let refused = fencer(
        &[
            "run",
            "--lock",
            "private:etcd",
            "--store",
            "private:zookeeper",
            "--plan",
            "jump.json",
        ],
        dir.path(),
    );
    assert_eq!(refused.status.code(), Some(254), "{}", text(&refused));
    assert!(
        text(&refused).contains("cannot be stepped"),
        "{}",
        text(&refused)
    );
}
