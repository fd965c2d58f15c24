//! [`Harness`]: fencer as a library, for a user's own `cargo test`.
//!
//! A user hands over their lock service and store (instances, or factories so that every seed
//! gets a fresh one and seeds can run side by side), picks a workload, its size, faults and
//! seeds, and gets a [`Report`] back; [`Report::assert_valid`] fails the test with the
//! anomalies in plain words, where the run was saved (with its `timeline.html`), its minimal
//! plan, and the command that runs the failing seed again. It is the CI gate's machinery:
//! saved regressions replay first, the first failure of each anomaly class is shrunk, failing
//! plans are saved as regressions, and a JUnit report can be written.
//!
//! Two ways time can pass:
//! - [`Harness::simulated_time`] (the default): fencer's simulation executor over a paused
//!   tokio runtime, one per seed. An in-memory
//!   backend that measures time with `tokio::time` runs a 10 s lease scenario in microseconds,
//!   and the same seed gives the same history.
//! - [`Harness::real_time`]: a real runtime for backends that talk to real servers. TTLs are
//!   scaled down (default 300 ms) and most cycles are short
//!   ([`CycleShape::RealTime`](fencer_workloads::CycleShape::RealTime)), so a seed of 3
//!   workers × 20 cycles takes about two seconds; replay is "the same plan again", and the
//!   saved history is the artifact.
//!
//! Faults a user's backend cannot take (the lock server's clock, and its restart unless the
//! service offers [`LockService::restart`]) are left out of each seed's plan and named in the
//! [`Report`] ([`Report::left_out`], and its summary), never dropped silently.
//!
//! The example in the `fencer` crate's documentation runs a user's lock service this way.

use std::fmt::Write as _;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use fencer_checkers::{AnomalyClass, Validity, Verdict};
use fencer_harness::runtime::{real_runtime, simulation_runtime};
use fencer_harness::terminal::escape;
use fencer_harness::{
    FencedStore, History, LibraryContext, LockLibrary, LockService, PackedHistory, Workload,
};
use fencer_nemesis::FaultKind;
use fencer_results::save::{FinishedRun, default_run_dir, save_run};
use fencer_run::backends::Built;
use fencer_run::checking::judge;
use fencer_run::drive::RunNames;
use fencer_run::plan::Plan;
use fencer_run::reach::add_left_out;
use fencer_run::real::unique_tag;
use fencer_run::settings::{LockBackend, Settings, StoreBackend};
use fencer_run::{Backends, ClientName, Launch, LeftOut, RunError, Time};
use fencer_workloads::{ClientVariant, RenewFailurePolicy};

use crate::divergence::Divergence;
use crate::junit::junit_xml;
use crate::minimize::{Against, minimize};
use crate::regressions;
use crate::runner::{Outcome, PlanResult, RunnerConfig, run_batch};
use crate::seeds::{SeedRange, Shard};
use crate::shrink::ShrinkLimits;
use crate::summary::{FailureKind, FailureRecord, GateSummary, ShrinkRecord};

/// The name the user's lock service has in a harness's runs.
pub const USER_LOCK: &str = "user-lock";

/// The name the user's store has in a harness's runs.
pub const USER_STORE: &str = "user-store";

/// The name the user's lock client library has in a harness's runs.
pub const USER_CLIENT: &str = "user-client";

/// Environment variable that overrides the seed range (`7` or `3..9`).
pub const SEEDS_ENV: &str = "FENCER_SEEDS";

/// Environment variable that runs one seed alone (no saved regressions first): the replay
/// command a failing report prints.
pub const SEED_ENV: &str = "FENCER_SEED";

/// How time passes during a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeMode {
    /// Paused, auto-advancing tokio time; deterministic for deterministic backends.
    Simulated,
    /// Real time and I/O, for backends on real servers.
    Real,
}

/// Builds the user's lock service for one run.
type LockFactory = Arc<dyn Fn() -> Arc<dyn LockService> + Send + Sync>;

/// Builds the user's store for one run.
type StoreFactory = Arc<dyn Fn() -> Arc<dyn FencedStore> + Send + Sync>;

/// Builds one worker's lock client library.
type LibraryFactory = Arc<dyn Fn(&LibraryContext) -> Arc<dyn LockLibrary> + Send + Sync>;

/// The lock client the workers use: one of fencer's own, or the user's library.
#[derive(Clone)]
enum Client {
    Fencer(ClientVariant),
    User(LibraryFactory),
}

/// How a harness gets the backends of one run.
enum Source {
    /// The same instances for every seed: seeds run one after another (in real time on one
    /// runtime, for connections that belong to the runtime that opened them).
    Shared(Arc<dyn LockService>, Arc<dyn FencedStore>),
    /// A fresh instance per seed: seeds may run side by side.
    Factories(LockFactory, StoreFactory),
    /// fencer's own reference lease service and fenced SQLite store, fresh for every seed: for
    /// a harness whose subject is the lock client.
    Fencer,
}

