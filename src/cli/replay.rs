//! `fencer replay`: run a saved run's plan again. In simulated time the new history must be
//! byte-identical to the stored one; in real time the servers' timing is not fencer's to fix,
//! so the plan runs again against the same backends (fresh servers for `private:` ones) and
//! the new history is the artifact. `--runs N` runs it N times and counts, per class the saved
//! run failed with, the runs that showed it: how often a real-time failure comes back.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Args;
use fencer_harness::history::sha256_hex;
use fencer_harness::terminal::escape_lines;
use fencer_results::{RunRecord, parse_run_json, read_run_file};
use fencer_run::checking::judge;
use fencer_run::settings::shell_word;
use fencer_run::{Launch, Time};

use super::output::outln;
use super::{Context, Failure, Outcome, summary};
use crate::{Plan, Validity, Verdict};

/// `fencer replay`'s flags.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The run directory (e.g. runs/latest).
    dir: PathBuf,
    /// Root of the run archive, where a real-time run's new directory goes.
    #[arg(long, default_value = super::DEFAULT_ARCHIVE, visible_alias = "store-dir")]
    archive: PathBuf,
    /// Run a real-time run's plan this many times, each saved as a run of its own, and count
    /// the runs that showed each class the saved run failed with: timing decides what a
    /// real-time plan's faults hit, so one run again says little. Exits with the worst verdict.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    runs: u32,
    /// Fail on warnings too, as `run --strict` and `gate --strict` do: how a strict gate's
    /// saved run was judged.
    #[arg(long)]
    strict: bool,
}

/// Replays the run in `args.dir`.
pub fn replay(args: &ReplayArgs, context: &mut Context) -> Outcome {
    let dir = &args.dir;
    if !dir.is_dir() {
        return Err(Failure::BadInput(format!(
            "{}: not a run directory (expected a directory with run.json, plan.json, history.jsonl)",
            dir.display()
        )));
    }
    let bad = |error: fencer_results::RunDirError| Failure::BadInput(error.to_string());
    let record: RunRecord = parse_run_json(dir, "run.json").map_err(bad)?;
    let plan_path = dir.join("plan.json");
    let plan_bytes = read_run_file(dir, "plan.json").map_err(bad)?;
    let plan = Plan::from_json(&plan_bytes, &plan_path.display().to_string())
        .map_err(Failure::bad_input)?;
    let launch = Launch {
        note: std::sync::Arc::new(|line: &str| outln!("{}", escape_lines(line))),
        ..Launch::new(&context.backends)
    };
    let real_time = launch.time(&plan)? == Time::Real;
    if args.runs > 1 && !real_time {
        return Err(Failure::BadInput(format!(
            "--runs {}: {} is a simulated run, whose replay is byte-identical every time: one \
             run tells all (drop --runs)",
            args.runs,
            dir.display()
        )));
    }
    if real_time {
        let hidden = [&plan.settings.lock, &plan.settings.store]
            .into_iter()
            .find(|name| name.as_str().contains(":***@"));
        if let Some(name) = hidden {
            return Err(Failure::BadInput(format!(
                "{}: the run's backend {name} was saved with its password hidden; run its plan \
                 again with: {} run --plan {} --lock {} --store {} (put the passwords back)",
                dir.display(),
                context.program,
                plan_path.display(),
                shell_word(plan.settings.lock.as_str()),
                shell_word(plan.settings.store.as_str())
            )));
        }
        outln!(
            "{}: a real-time run: its plan runs again, against fresh ones of the servers fencer \
             starts (real time cannot repeat a history byte for byte: the new one is the \
             artifact)",
            dir.display()
        );
        let saved: Verdict = parse_run_json(dir, "verdict.json").map_err(bad)?;
        let run_args = super::RunArgs::replaying(plan_path, args.archive.clone(), args.strict);
        if args.runs == 1 {
            return super::run::run(&run_args, context);
        }
        return run_again(&run_args, args.runs, &saved, context);
    }
    let stored_bytes = read_run_file(dir, "history.jsonl").map_err(bad)?;
    let stored_hash = sha256_hex(&stored_bytes);
    if stored_hash != record.history_sha256 {
        return Err(Failure::BadInput(format!(
            "{}: sha256 {stored_hash} does not match run.json's {}: the run directory was modified",
            dir.join("history.jsonl").display(),
            record.history_sha256
        )));
    }
    let history = launch.run(&plan)?.history;
    let replayed = history.to_jsonl();
    let replayed_hash = sha256_hex(&replayed);
    outln!("stored   history sha256 {stored_hash}");
    outln!("replayed history sha256 {replayed_hash}");
    if replayed != stored_bytes {
        let line = first_difference(&stored_bytes, &replayed);
        if let Some(why) = plan.replays_differently() {
            return Err(Failure::BadInput(format!(
                "replay diverged from the stored history at line {line}: {why}. Record the run \
                 again from its plan: {} run --plan {}",
                context.program,
                shell_word(&plan_path.display().to_string())
            )));
        }
        return Err(Failure::Internal(format!(
            "replay diverged from the stored history at line {line}: the simulation is not \
             deterministic for this plan (please report it with the run directory)"
        )));
    }
    outln!("identical: {} events", history.len());
    let verdict = judge(&plan.settings, &history, args.strict);
    let detail = summary::Detail {
        verbose: false,
        explain: Some(format!("{} explain {}", context.program, dir.display())),
        takes_verbose: false,
    };
    summary::print_summary(
        &summary::Shape::of_packed(&history),
        &verdict,
        summary::Took::Untimed,
        &detail,
    );
    Ok(verdict.validity.exit_code())
}

