//! Running many plans on every core, with results that do not depend on the job count.
//!
//! Jobs are plain threads, each simulating one plan at a time on its own current-thread
//! runtime. Work is handed out in index order from one counter, and results are passed back in
//! index order, so the caller sees exactly the sequence `--jobs 1` would produce. When the
//! gate stops at the first failure, every index below the failing one still runs (a lower
//! index may fail too), and everything above it is dropped: the reported first failure is the
//! lowest failing index, whatever the number of jobs.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use fencer_checkers::coverage::{Coverage, coverage};
use fencer_checkers::{Validity, Verdict};
use fencer_harness::PackedHistory;

use crate::divergence::{Divergence, first_divergence};
use crate::jobs::{ThreadFor, job_count, named_thread, spawn_jobs};
use fencer_run::plan::Plan;
use fencer_run::{Backends, Launch, Launched, RunError};

/// How to run a batch of plans.
#[derive(Clone, Debug)]
pub struct RunnerConfig {
    /// Where the plans' backend names resolve.
    pub backends: Backends,
    /// Warnings fail the verdict too.
    pub strict: bool,
    /// Threads running plans at once (at least 1; [`job_count`] caps it).
    pub jobs: usize,
    /// Run everything even after a failure.
    pub keep_going: bool,
    /// Stop handing out new plans after this instant (`--time`).
    pub deadline: Option<Instant>,
    /// Simulate each plan twice and compare the histories.
    pub check_determinism: bool,
    /// Keep every history, not only the failing ones' (a `cargo test` report hands them back).
    pub keep_histories: bool,
}

/// What became of one plan.
#[derive(Debug)]
pub struct PlanResult {
    /// Position in the batch.
    pub index: usize,
    /// What ran: the plan without the faults its backends could not take, which it names
    /// ([`Plan::left_out`]).
    pub plan: Plan,
    /// What happened to it.
    pub outcome: Outcome,
}

/// The result of simulating and checking one plan.
#[derive(Debug)]
pub enum Outcome {
    /// The run completed and was checked.
    Checked {
        /// What the checkers said (boxed: it is most of the variant's size).
        verdict: Box<Verdict>,
        /// The race windows the history reached.
        coverage: Coverage,
        /// Number of events in the history.
        events: usize,
        /// What the run recorded, kept when the verdict is invalid (to save the run directory)
        /// or when asked for every run.
        kept: Option<KeptRun>,
    },
    /// Two runs of the same plan recorded different histories.
    Nondeterministic(Divergence),
    /// The simulation itself failed.
    Error(RunError),
}

impl Outcome {
    /// Whether this result stops a gate that does not `--keep-going`.
    pub fn is_failure(&self) -> bool {
        match self {
            Outcome::Checked { verdict, .. } => verdict.validity == Validity::Invalid,
            Outcome::Nondeterministic(_) | Outcome::Error(_) => true,
        }
    }
}

/// What a run recorded that its run directory is saved from.
#[derive(Debug)]
pub struct KeptRun {
    /// The history.
    pub history: PackedHistory,
    /// When each worker began each cycle ([`Launched::cycle_starts_ns`]).
    pub cycle_starts_ns: Vec<Vec<u64>>,
}

/// How a batch ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchEnd {
    /// Every plan ran (or the batch stopped at its first failure, as asked).
    Finished,
    /// The time budget ran out before every plan ran.
    OutOfTime,
    /// `interrupted` was raised (SIGINT).
    Interrupted,
}

/// Runs plans `0..count` (`plan_for(i)` builds plan `i`) and hands each result to `on_result`
/// on the calling thread, in index order. Plans already running when the batch is stopped
/// (failure, deadline) finish first, so every reported result is complete; an interrupt stops
/// real-time runs where they are, and each hands on what it recorded as
/// [`RunError::Interrupted`], a result of no seed.
///
/// The plans run on [`job_count`] threads; when the system grants fewer, on as many as it
/// grants, and when it grants none, one after another on the calling thread.
pub fn run_batch(
    count: usize,
    plan_for: &(dyn Fn(usize) -> Plan + Sync),
    config: &RunnerConfig,
    interrupted: &AtomicBool,
    on_result: &mut dyn FnMut(PlanResult),
) -> BatchEnd {
    batch_on(
        count,
        plan_for,
        config,
        interrupted,
        on_result,
        &named_thread,
    )
}