/// Runs a workload and a nemesis against a user's backend over a range of seeds.
pub struct Harness {
    source: Source,
    name: String,
    workload: Workload,
    client: Client,
    workers: usize,
    ops: usize,
    ttl: Option<Duration>,
    renew_every: Option<Duration>,
    call_timeout: Option<Duration>,
    fault_gap: Option<Duration>,
    nemesis: Vec<FaultKind>,
    on_renew_failure: RenewFailurePolicy,
    seeds: Range<u64>,
    time: TimeMode,
    strict: bool,
    swarm: bool,
    jobs: Option<usize>,
    stop_at_first_failure: bool,
    allow_unknown: bool,
    shrink: Option<ShrinkLimits>,
    regressions: Option<PathBuf>,
    junit: Option<PathBuf>,
    save_failures_to: Option<PathBuf>,
}

impl Harness {
    /// A harness over `lock` and `store`, shared by every seed: 3 workers × 20 cycles of
    /// `fenced-register`, the default faults ([`FaultKind::DEFAULT`]), seeds 0..10, simulated
    /// time.
    pub fn new(lock: impl LockService + 'static, store: impl FencedStore + 'static) -> Harness {
        Harness::from_shared(Arc::new(lock), Arc::new(store))
    }

    /// As [`Harness::new`], for backends already shared (e.g. a lock and a store on one
    /// connection).
    pub fn from_shared(lock: Arc<dyn LockService>, store: Arc<dyn FencedStore>) -> Harness {
        Harness::with_source(Source::Shared(lock, store))
    }

    /// A harness that builds a fresh lock service and store for every seed, so seeds run side
    /// by side on every core ([`Harness::jobs`]) and none sees another's state.
    pub fn with_factories<L, S>(
        lock: impl Fn() -> L + Send + Sync + 'static,
        store: impl Fn() -> S + Send + Sync + 'static,
    ) -> Harness
    where
        L: LockService + 'static,
        S: FencedStore + 'static,
    {
        Harness::with_source(Source::Factories(
            Arc::new(move || Arc::new(lock()) as Arc<dyn LockService>),
            Arc::new(move || Arc::new(store()) as Arc<dyn FencedStore>),
        ))
    }

    /// A harness for the user's own lock client library alone, over fencer's reference lease
    /// service and fenced SQLite store (each seed gets fresh ones, and seeds run side by
    /// side): `build` makes each worker's library, as [`Harness::client`] says.
    pub fn for_client<L, F>(build: F) -> Harness
    where
        L: LockLibrary + 'static,
        F: Fn(&LibraryContext) -> L + Send + Sync + 'static,
    {
        Harness::with_source(Source::Fencer).client(build)
    }

    fn with_source(source: Source) -> Harness {
        Harness {
            source,
            name: "fencer".into(),
            workload: Workload::FencedRegister,
            client: Client::Fencer(ClientVariant::Reference),
            workers: 3,
            ops: 20,
            ttl: None,
            renew_every: None,
            call_timeout: None,
            fault_gap: None,
            nemesis: FaultKind::DEFAULT.to_vec(),
            on_renew_failure: RenewFailurePolicy::Stop,
            seeds: 0..10,
            time: TimeMode::Simulated,
            strict: false,
            swarm: false,
            jobs: None,
            stop_at_first_failure: false,
            allow_unknown: false,
            shrink: Some(ShrinkLimits {
                max_candidates: 500,
                budget: Duration::from_secs(10),
            }),
            regressions: None,
            junit: None,
            save_failures_to: Some(std::env::temp_dir().join("fencer-runs")),
        }
    }

    /// Names the run in messages; use the test's name so the replay command is exact.
    pub fn name(mut self, name: &str) -> Harness {
        self.name = name.to_string();
        self
    }

    /// What workers do under the lock (default `fenced-register`).
    pub fn workload(mut self, workload: Workload) -> Harness {
        self.workload = workload;
        self
    }

    /// One of fencer's own lock clients for the workers: the reference (the default), or a
    /// client with a known bug.
    pub fn fencer_client(mut self, variant: ClientVariant) -> Harness {
        self.client = Client::Fencer(variant);
        self
    }

    /// The user's own lock client library for the workers: `build` makes each worker's
    /// library from its context, afresh for every seed, over the recorded lock service, so
    /// its renewals are recorded and faulted and its tasks freeze with its worker.
    pub fn client<L, F>(mut self, build: F) -> Harness
    where
        L: LockLibrary + 'static,
        F: Fn(&LibraryContext) -> L + Send + Sync + 'static,
    {
        self.client = Client::User(Arc::new(move |cx| {
            Arc::new(build(cx)) as Arc<dyn LockLibrary>
        }));
        self
    }

