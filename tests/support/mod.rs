//! Shared by the real-backend tests: reaching a server or skipping honestly, and the fault
//! scenarios that make a broken backend show its bug.

#![allow(dead_code)] // each test file uses a different part

use std::io::Write as _;

use std::sync::Arc;
use std::time::{Duration, Instant};

use fencer::{ExpiryRule, FencedStore, Harness, LockService, Settings, Validity, Verdict};
use fencer_backends::registry::{lock_from_url, store_from_url};
use fencer_harness::{EventType, History, Op};
use fencer_nemesis::Fault;
use fencer_run::drive::RunNames;
use fencer_run::plan::Plan;
use fencer_run::real::{real_plan, run_real, run_real_with_servers, unique_tag};
use fencer_servers::{PrivateBackend, PrivateServer, ServerError, ServerGuard};
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
pub fn started_or_skipped<S, E: std::fmt::Display>(
    test: &str,
    server: &str,
    package: &str,
    started: Result<S, E>,
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
pub fn reachable<F, E>(test: &str, server: &str, package: &str, probe: F) -> bool
where
    F: std::future::Future<Output = Result<(), E>>,
    E: std::fmt::Display,
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
/// write (the acquire, read and check take a few round trips first: 150 ms leaves room for
/// them on a busy machine); w1 takes the expired lease, writes with the newer token and holds
/// on. When w0 wakes, its older write reaches the store: only the store's fence can refuse it.
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
            cycles: vec![cycle(200, 0, 1_200)],
        },
    ];
    plan.faults = vec![Fault::Pause {
        at_ns: 150_000_000,
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
    server: &Arc<fencer_servers::PrivateServer>,
    roles: &[&str],
) -> fencer_run::drive::ServerTargets {
    roles
        .iter()
        .map(|role| {
            let target: Arc<dyn fencer_nemesis::ServerFaults> = server.clone();
            (role.to_string(), target)
        })
        .collect()
}

/// One worker taking lease after lease (six cycles), before and after the lock service is
/// restarted at 250 ms for 300 ms.
pub fn lock_restart_plan() -> Plan {
    let mut plan = stale_release_plan();
    plan.workers.truncate(1);
    plan.settings.workers = 1;
    plan.workers[0].cycles = (0..6).map(|_| cycle(0, 0, 100)).collect();
    plan.faults = vec![Fault::Restart {
        at_ns: 250_000_000,
        target: "lock".into(),
        duration_ns: 300_000_000,
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

/// The shared Redis the real-backend tests use: `FENCER_REDIS_URL`, or the local default.
pub fn redis_url() -> String {
    std::env::var("FENCER_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// `url` with one more query parameter (`variant=unfenced`, `schema=s1`): `?` or `&` as the
/// URL already has a query or not, so a variant can be added to any backend's URL.
pub fn with_query(url: &str, param: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}{param}")
}

/// Whether the server behind `url` answers ([`reachable`]'s rules: skips or fails when it does
/// not), probed with the same adapter code a run uses, so one check serves every backend.
pub fn url_reachable(test: &str, server: &str, package: &str, url: &str) -> bool {
    let connected = lock_from_url(url).expect("a valid backend URL");
    reachable(test, server, package, connected.ping())
}

/// The lock service for `lock_url` and the store for `store_url` (any backend, `?variant=` and
/// all), built the way the CLI builds them: every test then drives the adapters it names by URL
/// and no test file needs its own per-backend constructor.
pub fn adapters(lock_url: &str, store_url: &str) -> Adapters {
    let lock = lock_from_url(lock_url).expect("a valid lock URL");
    let store = store_from_url(store_url).expect("a valid store URL");
    (lock.adapter, store.adapter)
}

/// The reference adapters for `lock_url` and `store_url`, and the same with the store's
/// `?variant=unfenced`: the two sides of [`assert_fence_refuses_the_stale_write`].
pub fn fenced_and_unfenced(lock_url: &str, store_url: &str) -> (Adapters, Adapters) {
    let unfenced = with_query(store_url, "variant=unfenced");
    (adapters(lock_url, store_url), adapters(lock_url, &unfenced))
}

/// The reference adapters for `url`, and the same with the lock's `?variant=unsafe-release`:
/// the two sides of [`assert_unsafe_release_is_caught`].
pub fn safe_and_unsafe_release(url: &str) -> (Adapters, Adapters) {
    let unsafe_release = with_query(url, "variant=unsafe-release");
    (adapters(url, url), adapters(&unsafe_release, url))
}

/// A lock service and a fenced store to run a scenario on.
pub type Adapters = (Arc<dyn LockService>, Arc<dyn FencedStore>);

/// Runs `plan` in real time on `adapters` under a fresh run tag (so runs on one server do not
/// see each other's keys, and the same adapters can serve several runs), and checks it.
pub fn run_and_check((lock, store): &Adapters, plan: &Plan) -> (Verdict, History) {
    let names = RunNames::tagged(&unique_tag(0));
    let history = run_real(plan, Arc::clone(lock), Arc::clone(store), names).unwrap();
    (fencer::check(&history), history)
}

/// An acquire and a write sent to `url` with nobody listening (port 1): the ping fails with
/// `expected` in its message (which names the backend and the URL), both calls come back as
/// definitely not applied ([`assert_calls_not_applied`], leases of `ttl`), and nothing hangs.
/// The same for every backend, since adapters are built from the URL.
pub fn assert_unreachable_answers_not_applied_at_once(url: &str, expected: &str, ttl: Duration) {
    let started = Instant::now();
    let lock = lock_from_url(url).expect("a valid lock URL");
    let store = store_from_url(url).expect("a valid store URL");
    let runtime = fencer_harness::runtime::real_runtime().expect("a tokio runtime");
    let error = runtime.block_on(lock.ping()).unwrap_err().to_string();
    assert!(error.contains(expected), "{error}");
    assert_calls_not_applied(&*lock.adapter, &*store.adapter, ttl);
    assert!(started.elapsed() < Duration::from_secs(7), "no hang");
}

/// What the correct (fenced) run of [`assert_fence_refuses_the_stale_write`] must give. It
/// legitimately differs by backend: where a renewal takes several round trips (etcd: owner check
/// then keep-alive; ZooKeeper: a reconnect), the frozen holder's renewal may be cut off when its
/// worker moves on, and that `info` leaves the checker honestly unsure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FencedVerdict {
    /// Exactly valid: every call's outcome is known (Redis, PostgreSQL).
    Valid,
    /// Valid or unknown, never invalid ([`assert_verdict_not_invalid`]).
    NotInvalid,
}

/// How many times [`assert_fence_refuses_the_stale_write`] runs its scenario on a real server
/// before it gives up on the timing ever staging it.
const STAGING_ATTEMPTS: usize = 3;

/// Whether `history` staged the stale write: w0's write was sent after another process's write
/// with a newer token had been accepted, and its outcome is known. A real server's timing (a
/// slow fsync, a lease expiry checked late) can let w0 wake before w1 holds the lease; then
/// nothing is stale, and the run proves nothing either way about the fence.
pub fn stale_write_staged(history: &History) -> bool {
    let events = &history.events;
    let Some(sent) = events
        .iter()
        .position(|e| e.process == "w0" && e.is(EventType::Invoke, Op::Write))
    else {
        return false;
    };
    let stale_token = events[sent].token.unwrap_or(0);
    let newer_accepted = events[..sent].iter().any(|e| {
        e.process != "w0" && e.is(EventType::Ok, Op::Write) && e.token > Some(stale_token)
    });
    let outcome_known = events[sent..].iter().any(|e| {
        e.process == "w0" && (e.is(EventType::Ok, Op::Write) || e.is(EventType::Fail, Op::Write))
    });
    newer_accepted && outcome_known
}

/// Runs `plan` on `adapters` until a run stages the stale write ([`stale_write_staged`]), at
/// most [`STAGING_ATTEMPTS`] times; a run that never does fails with its history, since then
/// the lease never expired under the frozen holder (a renewal that outlives its freeze would do
/// that) or the newer write never landed.
fn run_staging_the_stale_write(adapters: &Adapters, plan: &Plan) -> (Verdict, History) {
    let mut attempt = 1;
    loop {
        let run = run_and_check(adapters, plan);
        if stale_write_staged(&run.1) {
            return run;
        }
        assert!(
            attempt < STAGING_ATTEMPTS,
            "no run of {STAGING_ATTEMPTS} sent w0's write after a newer one was accepted; \
             the last:\n{}",
            String::from_utf8_lossy(&run.1.to_jsonl())
        );
        attempt += 1;
    }
}

/// The stale-write scenario (`plan`, e.g. [`stale_write_plan`]) on the reference lock with the
/// fenced store (`reference`) and then the unfenced one (`unfenced`, e.g. built from a store URL
/// with `?variant=unfenced`): the fenced store gives `fenced` and refuses w0's stale write with
/// the newer token; the unfenced one accepts it and is caught (`stale-write-accepted`). One body
/// for every backend, which differ only in adapters, plan stretch and [`FencedVerdict`]. Each
/// side is judged on a run that staged the stale write ([`run_staging_the_stale_write`]).
pub fn assert_fence_refuses_the_stale_write(
    reference: &Adapters,
    unfenced: &Adapters,
    plan: &Plan,
    fenced: FencedVerdict,
) {
    let (verdict, history) = run_staging_the_stale_write(reference, plan);
    match fenced {
        FencedVerdict::Valid => {
            assert_eq!(
                verdict.validity,
                Validity::Valid,
                "{}",
                verdict.summary_line()
            );
        }
        FencedVerdict::NotInvalid => assert_verdict_not_invalid(&verdict),
    }
    assert!(
        history.events.iter().any(|e| e.process == "w0"
            && e.is(EventType::Fail, Op::Write)
            && e.error.as_deref() == Some("rejected")
            && e.current_token.is_some()),
        "the fence must refuse w0's stale write with the newer token: {}\n{}",
        verdict.summary_line(),
        String::from_utf8_lossy(&history.to_jsonl())
    );
    let (unfenced, history) = run_staging_the_stale_write(unfenced, plan);
    assert!(
        unfenced.anomaly_counts.contains_key("stale-write-accepted"),
        "{}\n{}",
        unfenced.summary_line(),
        String::from_utf8_lossy(&history.to_jsonl())
    );
}

/// The stale-release scenario (`plan`, e.g. [`stale_release_plan`]): the reference lock
/// (`reference`) proves no anomaly (the stale owner's renewal may be cut off, leaving the checker
/// honestly unsure), and the lock that releases without the owner compare (`unsafe_release`,
/// e.g. built from a URL with `?variant=unsafe-release`) is proved invalid, as a
/// `foreign-release`. The broken run is tried up to `attempts` times until it is invalid:
/// 1 where the timing always exposes the bug; more where it depends on the server's timing
/// (ZooKeeper: only while the next holder's node is the lowest).
pub fn assert_unsafe_release_is_caught(
    reference: &Adapters,
    broken: &Adapters,
    plan: &Plan,
    attempts: usize,
) {
    let (reference, _) = run_and_check(reference, plan);
    assert_verdict_not_invalid(&reference);
    let mut unsafe_release = run_and_check(broken, plan).0;
    for _retry in 1..attempts {
        if unsafe_release.validity == Validity::Invalid {
            break;
        }
        unsafe_release = run_and_check(broken, plan).0;
    }
    assert_eq!(
        unsafe_release.validity,
        Validity::Invalid,
        "{}",
        unsafe_release.summary_line()
    );
    assert!(
        unsafe_release
            .anomaly_counts
            .contains_key("foreign-release"),
        "{}",
        unsafe_release.summary_line()
    );
}

/// The report of the checker named `checker` (`overlapping-leases`) in `verdict`.
pub fn report<'v>(verdict: &'v Verdict, checker: &str) -> &'v fencer_checkers::CheckerReport {
    verdict
        .checkers
        .iter()
        .find(|report| report.checker.name() == checker)
        .unwrap_or_else(|| panic!("the verdict has no {checker} report"))
}

/// The lock service's log events of `history` (`lock` `log` events), in history order.
pub fn lock_log(history: &History) -> Vec<&fencer_harness::Event> {
    history
        .events
        .iter()
        .filter(|e| e.process == "lock" && e.kind == EventType::Log)
        .collect()
}

/// Asserts the lock log of `history` is in service order and agrees with what the workers were
/// told: `seq` strictly increasing, grants' tokens strictly increasing, each grant's and
/// renewal's expiry its TTL after it on the service's clock (less at most `expiry_slack_ns`, for
/// a service that keeps expiries coarser than its log's times or reads them earlier; more by
/// what the service's boundary `rule` adds, as fencer records the first reading at which the
/// lease is over), and for each owner and call, at least as many
/// entries as `ok` replies and at most as many as replies that were `ok` or unknown (`info`):
/// nothing the service refused is logged, nothing it acknowledged is missing. An `ok` acquire's
/// entry carries the token the worker was given.
pub fn assert_lock_log_matches_replies(history: &History, expiry_slack_ns: u64, rule: ExpiryRule) {
    let log = lock_log(history);
    assert!(!log.is_empty(), "the lock service's log came back");
    let seqs: Vec<u64> = log.iter().map(|e| e.seq.expect("a seq")).collect();
    assert!(seqs.windows(2).all(|pair| pair[0] < pair[1]), "{seqs:?}");
    let tokens: Vec<u64> = log
        .iter()
        .filter(|e| e.f == Op::Acquire)
        .map(|e| e.token.expect("a grant's token"))
        .collect();
    assert!(
        tokens.windows(2).all(|pair| pair[0] < pair[1]),
        "{tokens:?}"
    );
    for entry in log.iter().filter(|e| e.f != Op::Release) {
        let (at_ns, expires_ns) = (entry.local_ns.unwrap(), entry.expires_ns.unwrap());
        let ttl_ns = entry.ttl_ns.unwrap() as i64;
        let lasts_ns = expires_ns - at_ns;
        let longest_ns = rule.ended_from_ns(at_ns + ttl_ns) - at_ns;
        assert!(
            lasts_ns <= longest_ns && lasts_ns >= ttl_ns - expiry_slack_ns as i64,
            "a {:?} entry lasts {lasts_ns} ns for a TTL of {ttl_ns} ns: {entry:?}",
            entry.f
        );
    }
    let mut counts: std::collections::BTreeMap<(String, &str), [usize; 3]> = Default::default();
    for event in &history.events {
        let (Some(owner), true) = (&event.owner, event.f.is_client_op()) else {
            continue;
        };
        if !matches!(event.f, Op::Acquire | Op::Renew | Op::Release) {
            continue;
        }
        let slot = match (event.process.as_str(), event.kind) {
            ("lock", EventType::Log) => 0,
            (_, EventType::Ok) => 1,
            (_, EventType::Info) => 2,
            _ => continue,
        };
        counts.entry((owner.clone(), event.f.name())).or_default()[slot] += 1;
        if event.is(EventType::Ok, Op::Acquire) {
            assert!(
                log.iter().any(|e| e.f == Op::Acquire
                    && e.owner == event.owner
                    && e.token == event.token),
                "the grant {event:?} is in the log"
            );
        }
    }
    for ((owner, call), [logged, ok, unknown]) in counts {
        assert!(
            ok <= logged && logged <= ok + unknown,
            "{call}s by {owner}: {logged} logged, {ok} ok, {unknown} unknown"
        );
    }
}

/// The lock-log scenario (`plan`, e.g. [`stale_release_plan`]) on a lock service that offers
/// its log: the reference (`reference`) has its log in the history, in service order and
/// agreeing with the replies ([`assert_lock_log_matches_replies`]), and `overlapping-leases`
/// and `foreign-release` judge from it and find nothing; the lock that releases without the
/// owner compare (`broken`) is caught from its log: `foreign-release` on evidence `lock log`,
/// whose entries show one owner ending (or extending) another's lease. The broken run is tried
/// up to `attempts` times until it is caught.
pub fn assert_lock_log_judges_the_leases(
    reference: &Adapters,
    broken: &Adapters,
    plan: &Plan,
    expiry_slack_ns: u64,
    attempts: usize,
) {
    let (verdict, history) = run_and_check(reference, plan);
    assert_verdict_not_invalid(&verdict);
    for checker in ["overlapping-leases", "foreign-release"] {
        let judged = report(&verdict, checker);
        assert_eq!(
            (judged.evidence.as_str(), judged.anomalies),
            ("lock log", 0),
            "{checker}: {}",
            verdict.summary_line()
        );
    }
    assert_lock_log_matches_replies(&history, expiry_slack_ns, reference.0.lock_log_expiry());
    for attempt in 1..=attempts {
        let (caught, history) = run_and_check(broken, plan);
        let foreign = lock_log(&history)
            .into_iter()
            .any(|e| e.f != Op::Acquire && e.holder.is_some() && e.holder != e.owner);
        if caught.validity != Validity::Invalid && attempt < attempts {
            continue;
        }
        assert_eq!(
            caught.validity,
            Validity::Invalid,
            "{}",
            caught.summary_line()
        );
        let judged = report(&caught, "foreign-release");
        assert_eq!(judged.evidence, "lock log", "{}", caught.summary_line());
        assert!(judged.anomalies > 0, "{}", caught.summary_line());
        assert!(foreign, "the log shows whose lease the stale owner touched");
        assert_lock_log_matches_replies(&history, expiry_slack_ns, broken.0.lock_log_expiry());
        return;
    }
}

/// A private server of `backend` a test started itself (`started`: a [`ServerGuard`] or a
/// [`PrivateServer`]), or `None` after the skip line ([`started_or_skipped`]), worded and
/// pointed at the Debian package the same way in every file.
pub fn private_or_skipped<S, E: std::fmt::Display>(
    test: &str,
    backend: PrivateBackend,
    started: Result<S, E>,
) -> Option<S> {
    let server = format!("a private {backend:?} server");
    started_or_skipped(test, &server, backend.debian_package(), started)
}

/// A bare private server of `backend` (`started`: no proxy, the test pauses, kills and
/// restarts it itself) and the URL its adapters use, or `None` after the skip line
/// ([`private_or_skipped`]): one place that knows each backend's URL on a loopback port.
pub fn private_guard(
    test: &str,
    backend: PrivateBackend,
    started: Result<ServerGuard, ServerError>,
) -> Option<(ServerGuard, String)> {
    let server = private_or_skipped(test, backend, started)?;
    let port = server.port();
    let url = match backend {
        PrivateBackend::Redis => format!("redis://127.0.0.1:{port}"),
        PrivateBackend::Postgres => {
            let database = fencer_servers::POSTGRES_DATABASE;
            format!("postgres://postgres@127.0.0.1:{port}/{database}")
        }
        PrivateBackend::Etcd => format!("etcd://127.0.0.1:{port}"),
        PrivateBackend::Zookeeper => format!("zk://127.0.0.1:{port}"),
    };
    Some((server, url))
}

/// A private server (`private:redis`, `private:postgres`, …) behind fencer's fault proxy, as a
/// nemesis target, or `None` after the skip line when it cannot start.
pub fn private_server(test: &str, url: &str) -> Option<Arc<PrivateServer>> {
    let (backend, _) = PrivateBackend::parse(url)
        .expect("a private: URL")
        .expect("a known private server");
    private_or_skipped(test, backend, PrivateServer::start(url).map(Arc::new))
}

/// Runs `plan` with lock and store on the private `server` (the store's `?variant=` given, or
/// ""), the server the target of the plan's `lock` faults (pauses, restarts, clock jumps).
pub fn run_on_private(
    server: &Arc<PrivateServer>,
    plan: &Plan,
    variant: &str,
    tag: &str,
) -> History {
    let lock = lock_from_url(&server.url()).unwrap();
    let store = store_from_url(&format!("{}{variant}", server.url())).unwrap();
    run_real_with_servers(
        plan,
        lock.adapter,
        store.adapter,
        RunNames::tagged(tag),
        server_targets(server, &["lock"]),
    )
    .unwrap()
}

/// The nemesis events of `history` in order: which server faults really happened.
pub fn nemesis_ops(history: &History) -> Vec<Op> {
    history
        .events
        .iter()
        .filter(|e| e.kind == EventType::Nemesis)
        .map(|e| e.f)
        .collect()
}

/// The clock-jump scenario ([`clock_jump_plan`]) on a private `server` whose clock can be
/// jumped (Redis by rewriting expiries, PostgreSQL under libfaketime): with the fenced store the
/// run is valid, the jump happened and let w1 in while w0's lease was live; with the unfenced
/// store the stale write lands and the run is invalid. Runs are tagged `{tag}-fenced` and
/// `{tag}-unfenced`.
pub fn assert_clock_jump_is_stopped_only_by_the_fence(server: &Arc<PrivateServer>, tag: &str) {
    let plan = clock_jump_plan();
    let fenced = run_on_private(server, &plan, "", &format!("{tag}-fenced"));
    let verdict = fencer::check(&fenced);
    assert_eq!(
        verdict.validity,
        Validity::Valid,
        "{}",
        verdict.summary_line()
    );
    assert!(nemesis_ops(&fenced).contains(&Op::ClockJump));
    assert_jump_let_a_second_worker_in_early(&fenced, plan.settings.ttl_ns);
    // The lock log's clock jumped with the expiries: judged on it, w1's grant came after w0's
    // lease had ended, though by the true clock it came early.
    let overlapping = report(&verdict, "overlapping-leases");
    assert_eq!(
        (overlapping.evidence.as_str(), overlapping.anomalies),
        ("lock log", 0),
        "{}",
        verdict.summary_line()
    );
    let unfenced = run_on_private(
        server,
        &plan,
        "?variant=unfenced",
        &format!("{tag}-unfenced"),
    );
    let verdict = fencer::check(&unfenced);
    assert_eq!(
        verdict.validity,
        Validity::Invalid,
        "{}",
        verdict.summary_line()
    );
}

/// Runs `plan` on the reference adapters at `url` while `server` is frozen with SIGSTOP from
/// `freeze_at` for `frozen_for`, and returns the history checked by
/// [`assert_frozen_run_ended_honestly`].
pub fn run_while_frozen(
    server: &ServerGuard,
    url: &str,
    plan: &Plan,
    (freeze_at, frozen_for): (Duration, Duration),
    deadline: Duration,
) -> History {
    let (lock, store) = adapters(url, url);
    assert_frozen_run_ended_honestly(deadline, || {
        std::thread::scope(|scope| {
            scope.spawn(|| {
                std::thread::sleep(freeze_at);
                server.pause().unwrap();
                std::thread::sleep(frozen_for);
                server.resume().unwrap();
            });
            run_real(plan, lock, store, RunNames::tagged(&unique_tag(0))).unwrap()
        })
    })
}

/// Runs `run` (a run during which the server is frozen with SIGSTOP) and asserts what any
/// backend must give: it ended within `deadline`, proved no anomaly, and left the calls sent
/// to the frozen server unknown (`info`) rather than guessing.
pub fn assert_frozen_run_ended_honestly(
    deadline: Duration,
    run: impl FnOnce() -> History,
) -> History {
    let started = Instant::now();
    let history = run();
    assert!(started.elapsed() < deadline, "the run must not hang");
    assert_not_invalid(&history);
    assert_some_calls_unknown(&history, "calls sent to a frozen server must end as info");
    history
}

/// The first fencing token granted after a server restart (`after`) outranks every token
/// granted before it (`before`, which must not be empty): the server's counter (etcd's
/// revision, ZooKeeper's zxid) came back from disk.
pub fn assert_token_after_restart_outranks(after: u64, before: &[u64]) {
    let newest = before
        .iter()
        .max()
        .copied()
        .expect("a lease was granted before the restart");
    assert!(
        after > newest,
        "first token after the restart {after} must exceed every token before: {before:?}"
    );
}

/// Asserts a private server's guard kills the server when a test panics while holding it: the
/// port no longer answers once the panic has unwound.
pub fn assert_guard_stops_the_server_on_panic(server: ServerGuard) {
    let port = server.port();
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _server = server;
        panic!("a failing test");
    }));
    assert!(panicked.is_err());
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the guard killed the server while unwinding"
    );
}
