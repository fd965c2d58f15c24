//! One gate from start to end: replay the saved regressions, run the seeds on every core,
//! keep and explain each failing run, shrink the first failure of each anomaly class, save the
//! failing plans as regressions, and write `gate.json` (and JUnit). The command line and the
//! `cargo test` [`crate::Harness`] both run a gate this way; they differ only in how they
//! show progress ([`Observer`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use fencer_checkers::AnomalyClass;
use fencer_harness::terminal::escape;
use fencer_results::save::{FinishedRun, save_run, save_unfinished};
use fencer_results::staging;
use fencer_results::{check_dir_writable, check_run_place};
use fencer_run::plan::Plan;
use fencer_run::reach::add_left_out;
use fencer_run::settings::Settings;
use fencer_run::{Backends, Launch, RunError, Time, Unfinished};

use crate::junit::junit_xml;
use crate::minimize::{Against, minimize};
use crate::regressions::{self, Regression, RegressionError, write_atomically};
use crate::runner::{BatchEnd, KeptRun, Outcome, PlanResult, RunnerConfig, run_batch};
use crate::seeds::{SeedRange, Shard, ShardSeeds};
use crate::shrink::ShrinkLimits;
use crate::summary::{FailureKind, FailureRecord, GateEnd, GateSummary, Tally};

/// Everything one gate needs.
#[derive(Clone, Debug)]
pub struct GateConfig {
    /// Where the settings' backend names resolve.
    pub backends: Backends,
    /// The settings every seed starts from (`seed` unused).
    pub base: Settings,
    /// Each seed also draws its fault mix.
    pub swarm: bool,
    /// Warnings fail too.
    pub strict: bool,
    /// The seeds asked for.
    pub seeds: SeedRange,
    /// This gate's shard of them.
    pub shard: Shard,
    /// Runs at once (at least 1).
    pub jobs: usize,
    /// Run every seed even after a failure.
    pub keep_going: bool,
    /// Stop starting seeds after this long.
    pub time: Option<Duration>,
    /// Run every seed twice and compare the histories.
    pub check_determinism: bool,
    /// Where `gate.json` and failing runs go (created; must not hold anything yet).
    pub out: PathBuf,
    /// The regressions folder, or `None` to neither replay nor save regressions.
    pub regressions: Option<PathBuf>,
    /// Shrinking bounds, or `None` not to shrink.
    pub shrink: Option<ShrinkLimits>,
    /// Where to write a JUnit report.
    pub junit: Option<PathBuf>,
    /// The command that runs the program, for the reproduce lines (`fencer`, or a user's own
    /// binary or `cargo test` line).
    pub program: String,
}

/// What a gate shows as it goes.
pub trait Observer {
    /// A batch of `total` runs starts (`None`: bounded by time only).
    fn batch(&mut self, what: &'static str, total: Option<usize>);
    /// One run of the batch finished.
    fn ran(&mut self, failed: bool);
    /// The batch is over.
    fn batch_done(&mut self);
    /// A line for the person watching (a failure, a shrink, a saved regression).
    fn say(&mut self, line: &str);
}

/// Why a gate could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    /// Something asked of it cannot be done: the message says what to change.
    #[error("{0}")]
    BadInput(String),
    /// A saved regression cannot be read.
    #[error(transparent)]
    Regressions(#[from] RegressionError),
    /// The gate ran, but its summary (or JUnit report) could not be written: the summary is
    /// here to be shown, and it names where the failing runs were kept.
    #[error("{path}: cannot write the gate's results: {source}")]
    Unsaved {
        /// What the gate found.
        summary: Box<GateSummary>,
        /// The file that could not be written.
        path: String,
        /// What the OS said.
        source: std::io::Error,
    },
    /// Its results could not be written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What the OS said.
        source: std::io::Error,
    },
}