    /// Number of workers racing for the lock.
    pub fn workers(mut self, workers: usize) -> Harness {
        self.workers = workers;
        self
    }

    /// Acquire → write → release cycles per worker.
    pub fn ops(mut self, ops: usize) -> Harness {
        self.ops = ops;
        self
    }

    /// Lease TTL (default 10 s simulated, 300 ms real).
    pub fn ttl(mut self, ttl: Duration) -> Harness {
        self.ttl = Some(ttl);
        self
    }

    /// Renewal period (default TTL / 3).
    pub fn renew_every(mut self, every: Duration) -> Harness {
        self.renew_every = Some(every);
        self
    }

    /// How long a worker waits for a reply before recording `info` (default TTL / 3 in real
    /// time, 1 s simulated).
    pub fn call_timeout(mut self, timeout: Duration) -> Harness {
        self.call_timeout = Some(timeout);
        self
    }

    /// Mean gap between faults (default one TTL).
    pub fn fault_gap(mut self, gap: Duration) -> Harness {
        self.fault_gap = Some(gap);
        self
    }

    /// Faults to inject; empty for none.
    pub fn nemesis(mut self, kinds: impl IntoIterator<Item = FaultKind>) -> Harness {
        self.nemesis = kinds.into_iter().collect();
        self
    }

    /// What workers do when a renewal fails or goes unanswered.
    pub fn on_renew_failure(mut self, policy: RenewFailurePolicy) -> Harness {
        self.on_renew_failure = policy;
        self
    }

    /// Seeds to run (overridden by `FENCER_SEEDS`, or `FENCER_SEED` for one).
    pub fn seeds(mut self, seeds: Range<u64>) -> Harness {
        self.seeds = seeds;
        self
    }

    /// Simulated time (the default): fencer's executor over paused tokio time, for in-memory
    /// backends that use `tokio::time`.
    pub fn simulated_time(mut self) -> Harness {
        self.time = TimeMode::Simulated;
        self
    }

    /// Real time: for backends on real servers. Cycles are drawn in the real-time shape
    /// ([`CycleShape::RealTime`](fencer_workloads::CycleShape::RealTime)): one in ten as long
    /// as in the simulation, the others short, since every millisecond a worker sleeps under
    /// the lease is a millisecond of the test.
    pub fn real_time(mut self) -> Harness {
        self.time = TimeMode::Real;
        self
    }

    /// The user's backends as fencer's runs name them: each seed gets the shared instances or
    /// fresh ones from the factories.
    fn backends(&self) -> Backends {
        let time = match self.time {
            TimeMode::Simulated => Time::Simulated,
            TimeMode::Real => Time::Real,
        };
        let mut backends = Backends::new();
        let (lock, store): (LockFactory, StoreFactory) = match &self.source {
            Source::Shared(lock, store) => {
                let (lock, store) = (Arc::clone(lock), Arc::clone(store));
                (
                    Arc::new(move || Arc::clone(&lock)),
                    Arc::new(move || Arc::clone(&store)),
                )
            }
            Source::Factories(lock, store) => (Arc::clone(lock), Arc::clone(store)),
            Source::Fencer => {
                self.register_client(&mut backends, time);
                return backends;
            }
        };
        backends
            .lock_built(USER_LOCK, time, "the lock service under test", move |_| {
                Ok(Built::adapter(lock()))
            })
            .and_then(|backends| {
                backends.store_built(USER_STORE, time, "the store under test", move |_| {
                    Ok(Built::adapter(store()))
                })
            })
            .expect("the user's names are free");
        self.register_client(&mut backends, time);
        backends
    }

    /// Registers the user's lock client library, when the harness has one.
    fn register_client(&self, backends: &mut Backends, time: Time) {
        if let Client::User(build) = &self.client {
            let build = Arc::clone(build);
            backends
                .clients_mut()
                .register(USER_CLIENT, time, "the lock client under test", move |cx| {
                    build(cx)
                })
                .expect("the user's client name is free");
        }
    }

    /// Warnings (fencing's documented limit) fail the verdict too.
    pub fn strict(mut self, strict: bool) -> Harness {
        self.strict = strict;
        self
    }

    /// Swarm testing: each seed also chooses which of the faults are on and how often.
    pub fn swarm(mut self, swarm: bool) -> Harness {
        self.swarm = swarm;
        self
    }

    /// Seeds run at once (default: every core with [`Harness::with_factories`] in simulated
    /// time, else 1; shared instances always run one seed at a time).
    pub fn jobs(mut self, jobs: usize) -> Harness {
        self.jobs = Some(jobs.max(1));
        self
    }

