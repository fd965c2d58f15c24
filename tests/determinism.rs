//! The simulation tier's promise: the same plan gives the same history, byte for byte — across
//! runs in one process and between processes.

use fencer::{Plan, Settings, simulate};

fn settings(seed: u64) -> Settings {
    Settings {
        seed,
        ops_per_worker: 20,
        ..Settings::default()
    }
}

#[test]
fn same_seed_gives_byte_identical_history_for_100_seeds() {
    let mut distinct_hashes = std::collections::BTreeSet::new();
    for seed in 0..100 {
        let plan = Plan::generate(&settings(seed));
        let first = simulate(&plan).unwrap();
        let second = simulate(&plan).unwrap();
        assert!(
            first.to_jsonl() == second.to_jsonl(),
            "seed {seed}: two runs of the same plan differ"
        );
        distinct_hashes.insert(first.sha256_hex());
    }
    // Guards against a degenerate simulation that ignores its seed.
    assert_eq!(distinct_hashes.len(), 100);
}

#[test]
fn a_fresh_process_records_the_same_history_as_this_one() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_fencer"))
        .args(["run", "--seed", "42", "--ops", "20", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        status.status.code().is_some_and(|code| code <= 2),
        "fencer run failed: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    let from_process = std::fs::read(out.join("history.jsonl")).unwrap();
    let in_process = simulate(&Plan::generate(&settings(42))).unwrap().to_jsonl();
    assert!(
        from_process == in_process,
        "histories differ between processes"
    );
}

/// The faults that reach every call and the lease's edge hold calls on timers and read the
/// run-wide lease board; none of it may depend on anything but the seed.
#[test]
fn faults_on_every_call_and_at_the_lease_s_edge_replay_byte_for_byte() {
    use fencer::{FaultKind, LockBackend, Workload};
    let kinds = [
        FaultKind::DelayAcquire,
        FaultKind::DelayRenew,
        FaultKind::DelayRelease,
        FaultKind::LeaseEdge,
    ];
    for workload in Workload::ALL {
        for (lock, nemesis) in [
            (LockBackend::Sim, &kinds[..]),
            (LockBackend::Sim, &kinds[3..]),
            (LockBackend::SimLateRenew, &kinds[3..]),
        ] {
            let mut distinct_hashes = std::collections::BTreeSet::new();
            for seed in 0..6 {
                let plan = Plan::generate(&Settings {
                    workload,
                    lock: lock.into(),
                    nemesis: nemesis.iter().copied().collect(),
                    ..settings(seed)
                });
                assert!(
                    plan.faults
                        .iter()
                        .any(|fault| nemesis.contains(&fault.kind())),
                    "{workload:?} seed {seed}: the plan holds the faults under test"
                );
                let first = simulate(&plan).unwrap();
                let second = simulate(&plan).unwrap();
                assert!(
                    first.sha256_hex() == second.sha256_hex(),
                    "{workload:?} {lock:?} {nemesis:?} seed {seed}: two runs of the same plan differ"
                );
                distinct_hashes.insert(first.sha256_hex());
            }
            assert_eq!(
                distinct_hashes.len(),
                6,
                "{workload:?} {lock:?}: the seed is ignored"
            );
        }
    }
}

/// Every one of fencer's own lock clients, with its work cancelled now and then: a library's
/// watchdog, its ownership checks, its notices and abandoned work that writes late all run on
/// the simulation's timers, and replay byte for byte.
#[test]
fn every_client_with_cancellations_replays_byte_for_byte() {
    use fencer::{ClientVariant, FaultKind};
    for variant in ClientVariant::ALL {
        for seed in 0..3 {
            let mut settings = settings(seed);
            settings.client = variant.into();
            settings.nemesis.insert(FaultKind::Cancel);
            settings.mean_fault_gap_ns = 3_000_000_000;
            let plan = Plan::generate(&settings);
            let first = simulate(&plan).unwrap().to_jsonl();
            let second = simulate(&plan).unwrap().to_jsonl();
            assert!(
                first == second,
                "{} seed {seed}: two runs differ",
                variant.name()
            );
            let text = String::from_utf8(first).unwrap();
            assert!(
                text.contains("\"f\":\"cancel\""),
                "{} seed {seed}",
                variant.name()
            );
        }
    }
}