/// [`run_batch`] on job threads made by `thread_for`.
fn batch_on(
    count: usize,
    plan_for: &(dyn Fn(usize) -> Plan + Sync),
    config: &RunnerConfig,
    interrupted: &AtomicBool,
    on_result: &mut dyn FnMut(PlanResult),
    thread_for: ThreadFor<'_>,
) -> BatchEnd {
    let next = AtomicUsize::new(0);
    // Lowest failing index seen so far; no index above it is started.
    let limit = AtomicUsize::new(usize::MAX);
    let out_of_time = AtomicBool::new(false);
    let (sender, receiver) = mpsc::channel::<PlanResult>();
    let work = |sender: mpsc::Sender<PlanResult>| {
        loop {
            if interrupted.load(Ordering::SeqCst) {
                return;
            }
            if config
                .deadline
                .is_some_and(|deadline| Instant::now() >= deadline)
            {
                out_of_time.store(true, Ordering::SeqCst);
                return;
            }
            let index = next.fetch_add(1, Ordering::SeqCst);
            if index >= count || index > limit.load(Ordering::SeqCst) {
                return;
            }
            let (plan, outcome) = run_one(&plan_for(index), config);
            if outcome.is_failure() && !config.keep_going {
                limit.fetch_min(index, Ordering::SeqCst);
            }
            let result = PlanResult {
                index,
                plan,
                outcome,
            };
            if sender.send(result).is_err() {
                return;
            }
        }
    };
    std::thread::scope(|scope| {
        let jobs = job_count(config.jobs, count);
        if spawn_jobs(scope, jobs, thread_for, &sender, &work) == 0 {
            work(sender.clone());
        }
        drop(sender);
        let mut pending = BTreeMap::new();
        let mut emit_next = 0usize;
        let mut stopped_at_failure = false;
        let mut stopped_by_interrupt = false;
        for result in receiver {
            pending.insert(result.index, result);
            while let Some(result) = pending.remove(&emit_next) {
                emit_next += 1;
                // A real-time run stopped by the interrupt is no result: it neither passed nor
                // failed, and the batch ends interrupted without it. What it recorded is still
                // handed on (to be saved), as the error it is.
                if let Outcome::Error(RunError::Interrupted(recorded)) = &result.outcome {
                    stopped_by_interrupt = true;
                    if recorded.is_some() {
                        on_result(result);
                    }
                    continue;
                }
                if stopped_at_failure {
                    continue;
                }
                let failed = result.outcome.is_failure();
                on_result(result);
                stopped_at_failure = failed && !config.keep_going;
            }
        }
        if stopped_at_failure || (emit_next >= count && !stopped_by_interrupt) {
            BatchEnd::Finished
        } else if stopped_by_interrupt || interrupted.load(Ordering::SeqCst) {
            BatchEnd::Interrupted
        } else if out_of_time.load(Ordering::SeqCst) {
            BatchEnd::OutOfTime
        } else {
            BatchEnd::Finished
        }
    })
}

/// Runs and checks one plan (twice, comparing histories, when asked); returns the plan as it
/// ran (without the faults its backends could not take, which it names) and what became of it.
pub fn run_one(plan: &Plan, config: &RunnerConfig) -> (Plan, Outcome) {
    let launch = Launch::new(&config.backends);
    let launched = match launch.run(plan) {
        Ok(launched) => launched,
        Err(error) => return (plan.clone(), Outcome::Error(error)),
    };
    if config.check_determinism {
        let again = match launch.run(plan) {
            Ok(again) => again,
            Err(error) => return (launched.plan, Outcome::Error(error)),
        };
        if let Some(divergence) = first_divergence(&launched.history, &again.history) {
            return (launched.plan, Outcome::Nondeterministic(divergence));
        }
    }
    checked(launched, config.strict, config.keep_histories)
}