    /// Stop at the first failing seed (every lower seed still runs), as the gate does.
    pub fn stop_at_first_failure(mut self, stop: bool) -> Harness {
        self.stop_at_first_failure = stop;
        self
    }

    /// Let `unknown` verdicts pass [`Report::assert_valid`] (by default they fail it: a gate
    /// that says "unknown" has not shown the backend safe).
    pub fn allow_unknown(mut self, allow: bool) -> Harness {
        self.allow_unknown = allow;
        self
    }

    /// Shrinking bounds for the first failure of each anomaly class, or `None` not to shrink.
    pub fn shrink(mut self, limits: Option<ShrinkLimits>) -> Harness {
        self.shrink = limits;
        self
    }

    /// A regressions folder: its saved plans run before the seeds, and every failing plan
    /// (shrunk when it could be) is saved there. Commit it.
    pub fn regressions(mut self, dir: impl Into<PathBuf>) -> Harness {
        self.regressions = Some(dir.into());
        self
    }

    /// Writes a JUnit report of the run here.
    pub fn junit(mut self, path: impl Into<PathBuf>) -> Harness {
        self.junit = Some(path.into());
        self
    }

    /// Where failing runs are saved (default: `<temp>/fencer-runs`); `None` saves nothing.
    pub fn save_failures_to(mut self, dir: Option<PathBuf>) -> Harness {
        self.save_failures_to = dir;
        self
    }

    /// The settings one seed runs with.
    pub fn settings(&self, seed: u64) -> Settings {
        let real = self.time == TimeMode::Real;
        let ttl = self.ttl.unwrap_or(if real {
            Duration::from_millis(300)
        } else {
            Duration::from_secs(10)
        });
        let ttl_ns = ttl.as_nanos() as u64;
        let nanos = |value: Option<Duration>, default_ns: u64| {
            value.map_or(default_ns, |value| value.as_nanos() as u64)
        };
        let settings = Settings {
            seed,
            workload: self.workload,
            client: match &self.client {
                Client::Fencer(variant) => ClientName::from(*variant),
                Client::User(_) => ClientName::new(USER_CLIENT),
            },
            workers: self.workers,
            ops_per_worker: self.ops,
            ttl_ns,
            renew_every_ns: nanos(self.renew_every, ttl_ns / 3),
            nemesis: self.nemesis.iter().copied().collect(),
            mean_fault_gap_ns: nanos(self.fault_gap, ttl_ns),
            on_renew_failure: self.on_renew_failure,
            call_timeout_ns: nanos(
                self.call_timeout,
                if real { ttl_ns / 3 } else { 1_000_000_000 },
            ),
            lock: match self.source {
                Source::Fencer => LockBackend::Sim.into(),
                _ => USER_LOCK.into(),
            },
            store: match self.source {
                Source::Fencer => StoreBackend::Sqlite.into(),
                _ => USER_STORE.into(),
            },
            ..Settings::default()
        };
        let settings = if real {
            settings.in_real_time()
        } else {
            settings
        };
        settings.for_seed(seed, self.swarm)
    }

    /// The plan one seed runs, as generated (faults the backends cannot take are left out
    /// when it runs, and reported).
    pub fn plan(&self, seed: u64) -> Plan {
        Plan::generate(&self.settings(seed))
    }

    /// The seeds to run: `FENCER_SEED`, else `FENCER_SEEDS`, else [`Harness::seeds`].
    fn chosen_seeds(&self) -> (Range<u64>, bool) {
        if let Ok(text) = std::env::var(SEED_ENV) {
            let seed = text
                .trim()
                .parse::<u64>()
                .unwrap_or_else(|_| panic!("{SEED_ENV}: expected a seed like 7, found `{text}`"));
            return (seed..seed + 1, true);
        }
        match std::env::var(SEEDS_ENV) {
            Ok(text) => (
                parse_seeds(&text).unwrap_or_else(|| {
                    panic!(
                        "{SEEDS_ENV}: expected a seed like 7 or a range like 3..9, found `{text}`"
                    )
                }),
                false,
            ),
            Err(_) => (self.seeds.clone(), false),
        }
    }