/// Runs a real-time plan `runs` times and tells how many runs showed each class `saved` (the
/// recorded run's verdict) failed with, or how many were valid when it was valid. A run that
/// cannot run, or an interrupt, ends the series: the runs done are told, then the error.
fn run_again(args: &super::RunArgs, runs: u32, saved: &Verdict, context: &mut Context) -> Outcome {
    let mut tally = Tally::of(saved);
    for run in 1..=runs {
        outln!("run {run} of {runs}:");
        match super::run::run_saved(args, context) {
            Ok(done) => tally.add(&done.verdict, &done.dir),
            Err(failure) => {
                outln!("{}", tally.describe());
                return Err(failure);
            }
        }
    }
    outln!("{}", tally.describe());
    Ok(tally.worst.exit_code())
}

/// What a series of runs of one plan showed, against the saved run's classes.
struct Tally {
    /// The classes the saved run failed with, each with what the runs found of it.
    showed: BTreeMap<String, Seen>,
    /// The saved run's verdict.
    saved: Validity,
    /// How many runs ended valid, invalid and unknown, in that order.
    ended: [usize; 3],
    worst: Validity,
}

/// What the runs found of one class: the runs that failed with it, and how many more found it
/// only as a warning (judged without `--strict`).
#[derive(Default)]
struct Seen {
    failed: Vec<PathBuf>,
    warned: usize,
}

impl Tally {
    fn of(saved: &Verdict) -> Tally {
        Tally {
            showed: saved
                .anomaly_counts
                .keys()
                .map(|class| (class.clone(), Seen::default()))
                .collect(),
            saved: saved.validity,
            ended: [0; 3],
            worst: Validity::Valid,
        }
    }

    fn add(&mut self, verdict: &Verdict, dir: &Path) {
        self.ended[Tally::slot(verdict.validity)] += 1;
        self.worst = self.worst.worst(verdict.validity);
        for (class, seen) in &mut self.showed {
            if verdict.anomaly_counts.contains_key(class) {
                seen.failed.push(dir.to_path_buf());
            } else if verdict.warning_counts.contains_key(class) {
                seen.warned += 1;
            }
        }
    }

