//! A user's correct backend that keeps no logs (the example project's in-memory lease service
//! and fenced store, neither offering a log), run through
//! `fencer::Harness`: the checkers must judge it from client replies alone, without false
//! alarms and without giving up.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use fencer::{
    Acquired, CallError, FaultKind, FencedStore, FencingToken, Harness, LockService, Owned,
    OwnerToken, ReadValue, Validity, Written, async_trait,
};
use fencer_harness::EventType;

// The example user project's backends: a correct lock and store that keep no logs. One
// instance serves every seed, and each seed's lock has its own name, so a lease left over from
// an earlier seed cannot hold up the next one.
#[allow(dead_code)] // its `cli()` registration is the example's, not used here
#[path = "../examples/user-project/src/backends.rs"]
mod backends;

use backends::{MemoryLock, MemoryStore};

/// The example's fenced store.
fn fenced_store() -> MemoryStore {
    MemoryStore::new(true)
}

/// Every fault a user's backend can take at the adapter boundary.
const ADAPTER_FAULTS: [FaultKind; 10] = [
    FaultKind::Pause,
    FaultKind::Skew,
    FaultKind::DropRenew,
    FaultKind::DelayWrite,
    FaultKind::DelayAcquire,
    FaultKind::DelayRenew,
    FaultKind::DelayRelease,
    FaultKind::LeaseEdge,
    FaultKind::DropAcquire,
    FaultKind::DropWrite,
];

/// Runs `seeds` seeds of the log-less backend with `faults` (the Harness defaults when
/// `None`); returns the number of valid seeds and the summary lines of the unknown ones, and
/// fails on any invalid verdict.
fn verdicts(seeds: u64, faults: Option<&[FaultKind]>) -> (usize, Vec<String>) {
    let mut harness = Harness::new(MemoryLock::default(), fenced_store())
        .name("logless_backend")
        .seeds(0..seeds)
        .save_failures_to(None);
    if let Some(faults) = faults {
        harness = harness.nemesis(faults.iter().copied());
    }
    let report = harness.run();
    let mut valid = 0;
    let mut unknown = Vec::new();
    for run in &report.runs {
        let (history, verdict) = run.outcome.as_ref().expect("the seed ran");
        assert!(
            !history
                .events
                .iter()
                .any(|event| event.kind == EventType::Log),
            "the backend keeps no logs"
        );
        match verdict.validity {
            Validity::Valid => valid += 1,
            Validity::Unknown => {
                unknown.push(format!("seed {}: {}", run.seed, verdict.summary_line()))
            }
            Validity::Invalid => panic!("seed {}: {}", run.seed, verdict.summary_line()),
        }
    }
    (valid, unknown)
}

#[test]
fn a_correct_backend_without_logs_is_valid_under_the_harness_defaults() {
    let (valid, unknown) = verdicts(200, None);
    eprintln!("{valid} of 200 valid; unknown: {unknown:#?}");
    // At least 99 % of 200 seeds.
    assert!(valid >= 198, "{valid} of 200 valid; unknown: {unknown:#?}");
}

#[test]
fn a_correct_backend_without_logs_is_valid_under_every_adapter_fault() {
    let (valid, unknown) = verdicts(200, Some(&ADAPTER_FAULTS));
    eprintln!("{valid} of 200 valid; unknown: {unknown:#?}");
    // At least 95 % of 200 seeds.
    assert!(valid >= 190, "{valid} of 200 valid; unknown: {unknown:#?}");
}

#[test]
fn the_overlap_check_runs_from_client_replies() {
    let report = Harness::new(MemoryLock::default(), fenced_store())
        .seeds(0..1)
        .save_failures_to(None)
        .run();
    let (_, verdict) = report.runs[0].outcome.as_ref().unwrap();
    let overlap = verdict
        .checkers
        .iter()
        .find(|report| report.checker == fencer_checkers::AnomalyClass::OverlappingLeases)
        .unwrap();
    assert_eq!(overlap.skipped, None);
    assert_eq!(overlap.evidence, "client replies");
}

