//! [`Harness`]: fencer as a library, for a user's own `cargo test`.
//!
//! A user hands over their lock service and store, picks a workload size, faults and seeds,
//! and gets a [`Report`] back; [`Report::assert_valid`] fails the test with the anomalies in
//! plain words and the command that re-runs the failing seed.
//!
//! Two ways time can pass:
//! - [`Harness::simulated_time`] (the default): one paused tokio runtime per seed. An in-memory
//!   backend that measures time with `tokio::time` runs a 10 s lease scenario in microseconds,
//!   and the same seed gives the same history.
//! - [`Harness::real_time`]: a real runtime for backends that talk to real servers. TTLs are
//!   scaled down (default 300 ms) so a seed takes about a second; replay is "the same plan
//!   again", and the saved history is the artifact.
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
use std::time::Duration;

use fencer_checkers::{Validity, Verdict};
use fencer_harness::runtime::{real_runtime, simulation_runtime};
use fencer_harness::{FencedStore, History, LatencyModel, LockService};
use fencer_nemesis::FaultKind;
use fencer_run::checking::judge;
use fencer_workloads::RenewFailurePolicy;

use fencer_results::save::{FinishedRun, default_run_dir, save_run};
use fencer_run::drive::{RunNames, drive};
use fencer_run::fit::{LeftOut, Reach, fit};
use fencer_run::plan::Plan;
use fencer_run::real::unique_tag;
use fencer_run::settings::Settings;

/// Environment variable that overrides the seed range (`7` or `3..9`): the replay command a
/// failing report prints.
pub const SEEDS_ENV: &str = "FENCER_SEEDS";

/// How time passes during a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeMode {
    /// Paused, auto-advancing tokio time; deterministic for deterministic backends.
    Simulated,
    /// Real time and I/O, for backends on real servers.
    Real,
}

/// Runs a workload and a nemesis against a user's backend over a range of seeds.
pub struct Harness {
    lock: Arc<dyn LockService>,
    store: Arc<dyn FencedStore>,
    name: String,
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
    save_failures_to: Option<PathBuf>,
}

impl Harness {
    /// A harness over `lock` and `store`: 3 workers × 20 cycles, the default faults
    /// ([`FaultKind::DEFAULT`]), seeds 0..10, simulated time.
    pub fn new(lock: impl LockService + 'static, store: impl FencedStore + 'static) -> Harness {
        Harness::from_shared(Arc::new(lock), Arc::new(store))
    }

    /// As [`Harness::new`], for backends already shared (e.g. a lock and a store on one
    /// connection).
    pub fn from_shared(lock: Arc<dyn LockService>, store: Arc<dyn FencedStore>) -> Harness {
        Harness {
            lock,
            store,
            name: "fencer".into(),
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
            save_failures_to: Some(std::env::temp_dir().join("fencer-runs")),
        }
    }