/// Runs the gate `config` describes; `interrupted` stops it between runs (the running ones
/// finish, the summary says it is incomplete). Returns the summary, also written to
/// `<out>/gate.json`.
pub fn run_gate(
    config: &GateConfig,
    observer: &mut dyn Observer,
    interrupted: &AtomicBool,
) -> Result<GateSummary, GateError> {
    if config.seeds.end.is_none() && config.time.is_none() {
        return Err(GateError::BadInput(format!(
            "--seeds {} has no end: give an end (e.g. {}..{}) or a --time budget",
            config.seeds,
            config.seeds.start,
            config.seeds.start + 1000
        )));
    }
    if config.jobs == 0 {
        return Err(GateError::BadInput("--jobs must be at least 1".into()));
    }
    let out = &config.out;
    check_places(out, config.junit.as_deref())?;
    let saved = match &config.regressions {
        Some(dir) => regressions::load(dir, &config.base)?,
        None => Vec::new(),
    };
    std::fs::create_dir_all(out).map_err(io_error(out))?;
    let started = Instant::now();
    let mut gate = Gate {
        config,
        observer,
        summary: GateSummary::empty(
            config.base.clone(),
            config.swarm,
            config.seeds,
            vec![config.shard],
        ),
        failed_plans: Vec::new(),
    };
    let runner = RunnerConfig {
        backends: config.backends.clone(),
        strict: config.strict,
        jobs: config.jobs,
        keep_going: config.keep_going,
        deadline: config.time.map(|time| started + time),
        check_determinism: config.check_determinism,
        keep_histories: false,
    };
    let mut end = BatchEnd::Finished;
    if !saved.is_empty() {
        let folder = config.regressions.as_deref().unwrap_or(Path::new(""));
        gate.observer.say(&format!(
            "replaying {} saved regression(s) from {}",
            saved.len(),
            folder.display()
        ));
        end = gate.run_regressions(&saved, &runner, interrupted);
    }
    let stop = end != BatchEnd::Finished || (gate.summary.failed() && !config.keep_going);
    if !stop {
        end = gate.run_seeds(&runner, interrupted);
    }
    match end {
        BatchEnd::Interrupted => {
            gate.summary.complete = false;
            gate.summary.ended = GateEnd::Interrupted;
        }
        BatchEnd::OutOfTime => gate.summary.ended = GateEnd::OutOfTime,
        BatchEnd::Finished if gate.summary.failed() && !config.keep_going => {
            gate.summary.ended = GateEnd::FirstFailure;
        }
        BatchEnd::Finished => {}
    }
    gate.summary.wall_s = started.elapsed().as_secs_f64();
    if let Some(limits) = config.shrink
        && !gate.failed_plans.is_empty()
    {
        let shrinking = Instant::now();
        gate.shrink_failures(limits, interrupted);
        gate.summary.shrink_s = shrinking.elapsed().as_secs_f64();
    }
    gate.save_regressions();
    let summary_path = out.join("gate.json");
    let written = write_atomically(&summary_path, &gate.summary.to_json())
        .map_err(|source| (summary_path, source))
        .and_then(|()| match &config.junit {
            Some(path) => write_atomically(path, junit_xml(&gate.summary).as_bytes())
                .map_err(|source| (path.clone(), source)),
            None => Ok(()),
        });
    match written {
        Ok(()) => Ok(gate.summary),
        Err((path, source)) => Err(GateError::Unsaved {
            summary: Box::new(gate.summary),
            path: path.display().to_string(),
            source,
        }),
    }
}

/// Refuses, before any seed runs, a gate whose results have nowhere to go: `out` must be
/// able to become its directory and `junit`'s directory must take a file (the OS's own
/// words say why not).
pub fn check_places(out: &Path, junit: Option<&Path>) -> Result<(), GateError> {
    check_run_place(out).map_err(|error| GateError::BadInput(error.to_string()))?;
    if let Some(junit) = junit {
        check_dir_writable(staging::parent_dir(junit))
            .map_err(|error| GateError::BadInput(format!("--junit: {error}")))?;
    }
    Ok(())
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> GateError {
    let path = path.display().to_string();
    move |source| GateError::Io { path, source }
}

/// A gate in progress: its summary and the failing plans still to shrink and save.
struct Gate<'a> {
    config: &'a GateConfig,
    observer: &'a mut dyn Observer,
    summary: GateSummary,
    /// (index into `summary.failures`, plan, anomaly class) of invalid runs.
    failed_plans: Vec<(usize, Plan, AnomalyClass)>,
}

