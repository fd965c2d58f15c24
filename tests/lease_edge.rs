//! Faults aimed at the lease's edge: calls really land next to the moment a lease expires,
//! far more often than under random faults, and a lock service whose bug only shows there (a
//! renew accepted a grace period after expiry, `sim-late-renew`) is caught because of it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencer::backends::{LeaseRules, SimLeaseService, SqliteStore, StoreRules};
use fencer::{LockBackend, Settings, Validity};
use fencer_gate::mutants::{Mutant, verdict_of};
use fencer_harness::runtime::simulation_runtime;
use fencer_harness::{
    Acquired, CallError, FencedStore, FencingToken, LocalClock, LockService, NodeClock, Owned,
    OwnerToken, ReadValue, Recorder, TrueClock, Written,
};
use fencer_nemesis::FaultKind;
use fencer_nemesis::schedule::EDGE_WINDOW_PER_TTL;
use fencer_run::drive::{RunNames, drive};
use fencer_run::plan::Plan;
use fencer_run::{BackendName, Reach, Roles};

/// Where the current lease ends, as the lock service's replies say, and how many calls
/// reached the backends within the edge window of it.
struct Edges {
    truth: TrueClock,
    ttl_ns: u64,
    window_ns: u64,
    expiry_ns: Mutex<Option<u64>>,
    calls: AtomicUsize,
    near: AtomicUsize,
}