    /// Runs the saved regressions (unless one seed is asked for), then every seed, and checks
    /// each history; shrinks and saves what failed.
    pub fn run(&self) -> Report {
        let (seeds, alone) = self.chosen_seeds();
        let base = self.settings(0);
        let saved = match (&self.regressions, alone) {
            (Some(dir), false) => match regressions::load(dir, &base) {
                Ok(saved) => saved,
                Err(error) => panic!("fencer: regressions of `{}`: {error}", self.name),
            },
            _ => Vec::new(),
        };
        let mut plans: Vec<(Label, Plan)> = saved
            .into_iter()
            .map(|regression| (Label::Regression(regression.path), regression.plan))
            .collect();
        plans.extend(
            seeds
                .clone()
                .map(|seed| (Label::Seed(seed), self.plan(seed))),
        );
        let results = self.run_plans(&plans);
        let mut report = Report {
            name: self.name.clone(),
            allow_unknown: self.allow_unknown,
            runs: Vec::new(),
        };
        for ((label, _), result) in plans.into_iter().zip(results) {
            report.runs.push(self.seed_run(label, result));
        }
        self.shrink_and_save(&mut report);
        if let Some(path) = &self.junit
            && let Err(error) = regressions::write_atomically(
                path,
                junit_xml(&self.summary(&report, seeds)).as_bytes(),
            )
        {
            panic!("fencer: cannot write {}: {error}", path.display());
        }
        report
    }

    /// Runs `plans` in order, side by side when the backends allow, and returns what became of
    /// each (fewer when stopping at the first failure).
    fn run_plans(&self, plans: &[(Label, Plan)]) -> Vec<RunResult> {
        let backends = self.backends();
        match &self.source {
            Source::Shared(..) => self.run_shared(&backends, plans),
            Source::Factories(..) | Source::Fencer => {
                let jobs = self.jobs.unwrap_or(match self.time {
                    TimeMode::Simulated => {
                        std::thread::available_parallelism().map_or(1, usize::from)
                    }
                    TimeMode::Real => 1,
                });
                let config = RunnerConfig {
                    backends,
                    strict: self.strict,
                    jobs,
                    keep_going: !self.stop_at_first_failure,
                    deadline: None,
                    check_determinism: false,
                    keep_histories: true,
                };
                let mut results = Vec::new();
                run_batch(
                    plans.len(),
                    &|index| plans[index].1.clone(),
                    &config,
                    &AtomicBool::new(false),
                    &mut |PlanResult { plan, outcome, .. }| {
                        results.push(match outcome {
                            Outcome::Checked {
                                kept: Some(kept),
                                verdict,
                                ..
                            } => Ok((plan, kept.history, *verdict)),
                            Outcome::Checked { kept: None, .. } => {
                                Err(SeedRunError::HistoryNotKept)
                            }
                            Outcome::Nondeterministic(divergence) => {
                                Err(SeedRunError::Nondeterministic(divergence))
                            }
                            Outcome::Error(error) => Err(SeedRunError::Run(error)),
                        });
                    },
                );
                results
            }
        }
    }

    /// Runs `plans` one after another on the shared instances (in real time on one runtime).
    fn run_shared(&self, backends: &Backends, plans: &[(Label, Plan)]) -> Vec<RunResult> {
        // Real backends may keep connections on the runtime that opened them, so real time
        // uses one runtime for every seed; simulated time gets a fresh one per seed so a seed
        // replays alone.
        let shared_real = match self.time {
            TimeMode::Real => match real_runtime() {
                Ok(runtime) => Some(runtime),
                Err(error) => return vec![Err(SeedRunError::Runtime(error.to_string()))],
            },
            TimeMode::Simulated => None,
        };
        let mut results = Vec::new();
        for (_, plan) in plans {
            let seed = plan.settings.seed;
            let launch = Launch {
                names: Some(match self.time {
                    TimeMode::Simulated => RunNames::tagged(&format!("s{seed}")),
                    TimeMode::Real => RunNames::tagged(&unique_tag(seed)),
                }),
                ..Launch::new(backends)
            };
            let job = launch.drive(plan);
            let outcome = match &shared_real {
                Some(runtime) => runtime.block_on(job),
                None => simulation_runtime().block_on(job),
            };
            let result = outcome
                .map(|launched| {
                    let verdict = judge(&launched.plan.settings, &launched.history, self.strict);
                    (launched.plan, launched.history, verdict)
                })
                .map_err(SeedRunError::Run);
            let failed = match &result {
                Ok((_, _, verdict)) => verdict.validity == Validity::Invalid,
                Err(_) => true,
            };
            results.push(result);
            if failed && self.stop_at_first_failure {
                break;
            }
        }
        results
    }

