//! fencer as a library: a user's own backend (`examples/custom_backend.rs`) under
//! `fencer::Harness`, caught when broken, silent when correct, with a replayable failure.

#[path = "../examples/custom_backend.rs"]
#[allow(dead_code)] // the example's `main` is not called here
mod custom_backend;

use std::collections::BTreeMap;
use std::time::Duration;

use fencer::{FaultKind, Validity};
use fencer_harness::EventType;
use tokio::time::Instant;

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

#[test]
fn faults_a_user_backend_cannot_take_are_named_in_the_report_and_the_saved_run() {
    let dir = tempfile::tempdir().unwrap();
    let harness = custom_backend::harness(true).save_failures_to(Some(dir.path().to_path_buf()));
    let report = harness.run();
    let left_out = report.left_out();
    let named: Vec<(FaultKind, &str)> = left_out
        .iter()
        .map(|left| (left.family, left.target.as_str()))
        .collect();
    assert_eq!(
        named,
        [(FaultKind::Skew, "lock"), (FaultKind::Restart, "lock")],
        "the lock server's clock steps and restarts: {left_out:?}"
    );
    assert!(
        left_out[1].why.contains("offers no restart hook"),
        "{left_out:?}"
    );
    for run in &report.runs {
        let ran = run.plan.as_ref().expect("every seed ran");
        let drawn = harness.plan(run.seed).faults.len();
        let left: usize = run.left_out().iter().map(|left| left.faults).sum();
        assert_eq!(run.left_out(), ran.left_out, "seed {}", run.seed);
        assert_eq!(
            ran.faults.len() + left,
            drawn,
            "seed {}: every drawn fault either ran or is named as left out",
            run.seed
        );
    }
    let junit = dir.path().join("junit.xml");
    custom_backend::harness(true)
        .save_failures_to(None)
        .junit(&junit)
        .run();
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains(&format!(
            "left out: {} skew faults on lock",
            left_out[0].faults
        )),
        "the Harness's JUnit names what it left out: {xml}"
    );
    let total: usize = left_out.iter().map(|left| left.faults).sum();
    let per_seed: usize = report
        .runs
        .iter()
        .flat_map(|run| run.left_out())
        .map(|l| l.faults)
        .sum();
    assert_eq!(total, per_seed);
    assert!(
        report
            .summary()
            .contains(&format!("left out: {}", left_out[0])),
        "{}",
        report.summary()
    );
    let message = std::panic::catch_unwind(|| report.assert_valid())
        .expect_err("the buggy release is caught")
        .downcast::<String>()
        .unwrap();
    assert!(message.contains("left out: "), "{message}");
    let saved = report
        .failures()
        .find_map(|run| run.saved.clone().map(|dir| (run, dir)));
    let (run, saved) = saved.expect("a saved failing run");
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(saved.join("run.json")).unwrap()).unwrap();
    assert_eq!(
        record["left_out"],
        serde_json::to_value(run.left_out()).unwrap()
    );
}

/// A lease's holder and expiry, while anyone holds it.
type Lease = Option<(fencer::OwnerToken, Instant)>;

/// One lease and token counter per lock name, in memory; a restart loses every lease and,
/// unless the counter is persisted, the counter too.
#[derive(Default)]
struct RestartableLock {
    locks: std::sync::Mutex<BTreeMap<String, (Lease, u64)>>,
    persisted_counter: bool,
    restarts: std::sync::atomic::AtomicUsize,
}

impl RestartableLock {
    fn live(
        lease: &Option<(fencer::OwnerToken, Instant)>,
        owner: Option<fencer::OwnerToken>,
    ) -> bool {
        lease.is_some_and(|(holder, expires)| {
            expires > Instant::now() && owner.is_none_or(|owner| owner == holder)
        })
    }
}

#[fencer::async_trait]
impl fencer::LockService for RestartableLock {
    async fn acquire(
        &self,
        lock: &str,
        owner: fencer::OwnerToken,
        ttl: Duration,
    ) -> Result<fencer::Acquired, fencer::CallError> {
        let mut locks = self.locks.lock().unwrap();
        let (lease, counter) = locks.entry(lock.to_string()).or_default();
        if Self::live(lease, None) {
            return Ok(fencer::Acquired::Busy);
        }
        *counter += 1;
        *lease = Some((owner, Instant::now() + ttl));
        Ok(fencer::Acquired::Granted {
            fencing_token: *counter,
        })
    }

    async fn renew(
        &self,
        lock: &str,
        owner: fencer::OwnerToken,
        ttl: Duration,
    ) -> Result<fencer::Owned, fencer::CallError> {
        let mut locks = self.locks.lock().unwrap();
        match locks.get_mut(lock) {
            Some((lease, _)) if Self::live(lease, Some(owner)) => {
                *lease = Some((owner, Instant::now() + ttl));
                Ok(fencer::Owned::Done)
            }
            _ => Ok(fencer::Owned::NotOwner),
        }
    }

    async fn release(
        &self,
        lock: &str,
        owner: fencer::OwnerToken,
    ) -> Result<fencer::Owned, fencer::CallError> {
        let mut locks = self.locks.lock().unwrap();
        match locks.get_mut(lock) {
            Some((lease, _)) if Self::live(lease, Some(owner)) => {
                *lease = None;
                Ok(fencer::Owned::Done)
            }
            _ => Ok(fencer::Owned::NotOwner),
        }
    }

