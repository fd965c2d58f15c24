//! Shared by the real-backend tests: reaching a server or skipping honestly, and the fault
//! scenarios that make a broken backend show its bug.

#![allow(dead_code)] // each test file uses a different part

use std::io::Write as _;

use std::sync::Arc;
use std::time::Duration;

use fencer::plan::Plan;
use fencer::real::real_plan;
use fencer::{FencedStore, Harness, LockService, Settings};
use fencer_harness::{EventType, Op};
use fencer_nemesis::Fault;
use fencer_workloads::{CyclePlan, WorkerPlan};

/// The marker CI greps for: a backend test that skipped instead of running.
pub const SKIP_MARKER: &str = "FENCER-SKIPPED-BACKEND";

/// True when `FENCER_REQUIRE_BACKENDS=1`: an unreachable server is then a failure.
pub fn backends_required() -> bool {
    std::env::var("FENCER_REQUIRE_BACKENDS").is_ok_and(|value| value == "1")
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

fn cycle(delay_ms: u64, prepare_ms: u64, hold_ms: u64) -> CyclePlan {
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