    /// One run's entry in the report: judged, and saved when it failed.
    fn seed_run(&self, label: Label, result: RunResult) -> SeedRun {
        let seed = match &label {
            Label::Seed(seed) => Some(*seed),
            Label::Regression(_) => None,
        };
        match result {
            Ok((plan, history, verdict)) => {
                let saved = self.save_if_failed(&label, &plan, &history, &verdict);
                SeedRun {
                    seed: plan.settings.seed,
                    regression: match label {
                        Label::Regression(path) => Some(path),
                        Label::Seed(_) => None,
                    },
                    // The report hands back events, the view a test reads; the run was checked
                    // and saved from its packed form.
                    outcome: Ok((history.unpack(), verdict)),
                    saved,
                    plan: Some(plan),
                    shrunk: None,
                }
            }
            Err(message) => SeedRun {
                seed: seed.unwrap_or(0),
                regression: match label {
                    Label::Regression(path) => Some(path),
                    Label::Seed(_) => None,
                },
                outcome: Err(message),
                saved: None,
                plan: None,
                shrunk: None,
            },
        }
    }

    fn save_if_failed(
        &self,
        label: &Label,
        plan: &Plan,
        history: &PackedHistory,
        verdict: &Verdict,
    ) -> Option<PathBuf> {
        // An unknown verdict fails the test too, unless allowed: its run is kept so the events
        // it names can be looked at.
        let failed = match verdict.validity {
            Validity::Invalid => true,
            Validity::Unknown => !self.allow_unknown,
            Validity::Valid => false,
        };
        if !failed {
            return None;
        }
        let root = self.save_failures_to.as_ref()?;
        let tag = match label {
            Label::Seed(seed) => seed.to_string(),
            Label::Regression(_) => format!("regression-{}", plan.settings.seed),
        };
        let dir = default_run_dir(root, &self.name, &tag);
        let finished = FinishedRun {
            command: "cargo-test",
            plan,
            history,
            verdict,
            cycle_starts_ns: &[],
            interrupted_at_ns: None,
        };
        save_run(&finished, &dir, None).ok().map(|()| dir)
    }

    /// Shrinks the first failing seed of each anomaly class in place, and saves every failing
    /// seed's plan (the minimal one when shrunk) in the regressions folder.
    fn shrink_and_save(&self, report: &mut Report) {
        let backends = self.backends();
        let mut shrunk_classes: Vec<AnomalyClass> = Vec::new();
        for run in &mut report.runs {
            let (Ok((history, verdict)), Some(plan)) = (&run.outcome, &run.plan) else {
                continue;
            };
            if verdict.validity != Validity::Invalid || run.regression.is_some() {
                continue;
            }
            let class = verdict.first_failure().map(|anomaly| anomaly.class);
            if let (Some(limits), Some(class), Some(dir)) = (self.shrink, class, &run.saved)
                && !shrunk_classes.contains(&class)
            {
                shrunk_classes.push(class);
                let against = Against {
                    backends: &backends,
                    strict: self.strict,
                };
                run.shrunk = minimize(
                    dir,
                    plan,
                    class,
                    history.events.len(),
                    limits,
                    against,
                    &AtomicBool::new(false),
                )
                .ok();
            }
            if let (Some(folder), Some(class)) = (&self.regressions, class) {
                let minimal = run
                    .shrunk
                    .as_ref()
                    .and_then(|shrunk| regressions::load_shrunk(&shrunk.plan));
                let _ = regressions::save(folder, minimal.as_ref().unwrap_or(plan), class.name());
            }
        }
    }

    /// The report as a gate summary, for JUnit.
    fn summary(&self, report: &Report, seeds: Range<u64>) -> GateSummary {
        let range = SeedRange {
            start: seeds.start,
            end: Some(seeds.end),
        };
        let mut summary = GateSummary::empty(self.settings(0), self.swarm, range, vec![Shard::ALL]);
        for run in &report.runs {
            let seed = run.regression.is_none().then_some(run.seed);
            add_left_out(&mut summary.left_out, run.left_out());
            match &run.outcome {
                Ok((history, verdict)) => {
                    summary.count_checked(seed, &run.label(), verdict, history.events.len());
                    if verdict.validity == Validity::Invalid {
                        summary.failures.push(FailureRecord {
                            seed,
                            label: run.label(),
                            kind: FailureKind::Invalid,
                            class: verdict.first_failure().map(|anomaly| anomaly.class),
                            anomaly_counts: verdict.anomaly_counts.clone(),
                            explanation: verdict
                                .first_failure()
                                .map_or_else(|| verdict.summary_line(), |a| a.explanation.clone()),
                            run_dir: run.saved.as_ref().map(|dir| dir.display().to_string()),
                            replay: vec![report.replay_line(run)],
                            divergence: None,
                            shrunk: run.shrunk.clone(),
                        });
                    }
                }
                Err(message) => {
                    summary.count_run(seed, crate::summary::Tally::Error, 0);
                    summary.failures.push(FailureRecord {
                        seed,
                        label: run.label(),
                        kind: FailureKind::Error,
                        class: None,
                        anomaly_counts: Default::default(),
                        explanation: message.to_string(),
                        run_dir: None,
                        replay: vec![report.replay_line(run)],
                        divergence: None,
                        shrunk: None,
                    });
                }
            }
        }
        summary
    }
}