impl Edges {
    /// A call reached a backend now.
    fn arrive(&self) {
        let now_ns = self.truth.now_ns();
        self.calls.fetch_add(1, Ordering::Relaxed);
        if let Some(expiry_ns) = *self.expiry_ns.lock().unwrap()
            && now_ns.abs_diff(expiry_ns) <= self.window_ns
        {
            self.near.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn lease_until(&self, expiry_ns: Option<u64>) {
        *self.expiry_ns.lock().unwrap() = expiry_ns;
    }
}

/// The reference lease service, watched.
struct WatchedLock {
    inner: SimLeaseService,
    edges: Arc<Edges>,
}

#[fencer::async_trait]
impl LockService for WatchedLock {
    async fn acquire(
        &self,
        lock: &str,
        owner: OwnerToken,
        ttl: Duration,
    ) -> Result<Acquired, CallError> {
        self.edges.arrive();
        let reply = self.inner.acquire(lock, owner, ttl).await;
        if let Ok(Acquired::Granted { .. }) = reply {
            self.edges
                .lease_until(Some(self.edges.truth.now_ns() + self.edges.ttl_ns));
        }
        reply
    }

    async fn renew(
        &self,
        lock: &str,
        owner: OwnerToken,
        ttl: Duration,
    ) -> Result<Owned, CallError> {
        self.edges.arrive();
        let reply = self.inner.renew(lock, owner, ttl).await;
        if let Ok(Owned::Done) = reply {
            self.edges
                .lease_until(Some(self.edges.truth.now_ns() + self.edges.ttl_ns));
        }
        reply
    }

    async fn release(&self, lock: &str, owner: OwnerToken) -> Result<Owned, CallError> {
        self.edges.arrive();
        let reply = self.inner.release(lock, owner).await;
        if let Ok(Owned::Done) = reply {
            self.edges.lease_until(None);
        }
        reply
    }
}

/// The fenced SQLite store, its writes watched.
struct WatchedStore {
    inner: SqliteStore,
    edges: Arc<Edges>,
}

#[fencer::async_trait]
impl FencedStore for WatchedStore {
    async fn write(
        &self,
        key: &str,
        token: FencingToken,
        write_id: &str,
        value: &str,
    ) -> Result<Written, CallError> {
        self.edges.arrive();
        self.inner.write(key, token, write_id, value).await
    }

    async fn read(&self, key: &str) -> Result<ReadValue, CallError> {
        self.inner.read(key).await
    }
}

fn settings(seed: u64, kinds: &[FaultKind]) -> Settings {
    Settings {
        seed,
        ops_per_worker: 20,
        nemesis: kinds.iter().copied().collect(),
        ..Settings::default()
    }
}

/// Runs `settings` against the watched reference backends (faults on the lock server itself
/// left out: the watched service is a user's backend to fencer); returns (calls, calls near
/// an edge).
fn calls_near_the_edge(settings: &Settings) -> (usize, usize) {
    let user = BackendName::new("watched");
    let roles = Roles {
        lock: (&user, Reach::default()),
        store: (&user, Reach::default()),
    };
    let plan = Arc::new(roles.fit(&Plan::generate(settings)));
    simulation_runtime().block_on(async {
        let truth = TrueClock::start();
        let edges = Arc::new(Edges {
            truth,
            ttl_ns: settings.ttl_ns,
            window_ns: settings.ttl_ns / EDGE_WINDOW_PER_TTL,
            expiry_ns: Mutex::new(None),
            calls: AtomicUsize::new(0),
            near: AtomicUsize::new(0),
        });
        let lock = WatchedLock {
            inner: SimLeaseService::new(
                LocalClock::new(truth, NodeClock::with_offset(0)),
                Arc::new(Recorder::new(truth)),
                LeaseRules::Reference,
            ),
            edges: Arc::clone(&edges),
        };
        let store = WatchedStore {
            inner: SqliteStore::in_memory(StoreRules::Fenced, None).unwrap(),
            edges: Arc::clone(&edges),
        };
        drive(
            plan,
            Arc::new(lock),
            Arc::new(store),
            RunNames::tagged("edge"),
        )
        .await
        .unwrap();
        (
            edges.calls.load(Ordering::Relaxed),
            edges.near.load(Ordering::Relaxed),
        )
    })
}

/// Faults that reach every call, drawn at random: pauses, lost renew replies and requests of
/// every kind held in flight (the default set without skew, restarts and `lease-edge`).
const RANDOM_CALL_FAULTS: [FaultKind; 6] = [
    FaultKind::Pause,
    FaultKind::DropRenew,
    FaultKind::DelayWrite,
    FaultKind::DelayAcquire,
    FaultKind::DelayRenew,
    FaultKind::DelayRelease,
];

/// The default set without `lease-edge`.
fn default_without_the_edge() -> Vec<FaultKind> {
    FaultKind::DEFAULT
        .into_iter()
        .filter(|kind| *kind != FaultKind::LeaseEdge)
        .collect()
}

/// Seeds every comparison below runs.
const SEEDS: std::ops::Range<u64> = 0..8;

#[test]
fn lease_edge_faults_land_calls_next_to_the_lease_s_expiry_far_more_often_than_random_ones() {
    let total = |kinds: &[FaultKind]| {
        SEEDS
            .map(|seed| calls_near_the_edge(&settings(seed, kinds)))
            .fold((0, 0), |(calls, near), (c, n)| (calls + c, near + n))
    };
    let (edge_calls, edge_near) = total(&[FaultKind::LeaseEdge]);
    let (random_calls, random_near) = total(&RANDOM_CALL_FAULTS);
    let (default_calls, default_near) = total(&default_without_the_edge());
    eprintln!(
        "calls within a fortieth of a TTL of the lease's expiry, seeds {SEEDS:?}: \
         lease-edge {edge_near}/{edge_calls}, random call faults {random_near}/{random_calls}, \
         the other default faults {default_near}/{default_calls}"
    );
    let share = |near: usize, calls: usize| near as f64 / calls.max(1) as f64;
    assert!(
        share(edge_near, edge_calls) > 5.0 * share(random_near, random_calls),
        "lease-edge {edge_near}/{edge_calls} vs random {random_near}/{random_calls}"
    );
    assert!(
        share(edge_near, edge_calls) > 5.0 * share(default_near, default_calls),
        "lease-edge {edge_near}/{edge_calls} vs default {default_near}/{default_calls}"
    );
}

/// Over [`SEEDS`], how many runs of `sim-late-renew` were invalid and how many overlapping
/// leases they showed.
fn late_renew_caught(kinds: &[FaultKind]) -> (usize, usize) {
    let mutant = Mutant::named("late-renew").unwrap();
    SEEDS
        .map(|seed| {
            let verdict = verdict_of(
                &Settings {
                    nemesis: kinds.iter().copied().collect(),
                    ..mutant.settings(seed)
                },
                mutant.strict,
            )
            .unwrap();
            (
                usize::from(verdict.validity == Validity::Invalid),
                verdict
                    .anomaly_counts
                    .get("overlapping-leases")
                    .copied()
                    .unwrap_or(0),
            )
        })
        .fold((0, 0), |(runs, overlaps), (r, o)| (runs + r, overlaps + o))
}

#[test]
fn a_renew_accepted_after_expiry_is_caught_by_lease_edge_faults_and_missed_by_random_ones() {
    let mutant = Mutant::named("late-renew").unwrap();
    assert_eq!(mutant.settings(0).lock, LockBackend::SimLateRenew.into());
    let (edge_runs, edge_overlaps) = late_renew_caught(&[FaultKind::LeaseEdge]);
    let (random_runs, random_overlaps) = late_renew_caught(&RANDOM_CALL_FAULTS);
    eprintln!(
        "sim-late-renew, seeds {SEEDS:?}: lease-edge caught {edge_runs} runs \
         ({edge_overlaps} overlapping leases), random call faults {random_runs} \
         ({random_overlaps})"
    );
    assert!(
        edge_runs >= SEEDS.count() / 2 && edge_runs > 2 * random_runs,
        "lease-edge {edge_runs} vs random {random_runs} of {} seeds",
        SEEDS.count()
    );
    // The reference lease service under the same lease-edge faults shows nothing.
    for seed in SEEDS {
        let verdict = verdict_of(&mutant.healed(seed), mutant.strict).unwrap();
        assert!(
            verdict.anomaly_counts.is_empty(),
            "seed {seed}: {}",
            verdict.summary_line()
        );
    }
}

/// Over [`SEEDS`], the runs of `mutant` under its own (the plain default) settings that were
/// caught as its class, and those of the same settings without `lease-edge`.
fn caught_with_and_without_the_edge(name: &str) -> (usize, usize) {
    let mutant = Mutant::named(name).unwrap();
    let caught = |settings: &Settings| {
        let verdict = verdict_of(settings, mutant.strict).unwrap();
        usize::from(verdict.anomaly_counts.contains_key(mutant.expected_class))
    };
    SEEDS
        .map(|seed| {
            let plain = mutant.settings(seed);
            let without = Settings {
                nemesis: default_without_the_edge().into_iter().collect(),
                ..plain.clone()
            };
            (caught(&plain), caught(&without))
        })
        .fold((0, 0), |(with, without), (w, o)| (with + w, without + o))
}

/// A lock call made of two round trips 1–10 ms apart (`sim-two-step-release`,
/// `sim-two-step-renew`) races only when the lease expires inside that gap. Lease-edge attacks
/// aimed log-uniformly, with the rival's acquire aimed into the holder's call, reach it under
/// the plain defaults in most seeds; the other default faults alone hardly ever do.
#[test]
fn calls_in_two_round_trips_are_caught_under_the_plain_defaults() {
    for name in ["two-step-release", "two-step-renew"] {
        let mutant = Mutant::named(name).unwrap();
        assert_eq!(
            mutant.settings(0).nemesis,
            FaultKind::DEFAULT.into_iter().collect(),
            "{name} runs under the default faults"
        );
        let (with, without) = caught_with_and_without_the_edge(name);
        eprintln!(
            "{name}, seeds {SEEDS:?}: caught in {with} runs with lease-edge, {without} without"
        );
        assert!(
            with >= 2 && with > without,
            "{name}: {with} with lease-edge, {without} without, of {} seeds",
            SEEDS.count()
        );
    }
}