    fn slot(validity: Validity) -> usize {
        match validity {
            Validity::Valid => 0,
            Validity::Invalid => 1,
            Validity::Unknown => 2,
        }
    }

    /// One line per saved class (`the saved run's stale-ownership-check: in 7 of 10 runs
    /// (first: runs/mutex/real-3-…)`), then how the runs ended beside the saved run.
    fn describe(&self) -> String {
        let runs: usize = self.ended.iter().sum();
        let mut lines = Vec::new();
        for (class, seen) in &self.showed {
            let first = seen
                .failed
                .first()
                .map(|dir| format!(" (first: {})", dir.display()))
                .unwrap_or_default();
            let mut line = format!(
                "the saved run's {class}: in {} of {runs} runs{first}",
                seen.failed.len()
            );
            let warned = seen.warned;
            if warned > 0 {
                line.push_str(&format!(
                    "; as a warning only in {warned} more (the saved run was judged with \
                     --strict: add it)"
                ));
            }
            lines.push(line);
        }
        let [valid, invalid, unknown] = self.ended;
        lines.push(format!(
            "of {runs} runs: {valid} valid, {invalid} invalid, {unknown} unknown (the saved run: \
             {})",
            self.saved.name()
        ));
        lines.join("\n")
    }
}

/// 1-based line of the first difference between two JSONL texts.
fn first_difference(stored: &[u8], replayed: &[u8]) -> usize {
    let mut stored_lines = stored.split(|&b| b == b'\n');
    let mut replayed_lines = replayed.split(|&b| b == b'\n');
    let mut line = 1;
    loop {
        match (stored_lines.next(), replayed_lines.next()) {
            (Some(a), Some(b)) if a == b => line += 1,
            _ => return line,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(validity: &str, anomalies: &[&str], warnings: &[&str]) -> Verdict {
        let counts = |classes: &[&str]| {
            classes
                .iter()
                .map(|class| (class.to_string(), 1))
                .collect::<BTreeMap<_, _>>()
        };
        serde_json::from_value(serde_json::json!({
            "validity": validity,
            "events": 10,
            "anomaly_counts": counts(anomalies),
            "warning_counts": counts(warnings),
            "anomalies": [],
            "checkers": [],
        }))
        .unwrap()
    }

    #[test]
    fn each_saved_class_is_counted_over_the_runs_and_a_warning_only_run_is_told_apart() {
        let saved = verdict("invalid", &["silent-lease-loss", "lost-update"], &[]);
        let mut tally = Tally::of(&saved);
        tally.add(
            &verdict("invalid", &["silent-lease-loss"], &[]),
            Path::new("a"),
        );
        tally.add(
            &verdict("valid", &[], &["silent-lease-loss"]),
            Path::new("b"),
        );
        tally.add(&verdict("unknown", &[], &[]), Path::new("c"));
        tally.add(
            &verdict("invalid", &["silent-lease-loss"], &[]),
            Path::new("d"),
        );
        assert_eq!(
            tally.describe(),
            "the saved run's lost-update: in 0 of 4 runs\n\
             the saved run's silent-lease-loss: in 2 of 4 runs (first: a); as a warning only \
             in 1 more (the saved run was judged with --strict: add it)\n\
             of 4 runs: 1 valid, 2 invalid, 1 unknown (the saved run: invalid)"
        );
        assert_eq!(tally.worst, Validity::Invalid);
    }

    #[test]
    fn a_saved_run_without_anomalies_is_told_beside_how_the_runs_ended() {
        for saved in ["valid", "unknown"] {
            let mut tally = Tally::of(&verdict(saved, &[], &[]));
            tally.add(&verdict("valid", &[], &[]), Path::new("a"));
            tally.add(&verdict("unknown", &[], &[]), Path::new("b"));
            assert_eq!(
                tally.describe(),
                format!("of 2 runs: 1 valid, 0 invalid, 1 unknown (the saved run: {saved})")
            );
            assert_eq!(tally.worst, Validity::Unknown);
        }
    }
}