/// One run as it ran (its plan, naming the faults left out, its history and the history's
/// verdict), or why it could not.
type RunResult = Result<(Plan, PackedHistory, Verdict), SeedRunError>;

/// Why a run of a harness could not happen: its seed counts as unknown.
#[derive(Debug, thiserror::Error)]
pub enum SeedRunError {
    /// The run failed (its backends, its plan, or fencer itself: the error says which).
    #[error(transparent)]
    Run(#[from] RunError),
    /// Two runs of the same plan recorded different histories.
    #[error("{}", .0.describe())]
    Nondeterministic(Divergence),
    /// No tokio runtime could be started for real time: what the OS said, as text, so a
    /// report stays safe to hand across `catch_unwind` (an `io::Error` is not).
    #[error("cannot start a tokio runtime: {0}")]
    Runtime(String),
    /// The runner did not keep the history a report hands back.
    #[error("the history was not kept")]
    HistoryNotKept,
}

/// What a run of a harness was: a seed, or a saved regression.
enum Label {
    Seed(u64),
    Regression(PathBuf),
}

/// Parses `7` or `3..9`; `None` for anything else.
fn parse_seeds(text: &str) -> Option<Range<u64>> {
    let number = |part: &str| part.trim().parse::<u64>().ok();
    match text.split_once("..") {
        Some((start, end)) => Some(number(start)?..number(end)?),
        None => {
            let seed = number(text)?;
            Some(seed..seed + 1)
        }
    }
}

/// One run's result.
#[derive(Debug)]
pub struct SeedRun {
    /// The seed.
    pub seed: u64,
    /// The saved regression it replayed, if it was one.
    pub regression: Option<PathBuf>,
    /// The history and its verdict, or why the run could not happen.
    pub outcome: Result<(History, Verdict), SeedRunError>,
    /// Where the run was saved (failing runs only).
    pub saved: Option<PathBuf>,
    /// The plan as it ran.
    pub plan: Option<Plan>,
    /// What shrinking achieved, for the first failure of its anomaly class.
    pub shrunk: Option<ShrinkRecord>,
}

impl SeedRun {
    /// Faults of the seed's plan the backends could not take, left out of its run (none when
    /// the run could not happen).
    pub fn left_out(&self) -> &[LeftOut] {
        self.plan
            .as_ref()
            .map_or(&[], |plan| plan.left_out.as_slice())
    }

    fn label(&self) -> String {
        match &self.regression {
            Some(path) => format!("regression {}", path.display()),
            None => format!("seed {}", self.seed),
        }
    }
}

/// What a [`Harness::run`] found, run by run.
#[derive(Debug)]
pub struct Report {
    name: String,
    allow_unknown: bool,
    /// Every run's result, in order: saved regressions first, then the seeds.
    pub runs: Vec<SeedRun>,
}

impl Report {
    /// The worst verdict over all runs; a run that could not happen counts as unknown.
    pub fn validity(&self) -> Validity {
        self.runs
            .iter()
            .map(|run| match &run.outcome {
                Ok((_, verdict)) => verdict.validity,
                Err(_) => Validity::Unknown,
            })
            .fold(Validity::Valid, Validity::worst)
    }

    /// Every fault left out of the seeds' plans, added up over the seeds by family, target and
    /// reason: what this report did not test.
    pub fn left_out(&self) -> Vec<LeftOut> {
        let mut total = Vec::new();
        for run in &self.runs {
            add_left_out(&mut total, run.left_out());
        }
        total
    }

    /// Runs whose history proved an anomaly or that could not run.
    pub fn failures(&self) -> impl Iterator<Item = &SeedRun> {
        self.runs.iter().filter(|run| match &run.outcome {
            Ok((_, verdict)) => verdict.validity == Validity::Invalid,
            Err(_) => true,
        })
    }

    /// Runs whose verdict is unknown: nothing proven wrong, but unknown outcomes could hide an
    /// anomaly.
    pub fn unknowns(&self) -> impl Iterator<Item = &SeedRun> {
        self.runs.iter().filter(
            |run| matches!(&run.outcome, Ok((_, verdict)) if verdict.validity == Validity::Unknown),
        )
    }

    /// Panics, failing the calling test, if any run proved an anomaly or could not run, or
    /// (unless [`Harness::allow_unknown`]) ended unknown. The message gives each failure's first
    /// explanation, where its run was saved with its timeline, its minimal plan, and the
    /// command that runs that seed again; for an unknown verdict, which checks could not
    /// conclude and why.
    #[track_caller]
    pub fn assert_valid(&self) {
        let failures: Vec<&SeedRun> = self.failures().collect();
        let unknowns: Vec<&SeedRun> = if self.allow_unknown {
            Vec::new()
        } else {
            self.unknowns().collect()
        };
        if !failures.is_empty() || !unknowns.is_empty() {
            panic!("{}", self.failure_message(&failures, &unknowns));
        }
    }

