//! `fencer run --lock private:redlock …`: fencer starts a cluster itself, aims server faults at
//! its members (`lock.n1` …), and stops every member afterwards. A clean run is valid; the
//! cases Redlock is known to be unsafe in (a majority of masters forgetting a key early, a
//! holder paused past its validity) are caught with an unfenced store; a failing plan shrinks
//! to the member faults that matter.

#![cfg(all(feature = "redis", feature = "postgres"))]

mod support;

mod cli_support;
use cli_support::{REAL_TIMING, fencer, text};

use std::path::Path;
use std::process::Output;

use fencer::Plan;
use fencer_checkers::AnomalyClass;
use fencer_gate::shrink::{ShrinkLimits, fails_with, shrink};
use fencer_nemesis::Fault;

/// Real-tier timing ([`REAL_TIMING`]) over six cycles of three workers.
fn quick() -> Vec<&'static str> {
    [&REAL_TIMING[..], &["--ops", "6", "--workers", "3"]].concat()
}

const TTL_NS: u64 = 300_000_000;

/// Whether fencer could start the cluster and the store (what `printed` says); when it could
/// not, the skip line, or a failure under `FENCER_REQUIRE_BACKENDS=1`.
fn started(printed: &str) -> bool {
    let started = if printed.contains("cannot start a private") {
        Err(printed.lines().last().unwrap_or("").to_string())
    } else {
        Ok(())
    };
    support::started_or_skipped(
        "cluster_real",
        "a private Redlock cluster",
        "redis-server postgresql",
        started,
    )
    .is_some()
}

/// The "started the lock cluster KIND …" line fencer printed.
fn cluster_line<'p>(printed: &'p str, kind: &str) -> &'p str {
    let start = format!("started the lock cluster {kind}");
    printed
        .lines()
        .find(|line| line.starts_with(&start))
        .unwrap_or_else(|| panic!("the {kind} cluster is announced: {printed}"))
}

/// Every loopback port the "started the lock cluster …" line names: each master's and each
/// proxy's.
fn cluster_ports(printed: &str) -> Vec<u16> {
    cluster_line(printed, "redlock")
        .split("127.0.0.1:")
        .skip(1)
        .filter_map(|after| {
            let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .collect()
}

/// The process ids the "started the lock cluster KIND …" line names (`Redis pid N`).
fn cluster_pids(printed: &str, kind: &str) -> Vec<u32> {
    cluster_line(printed, kind)
        .split(" pid ")
        .skip(1)
        .filter_map(|after| after.split(' ').next()?.parse().ok())
        .collect()
}

/// Asserts the run started five masters behind five proxies and that none of them is left:
/// no redis-server of the cluster alive, nothing listening on any of their ports.
fn assert_cluster_started_and_stopped(printed: &str) {
    let pids = cluster_pids(printed, "redlock");
    assert_eq!(pids.len(), 5, "five masters: {printed}");
    for pid in pids {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        assert!(
            !comm.starts_with("redis-server"),
            "master pid {pid} is gone after the run: {printed}"
        );
    }
    let ports = cluster_ports(printed);
    assert!(ports.len() >= 10, "5 masters and 5 proxies: {ports:?}");
    assert!(
        printed.contains("stopped the lock cluster redlock"),
        "{printed}"
    );
    for port in ports {
        assert!(
            std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
            "port {port} of the cluster is closed after the run: {printed}"
        );
    }
}

fn verdict(dir: &Path, run: &str) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join(run).join("verdict.json")).unwrap()).unwrap()
}

