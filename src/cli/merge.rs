//! `fencer merge DIR…`: one summary and one JUnit file from the `gate.json` of every shard.

use std::path::PathBuf;

use clap::Args;
use fencer_gate::junit::junit_xml;
use fencer_gate::regressions::write_atomically;
use fencer_gate::summary::{GateSummary, merge};
use fencer_results::parse_run_json;

use super::gate::print_summary;
use super::{Failure, Outcome};

/// `fencer merge`'s flags.
#[derive(Args, Debug)]
pub struct MergeArgs {
    /// The shards' gate directories (each with a gate.json).
    #[arg(required = true)]
    dirs: Vec<PathBuf>,
    /// Write the merged summary here (gate.json format).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Write JUnit XML here.
    #[arg(long)]
    junit: Option<PathBuf>,
}

/// Merges the shards; exits as the merged gate would have.
pub fn merge_command(args: &MergeArgs) -> Outcome {
    let mut parts = Vec::new();
    for dir in &args.dirs {
        let summary: GateSummary = parse_run_json(dir, "gate.json")
            .map_err(|error| Failure::BadInput(error.to_string()))?;
        parts.push((dir.join("gate.json").display().to_string(), summary));
    }
    let merged = merge(&parts).map_err(Failure::bad_input)?;
    let write = |path: &PathBuf, bytes: &[u8]| {
        write_atomically(path, bytes)
            .map_err(|error| Failure::BadInput(format!("{}: {error}", path.display())))
    };
    if let Some(path) = &args.out {
        write(path, &merged.to_json())?;
    }
    if let Some(path) = &args.junit {
        write(path, junit_xml(&merged).as_bytes())?;
    }
    print_summary(&merged, args.out.as_deref());
    Ok(merged.exit_code())
}
