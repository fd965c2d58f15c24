//! `fencer gate`: the CI regression gate. Replays the saved regressions, then runs a seed range
//! on every core; on a failure keeps the run directory, prints the commands that reproduce it,
//! shrinks it and saves it as a regression; writes `gate.json` (and JUnit) and a summary table.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::signals::{Arrival, Signals};
use crate::Plan;
use clap::Args;
use fencer_checkers::coverage::CoverageTally;
use fencer_gate::jobs::job_count;
use fencer_gate::seeds::{SeedRange, Shard, ShardSeeds};
use fencer_gate::summary::{GateEnd, GateSummary};
use fencer_gate::{GateConfig, GateError, Observer, check_places, run_gate};
use fencer_harness::terminal::{escape, escape_lines};
use fencer_results::{Archive, utc_stamp};
use fencer_run::settings::{format_duration, parse_duration};
use fencer_run::{Launch, Time};

use super::output::{errln, outln};
use super::progress::Progress;
use super::shrink::ShrinkFlags;
use super::{Context, Failure, Outcome, SettingsArgs};

/// Seeds a gate runs when given neither `--seeds` nor `--time`.
const DEFAULT_SEEDS: &str = "0..100";

/// Set by the SIGINT, SIGTERM and SIGHUP handler: stop starting runs, finish the running ones,
/// write the summary.
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
    /// Seeds run at once, each on its own thread; at most the number of seeds, and 256
    /// [default: all cores; 1 in real time].
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
    /// Fail on warnings too (superseded-write-accepted, fencing's documented limit).
    #[arg(long)]
    strict: bool,
    /// Do not shrink failures.
    #[arg(long)]
    no_shrink: bool,
    #[command(flatten)]
    shrink: ShrinkFlags,
    #[command(flatten)]
    settings: SettingsArgs,
}

/// Runs the gate.
pub fn gate(args: &GateArgs, context: &mut Context) -> Outcome {
    let out = match &args.out {
        Some(dir) => dir.clone(),
        None => Archive::new(&args.archive).run_dir("gate", "gate", &utc_stamp(now_s())),
    };
    // Before a plan is drawn, which takes a while for a large one.
    check_places(&out, args.junit.as_deref()).map_err(Failure::bad_input)?;
    let base = args.settings.base(&mut context.backends);
    for warning in base.validate().map_err(Failure::bad_input)? {
        errln!("warning: {warning}");
    }
    let time = Launch::new(&context.backends).time(&Plan::generate(&base))?;
    let base = match time {
        Time::Real => base.in_real_time(),
        Time::Simulated => base,
    };
    if time == Time::Real && args.check_determinism {
        return Err(Failure::BadInput(
            "--check-determinism compares two runs byte for byte: only the simulation tier \
             repeats itself, and these backends run in real time"
                .into(),
        ));
    }
    let seeds = match (args.seeds, args.time) {
        (Some(range), _) => range,
        (None, None) => DEFAULT_SEEDS.parse().expect("the default range parses"),
        (None, Some(_)) => "0..".parse().expect("an open range parses"),
    };
    let jobs = match (args.jobs, time) {
        (Some(jobs), _) => jobs,
        (None, Time::Simulated) => std::thread::available_parallelism().map_or(1, usize::from),
        // Real-time runs share the machine's timing: one at a time unless asked.
        (None, Time::Real) => 1,
    };
    // No more threads than seeds to run, nor than a batch starts (`--jobs 0` is refused by
    // the gate itself).
    let jobs = match jobs {
        0 => 0,
        jobs => job_count(jobs, ShardSeeds::new(seeds, args.shard).len()),
    };
    let config = GateConfig {
        backends: context.backends.clone(),
        base,
        swarm: args.settings.swarm,
        strict: args.strict,
        seeds,
        shard: args.shard,
        jobs,
        keep_going: args.keep_going,
        time: args.time.map(Duration::from_nanos),
        check_determinism: args.check_determinism,
        out: out.clone(),
        regressions: (!args.no_regressions).then(|| args.regressions.clone()),
        shrink: (!args.no_shrink).then(|| args.shrink.limits()),
        junit: args.junit.clone(),
        program: context.program.clone(),
    };
    outln!(
        "{} gate: seeds {seeds}{} ({jobs} jobs{}{}{}), {}",
        context.program,
        if args.shard == Shard::ALL {
            String::new()
        } else {
            format!(", shard {}", args.shard)
        },
        args.time
            .map_or(String::new(), |ns| format!(", for {}", format_duration(ns))),
        if args.settings.swarm { ", swarm" } else { "" },
        if time == Time::Real {
            ", real time"
        } else {
            ""
        },
        config.base.describe().replacen(" seed 0", "", 1),
    );
    install_interrupt_handler();
    let mut observer = Watch::default();
    let summary = match run_gate(&config, &mut observer, &INTERRUPTED) {
        Ok(summary) => summary,
        Err(GateError::Unsaved {
            summary,
            path,
            source,
        }) => {
            // What the gate found is shown all the same; the file it could not write is the
            // user's to look into.
            print_summary(&summary, None);
            return Err(Failure::BadInput(format!(
                "{path}: cannot write the gate's results: {source}; the failing runs are                  where the summary above names them"
            )));
        }
        Err(error @ GateError::Io { .. }) => return Err(Failure::internal(error)),
        Err(error) => return Err(Failure::bad_input(error)),
    };
    print_summary(&summary, Some(&out.join("gate.json")));
    if summary.ended == GateEnd::Interrupted {
        // However much failed before the interrupt, the gate did not finish: unknown.
        return Ok(2);
    }
    Ok(summary.exit_code())
}

fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

fn install_interrupt_handler() {
    // Ctrl-C, and the SIGTERM a CI runner or Kubernetes sends to stop a job (or the SIGHUP of a
    // closed terminal), end the gate with its summary. Simulated seeds under way finish (in
    // moments); real-time ones stop where they are and tear down every server, cluster and
    // client child they started, as `fencer run` does, since one can wait on a stuck lock
    // for its whole budget; they are left out of the summary. A second signal
    // (`Arrival::Again`) stops at once; the run directories already written are complete
    // (they are written atomically), the summary is not.
    let signals = Signals::default();
    let _ = ctrlc::set_handler(move || {
        match signals.arrived() {
            Arrival::First => INTERRUPTED.store(true, Ordering::SeqCst),
            Arrival::Repeat => return,
            Arrival::Again => std::process::exit(2),
        }
        if fencer_run::interrupt::request() {
            errln!(
                "interrupted: stopping the running real-time seeds and tearing down their \
                 servers, then writing the summary"
            );
        } else {
            errln!("interrupted: finishing the running seeds, then writing the summary");
        }
    });
}

/// The gate's progress on the terminal: a bar per batch, lines printed above it.
#[derive(Default)]
struct Watch {
    progress: Option<Progress>,
}

impl Observer for Watch {
    fn batch(&mut self, what: &'static str, total: Option<usize>) {
        self.progress = Some(Progress::new(what, total));
    }

    fn ran(&mut self, failed: bool) {
        if let Some(progress) = &mut self.progress {
            progress.advance(failed);
        }
    }

    fn batch_done(&mut self) {
        if let Some(progress) = self.progress.take() {
            progress.finish();
        }
    }

    fn say(&mut self, line: &str) {
        let line = escape_lines(line);
        match &self.progress {
            Some(progress) => progress.println(&line),
            None => outln!("{line}"),
        }
    }
}

/// The summary table printed at the end of a gate (and of a merge).
/// The race windows a gate's runs reached, one line per kind and width, those never reached
/// said so, those no run could measure said so; nothing for a summary that counted none
/// (written before coverage was).
pub fn print_coverage(tally: &CoverageTally) {
    if tally.runs == 0 {
        return;
    }
    outln!("  coverage (race windows reached):");
    for line in tally.lines() {
        outln!("    {}", escape(&line));
    }
}

pub fn print_summary(summary: &GateSummary, path: Option<&Path>) {
    let shards: Vec<String> = summary.shards.iter().map(ToString::to_string).collect();
    outln!(
        "gate summary: seeds {} (shard {}): {}",
        summary.seeds,
        shards.join(", "),
        if summary.complete {
            summary.ended.name().to_string()
        } else {
            format!("INCOMPLETE ({})", summary.ended.name())
        }
    );
    let row = |name: &str, value: String| outln!("  {name:<16} {}", escape(&value));
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
    if summary.runs_without_grant > 0 {
        row(
            "no lease",
            format!(
                "in {} of the runs no acquire was answered as granted: no worker in them was \
                 told it held a lease, so their verdicts test nothing a lock protects",
                summary.runs_without_grant
            ),
        );
    }
    let by_class = |counts: &BTreeMap<String, u64>| {
        counts
            .iter()
            .map(|(class, count)| format!("{class} {count}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    row(
        "anomalies",
        if summary.anomalies.is_empty() {
            "none".into()
        } else {
            by_class(&summary.anomalies)
        },
    );
    if !summary.warnings.is_empty() {
        row(
            "warnings",
            format!(
                "{} (they fail only under --strict)",
                by_class(&summary.warnings)
            ),
        );
    }
    print_coverage(&summary.coverage);
    const SHOWN_UNKNOWNS: usize = 3;
    for unknown in summary.unknowns.iter().take(SHOWN_UNKNOWNS) {
        row(
            "unknown",
            format!("{}: {}", unknown.label, unknown.inconclusive),
        );
    }
    if summary.unknowns.len() > SHOWN_UNKNOWNS {
        row(
            "",
            format!(
                "... {} more in gate.json",
                summary.unknowns.len() - SHOWN_UNKNOWNS
            ),
        );
    }
    for left in &summary.left_out {
        row("left out", left.to_string());
    }
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
