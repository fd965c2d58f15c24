//! fencer as a library: a user's own backend (`examples/custom_backend.rs`) under
//! `fencer::Harness`, caught when broken, silent when correct, with a replayable failure.

#[path = "../examples/custom_backend.rs"]
#[allow(dead_code)] // the example's `main` is not called here
mod custom_backend;

use fencer::Validity;

#[test]
fn users_buggy_release_is_caught_with_a_replay_command() {
    let report = custom_backend::harness(true).save_failures_to(None).run();
    assert_eq!(report.validity(), Validity::Invalid, "{}", report.summary());
    let failing = report.failures().next().expect("a failing seed");
    let (_, verdict) = failing.outcome.as_ref().unwrap();
    assert!(
        verdict.anomaly_counts.contains_key("foreign-release"),
        "{}",
        verdict.summary_line()
    );
    let message = std::panic::catch_unwind(|| report.assert_valid())
        .expect_err("an invalid report fails the test")
        .downcast::<String>()
        .unwrap();
    let replay = format!(
        "replay: FENCER_SEED={} cargo test custom_backend",
        failing.seed
    );
    assert!(message.contains(&replay), "{message}");
    assert!(message.contains("foreign-release"), "{message}");
}

#[test]
fn users_correct_backend_is_valid_and_replays_identically() {
    let report = custom_backend::harness(false).seeds(0..5).run();
    report.assert_valid();
    assert!(report.validity() != Validity::Invalid);
    // Simulated time: the same seed gives the same history, byte for byte.
    let again = custom_backend::harness(false).seeds(0..5).run();
    for (first, second) in report.runs.iter().zip(&again.runs) {
        let (first, _) = first.outcome.as_ref().unwrap();
        let (second, _) = second.outcome.as_ref().unwrap();
        assert_eq!(first.to_jsonl(), second.to_jsonl());
        assert!(
            first
                .events
                .iter()
                .any(|e| e.kind == fencer_harness::EventType::Log)
        );
    }
}

#[test]
fn failing_runs_are_saved_with_plan_history_and_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let report = custom_backend::harness(true)
        .save_failures_to(Some(dir.path().to_path_buf()))
        .run();
    let saved = report
        .failures()
        .find_map(|run| run.saved.clone())
        .expect("a saved failing run");
    for file in ["plan.json", "history.jsonl", "verdict.json", "run.json"] {
        assert!(saved.join(file).is_file(), "{} missing", file);
    }
}

/// A lock service whose calls never return, and a store that panics.
struct Broken;

#[fencer::async_trait]
impl fencer::LockService for Broken {
    async fn acquire(
        &self,
        _: &str,
        _: fencer::OwnerToken,
        _: std::time::Duration,
    ) -> Result<fencer::Acquired, fencer::CallError> {
        std::future::pending().await
    }
    async fn renew(
        &self,
        _: &str,
        _: fencer::OwnerToken,
        _: std::time::Duration,
    ) -> Result<fencer::Owned, fencer::CallError> {
        std::future::pending().await
    }
    async fn release(
        &self,
        _: &str,
        _: fencer::OwnerToken,
    ) -> Result<fencer::Owned, fencer::CallError> {
        std::future::pending().await
    }
}

#[test]
fn a_hanging_backend_ends_as_info_calls_not_a_hung_test() {
    let report = fencer::Harness::new(Broken, custom_backend::MemoryStore::default())
        .workers(2)
        .ops(2)
        .seeds(0..1)
        .run();
    let (history, verdict) = report.runs[0].outcome.as_ref().unwrap();
    let completions: Vec<_> = history
        .events
        .iter()
        .filter(|e| e.kind.is_completion())
        .collect();
    assert!(!completions.is_empty());
    assert!(
        completions
            .iter()
            .all(|e| e.kind == fencer_harness::EventType::Info),
        "a call that never answers is unknown, never ok or fail"
    );
    assert_ne!(verdict.validity, Validity::Invalid);
}