impl Gate<'_> {
    fn run_regressions(
        &mut self,
        saved: &[Regression],
        runner: &RunnerConfig,
        interrupted: &AtomicBool,
    ) -> BatchEnd {
        self.observer.batch("regressions", Some(saved.len()));
        let program = self.config.program.clone();
        let end = run_batch(
            saved.len(),
            &|index| saved[index].plan.clone(),
            runner,
            interrupted,
            &mut |result| {
                let regression = &saved[result.index];
                let name = regression
                    .path
                    .file_name()
                    .map_or_else(String::new, |name| name.to_string_lossy().into_owned());
                let replay = vec![format!(
                    "{program} run --plan {}",
                    regression.path.display()
                )];
                let (label, dir_name) = (
                    format!("regression {name}"),
                    format!("regression-{}", name.trim_end_matches(".json")),
                );
                if let Some(unfinished) = unfinished(&result) {
                    self.save_unfinished(&label, &dir_name, unfinished);
                    return;
                }
                let failed = self.record(result, None, &label, &dir_name, replay);
                self.observer.ran(failed);
            },
        );
        self.observer.batch_done();
        end
    }

    fn run_seeds(&mut self, runner: &RunnerConfig, interrupted: &AtomicBool) -> BatchEnd {
        let seeds = ShardSeeds::new(self.config.seeds, self.config.shard);
        let total = self.config.seeds.end.is_some().then(|| seeds.len());
        self.observer.batch("seeds", total);
        let (base, swarm) = (&self.config.base, self.config.swarm);
        let plan_for = |index: usize| {
            let seed = seeds
                .nth(index)
                .expect("the runner asks only for existing seeds");
            Plan::generate(&base.for_seed(seed, swarm))
        };
        let program = self.config.program.clone();
        let end = run_batch(seeds.len(), &plan_for, runner, interrupted, &mut |result| {
            let seed = result.plan.settings.seed;
            let (label, dir_name) = (format!("seed {seed}"), format!("seed-{seed}"));
            if let Some(unfinished) = unfinished(&result) {
                self.save_unfinished(&label, &dir_name, unfinished);
                return;
            }
            let replay_run = format!("{program} {}", base.run_command(seed, swarm));
            let failed = self.record(result, Some(seed), &label, &dir_name, vec![replay_run]);
            self.observer.ran(failed);
        });
        self.observer.batch_done();
        end
    }

    /// Counts one result; for a failure keeps its run directory and says how to reproduce
    /// it. Returns whether it failed.
    fn record(
        &mut self,
        result: PlanResult,
        seed: Option<u64>,
        label: &str,
        dir_name: &str,
        mut replay: Vec<String>,
    ) -> bool {
        let PlanResult { plan, outcome, .. } = result;
        add_left_out(&mut self.summary.left_out, &plan.left_out);
        // Real time decides what a fault hits: such a run is not replayed from its history,
        // and running it again is a chance to see the failure again, not a reproduction.
        let real_time = matches!(
            Launch::new(&self.config.backends).time(&plan),
            Ok(Time::Real)
        );
        let (kind, explanation, counts, class, divergence, run_dir) = match outcome {
            Outcome::Checked {
                verdict,
                coverage,
                events,
                kept,
            } => {
                self.summary.count_checked(seed, label, &verdict, events);
                self.summary.coverage.add(&coverage);
                let Some(KeptRun {
                    history,
                    cycle_starts_ns,
                }) = kept
                else {
                    return false;
                };
                let dir = self.config.out.join(dir_name);
                let finished = FinishedRun {
                    command: "gate",
                    plan: &plan,
                    history: &history,
                    verdict: &verdict,
                    cycle_starts_ns: &cycle_starts_ns,
                    interrupted_at_ns: None,
                };
                let run_dir = match save_run(&finished, &dir, None) {
                    Ok(()) => {
                        let program = &self.config.program;
                        let again = if real_time {
                            plan.settings.run_plan_command(&dir.join("plan.json"))
                        } else {
                            format!("replay {}", dir.display())
                        };
                        replay.insert(0, format!("{program} {again}"));
                        if real_time {
                            // One run again says little in real time; ten say how often.
                            replay
                                .insert(1, format!("{program} replay {} --runs 10", dir.display()));
                        }
                        Some(dir.display().to_string())
                    }
                    Err(error) => {
                        self.observer.say(&format!("warning: {error}"));
                        error.kept.map(|kept| kept.display().to_string())
                    }
                };
                let first = verdict.first_failure();
                (
                    FailureKind::Invalid,
                    first.map_or_else(|| verdict.summary_line(), |a| a.explanation.clone()),
                    verdict.anomaly_counts.clone(),
                    first.map(|a| a.class),
                    None,
                    run_dir,
                )
            }
            Outcome::Nondeterministic(divergence) => {
                self.summary.count_run(seed, Tally::Nondeterministic, 0);
                (
                    FailureKind::Nondeterministic,
                    divergence.describe(),
                    BTreeMap::new(),
                    None,
                    Some(divergence),
                    None,
                )
            }
            Outcome::Error(error) => {
                self.summary.count_run(seed, Tally::Error, 0);
                (
                    FailureKind::Error,
                    describe_error(&error),
                    BTreeMap::new(),
                    None,
                    None,
                    None,
                )
            }
        };
        // The explanation is escaped on its own: a line break in it must not start a line.
        let mut lines = vec![format!(
            "FAIL {label}: {}",
            match class {
                Some(class) => format!("{class}: {}", escape(&explanation)),
                None => format!("{}: {}", kind.name(), escape(&explanation)),
            }
        )];
        if self.config.strict {
            // Judged as the gate judged it, or the command would not show the failure.
            for command in &mut replay {
                command.push_str(" --strict");
            }
        }
        let again = if real_time {
            "run again (real time: it may not fail again)"
        } else {
            "reproduce"
        };
        for command in &replay {
            lines.push(format!("  {again}: {command}"));
        }
        self.observer.say(&lines.join("\n"));
        if let Some(class) = class {
            self.failed_plans
                .push((self.summary.failures.len(), plan.clone(), class));
        }
        self.summary.failures.push(FailureRecord {
            seed,
            label: label.to_string(),
            kind,
            class,
            anomaly_counts: counts,
            explanation,
            run_dir,
            replay,
            divergence,
            shrunk: None,
        });
        true
    }

    /// Saves what an interrupted real-time run recorded, in `<dir_name>-interrupted`, and says
    /// where: the run counts as no result, but the events up to the stop are how to learn why
    /// a run went on long enough to be interrupted.
    fn save_unfinished(&mut self, label: &str, dir_name: &str, unfinished: &Unfinished) {
        let dir = self.config.out.join(format!("{dir_name}-interrupted"));
        let saved = save_unfinished("gate", unfinished, self.config.strict, &dir, None);
        if let Some(error) = &saved.error {
            self.observer.say(&format!("warning: {error}"));
        }
        if let Some(line) = saved.report(
            &format!("interrupted {label}"),
            "unfinished and not counted",
        ) {
            self.observer.say(&line);
        }
    }

    /// Shrinks the first failing seed of each anomaly class (later ones of the same class are
    /// usually the same bug, and each shrink has its own time budget).
    fn shrink_failures(&mut self, limits: ShrinkLimits, interrupted: &AtomicBool) {
        let mut seen = Vec::new();
        let against = Against {
            backends: &self.config.backends,
            strict: self.config.strict,
        };
        for (position, plan, class) in &self.failed_plans {
            if seen.contains(class) || interrupted.load(Ordering::SeqCst) {
                continue;
            }
            let failure = &mut self.summary.failures[*position];
            if failure.seed.is_none() {
                continue; // A saved regression is already as small as it got.
            }
            seen.push(*class);
            let Some(dir) = failure.run_dir.clone() else {
                continue;
            };
            self.observer
                .say(&format!("shrinking {} ({class})...", failure.label));
            let events_before = failure_events(Path::new(&dir));
            match minimize(
                Path::new(&dir),
                plan,
                *class,
                events_before,
                limits,
                against,
                interrupted,
            ) {
                Ok(record) => {
                    self.observer.say(&describe_shrink(
                        &record,
                        &self.config.program,
                        self.config.strict,
                    ));
                    failure.shrunk = Some(record);
                }
                Err(error) => self
                    .observer
                    .say(&format!("cannot shrink {}: {error}", failure.label)),
            }
        }
    }

    /// Saves each invalid run's plan (its minimal plan when shrunk) in the regressions folder.
    fn save_regressions(&mut self) {
        let Some(folder) = &self.config.regressions else {
            return;
        };
        for (position, plan, class) in &self.failed_plans {
            let failure = &self.summary.failures[*position];
            if failure.seed.is_none() {
                continue; // Already a regression.
            }
            let minimal = failure
                .shrunk
                .as_ref()
                .and_then(|shrunk| regressions::load_shrunk(&shrunk.plan));
            let line =
                match regressions::save(folder, minimal.as_ref().unwrap_or(plan), class.name()) {
                    Ok(path) => format!("saved regression: {}", path.display()),
                    Err(error) => format!("warning: cannot save the regression: {error}"),
                };
            self.observer.say(&line);
        }
    }
}

