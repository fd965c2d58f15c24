//! `fencer gate`: the CI regression gate. Replays the saved regressions, then runs a seed range
//! on every core; on a failure keeps the run directory, prints the commands that reproduce it,
//! shrinks it and saves it as a regression; writes `gate.json` (and JUnit) and a summary table.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::{Plan, Settings};
use clap::Args;
use fencer_gate::junit::junit_xml;
use fencer_gate::regressions::{self, Regression, write_atomically};
use fencer_gate::runner::{BatchEnd, Outcome as RunOutcome, PlanResult, RunnerConfig, run_batch};
use fencer_gate::seeds::{SeedRange, Shard, ShardSeeds};
use fencer_gate::summary::{FailureKind, FailureRecord, GateEnd, GateSummary, Tally};
use fencer_results::save::{FinishedRun, save_run};
use fencer_results::{Archive, utc_stamp};
use fencer_run::settings::{format_duration, parse_duration};

use super::progress::Progress;
use super::shrink::{ShrinkFlags, print_record, shrink_failure};
use super::{Failure, Outcome, SettingsArgs, describe, run_command, settings_for_seed};

/// Seeds a gate runs when given neither `--seeds` nor `--time`.
const DEFAULT_SEEDS: &str = "0..100";

/// Set by the SIGINT handler: stop starting runs, finish the running ones, write the summary.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// `fencer gate`'s flags.
#[derive(Args, Debug)]
pub struct GateArgs {
    /// Seeds to run: A..B (B excluded), A..=B, a single seed, or A.. with --time
    /// [default: 0..100, or 0.. with --time].
    #[arg(long)]
    seeds: Option<SeedRange>,
    /// Stop starting new seeds after this long (e.g. 5m); running ones finish.
    #[arg(long, value_parser = parse_duration)]
    time: Option<u64>,
    /// Seeds simulated at once, each on its own thread [default: all cores].
    #[arg(long)]
    jobs: Option<usize>,
    /// Run every seed even after a failure (default: stop at the first failing seed).
    #[arg(long)]
    keep_going: bool,
    /// Run only shard K of N (seeds with seed % N == K - 1), e.g. 2/4 in a CI matrix.
    #[arg(long, default_value = "1/1")]
    shard: Shard,
    /// Simulate every seed twice and fail (exit 255) if the histories differ.
    #[arg(long)]
    check_determinism: bool,
    /// Write a JUnit XML report here.
    #[arg(long)]
    junit: Option<PathBuf>,
    /// Directory for gate.json and failing runs (default: <archive>/gate/<UTC time>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Root of the run archive, where saved runs live (`--store-dir` is its old name).
    #[arg(long, default_value = super::DEFAULT_ARCHIVE, visible_alias = "store-dir")]
    archive: PathBuf,
    /// Folder of saved failing plans, replayed before the seeds; commit it.
    #[arg(long, default_value = "fencer-regressions")]
    regressions: PathBuf,
    /// Neither replay nor save regressions.
    #[arg(long)]
    no_regressions: bool,
    /// Do not shrink failures.
    #[arg(long)]
    no_shrink: bool,
    #[command(flatten)]
    shrink: ShrinkFlags,
    #[command(flatten)]
    settings: SettingsArgs,
}