    fn offers_restart(&self) -> bool {
        true
    }

    async fn restart(&self) -> Result<(), fencer::RestartError> {
        self.restarts
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        for (lease, counter) in self.locks.lock().unwrap().values_mut() {
            *lease = None;
            if !self.persisted_counter {
                *counter = 0;
            }
        }
        Ok(())
    }
}

fn restarted(persisted_counter: bool) -> (fencer::Report, usize) {
    let lock = std::sync::Arc::new(RestartableLock {
        persisted_counter,
        ..RestartableLock::default()
    });
    let report = fencer::Harness::from_shared(
        std::sync::Arc::clone(&lock) as std::sync::Arc<dyn fencer::LockService>,
        std::sync::Arc::new(custom_backend::MemoryStore::default()),
    )
    .nemesis([FaultKind::Restart])
    .fault_gap(Duration::from_secs(60))
    .seeds(0..3)
    .save_failures_to(None)
    .run();
    let restarts = lock.restarts.load(std::sync::atomic::Ordering::Relaxed);
    (report, restarts)
}

#[test]
fn a_user_lock_service_that_offers_a_restart_is_restarted_and_a_volatile_counter_is_caught() {
    let (report, restarts) = restarted(true);
    assert!(report.left_out().is_empty(), "{:?}", report.left_out());
    let mut recorded = 0;
    for run in &report.runs {
        let (history, verdict) = run.outcome.as_ref().unwrap();
        assert_ne!(
            verdict.validity,
            Validity::Invalid,
            "{}",
            verdict.summary_line()
        );
        let events = &history.events;
        recorded += events
            .iter()
            .filter(|e| e.kind == EventType::Nemesis && e.f == fencer_harness::Op::Restart)
            .count();
        assert!(
            events
                .iter()
                .any(|e| e.kind == EventType::Fail
                    && e.error.as_deref() == Some("connection refused")),
            "fencer keeps the restarted service down: seed {}",
            run.seed
        );
    }
    assert!(recorded > 0);
    assert_eq!(
        restarts, recorded,
        "every restart reached the service's hook"
    );

    let (report, _) = restarted(false);
    assert!(
        report.failures().any(|run| run
            .outcome
            .as_ref()
            .is_ok_and(|(_, verdict)| verdict.anomaly_counts.contains_key("token-regression"))),
        "{}",
        report.summary()
    );
}

/// Records, at every call, how far the calling worker's clock reads from true time.
#[derive(Default)]
struct ClockReader {
    seen: std::sync::Mutex<Vec<(String, i64)>>,
    inner: RestartableLock,
}

impl ClockReader {
    fn note(&self) {
        let clock = fencer::caller_clock().expect("inside an adapter call");
        let skew_ns = clock.now_ns() - clock.truth().now_ns() as i64;
        let process = fencer::caller_process().expect("inside an adapter call");
        self.seen.lock().unwrap().push((process, skew_ns));
    }
}

#[fencer::async_trait]
impl fencer::LockService for ClockReader {
    async fn acquire(
        &self,
        lock: &str,
        owner: fencer::OwnerToken,
        ttl: Duration,
    ) -> Result<fencer::Acquired, fencer::CallError> {
        self.note();
        self.inner.acquire(lock, owner, ttl).await
    }

    async fn renew(
        &self,
        lock: &str,
        owner: fencer::OwnerToken,
        ttl: Duration,
    ) -> Result<fencer::Owned, fencer::CallError> {
        self.note();
        self.inner.renew(lock, owner, ttl).await
    }

    async fn release(
        &self,
        lock: &str,
        owner: fencer::OwnerToken,
    ) -> Result<fencer::Owned, fencer::CallError> {
        self.note();
        self.inner.release(lock, owner).await
    }
}

#[test]
fn an_adapter_sees_the_calling_worker_s_skewed_clock() {
    let lock = std::sync::Arc::new(ClockReader::default());
    let report = fencer::Harness::from_shared(
        std::sync::Arc::clone(&lock) as std::sync::Arc<dyn fencer::LockService>,
        std::sync::Arc::new(custom_backend::MemoryStore::default()),
    )
    .nemesis([FaultKind::Skew])
    .seeds(0..1)
    .run();
    let (history, _) = report.runs[0].outcome.as_ref().unwrap();
    let seen = lock.seen.lock().unwrap().clone();
    let skewed: Vec<&(String, i64)> = seen.iter().filter(|(_, skew)| *skew != 0).collect();
    assert!(
        !skewed.is_empty(),
        "the plan skews workers' clocks: {seen:?}"
    );
    // What the adapter read is what the worker's own events say about its clock (within the
    // drift a request's few milliseconds on the wire can add).
    for (process, skew_ns) in skewed {
        assert!(
            history.events.iter().any(|e| &e.process == process
                && e.local_ns
                    .is_some_and(|local| (local - e.time_ns as i64 - skew_ns).abs() < 1_000_000)),
            "{process} read a skew of {skew_ns} ns its history never shows"
        );
    }
}