    /// The command that runs `run` again.
    fn replay_line(&self, run: &SeedRun) -> String {
        match &run.regression {
            Some(path) => format!(
                "the saved regression {} runs first in every run of `{}`",
                path.display(),
                self.name
            ),
            None => format!("{SEED_ENV}={} cargo test {}", run.seed, self.name),
        }
    }

    fn failure_message(&self, failures: &[&SeedRun], unknowns: &[&SeedRun]) -> String {
        let mut message = format!(
            "fencer: {} of {} runs of `{}` failed{}",
            failures.len(),
            self.runs.len(),
            self.name,
            if unknowns.is_empty() {
                String::new()
            } else {
                format!(
                    ", {} ended unknown (Harness::allow_unknown lets them pass)",
                    unknowns.len()
                )
            }
        );
        for run in failures.iter().chain(unknowns) {
            match &run.outcome {
                Ok((_, verdict)) => {
                    let _ = write!(
                        message,
                        "\n  {}: {}",
                        run.label(),
                        escape(&verdict.summary_line())
                    );
                    if let Some(anomaly) = verdict.first_failure() {
                        let _ = write!(
                            message,
                            "\n    {}: {}",
                            anomaly.class,
                            escape(&anomaly.explanation)
                        );
                    }
                    for (class, why) in verdict.inconclusive() {
                        match why {
                            Some(why) => write!(
                                message,
                                "\n    {class} could not conclude: {}",
                                escape(&why.describe())
                            ),
                            None => write!(message, "\n    {class} could not conclude"),
                        }
                        .expect("writing to a String cannot fail");
                    }
                }
                Err(error) => {
                    let _ = write!(message, "\n  {}: could not run: {error}", run.label());
                }
            }
            if let Some(dir) = &run.saved {
                let _ = write!(
                    message,
                    "\n    saved: {} (timeline: {})",
                    dir.display(),
                    dir.join("timeline.html").display()
                );
            }
            if let Some(shrunk) = &run.shrunk {
                let _ = write!(message, "\n    minimal plan: {}", shrunk.plan);
            }
            let _ = write!(message, "\n    replay: {}", self.replay_line(run));
        }
        for left in self.left_out() {
            let _ = write!(message, "\n  left out: {left}");
        }
        message
    }

    /// One line: worst verdict and per-validity counts.
    pub fn summary(&self) -> String {
        let count = |validity| {
            self.runs
                .iter()
                .filter(|run| matches!(&run.outcome, Ok((_, v)) if v.validity == validity))
                .count()
        };
        let errors = self.runs.iter().filter(|run| run.outcome.is_err()).count();
        let mut summary = format!(
            "{}: {} runs, {} valid, {} invalid, {} unknown, {} could not run",
            self.validity().name(),
            self.runs.len(),
            count(Validity::Valid),
            count(Validity::Invalid),
            count(Validity::Unknown),
            errors
        );
        let left_out = self.left_out();
        if !left_out.is_empty() {
            let named: Vec<String> = left_out.iter().map(LeftOut::to_string).collect();
            let _ = write!(summary, "; left out: {}", named.join("; "));
        }
        summary
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_time_draws_real_time_cycles_and_simulated_time_full_ones() {
        use fencer_backends::{LeaseRules, SimLeaseService, SqliteStore, StoreRules};
        use fencer_harness::{LocalClock, NodeClock, Recorder, TrueClock};
        let truth = TrueClock::start();
        let lock = SimLeaseService::new(
            LocalClock::new(truth, NodeClock::with_offset(0)),
            Arc::new(Recorder::new(truth)),
            LeaseRules::Reference,
        );
        let harness = Harness::new(
            lock,
            SqliteStore::in_memory(StoreRules::Fenced, None).unwrap(),
        );
        let simulated = harness.plan(4);
        let real = harness.real_time().plan(4);
        assert_eq!(
            simulated.settings.cycle_shape,
            fencer_workloads::CycleShape::Full
        );
        assert_eq!(
            real.settings.cycle_shape,
            fencer_workloads::CycleShape::RealTime
        );
        assert_ne!(simulated.workers, real.workers);
    }

    #[test]
    fn seed_ranges_parse_from_the_environment_form() {
        assert_eq!(parse_seeds("7"), Some(7..8));
        assert_eq!(parse_seeds("3..9"), Some(3..9));
        assert_eq!(parse_seeds("x"), None);
        assert_eq!(parse_seeds("3..x"), None);
    }
}
