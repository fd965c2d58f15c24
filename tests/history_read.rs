//! Reading a stored history gives back exactly the history fencer recorded, so re-checking it
//! gives the same verdict: the fast reader for fencer's own lines and serde's general reader
//! agree event for event, on clean runs and on mutants' runs full
//! of anomalies.

use fencer::{
    CheckOptions, History, LockBackend, Plan, Settings, StoreBackend, Validity, Workload,
    check_with, simulate,
};
use fencer_checkers::check_packed;
use fencer_harness::Event;
use fencer_harness::PackedHistory;

/// Settings for `seed` on reference backends and on mutants that make every checker speak.
fn runs() -> Vec<Settings> {
    let mut runs = Vec::new();
    for seed in 0..3 {
        let base = Settings {
            seed,
            ops_per_worker: 40,
            ..Settings::default()
        };
        runs.push(base.clone());
        runs.push(Settings {
            lock: LockBackend::SimUnsafeRelease.into(),
            ..base.clone()
        });
        runs.push(Settings {
            store: StoreBackend::SqliteUnfenced.into(),
            ..base.clone()
        });
        runs.push(Settings {
            workload: Workload::LockCounter,
            lock: LockBackend::SimVolatileCounter.into(),
            ..base
        });
    }
    runs
}

/// The general reader: serde on every line.
fn read_with_serde(jsonl: &[u8]) -> Vec<Event> {
    jsonl
        .split(|&byte| byte == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_slice(line).expect("fencer writes events"))
        .collect()
}

#[test]
fn a_stored_history_reads_back_as_recorded_and_checks_the_same() {
    let mut invalid_runs = 0;
    for settings in runs() {
        let recorded = simulate(&Plan::generate(&settings)).expect("the plan runs");
        let jsonl = recorded.to_jsonl();
        let read = History::read_jsonl(&jsonl[..], "mem").expect("fencer's own history reads");
        assert_eq!(read.events, read_with_serde(&jsonl), "{settings:?}");
        assert_eq!(read, recorded, "{settings:?}");
        let options = CheckOptions {
            workload: settings.workload,
            ..CheckOptions::default()
        };
        let verdict = serde_json::to_string(&check_with(&read, &options)).unwrap();
        let expected = check_with(&recorded, &options);
        assert_eq!(verdict, serde_json::to_string(&expected).unwrap());
        // `fencer check`'s path: straight into checking form, never building events.
        let packed = PackedHistory::read_jsonl(&jsonl[..], "mem").expect("reads packed");
        assert_eq!(packed.unpack(), recorded, "{settings:?}");
        let verdict = serde_json::to_string(&check_packed(&packed, &options)).unwrap();
        assert_eq!(verdict, serde_json::to_string(&expected).unwrap());
        invalid_runs += usize::from(expected.validity == Validity::Invalid);
    }
    // The mutants did produce anomalies, so verdicts with evidence were compared too.
    assert!(invalid_runs >= 3, "{invalid_runs} invalid runs");
}