/// A store that keeps the first token it accepts per key and refuses every other, naming a
/// fence it never accepted: every new holder is told it was superseded.
struct RefusingStore(MemoryStore);

#[async_trait]
impl FencedStore for RefusingStore {
    async fn write(
        &self,
        key: &str,
        fencing_token: FencingToken,
        write_id: &str,
        value: &str,
    ) -> Result<Written, CallError> {
        let first = self.0.read(key).await?.fencing_token;
        if first != 0 && fencing_token != first {
            return Ok(Written::Rejected {
                current_token: fencing_token + 1,
            });
        }
        self.0.write(key, fencing_token, write_id, value).await
    }

    async fn read(&self, key: &str) -> Result<ReadValue, CallError> {
        self.0.read(key).await
    }
}

#[test]
fn a_store_that_refuses_every_new_holder_is_caught() {
    let report = Harness::new(MemoryLock::default(), RefusingStore(fenced_store()))
        .seeds(0..3)
        .nemesis([])
        .save_failures_to(None)
        .run();
    for run in &report.runs {
        let (_, verdict) = run.outcome.as_ref().unwrap();
        assert_eq!(
            verdict.validity,
            Validity::Invalid,
            "{}",
            verdict.summary_line()
        );
        assert!(
            verdict.anomaly_counts.contains_key("unfounded-rejection"),
            "{}",
            verdict.summary_line()
        );
    }
}

/// A lease service that never lets a lease go: release answers done and changes nothing, and
/// leases never expire, so after the first grant every acquire is busy.
#[derive(Default)]
struct StickyLock(Mutex<BTreeMap<String, (OwnerToken, u64)>>);

#[async_trait]
impl LockService for StickyLock {
    async fn acquire(
        &self,
        lock: &str,
        owner: OwnerToken,
        _: Duration,
    ) -> Result<Acquired, CallError> {
        let mut locks = self.0.lock().unwrap();
        if locks.contains_key(lock) {
            return Ok(Acquired::Busy);
        }
        locks.insert(lock.to_string(), (owner, 1));
        Ok(Acquired::Granted { fencing_token: 1 })
    }

    async fn renew(&self, lock: &str, owner: OwnerToken, _: Duration) -> Result<Owned, CallError> {
        let locks = self.0.lock().unwrap();
        Ok(match locks.get(lock) {
            Some((holder, _)) if *holder == owner => Owned::Done,
            _ => Owned::NotOwner,
        })
    }

    async fn release(&self, lock: &str, owner: OwnerToken) -> Result<Owned, CallError> {
        self.renew(lock, owner, Duration::ZERO).await
    }
}

#[test]
fn a_lock_that_stays_busy_after_its_release_is_warned_about_and_fails_strict() {
    let report = Harness::new(StickyLock::default(), fenced_store())
        .workers(2)
        .ops(2)
        .seeds(0..1)
        .nemesis([])
        .save_failures_to(None)
        .run();
    let (history, verdict) = report.runs[0].outcome.as_ref().unwrap();
    assert_eq!(
        verdict.validity,
        Validity::Valid,
        "{}",
        verdict.summary_line()
    );
    assert_eq!(verdict.warning_counts.get("stuck-lock"), Some(&1));
    assert!(
        verdict.summary_line().ends_with("; warnings: 1 stuck-lock"),
        "{}",
        verdict.summary_line()
    );
    let strict = fencer_checkers::check_with(
        history,
        &fencer_checkers::CheckOptions {
            strict: true,
            ..fencer_checkers::CheckOptions::default()
        },
    );
    assert_eq!(strict.validity, Validity::Invalid);
    // The same workers against a lock that lets go are not warned about.
    let report = Harness::new(MemoryLock::default(), fenced_store())
        .workers(2)
        .ops(2)
        .seeds(0..1)
        .nemesis([])
        .save_failures_to(None)
        .run();
    let (_, verdict) = report.runs[0].outcome.as_ref().unwrap();
    assert!(
        verdict.warning_counts.is_empty(),
        "{}",
        verdict.summary_line()
    );
}