    /// Names the run in messages; use the test's name so the replay command is exact.
    pub fn name(mut self, name: &str) -> Harness {
        self.name = name.to_string();
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

    /// Seeds to run (overridden by `FENCER_SEEDS`).
    pub fn seeds(mut self, seeds: Range<u64>) -> Harness {
        self.seeds = seeds;
        self
    }

    /// Paused tokio time (the default): for in-memory backends that use `tokio::time`.
    pub fn simulated_time(mut self) -> Harness {
        self.time = TimeMode::Simulated;
        self
    }

    /// Real time: for backends on real servers.
    pub fn real_time(mut self) -> Harness {
        self.time = TimeMode::Real;
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
        Settings {
            seed,
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
            latency: if real {
                LatencyModel::NONE
            } else {
                Settings::default().latency
            },
            ..Settings::default()
        }
    }

    /// The plan one seed runs: faults on the lock server's clock are left out, since a user's
    /// backend keeps its own time, and so are restarts unless the lock service offers one;
    /// the plan names what it left out ([`Plan::left_out`]).
    pub fn plan(&self, seed: u64) -> Plan {
        fit(
            Plan::generate(&self.settings(seed)),
            Reach::of(self.lock.as_ref()),
        )
    }

    /// Runs every seed (or those in `FENCER_SEEDS`) and checks each history.
    pub fn run(&self) -> Report {
        let seeds = match std::env::var(SEEDS_ENV) {
            Ok(text) => parse_seeds(&text).unwrap_or_else(|error| panic!("{SEEDS_ENV}: {error}")),
            Err(_) => self.seeds.clone(),
        };
        let mut report = Report {
            name: self.name.clone(),
            runs: Vec::new(),
        };
        // Real backends keep connections on the runtime that opened them, so real time uses one
        // runtime for every seed; simulated time gets a fresh one per seed so a seed replays alone.
        let shared_real = match self.time {
            TimeMode::Real => Some(real_runtime()),
            TimeMode::Simulated => None,
        };
        for seed in seeds {
            let plan = self.plan(seed);
            let outcome = match plan.check() {
                Err(message) => Err(message),
                Ok(()) => {
                    let names = match self.time {
                        TimeMode::Simulated => RunNames::tagged(&format!("s{seed}")),
                        TimeMode::Real => RunNames::tagged(&unique_tag(seed)),
                    };
                    let job = drive(
                        Arc::new(plan.clone()),
                        Arc::clone(&self.lock),
                        Arc::clone(&self.store),
                        names,
                    );
                    match &shared_real {
                        Some(Ok(runtime)) => runtime.block_on(job),
                        Some(Err(error)) => {
                            return Report::failed_to_start(&self.name, seed, error);
                        }
                        None => simulation_runtime().block_on(job),
                    }
                    .map_err(|error| error.to_string())
                }
            };
            let run = match outcome {
                Ok(history) => {
                    let verdict = judge(&plan.settings, &history, false);
                    let saved = self.save_if_failed(&plan, &history, &verdict);
                    SeedRun {
                        seed,
                        outcome: Ok((history, verdict)),
                        saved,
                        left_out: plan.left_out,
                    }
                }
                Err(message) => SeedRun {
                    seed,
                    outcome: Err(message),
                    saved: None,
                    left_out: plan.left_out,
                },
            };
            report.runs.push(run);
        }
        report
    }

    fn save_if_failed(&self, plan: &Plan, history: &History, verdict: &Verdict) -> Option<PathBuf> {
        if verdict.validity != Validity::Invalid {
            return None;
        }
        let root = self.save_failures_to.as_ref()?;
        let dir = default_run_dir(root, &self.name, &plan.settings.seed.to_string());
        let finished = FinishedRun {
            command: "cargo-test",
            plan,
            history,
            verdict,
        };
        save_run(&finished, &dir, None).ok().map(|()| dir)
    }
}

/// Parses `7` or `3..9`.
fn parse_seeds(text: &str) -> Result<Range<u64>, String> {
    let number = |part: &str| {
        part.trim()
            .parse::<u64>()
            .map_err(|_| format!("expected a seed like 7 or a range like 3..9, found `{text}`"))
    };
    match text.split_once("..") {
        Some((start, end)) => Ok(number(start)?..number(end)?),
        None => {
            let seed = number(text)?;
            Ok(seed..seed + 1)
        }
    }
}

/// One seed's result.
#[derive(Debug)]
pub struct SeedRun {
    /// The seed.
    pub seed: u64,
    /// The history and its verdict, or why the run could not happen.
    pub outcome: Result<(History, Verdict), String>,
    /// Where the run was saved (failing runs only).
    pub saved: Option<PathBuf>,
    /// Faults the seed drew that the backends cannot take, left out of its plan.
    pub left_out: Vec<LeftOut>,
}

/// What a [`Harness::run`] found, seed by seed.
#[derive(Debug)]
pub struct Report {
    name: String,
    /// Every seed's result, in order.
    pub runs: Vec<SeedRun>,
}

impl Report {
    fn failed_to_start(name: &str, seed: u64, error: &std::io::Error) -> Report {
        Report {
            name: name.to_string(),
            runs: vec![SeedRun {
                seed,
                outcome: Err(format!("cannot start a tokio runtime: {error}")),
                saved: None,
                left_out: Vec::new(),
            }],
        }
    }

    /// The worst verdict over all seeds; a run that could not happen counts as unknown.
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
        let mut total: Vec<LeftOut> = Vec::new();
        for left in self.runs.iter().flat_map(|run| &run.left_out) {
            match total.iter_mut().find(|seen| {
                (seen.family, &seen.target, &seen.why) == (left.family, &left.target, &left.why)
            }) {
                Some(seen) => seen.faults += left.faults,
                None => total.push(left.clone()),
            }
        }
        total
    }

    /// Seeds whose history proved an anomaly or that could not run.
    pub fn failures(&self) -> impl Iterator<Item = &SeedRun> {
        self.runs.iter().filter(|run| match &run.outcome {
            Ok((_, verdict)) => verdict.validity == Validity::Invalid,
            Err(_) => true,
        })
    }

    /// Panics, failing the calling test, if any seed proved an anomaly or could not run. The
    /// message gives each failure's first explanation, where its run was saved, and the command
    /// that runs that seed again. `unknown` verdicts (lost replies that could hide an anomaly)
    /// do not fail: they are honest, not wrong.
    #[track_caller]
    pub fn assert_valid(&self) {
        let failures: Vec<&SeedRun> = self.failures().collect();
        if !failures.is_empty() {
            panic!("{}", self.failure_message(&failures));
        }
    }

    fn failure_message(&self, failures: &[&SeedRun]) -> String {
        let mut message = format!(
            "fencer: {} of {} seeds of `{}` failed",
            failures.len(),
            self.runs.len(),
            self.name
        );
        for run in failures {
            match &run.outcome {
                Ok((_, verdict)) => {
                    let _ = write!(message, "\n  seed {}: {}", run.seed, verdict.summary_line());
                    if let Some(anomaly) = verdict.anomalies.first() {
                        let _ = write!(message, "\n    {}: {}", anomaly.class, anomaly.explanation);
                    }
                }
                Err(error) => {
                    let _ = write!(message, "\n  seed {}: could not run: {error}", run.seed);
                }
            }
            if let Some(dir) = &run.saved {
                let _ = write!(message, "\n    saved: {}", dir.display());
            }
            let _ = write!(
                message,
                "\n    replay: {SEEDS_ENV}={} cargo test {}",
                run.seed, self.name
            );
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
            "{}: {} seeds, {} valid, {} invalid, {} unknown, {} could not run",
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
    fn seed_ranges_parse_from_the_environment_form() {
        assert_eq!(parse_seeds("7"), Ok(7..8));
        assert_eq!(parse_seeds("3..9"), Ok(3..9));
        assert!(parse_seeds("x").unwrap_err().contains("found `x`"));
    }
}
