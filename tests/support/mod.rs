//! Shared by the real-backend tests: reaching a server or skipping honestly, and the fault
//! scenarios that make a broken backend show its bug.

#![allow(dead_code)] // each test file uses a different part

use std::io::Write as _;

use std::sync::Arc;
use std::time::Duration;

use fencer::plan::Plan;
use fencer::real::real_plan;
use fencer::{FencedStore, Harness, LockService, Settings, Validity, Verdict};
use fencer_harness::{EventType, History, Op};
use fencer_nemesis::Fault;
use fencer_workloads::{CyclePlan, WorkerPlan};

/// The marker CI greps for: a backend test that skipped instead of running.
pub const SKIP_MARKER: &str = "FENCER-SKIPPED-BACKEND";

/// True when `FENCER_REQUIRE_BACKENDS=1`: an unreachable server is then a failure.
pub fn backends_required() -> bool {
    std::env::var("FENCER_REQUIRE_BACKENDS").is_ok_and(|value| value == "1")
}

/// Asserts `verdict` proved no anomaly: valid, or honestly unknown when a fault left a call's
/// outcome unknown — what a correct backend must give under any fault.
pub fn assert_verdict_not_invalid(verdict: &Verdict) {
    assert_ne!(
        verdict.validity,
        Validity::Invalid,
        "{}",
        verdict.summary_line()
    );
}

/// Checks `history` and asserts it proves no anomaly ([`assert_verdict_not_invalid`]).
pub fn assert_not_invalid(history: &History) -> Verdict {
    let verdict = fencer::check(history);
    assert_verdict_not_invalid(&verdict);
    verdict
}

/// Asserts some call of `history` ended as `info`: the fault left its outcome unknown, and
/// fencer must not have rounded it to `ok` or `fail`.
pub fn assert_some_calls_unknown(history: &History, why: &str) {
    assert!(
        history.events.iter().any(|e| e.kind == EventType::Info),
        "{why}"
    );
}

/// Every acquire the history records as granted: (true time of the reply, fencing token), in
/// history order — what a restart test compares across the restart.
pub fn granted_tokens(history: &History) -> Vec<(u64, u64)> {
    history
        .events
        .iter()
        .filter(|e| e.is(EventType::Ok, Op::Acquire))
        .map(|e| {
            (
                e.time_ns,
                e.token.expect("a granted acquire carries its token"),
            )
        })
        .collect()
}

/// Asserts an acquire and a write to a server nobody listens on come back at once as
/// definitely not applied (the connect was refused, so nothing was sent).
pub fn assert_calls_not_applied(lock: &dyn LockService, store: &dyn FencedStore, ttl: Duration) {
    let runtime = fencer_harness::runtime::real_runtime().expect("a tokio runtime");
    let acquired = runtime.block_on(lock.acquire("l", fencer::OwnerToken(1), ttl));
    assert!(
        matches!(acquired, Err(fencer::CallError::NotApplied(_))),
        "{acquired:?}"
    );
    let written = runtime.block_on(store.write("k", 1, "w", "v"));
    assert!(
        matches!(written, Err(fencer::CallError::NotApplied(_))),
        "{written:?}"
    );
}

/// The server `started` gave (a private server a test starts itself), or `None` after the skip
/// line when it could not start: [`reachable`]'s rules, `package` naming what to install.
pub fn started_or_skipped<S>(
    test: &str,
    server: &str,
    package: &str,
    started: Result<S, String>,
) -> Option<S> {
    match started {
        Ok(server) => Some(server),
        Err(error) => {
            assert!(!reachable(test, server, package, async move { Err(error) }));
            None
        }
    }
}

/// Runs `probe` (connect + ping) on a throwaway runtime. `Ok(true)`: go on. Unreachable:
/// panics under `FENCER_REQUIRE_BACKENDS=1`, else prints one line with [`SKIP_MARKER`] naming
/// the Debian package, straight to stderr (past the test harness's capture), and returns false.
pub fn reachable<F>(test: &str, server: &str, package: &str, probe: F) -> bool
where
    F: std::future::Future<Output = Result<(), String>>,
{
    let runtime = fencer_harness::runtime::real_runtime().expect("a tokio runtime");
    match runtime.block_on(probe) {
        Ok(()) => true,
        Err(error) => {
            if backends_required() {
                panic!(
                    "{test}: {server} unreachable and FENCER_REQUIRE_BACKENDS=1: {error} \
                     (install the Debian package {package} and start it)"
                );
            }
            let _ = writeln!(
                std::io::stderr(),
                "{SKIP_MARKER} {test}: {server} unreachable ({error}); install the Debian \
                 package {package} and start it, or set FENCER_REQUIRE_BACKENDS=1 to fail instead"
            );
            false
        }
    }
}

