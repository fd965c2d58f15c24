//! Every history `fencer run` writes reads back as recorded and re-checks to the same verdict
//! (`fencer check` on it agrees with `fencer run`): every workload × the reference and every
//! broken lock service, store and worker of the zoo, and every zoo mutant in the scenario that
//! exposes it, a few seeds each. The fast reader for fencer's own lines and serde's general
//! reader agree event for event, on clean runs and on mutants' runs full of anomalies.

use fencer::{
    CheckOptions, History, LockBackend, Plan, Settings, StoreBackend, Validity, Workload,
    check_with, simulate,
};
use fencer_checkers::check_packed;
use fencer_gate::mutants::ZOO;
use fencer_harness::Event;
use fencer_harness::PackedHistory;
use fencer_workloads::ClientVariant;

/// Seeds per case: enough to vary the schedule, few enough for `cargo test --workspace`.
const SEEDS: std::ops::Range<u64> = 0..2;

/// Cycles per worker: short runs, still long enough for most mutants to show their bug.
const OPS: usize = 12;

/// One run to read back, and whether warnings fail its verdict.
struct Case {
    settings: Settings,
    strict: bool,
}

/// Every workload × every backend and worker: the reference, then each mutant of the zoo
/// swapped in alone, under the default faults.
fn every_backend_and_worker() -> Vec<Case> {
    let mut variants: Vec<Settings> = vec![Settings::default()];
    variants.extend(
        LockBackend::ALL
            .iter()
            .filter(|&&lock| lock != LockBackend::Sim)
            .map(|&lock| Settings {
                lock: lock.into(),
                ..Settings::default()
            }),
    );
    variants.extend(
        StoreBackend::ALL
            .iter()
            .filter(|&&store| store != StoreBackend::Sqlite)
            .map(|&store| Settings {
                store: store.into(),
                ..Settings::default()
            }),
    );
    variants.extend(
        ClientVariant::ALL
            .iter()
            .filter(|&&client| client != ClientVariant::Reference)
            .map(|&client| Settings {
                client: client.into(),
                ..Settings::default()
            }),
    );
    let mut cases = Vec::new();
    for seed in SEEDS {
        for workload in Workload::ALL {
            for variant in &variants {
                cases.push(Case {
                    settings: Settings {
                        seed,
                        workload,
                        ops_per_worker: OPS,
                        ..variant.clone()
                    },
                    strict: false,
                });
            }
        }
    }
    cases
}

/// Every zoo mutant in the scenario that exposes it (workload, faults, strictness).
fn every_zoo_scenario() -> Vec<Case> {
    SEEDS
        .flat_map(|seed| {
            ZOO.iter().map(move |mutant| Case {
                settings: Settings {
                    ops_per_worker: OPS,
                    ..mutant.settings(seed)
                },
                strict: mutant.strict,
            })
        })
        .collect()
}

/// The general reader: serde on every line.
fn read_with_serde(jsonl: &[u8]) -> Vec<Event> {
    jsonl
        .split(|&byte| byte == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_slice(line).expect("fencer writes events"))
        .collect()
}

/// Records each case, writes its history as `fencer run` does, reads it back as `fencer check`
/// does and as events, and asserts both give back the recorded history and the same verdict.
/// Returns how many verdicts were invalid.
fn read_back(cases: &[Case]) -> usize {
    let mut invalid_runs = 0;
    for Case { settings, strict } in cases {
        let label = format!(
            "{} {} {} {} seed {}",
            settings.workload, settings.lock, settings.store, settings.client, settings.seed
        );
        let recorded = simulate(&Plan::generate(settings)).expect("the plan runs");
        let options = CheckOptions {
            workload: settings.workload,
            strict: *strict,
            ..CheckOptions::default()
        };
        // What `fencer run` writes as verdict.json.
        let expected = serde_json::to_string(&check_with(&recorded, &options)).unwrap();
        let jsonl = recorded.to_jsonl();
        // `fencer check`'s path: straight into checking form, never building events.
        let packed = PackedHistory::read_jsonl(&jsonl[..], "history.jsonl")
            .unwrap_or_else(|error| panic!("{label}: {error}"));
        let verdict = check_packed(&packed, &options);
        assert_eq!(
            serde_json::to_string(&verdict).unwrap(),
            expected,
            "{label}"
        );
        assert_eq!(packed.unpack(), recorded, "{label}");
        let read = History::read_jsonl(&jsonl[..], "history.jsonl").expect("reads as events");
        assert_eq!(read.events, read_with_serde(&jsonl), "{label}");
        assert_eq!(read, recorded, "{label}");
        invalid_runs += usize::from(verdict.validity == Validity::Invalid);
    }
    invalid_runs
}

#[test]
fn every_backend_and_worker_s_history_reads_back_and_checks_the_same() {
    let cases = every_backend_and_worker();
    let invalid = read_back(&cases);
    // The mutants did produce anomalies, so verdicts with evidence were compared too (the
    // client mutants whose class is a warning leave their runs valid: a fifth, not a quarter).
    assert!(
        invalid >= cases.len() / 5,
        "{invalid} of {} runs invalid",
        cases.len()
    );
}

#[test]
fn every_zoo_scenario_s_history_reads_back_and_checks_the_same() {
    let cases = every_zoo_scenario();
    let invalid = read_back(&cases);
    // Most scenarios catch their mutant within a few cycles.
    assert!(
        invalid >= cases.len() / 2,
        "{invalid} of {} runs invalid",
        cases.len()
    );
}
