//! `fencer replay`: run a saved run's plan again. In simulated time the new history must be
//! byte-identical to the stored one; in real time the servers' timing is not fencer's to fix,
//! so the plan runs again against the same backends (fresh servers for `private:` ones) and
//! the new history is the artifact.

use std::path::PathBuf;

use clap::Args;
use fencer_harness::history::sha256_hex;
use fencer_harness::terminal::escape_lines;
use fencer_results::{RunRecord, parse_run_json, read_run_file};
use fencer_run::checking::judge;
use fencer_run::settings::shell_word;
use fencer_run::{Launch, Time};

use super::output::outln;
use super::{Context, Failure, Outcome, summary};
use crate::Plan;

/// `fencer replay`'s flags.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The run directory (e.g. runs/latest).
    dir: PathBuf,
    /// Root of the run archive, where a real-time run's new directory goes.
    #[arg(long, default_value = super::DEFAULT_ARCHIVE, visible_alias = "store-dir")]
    archive: PathBuf,
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
    if launch.time(&plan)? == Time::Real {
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
        let args = super::RunArgs::replaying(plan_path, args.archive.clone());
        return super::run::run(&args, context);
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
    let verdict = judge(&plan.settings, &history, false);
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