/// The events of a saved run's history.
fn history(dir: &Path, run: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join(run).join("history.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The true time of the first event of `kind` in `events`.
fn first_ns(events: &[serde_json::Value], kind: &str) -> u64 {
    events
        .iter()
        .find(|event| event["type"] == kind)
        .and_then(|event| event["time_ns"].as_u64())
        .unwrap_or_else(|| panic!("no {kind} event"))
}

fn anomaly_classes(verdict: &serde_json::Value) -> Vec<String> {
    verdict["anomaly_counts"]
        .as_object()
        .map(|counts| counts.keys().cloned().collect())
        .unwrap_or_default()
}

fn run(dir: &Path, args: &[&str]) -> Output {
    let mut all = args.to_vec();
    all.extend(quick());
    fencer(&all, dir)
}

#[test]
fn a_clean_redlock_run_is_valid_and_leaves_no_master_behind() {
    let dir = tempfile::tempdir().unwrap();
    let output = run(
        dir.path(),
        &[
            "run",
            "--lock",
            "private:redlock",
            "--store",
            "private:postgres",
            "--nemesis",
            "none",
            "--seed",
            "1",
            "--out",
            "clean",
        ],
    );
    let printed = text(&output);
    if !started(&printed) {
        return;
    }
    assert_eq!(output.status.code(), Some(0), "{printed}");
    assert_eq!(
        verdict(dir.path(), "clean")["validity"],
        "valid",
        "{printed}"
    );
    assert!(
        printed.contains("Redlock over 5 independent Redis masters"),
        "{printed}"
    );
    assert_cluster_started_and_stopped(&printed);

    // The plan runs again against a fresh cluster, which is stopped in turn.
    let replay = fencer(&["replay", "clean"], dir.path());
    let replayed = text(&replay);
    assert_eq!(replay.status.code(), Some(0), "{replayed}");
    assert!(replayed.contains("against fresh ones"), "{replayed}");
    assert_cluster_started_and_stopped(&replayed);
}

/// A plan of `settings` with `faults` instead of its drawn ones.
fn plan_with(settings: &fencer::Settings, faults: Vec<Fault>) -> Plan {
    let mut plan = Plan::generate(settings);
    plan.faults = faults;
    plan
}

/// Settings of a Redlock run, five workers contending, protecting an unfenced PostgreSQL
/// store: what Redlock alone guarantees, with no fence behind it.
fn unfenced_redlock(seed: u64) -> fencer::Settings {
    let mut settings = support::real_settings(seed, 5, 20);
    settings.lock = "private:redlock".into();
    settings.store = "private:postgres?variant=unfenced".into();
    settings.nemesis = Default::default();
    // Renewals two thirds of a TTL apart leave a rival time to be granted the lock before the
    // holder's next renewal finds its keys gone.
    settings.renew_every_ns = 200_000_000;
    settings.in_real_time()
}

/// Forward clock jumps of `by_ns` on `members` at `at_ns`: their keys expire at once.
fn jumps(at_ns: u64, members: &[&str], by_ns: i64) -> Vec<Fault> {
    members
        .iter()
        .map(|member| Fault::ClockJump {
            at_ns,
            target: format!("lock.{member}"),
            jump_ns: by_ns,
        })
        .collect()
}

/// Runs `plan` from a file with `fencer run --plan`, into `out`.
fn run_plan(dir: &Path, plan: &Plan, out: &str) -> Output {
    let file = dir.join(format!("{out}.json"));
    std::fs::write(&file, plan.to_json()).unwrap();
    fencer(
        &["run", "--plan", file.to_str().unwrap(), "--out", out],
        dir,
    )
}

#[test]
fn clock_jumps_on_a_majority_of_masters_let_two_holders_in_but_on_a_minority_do_not() {
    let dir = tempfile::tempdir().unwrap();
    // Cycles enough for the run to outlast every round of jumps below.
    let settings = fencer::Settings {
        ops_per_worker: 40,
        ..unfenced_redlock(4)
    };
    // A clock jump on three of five masters once a renewal interval (two thirds of a TTL):
    // each time, the holder's keys vanish from a majority and a rival is granted the lock
    // while the holder still counts validity (a small jump on n4 beside it changes nothing).
    const ROUND_NS: u64 = 2 * TTL_NS / 3;
    let mut faults = Vec::new();
    for round in 1..=16u64 {
        let at_ns = round * ROUND_NS;
        faults.extend(jumps(at_ns, &["n1", "n2", "n3"], 10 * TTL_NS as i64));
        faults.extend(jumps(at_ns + TTL_NS / 2, &["n4"], TTL_NS as i64 / 10));
    }
    let plan = plan_with(&settings, faults);
    let output = run_plan(dir.path(), &plan, "jumps");
    let printed = text(&output);
    if !started(&printed) {
        return;
    }
    assert_eq!(output.status.code(), Some(1), "invalid: {printed}");
    let found = anomaly_classes(&verdict(dir.path(), "jumps"));
    assert!(
        found
            .iter()
            .any(|class| class == "superseded-write-accepted"
                || class == "stale-write-accepted"
                || class == "overlapping-leases"),
        "{found:?}: {printed}"
    );
    assert_cluster_started_and_stopped(&printed);
    // The schedule counts from the workers' start, not from before five masters and
    // PostgreSQL came up: the first jump lands a round after the first call.
    let events = history(dir.path(), "jumps");
    let after_first_call_ns = first_ns(&events, "nemesis") - first_ns(&events, "invoke");
    assert!(
        after_first_call_ns + 50_000_000 >= ROUND_NS,
        "the first jump came {after_first_call_ns} ns after the first call"
    );

    // The same plan with the jumps on a minority only (n4, n5) is safe: a majority still
    // holds the key.
    let mut minority = plan.clone();
    minority.faults = (1..=16u64)
        .flat_map(|round| jumps(round * ROUND_NS, &["n4", "n5"], 10 * TTL_NS as i64))
        .collect();
    let output = run_plan(dir.path(), &minority, "minority");
    let printed = text(&output);
    assert!(
        matches!(output.status.code(), Some(0 | 2)),
        "a minority's clocks cannot break Redlock: {printed}"
    );
}

#[test]
fn a_failing_redlock_plan_shrinks_to_the_jumps_on_a_majority() {
    // Short scripts on a Redis store (fast to start), so each candidate is a short run.
    let mut settings = unfenced_redlock(6);
    settings.ops_per_worker = 10;
    settings.store = "private:redis?variant=unfenced".into();
    let mut plan = Plan::generate(&settings);
    // Rounds of jumps on a majority, every half TTL, after noise the failure does not need: a
    // short pause of n5 and a small jump on n4.
    let step_ns = TTL_NS / 2;
    let mut faults = vec![
        Fault::ServerPause {
            at_ns: step_ns / 4,
            target: "lock.n5".into(),
            duration_ns: TTL_NS / 10,
        },
        Fault::ClockJump {
            at_ns: step_ns / 2,
            target: "lock.n4".into(),
            jump_ns: TTL_NS as i64 / 10,
        },
    ];
    for round in 1..=10u64 {
        faults.extend(jumps(
            round * step_ns,
            &["n1", "n2", "n3"],
            10 * TTL_NS as i64,
        ));
    }
    plan.faults = faults;
    let backends = fencer::Backends::new();
    let class = AnomalyClass::OverlappingLeases;
    let mut reproduces = fails_with(class, &backends, false);
    let first = reproduces(&plan);
    if !first {
        let what = "a private Redlock cluster and Redis store";
        let started = fencer_run::Launch::new(&backends).run(&plan).map(drop);
        if support::started_or_skipped("cluster_real", what, "redis-server", started).is_none() {
            return;
        }
    }
    // A real-time run may miss the window once; the shrink needs a plan that fails.
    assert!(first || reproduces(&plan), "the plan fails with {class:?}");
    // So may a candidate, on a loaded machine: each is given a second run before it is
    // taken not to reproduce, and the candidates that cut cycles (tried first, and on a slow
    // machine often too short to reach the jumps) leave room for those that drop faults.
    let shrunk = shrink(
        &plan,
        |candidate: &Plan| reproduces(candidate) || reproduces(candidate),
        ShrinkLimits {
            max_candidates: 64,
            budget: std::time::Duration::from_secs(120),
        },
    );
    let targets: Vec<&str> = shrunk.plan.faults.iter().map(Fault::target).collect();
    eprintln!(
        "shrunk from {} faults to {targets:?} in {} candidates",
        plan.faults.len(),
        shrunk.candidates
    );
    assert!(
        shrunk.plan.faults.len() < plan.faults.len(),
        "faults were dropped: {targets:?} ({} candidates)",
        shrunk.candidates
    );
    let on_majority = |fault: &&Fault| {
        matches!(fault, Fault::ClockJump { target, .. }
            if ["lock.n1", "lock.n2", "lock.n3"].contains(&target.as_str()))
    };
    assert!(
        shrunk.plan.faults.iter().filter(on_majority).count() >= 3,
        "jumps on a majority stay: {targets:?}"
    );
}

#[test]
fn an_etcd3_run_through_partitions_and_pauses_of_its_leader_is_valid() {
    let dir = tempfile::tempdir().unwrap();
    let output = fencer(
        &[
            "run",
            "--lock",
            "private:etcd3",
            "--store",
            "private:postgres",
            "--nemesis",
            "net-partition,server-pause",
            "--ttl",
            "2s",
            "--renew-every",
            "600ms",
            "--call-timeout",
            "600ms",
            "--fault-gap",
            "1s",
            "--ops",
            "3",
            "--workers",
            "3",
            "--seed",
            "3",
            "--out",
            "etcd3",
        ],
        dir.path(),
    );
    let printed = text(&output);
    let started = if printed.contains("cannot start a private") {
        Err(printed.lines().last().unwrap_or("").to_string())
    } else {
        Ok(())
    };
    let what = "a private etcd3 cluster (root, ip netns, iptables)";
    let packages = "etcd-server iptables iproute2 postgresql";
    if support::started_or_skipped("cluster_real", what, packages, started).is_none() {
        return;
    }
    assert_eq!(output.status.code(), Some(0), "valid: {printed}");
    assert_eq!(verdict(dir.path(), "etcd3")["validity"], "valid");
    let history = std::fs::read_to_string(dir.path().join("etcd3/history.jsonl")).unwrap();
    // Pauses aimed at the leader hit the member leading then, named in the event (or, with
    // no leader at that moment, an `info` event says the pause did not happen).
    let plan: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("etcd3/plan.json")).unwrap())
            .unwrap();
    let at_leader = plan["faults"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|fault| fault["target"] == "lock.leader")
        .count();
    assert!(at_leader > 0, "seed 3 aims pauses at the leader: {plan}");
    let hit = history
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .filter(|event| {
            event["f"] == "server-pause"
                && ((event["type"] == "nemesis"
                    && event["value"] == "lock.leader"
                    && event["target"]
                        .as_str()
                        .is_some_and(|t| t.starts_with("lock.n")))
                    || (event["type"] == "info" && event["target"] == "lock.leader"))
        })
        .count();
    // Faults drawn past the run's end never start.
    assert!(
        (1..=at_leader).contains(&hit),
        "{hit} of {at_leader} pauses at the leader recorded with the member hit"
    );
    let partitions: Vec<serde_json::Value> = history
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .filter(|event| event["f"] == "net-partition" && event["type"] == "nemesis")
        .collect();
    assert!(!partitions.is_empty(), "net partitions ran: {printed}");
    assert!(
        partitions
            .iter()
            .all(|event| event["value"].as_str().is_some_and(|v| v.contains(" | "))),
        "each records its sides: {partitions:?}"
    );
    // The cluster's namespaces (`fencer-PID-N-nK`) are gone.
    let lab = printed
        .split(" in fencer-")
        .nth(1)
        .and_then(|rest| rest.split([' ', ')']).next())
        .map(|id| format!("fencer-{id}"))
        .unwrap_or_else(|| panic!("the cluster names its namespaces: {printed}"));
    let namespaces = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap();
    let namespaces = String::from_utf8_lossy(&namespaces.stdout);
    assert!(
        !namespaces.contains(&format!("{lab}-")),
        "{lab}'s namespaces are gone: {namespaces}"
    );
    assert!(
        printed.contains("stopped the lock cluster etcd3"),
        "{printed}"
    );
}

