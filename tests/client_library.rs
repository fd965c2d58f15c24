//! fencer as a library for a user's own lock client (`examples/custom_client.rs`): its watchdog
//! and ownership check under `fencer::Harness`, silent when correct, caught when its check
//! answers from a cached flag, and replayed byte for byte.

#[path = "../examples/custom_client.rs"]
#[allow(dead_code)] // the example's `main` is not called here
mod custom_client;

use fencer::Validity;
use fencer_harness::{EventType, Op};

#[test]
fn users_correct_client_is_valid_renews_and_replays_identically() {
    let report = custom_client::harness(false).seeds(0..10).run();
    report.assert_valid();
    let again = custom_client::harness(false).seeds(0..10).run();
    for (first, second) in report.runs.iter().zip(&again.runs) {
        let (first, _) = first.outcome.as_ref().unwrap();
        let (second, _) = second.outcome.as_ref().unwrap();
        assert_eq!(first.to_jsonl(), second.to_jsonl());
        // Its watchdog's renewals and its checks are in the history, as its own process.
        assert!(
            first
                .events
                .iter()
                .any(|e| e.process.ends_with(":renew") && e.is(EventType::Ok, Op::Renew))
        );
        assert!(first.events.iter().any(|e| e.is(EventType::Ok, Op::Check)));
    }
}

#[test]
fn users_client_with_a_cached_ownership_check_is_caught() {
    let report = custom_client::harness(true).save_failures_to(None).run();
    assert_eq!(report.validity(), Validity::Invalid, "{}", report.summary());
    let caught = report.failures().any(|run| {
        run.outcome
            .as_ref()
            .is_ok_and(|(_, verdict)| verdict.anomaly_counts.contains_key("stale-ownership-check"))
    });
    assert!(caught, "{}", report.summary());
}
