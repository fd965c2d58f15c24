//! Printing what a run found: counts, the verdict, the first anomalies in plain words, and
//! where to read the rest. Warnings (findings that fail only a strict check) are counted on
//! the verdict line and told in full only on request, so a valid run reads as valid.

use crate::Verdict;
use fencer_checkers::Severity;
use fencer_harness::terminal::escape;

use super::output::outln;
use fencer_harness::{EventType, Op, PackedHistory};

/// How many anomaly explanations a summary prints before pointing at the rest.
const SHOWN_ANOMALIES: usize = 5;

/// How long a run took, as its tier measures time.
#[derive(Clone, Copy, Debug)]
pub enum Took {
    /// A simulation: its simulated span went by in `wall_s` seconds of the machine's clock.
    Simulated {
        /// Seconds of the machine's clock the run took.
        wall_s: f64,
    },
    /// A real-time run: the machine's clock is the run's own.
    Real {
        /// Seconds of the machine's clock the run took.
        wall_s: f64,
    },
    /// Not timed: a stored history checked or replayed.
    Untimed,
}

/// How much of a verdict the summary tells, and where it sends the reader for the rest.
#[derive(Clone, Debug)]
pub struct Detail {
    /// Tell every finding in full, warnings included (`--verbose`).
    pub verbose: bool,
    /// The command that tells the saved run's verdict in full (`fencer explain DIR`), when
    /// the run is saved.
    pub explain: Option<String>,
    /// Whether the command printing the summary takes `--verbose`, so pointers may name it.
    pub takes_verbose: bool,
}

impl Detail {
    /// Where the findings the summary leaves out are told in full, e.g. `fencer explain DIR
    /// or --verbose`.
    fn pointer(&self, verdict: &Verdict) -> String {
        let mut ways = Vec::new();
        if let Some(explain) = &self.explain {
            let all = verdict.anomalies.len() > super::explain::TOLD_ANOMALIES;
            ways.push(format!("{explain}{}", if all { " --all" } else { "" }));
        }
        if self.takes_verbose {
            ways.push("--verbose".to_string());
        }
        ways.join(" or ")
    }
}

/// Prints the history's shape, how long it took and the verdict: with `detail.verbose` every
/// finding's explanation, otherwise the first anomalies that fail the verdict, the count of
/// the rest and of the warnings, and where they are told.
pub fn print_summary(shape: &Shape, verdict: &Verdict, took: Took, detail: &Detail) {
    outln!(
        "history: {} events; {} grants, {} writes applied, {} rejected, {} unknown; {} faults",
        shape.events,
        shape.grants,
        shape.writes_applied,
        shape.writes_rejected,
        shape.writes_unknown,
        shape.faults,
    );
    match took {
        Took::Simulated { wall_s } => {
            let simulated_s = shape.last_time_ns as f64 / 1e9;
            outln!(
                "time: {simulated_s:.3} simulated s in {wall_s:.3} wall s ({:.0}x)",
                simulated_s / wall_s
            );
        }
        Took::Real { wall_s } => outln!("time: {wall_s:.3} s on the wall clock (real time)"),
        Took::Untimed => {}
    }
    if detail.verbose {
        outln!("verdict: {}", escape(&verdict.summary_line()));
        for anomaly in &verdict.anomalies {
            let warning = anomaly.severity == Severity::Warning;
            outln!(
                "- {}{}: {}",
                anomaly.class,
                if warning { " (warning)" } else { "" },
                escape(&anomaly.explanation)
            );
        }
        return;
    }
    let pointer = detail.pointer(verdict);
    let warnings: usize = verdict.warning_counts.values().sum();
    if warnings == 0 {
        outln!("verdict: {}", escape(&verdict.summary_line()));
    } else {
        outln!(
            "verdict: {} (warnings fail only under --strict; told in full: {pointer})",
            escape(&verdict.summary_line())
        );
    }
    let failures = verdict
        .anomalies
        .iter()
        .filter(|anomaly| anomaly.severity == Severity::Failure);
    let mut shown = 0;
    for anomaly in failures.take(SHOWN_ANOMALIES) {
        outln!("- {}: {}", anomaly.class, escape(&anomaly.explanation));
        shown += 1;
    }
    let failing: usize = verdict.anomaly_counts.values().sum();
    if failing > shown {
        let more = failing - shown;
        outln!(
            "  ... {more} more {}: {pointer}",
            if more == 1 { "anomaly" } else { "anomalies" }
        );
    }
}

/// The counts the summary's history line shows, gathered in one pass (on a
/// 10,000,000-event history each extra pass over the events is noticeable) from a history in
/// either form.
#[derive(Default)]
pub struct Shape {
    events: usize,
    last_time_ns: u64,
    grants: usize,
    writes_applied: usize,
    writes_rejected: usize,
    writes_unknown: usize,
    faults: usize,
}

impl Shape {
    /// The shape of a history in checking form (a run's, a replay's, `fencer check`'s).
    pub fn of_packed(history: &PackedHistory) -> Shape {
        let mut shape = Shape::default();
        for row in history.rows().iter() {
            shape.add(row.kind, row.f, row.time_ns);
        }
        shape
    }

    fn add(&mut self, kind: EventType, f: Op, time_ns: u64) {
        self.events += 1;
        self.last_time_ns = time_ns;
        let counter = match (kind, f) {
            (EventType::Ok, Op::Acquire) => &mut self.grants,
            (EventType::Log, Op::Write) => &mut self.writes_applied,
            (EventType::Fail, Op::Write) => &mut self.writes_rejected,
            (EventType::Info, Op::Write) => &mut self.writes_unknown,
            (EventType::Nemesis, f) if f.starts_fault() => &mut self.faults,
            _ => return,
        };
        *counter += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fault_family_counts_once_and_its_end_does_not() {
        let mut shape = Shape::default();
        for f in [
            Op::Pause,
            Op::Resume,
            Op::DropAcquireReply,
            Op::HealAcquireReply,
            Op::Cancel,
            Op::Cut,
        ] {
            shape.add(EventType::Nemesis, f, 0);
        }
        shape.add(EventType::Ok, Op::Acquire, 1);
        assert_eq!((shape.faults, shape.grants, shape.events), (4, 1, 7));
    }
}