/// Real-tier settings: 300 ms leases renewed every 100 ms, 100 ms call timeout.
pub fn real_settings(seed: u64, workers: usize, ops: usize) -> Settings {
    Settings {
        seed,
        workers,
        ops_per_worker: ops,
        ttl_ns: 300_000_000,
        renew_every_ns: 100_000_000,
        mean_fault_gap_ns: 300_000_000,
        call_timeout_ns: 100_000_000,
        nemesis: [
            fencer::FaultKind::Pause,
            fencer::FaultKind::Skew,
            fencer::FaultKind::DropRenew,
            fencer::FaultKind::DropAcquire,
            fencer::FaultKind::DropWrite,
        ]
        .into_iter()
        .collect(),
        ..Settings::default()
    }
}

/// One cycle: wait `delay_ms`, acquire, prepare `prepare_ms`, write, hold `hold_ms`, release.
pub fn cycle(delay_ms: u64, prepare_ms: u64, hold_ms: u64) -> CyclePlan {
    CyclePlan {
        delay_ns: delay_ms * 1_000_000,
        think_ns: 0,
        prepare_ns: prepare_ms * 1_000_000,
        hold_ns: hold_ms * 1_000_000,
        value: None,
    }
}

/// w0 takes the lease and is frozen for 900 ms (3 TTLs) between its last lease check and its
/// write; w1 takes the expired lease, writes with the newer token and holds on. When w0 wakes,
/// its older write reaches the store: only the store's fence can refuse it.
pub fn stale_write_plan() -> Plan {
    let mut plan = real_plan(&Settings {
        nemesis: Default::default(),
        ..real_settings(0, 2, 1)
    });
    plan.workers = vec![
        WorkerPlan {
            cycles: vec![cycle(0, 600, 0)],
        },
        WorkerPlan {
            cycles: vec![cycle(100, 0, 1_200)],
        },
    ];
    plan.faults = vec![Fault::Pause {
        at_ns: 50_000_000,
        target: "w0".into(),
        duration_ns: 900_000_000,
    }];
    plan
}

/// 1 s leases. w0 takes the lease and sends its write 50 ms later (the write delay is on by
/// then), but the write is held in flight until 800 ms (w0 waits for the reply, renewing meanwhile); at 300 ms the lock server's clock
/// jumps 5 s forward, expiring w0's live lease (its renewals fail from then on); at 500 ms w1
/// takes the lease and writes with the newer token. When w0's older write lands, only the
/// store's fence can refuse it. Without the jump, w1 could not acquire before w0 released after
/// its write, and nothing would be stale.
pub fn clock_jump_plan() -> Plan {
    let mut plan = real_plan(&Settings {
        nemesis: Default::default(),
        ttl_ns: 1_000_000_000,
        renew_every_ns: 200_000_000,
        call_timeout_ns: 900_000_000,
        ..real_settings(0, 2, 1)
    });
    plan.workers = vec![
        WorkerPlan {
            cycles: vec![cycle(0, 50, 0)],
        },
        WorkerPlan {
            cycles: vec![cycle(500, 0, 1_200)],
        },
    ];
    plan.faults = vec![
        Fault::DelayWrite {
            at_ns: 0,
            target: "w0".into(),
            duration_ns: 800_000_000,
        },
        Fault::ClockJump {
            at_ns: 300_000_000,
            target: "lock".into(),
            jump_ns: 5_000_000_000,
        },
    ];
    plan
}