/// The network namespaces `ip netns` lists whose name starts with `prefix`.
fn namespaces_named(prefix: &str) -> Vec<String> {
    let listed = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map(|output| String::from_utf8_lossy(&output.stdout).into_owned())
        .unwrap_or_default();
    listed
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| name.starts_with(prefix))
        .map(str::to_string)
        .collect()
}

#[test]
fn an_interrupted_etcd3_run_tears_its_cluster_down_keeps_its_events_and_exits_130() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;

    let dir = tempfile::tempdir().unwrap();
    let mut child = cli_support::fencer_command(
        &[
            "run",
            "--lock",
            "private:etcd3",
            "--store",
            "private:postgres",
            "--nemesis",
            "net-partition",
            "--ttl",
            "2s",
            "--renew-every",
            "600ms",
            "--call-timeout",
            "600ms",
            "--fault-gap",
            "1s",
            "--ops",
            "200",
            "--workers",
            "3",
            "--out",
            "interrupted",
        ],
        dir.path(),
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("fencer runs");
    let namespace_prefix = format!("fencer-{}-", child.id());
    // Read what it prints until both servers are up; then the run is under way.
    let mut printed = String::new();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    while !printed.contains("started the store server") {
        let Some(Ok(line)) = lines.next() else {
            break;
        };
        printed.push_str(&line);
        printed.push('\n');
    }
    let running = printed.contains("started the store server");
    if !running {
        let status = child.wait().unwrap();
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
        let started: Result<(), String> = Err(format!("{status}: {printed}{stderr}"));
        support::started_or_skipped(
            "cluster_real",
            "a private etcd3 cluster",
            "etcd-server postgresql iproute2 iptables",
            started,
        );
        return;
    }
    let etcd_pids = cluster_pids(&printed, "etcd3");
    assert_eq!(etcd_pids.len(), 3, "three members: {printed}");
    assert_eq!(namespaces_named(&namespace_prefix).len(), 3);
    std::thread::sleep(std::time::Duration::from_millis(1_500));
    // SIGINT to fencer alone: the members are not signalled, so what stops them is fencer.
    let sent = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let started_waiting = std::time::Instant::now();
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(
        started_waiting.elapsed() < std::time::Duration::from_secs(20),
        "stopped promptly: {:?}",
        started_waiting.elapsed()
    );
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert!(
        namespaces_named(&namespace_prefix).is_empty(),
        "no namespace left: {:?}",
        namespaces_named(&namespace_prefix)
    );
    for pid in etcd_pids {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        assert!(!comm.starts_with("etcd"), "member pid {pid} is gone");
    }
    // What the run recorded until the stop is saved, marked as interrupted.
    let record: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("interrupted/run.json"))
            .expect("the unfinished run is saved"),
    )
    .unwrap();
    let stopped_ns = record["interrupted_at_ns"].as_u64().expect("{record}");
    assert!(stopped_ns >= 1_000_000_000, "{record}");
    let history = std::fs::read_to_string(dir.path().join("interrupted/history.jsonl")).unwrap();
    assert_eq!(
        history.lines().count() as u64,
        record["events"].as_u64().unwrap()
    );
    let printed_after: String = lines.map_while(Result::ok).collect::<Vec<_>>().join("\n");
    assert!(
        printed_after.contains("unfinished: its ")
            && printed_after.contains("judged on those alone"),
        "{printed_after}"
    );
}