/// Runs the gate.
pub fn gate(args: &GateArgs) -> Outcome {
    args.settings.simulated_only("gate")?;
    let base = args.settings.base();
    for warning in base.validate().map_err(Failure::bad_input)? {
        eprintln!("warning: {warning}");
    }
    let range = match (args.seeds, args.time) {
        (Some(range), _) => range,
        (None, None) => DEFAULT_SEEDS.parse().expect("the default range parses"),
        (None, Some(_)) => "0..".parse().expect("an open range parses"),
    };
    if range.end.is_none() && args.time.is_none() {
        return Err(Failure::BadInput(format!(
            "--seeds {range} has no end: give an end (e.g. {}..{}) or a --time budget",
            range.start,
            range.start + 1000
        )));
    }
    let jobs = match args.jobs {
        Some(0) => return Err(Failure::BadInput("--jobs must be at least 1".into())),
        Some(jobs) => jobs,
        None => std::thread::available_parallelism().map_or(1, usize::from),
    };
    let out = match &args.out {
        Some(dir) => dir.clone(),
        None => Archive::new(&args.archive).run_dir("gate", "gate", &utc_stamp(now_s())),
    };
    if std::fs::read_dir(&out).is_ok_and(|mut entries| entries.next().is_some()) {
        return Err(Failure::BadInput(format!(
            "{}: already exists and is not empty; choose another --out",
            out.display()
        )));
    }
    let regressions = if args.no_regressions {
        Vec::new()
    } else {
        regressions::load(&args.regressions, &base)
            .map_err(|error| Failure::BadInput(error.to_string()))?
    };
    std::fs::create_dir_all(&out)
        .map_err(|error| Failure::BadInput(format!("{}: {error}", out.display())))?;
    install_interrupt_handler();

    let started = Instant::now();
    let mut gate = Gate {
        args,
        base: base.clone(),
        out: out.clone(),
        summary: GateSummary::empty(base.clone(), args.settings.swarm, range, vec![args.shard]),
        failed_plans: Vec::new(),
    };
    let seeds = ShardSeeds::new(range, args.shard);
    println!(
        "fencer gate: seeds {range}{} ({} jobs{}{}), {}",
        if args.shard == Shard::ALL {
            String::new()
        } else {
            format!(", shard {}", args.shard)
        },
        jobs,
        args.time
            .map_or(String::new(), |ns| format!(", for {}", format_duration(ns))),
        if args.settings.swarm { ", swarm" } else { "" },
        describe(&base).replacen(" seed 0", "", 1),
    );
    let config = RunnerConfig {
        jobs,
        keep_going: args.keep_going,
        deadline: args.time.map(|ns| started + Duration::from_nanos(ns)),
        check_determinism: args.check_determinism,
    };
    let mut end = BatchEnd::Finished;
    if !regressions.is_empty() {
        println!(
            "replaying {} saved regression(s) from {}",
            regressions.len(),
            args.regressions.display()
        );
        end = gate.run_regressions(&regressions, &config);
    }
    let stop = end != BatchEnd::Finished || (gate.summary.failed() && !args.keep_going);
    if !stop {
        end = gate.run_seeds(seeds, &config);
    }
    match end {
        BatchEnd::Interrupted => {
            gate.summary.complete = false;
            gate.summary.ended = GateEnd::Interrupted;
        }
        BatchEnd::OutOfTime => gate.summary.ended = GateEnd::OutOfTime,
        BatchEnd::Finished if gate.summary.failed() && !args.keep_going => {
            gate.summary.ended = GateEnd::FirstFailure;
        }
        BatchEnd::Finished => {}
    }
    gate.summary.wall_s = started.elapsed().as_secs_f64();
    if !args.no_shrink && !gate.failed_plans.is_empty() {
        let shrinking = Instant::now();
        gate.shrink_failures();
        gate.summary.shrink_s = shrinking.elapsed().as_secs_f64();
    }
    gate.save_regressions();
    let summary_path = out.join("gate.json");
    write_atomically(&summary_path, &gate.summary.to_json())
        .map_err(|error| Failure::BadInput(format!("{}: {error}", summary_path.display())))?;
    if let Some(path) = &args.junit {
        write_atomically(path, junit_xml(&gate.summary).as_bytes())
            .map_err(|error| Failure::BadInput(format!("{}: {error}", path.display())))?;
    }
    print_summary(&gate.summary, Some(&summary_path));
    if gate.summary.ended == GateEnd::Interrupted {
        // However much failed before the interrupt, the gate did not finish: unknown.
        return Ok(2);
    }
    Ok(gate.summary.exit_code())
}

fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

fn install_interrupt_handler() {
    // A second Ctrl-C stops at once; the run directories already written are complete
    // (they are written atomically), the summary is not.
    let _ = ctrlc::set_handler(|| {
        if INTERRUPTED.swap(true, Ordering::SeqCst) {
            std::process::exit(2);
        }
        eprintln!("interrupted: finishing the running seeds, then writing the summary");
    });
}