/// Judges what `launched` recorded (warnings fail under `strict`), keeping the history and
/// the cycle starts when the verdict is invalid or `keep` asks for them; returns the plan as
/// it ran and the outcome.
fn checked(launched: Launched, strict: bool, keep: bool) -> (Plan, Outcome) {
    let Launched {
        plan,
        history,
        cycle_starts_ns,
        ..
    } = launched;
    let verdict = fencer_run::checking::judge(&plan.settings, &history, strict);
    let coverage = coverage(&history, plan.settings.ttl_ns);
    let events = history.len();
    let kept = (keep || verdict.validity == Validity::Invalid).then_some(KeptRun {
        history,
        cycle_starts_ns,
    });
    let outcome = Outcome::Checked {
        verdict: Box::new(verdict),
        coverage,
        events,
        kept,
    };
    (plan, outcome)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencer_run::settings::{Settings, StoreBackend};
    use fencer_workloads::RenewFailurePolicy;

    fn mutant(seed: u64) -> Plan {
        Plan::generate(&Settings {
            seed,
            ops_per_worker: 5,
            store: StoreBackend::SqliteUnfenced.into(),
            on_renew_failure: RenewFailurePolicy::Continue,
            nemesis: [fencer_nemesis::FaultKind::Pause].into_iter().collect(),
            ..Settings::default()
        })
    }

    fn failing_indexes(jobs: usize, keep_going: bool) -> Vec<usize> {
        failing_indexes_on(jobs, keep_going, &named_thread)
    }

    fn failing_indexes_on(jobs: usize, keep_going: bool, thread_for: ThreadFor<'_>) -> Vec<usize> {
        let config = RunnerConfig {
            backends: Backends::new(),
            strict: false,
            keep_histories: false,
            jobs,
            keep_going,
            deadline: None,
            check_determinism: false,
        };
        let mut seen = Vec::new();
        let mut failing = Vec::new();
        batch_on(
            40,
            &|index| mutant(index as u64),
            &config,
            &AtomicBool::new(false),
            &mut |result| {
                seen.push(result.index);
                if result.outcome.is_failure() {
                    failing.push(result.index);
                }
            },
            thread_for,
        );
        assert!(
            seen.windows(2).all(|pair| pair[0] + 1 == pair[1]),
            "{seen:?}"
        );
        failing
    }

    #[test]
    fn results_arrive_in_index_order_and_do_not_depend_on_jobs() {
        let all = failing_indexes(1, true);
        assert!(
            all.len() >= 2,
            "the mutant must fail on a few seeds: {all:?}"
        );
        assert_eq!(failing_indexes(3, true), all);
        assert_eq!(failing_indexes(1, false), all[..1]);
        assert_eq!(failing_indexes(3, false), all[..1]);
    }

    #[test]
    fn a_system_that_grants_fewer_threads_gets_the_same_results_on_fewer_or_none() {
        let all = failing_indexes(1, true);
        let first_only = |job: usize| {
            if job == 0 {
                named_thread(job)
            } else {
                crate::jobs::tests::unstartable(job)
            }
        };
        assert_eq!(failing_indexes_on(3_000, true, &first_only), all);
        let none = crate::jobs::tests::unstartable;
        assert_eq!(failing_indexes_on(3, true, &none), all);
        assert_eq!(failing_indexes_on(3, false, &none), all[..1]);
    }

    #[test]
    fn an_interrupted_batch_starts_nothing() {
        let mut results = 0;
        let end = run_batch(
            5,
            &|index| mutant(index as u64),
            &RunnerConfig {
                backends: Backends::new(),
                strict: false,
                keep_histories: false,
                jobs: 2,
                keep_going: true,
                deadline: None,
                check_determinism: false,
            },
            &AtomicBool::new(true),
            &mut |_| results += 1,
        );
        assert_eq!((end, results), (BatchEnd::Interrupted, 0));
    }
}