/// What an interrupted real-time run recorded, when `result` is one.
fn unfinished(result: &PlanResult) -> Option<&Unfinished> {
    match &result.outcome {
        Outcome::Error(RunError::Interrupted(Some(unfinished))) => Some(unfinished),
        _ => None,
    }
}

/// What a run that could not happen says, one line.
fn describe_error(error: &RunError) -> String {
    error.to_string()
}

/// Events of a kept run, from its run.json (0 if unreadable: only used for the size report).
fn failure_events(dir: &Path) -> usize {
    fencer_results::parse_run_json::<fencer_results::RunRecord>(dir, "run.json")
        .map_or(0, |record| record.events)
}

/// What a shrink achieved: the sizes before and after, the minimal plan in words, how to run
/// it, and where its timeline is; `program` runs the minimal plan, judging warnings as
/// failures when the shrink was `strict`.
pub fn describe_shrink(
    record: &crate::summary::ShrinkRecord,
    program: &str,
    strict: bool,
) -> String {
    use fencer_harness::words::count;
    let size = |size: &crate::shrink::PlanSize, events: usize| {
        format!("{}, {}", size.in_words(), count(events, "event", "events"))
    };
    let mut lines = vec![format!(
        "shrunk ({}, {}{}): {} -> {}",
        record.class,
        count(record.candidates, "candidate", "candidates"),
        record
            .stopped_by
            .as_ref()
            .map_or(String::new(), |why| format!(", stopped by the {why}")),
        size(&record.before, record.events_before),
        size(&record.after, record.events_after),
    )];
    if !record.after_in_words.is_empty() {
        lines.push(format!("in the minimal plan: {}", record.after_in_words));
    }
    if let Some(reran) = record.reran.filter(|reran| reran.runs > 0) {
        lines.push(format!(
            "run again {} (real time: timing decides what its faults hit), the minimal plan \
             showed {} in {} of them",
            count(reran.runs, "time", "times"),
            record.class,
            reran.showed
        ));
    }
    lines.push(format!(
        "minimal plan: {} (run it: {program} run --plan {}{})",
        record.plan,
        record.plan,
        if strict { " --strict" } else { "" }
    ));
    if let Some(run) = &record.run {
        lines.push(format!(
            "timeline: {}",
            Path::new(run)
                .join(fencer_results::report::TIMELINE_FILE)
                .display()
        ));
        lines.push(format!("explain: {program} explain {run}"));
    }
    lines.join("\n")
}