/// A gate in progress: its summary and the failing plans still to shrink and save.
struct Gate<'a> {
    args: &'a GateArgs,
    base: Settings,
    out: PathBuf,
    summary: GateSummary,
    /// (index into `summary.failures`, plan, anomaly class) of invalid runs.
    failed_plans: Vec<(usize, Plan, fencer_checkers::AnomalyClass)>,
}

impl Gate<'_> {
    fn run_regressions(&mut self, regressions: &[Regression], config: &RunnerConfig) -> BatchEnd {
        let mut progress = Progress::new("regressions", Some(regressions.len()));
        let end = run_batch(
            regressions.len(),
            &|index| regressions[index].plan.clone(),
            config,
            &INTERRUPTED,
            &mut |result| {
                let regression = &regressions[result.index];
                let name = regression
                    .path
                    .file_name()
                    .map_or_else(String::new, |name| name.to_string_lossy().into_owned());
                let label = format!("regression {name}");
                let replay = vec![format!("fencer run --plan {}", regression.path.display())];
                let failed = self.record(
                    result,
                    None,
                    &label,
                    &format!("regression-{}", name.trim_end_matches(".json")),
                    replay,
                    &progress,
                );
                progress.advance(failed);
            },
        );
        progress.finish();
        end
    }

    fn run_seeds(&mut self, seeds: ShardSeeds, config: &RunnerConfig) -> BatchEnd {
        let total = (self.summary.seeds.end.is_some()).then(|| seeds.len());
        let mut progress = Progress::new("seeds", total);
        let (base, swarm) = (self.base.clone(), self.args.settings.swarm);
        let plan_for = |index: usize| {
            let seed = seeds
                .nth(index)
                .expect("the runner asks only for existing seeds");
            Plan::generate(&settings_for_seed(&base, seed, swarm))
        };
        let end = run_batch(
            seeds.len(),
            &plan_for,
            config,
            &INTERRUPTED,
            &mut |result| {
                let seed = result.plan.settings.seed;
                let replay_run = run_command(&base, seed, swarm);
                let failed = self.record(
                    result,
                    Some(seed),
                    &format!("seed {seed}"),
                    &format!("seed-{seed}"),
                    vec![replay_run],
                    &progress,
                );
                progress.advance(failed);
            },
        );
        progress.finish();
        end
    }

    /// Counts one result; for a failure keeps its run directory and prints how to reproduce
    /// it. Returns whether it failed.
    fn record(
        &mut self,
        result: PlanResult,
        seed: Option<u64>,
        label: &str,
        dir_name: &str,
        mut replay: Vec<String>,
        progress: &Progress,
    ) -> bool {
        let PlanResult { plan, outcome, .. } = result;
        let (kind, explanation, counts, class, divergence, run_dir) = match outcome {
            RunOutcome::Checked {
                verdict,
                events,
                history,
            } => {
                self.summary
                    .count_run(seed, verdict.validity.into(), events);
                for (class, count) in &verdict.anomaly_counts {
                    *self.summary.anomalies.entry(class.clone()).or_default() += *count as u64;
                }
                let Some(history) = history else {
                    return false;
                };
                let dir = self.out.join(dir_name);
                let finished = FinishedRun {
                    command: "gate",
                    plan: &plan,
                    history: &history,
                    verdict: &verdict,
                };
                let run_dir = match save_run(&finished, &dir, None) {
                    Ok(()) => {
                        replay.insert(0, format!("fencer replay {}", dir.display()));
                        Some(dir.display().to_string())
                    }
                    Err(error) => {
                        progress.println(&format!("warning: cannot keep the run: {error}"));
                        None
                    }
                };
                let first = verdict.anomalies.first();
                (
                    FailureKind::Invalid,
                    first.map_or_else(|| verdict.summary_line(), |a| a.explanation.clone()),
                    verdict.anomaly_counts.clone(),
                    first.map(|a| a.class),
                    None,
                    run_dir,
                )
            }
            RunOutcome::Nondeterministic(divergence) => {
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
            RunOutcome::Error(error) => {
                self.summary.count_run(seed, Tally::Error, 0);
                (
                    FailureKind::Error,
                    error.to_string(),
                    BTreeMap::new(),
                    None,
                    None,
                    None,
                )
            }
        };
        let mut lines = vec![format!(
            "FAIL {label}: {}",
            match class {
                Some(class) => format!("{class}: {explanation}"),
                None => format!("{}: {explanation}", kind.name()),
            }
        )];
        for command in &replay {
            lines.push(format!("  reproduce: {command}"));
        }
        progress.println(&lines.join("\n"));
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

    /// Shrinks the first failing seed of each anomaly class (later ones of the same class are
    /// usually the same bug, and each shrink has its own time budget).
    fn shrink_failures(&mut self) {
        let mut seen = Vec::new();
        for (position, plan, class) in &self.failed_plans {
            if seen.contains(class) || INTERRUPTED.load(Ordering::SeqCst) {
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
            println!("shrinking {} ({class})...", failure.label);
            let events_before = failure_events(Path::new(&dir));
            match shrink_failure(
                Path::new(&dir),
                plan,
                *class,
                events_before,
                self.args.shrink.limits(),
                &INTERRUPTED,
            ) {
                Ok(record) => {
                    print_record(&record);
                    failure.shrunk = Some(record);
                }
                Err(Failure::BadInput(message) | Failure::Internal(message)) => {
                    println!("cannot shrink {}: {message}", failure.label);
                }
            }
        }
    }

    /// Saves each invalid run's plan (its minimal plan when shrunk) in the regressions folder.
    fn save_regressions(&self) {
        if self.args.no_regressions {
            return;
        }
        for (position, plan, class) in &self.failed_plans {
            let failure = &self.summary.failures[*position];
            if failure.seed.is_none() {
                continue; // Already a regression.
            }
            let minimal = failure.shrunk.as_ref().and_then(|shrunk| {
                let bytes = std::fs::read(&shrunk.plan).ok()?;
                Plan::from_json(&bytes, &shrunk.plan).ok()
            });
            match regressions::save(
                &self.args.regressions,
                minimal.as_ref().unwrap_or(plan),
                class.name(),
            ) {
                Ok(path) => println!("saved regression: {}", path.display()),
                Err(error) => eprintln!("warning: cannot save the regression: {error}"),
            }
        }
    }
}

/// Events of a kept run, from its run.json (0 if unreadable: only used for the size report).
fn failure_events(dir: &Path) -> usize {
    fencer_results::parse_run_json::<fencer_results::RunRecord>(dir, "run.json")
        .map_or(0, |record| record.events)
}

/// The summary table printed at the end of a gate (and of a merge).
pub fn print_summary(summary: &GateSummary, path: Option<&Path>) {
    let shards: Vec<String> = summary.shards.iter().map(ToString::to_string).collect();
    println!(
        "gate summary: seeds {} (shard {}): {}",
        summary.seeds,
        shards.join(", "),
        if summary.complete {
            summary.ended.name().to_string()
        } else {
            format!("INCOMPLETE ({})", summary.ended.name())
        }
    );
    let row = |name: &str, value: String| println!("  {name:<16} {value}");
    row(
        "seeds run",
        format!(
            "{}{}",
            summary.seeds_run,
            if summary.regressions_run > 0 {
                format!(" (+{} regressions)", summary.regressions_run)
            } else {
                String::new()
            }
        ),
    );
    row("events", summary.events.to_string());
    let verdicts: Vec<String> = summary
        .validity
        .iter()
        .map(|(tally, count)| format!("{count} {}", tally.name()))
        .collect();
    row("verdicts", verdicts.join(", "));
    let anomalies: Vec<String> = summary
        .anomalies
        .iter()
        .map(|(class, count)| format!("{class} {count}"))
        .collect();
    row(
        "anomalies",
        if anomalies.is_empty() {
            "none".into()
        } else {
            anomalies.join(", ")
        },
    );
    let failing: Vec<&str> = summary.failures.iter().map(|f| f.label.as_str()).collect();
    if !failing.is_empty() {
        row("failing", failing.join(", "));
    }
    row("wall time", format!("{:.2} s", summary.wall_s));
    if summary.shrink_s > 0.0 {
        row("shrinking", format!("{:.2} s", summary.shrink_s));
    }
    row("runs/s", format!("{:.1}", summary.runs_per_s()));
    if let Some(path) = path {
        row("summary", path.display().to_string());
    }
}