/// w1 was granted the lease while w0's, by its last successful renewal, still had time left
/// (`ttl_ns`): only the server's clock jump can have expired it.
pub fn assert_jump_let_a_second_worker_in_early(history: &History, ttl_ns: u64) {
    let w0_last_ns = history
        .events
        .iter()
        .filter(|e| e.process.starts_with("w0") && e.kind == EventType::Ok)
        .filter(|e| matches!(e.f, Op::Acquire | Op::Renew))
        .map(|e| e.time_ns)
        .max()
        .expect("w0 took the lease");
    let w1_granted_ns = history
        .events
        .iter()
        .find(|e| e.process == "w1" && e.is(EventType::Ok, Op::Acquire))
        .expect("w1 took the lease")
        .time_ns;
    assert!(
        w1_granted_ns < w0_last_ns + ttl_ns,
        "w1 got the lease at {w1_granted_ns} ns, after w0's would have expired anyway ({} ns)",
        w0_last_ns + ttl_ns
    );
}

/// `roles` (`lock`, `store`) all served by `server`, as nemesis targets.
pub fn server_targets(
    server: &Arc<fencer::servers::PrivateServer>,
    roles: &[&str],
) -> fencer::drive::ServerTargets {
    roles
        .iter()
        .map(|role| {
            let target: Arc<dyn fencer_nemesis::ServerFaults> = server.clone();
            (role.to_string(), target)
        })
        .collect()
}

/// w0 takes the lease, writes, and is frozen for 900 ms while holding it; w1 takes the expired
/// lease and holds on. When w0 wakes it releases "its" lease: only the service's owner compare
/// keeps w1's lease alive.
pub fn stale_release_plan() -> Plan {
    let mut plan = stale_write_plan();
    plan.workers[0] = WorkerPlan {
        cycles: vec![cycle(0, 0, 600)],
    };
    plan
}

/// Runs `lock` + `store` in real time under the real tier's faults (3 workers × 5 cycles,
/// seeds 0–2), asserts the verdict is valid, and that it was not vacuous: every seed's applied
/// writes came back from the store's log into the history.
pub fn assert_clean_under_faults(
    name: &str,
    lock: Arc<dyn LockService>,
    store: Arc<dyn FencedStore>,
) {
    assert_clean_under_faults_at(name, lock, store, Duration::from_millis(300));
}

/// [`assert_clean_under_faults`] with leases of `ttl` (renewal, call timeout and fault gap in
/// the same proportions), for servers whose leases cannot be as short as 300 ms (etcd: 1 s).
pub fn assert_clean_under_faults_at(
    name: &str,
    lock: Arc<dyn LockService>,
    store: Arc<dyn FencedStore>,
    ttl: Duration,
) {
    let report = Harness::from_shared(lock, store)
        .name(name)
        .real_time()
        .ttl(ttl)
        .renew_every(ttl / 3)
        .call_timeout(ttl / 3)
        .fault_gap(ttl)
        .workers(3)
        .ops(5)
        .nemesis(real_settings(0, 1, 1).nemesis)
        .seeds(0..3)
        .run();
    report.assert_valid();
    for run in &report.runs {
        let (history, _) = run.outcome.as_ref().expect("ran");
        let applied = history
            .events
            .iter()
            .filter(|e| e.is(EventType::Log, Op::Write))
            .count();
        assert!(
            applied > 0,
            "seed {}: no applied write was logged",
            run.seed
        );
    }
}

/// `plan` with every duration (TTL, renewal, call timeout, fault gap, cycle timings, pauses)
/// multiplied by `times`/`per`, so a scenario written for 300 ms leases plays out the same on a
/// server whose leases are whole seconds (etcd: ×10/3 gives 1 s).
pub fn stretched(mut plan: Plan, times: u64, per: u64) -> Plan {
    let scale = |ns: &mut u64| *ns = *ns * times / per;
    let settings = &mut plan.settings;
    for ns in [
        &mut settings.ttl_ns,
        &mut settings.renew_every_ns,
        &mut settings.call_timeout_ns,
        &mut settings.mean_fault_gap_ns,
    ] {
        scale(ns);
    }
    for cycle in plan
        .workers
        .iter_mut()
        .flat_map(|worker| &mut worker.cycles)
    {
        for ns in [
            &mut cycle.delay_ns,
            &mut cycle.think_ns,
            &mut cycle.prepare_ns,
            &mut cycle.hold_ns,
        ] {
            scale(ns);
        }
    }
    for fault in &mut plan.faults {
        match fault {
            Fault::Pause {
                at_ns, duration_ns, ..
            } => {
                scale(at_ns);
                scale(duration_ns);
            }
            other => panic!("stretched: only pauses are scaled, found {other:?}"),
        }
    }
    plan
}
