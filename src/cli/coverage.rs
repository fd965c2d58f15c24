//! `fencer coverage DIR…`: which race windows saved runs and gates reached, added up.

use std::path::PathBuf;

use clap::Args;
use fencer_checkers::coverage::CoverageTally;
use fencer_gate::summary::GateSummary;
use fencer_harness::terminal::escape;
use fencer_results::{RunRecord, parse_run_json};

use super::output::outln;
use super::{Failure, Outcome};

/// `fencer coverage`'s flags.
#[derive(Args, Debug)]
pub struct CoverageArgs {
    /// Run directories (each with a run.json) and gate directories (each with a gate.json).
    #[arg(required = true)]
    dirs: Vec<PathBuf>,
}

/// Adds up the coverage of every directory and prints it, one line per window kind and width;
/// windows no run reached are printed as never reached, and those no run could measure (no
/// lock service log) as not measured.
pub fn coverage_command(args: &CoverageArgs) -> Outcome {
    let mut tally = CoverageTally::default();
    for dir in &args.dirs {
        if dir.join("gate.json").is_file() {
            let summary: GateSummary = parse_run_json(dir, "gate.json")
                .map_err(|error| Failure::BadInput(error.to_string()))?;
            tally.merge(&summary.coverage);
            continue;
        }
        let record: RunRecord = parse_run_json(dir, "run.json")
            .map_err(|error| Failure::BadInput(error.to_string()))?;
        let Some(coverage) = record.coverage else {
            return Err(Failure::BadInput(format!(
                "{}: saved by a fencer that did not count coverage; run it again with \
                 `fencer replay {}`",
                dir.join("run.json").display(),
                dir.display()
            )));
        };
        tally.add(&coverage);
    }
    outln!(
        "coverage over {} run{}:",
        tally.runs,
        if tally.runs == 1 { "" } else { "s" }
    );
    for line in tally.lines() {
        outln!("  {}", escape(&line));
    }
    Ok(0)
}
