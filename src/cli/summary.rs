//! Printing what a run found: counts, the verdict, the first anomalies in plain words.

use super::output::outln;
use crate::{History, Verdict};
use fencer_harness::{EventType, Op, PackedHistory};

/// How many anomaly explanations a summary prints before pointing at verdict.json.
const SHOWN_ANOMALIES: usize = 5;

/// Prints the history's shape and the verdict with its first explanations.
pub fn print_summary(shape: &Shape, verdict: &Verdict, wall_s: f64) {
    let simulated_s = shape.last_time_ns as f64 / 1e9;
    outln!(
        "history: {} events; {} grants, {} writes applied, {} rejected, {} unknown; {} faults",
        shape.events,
        shape.grants,
        shape.writes_applied,
        shape.writes_rejected,
        shape.writes_unknown,
        shape.faults,
    );
    if wall_s > 0.0 {
        outln!(
            "time: {simulated_s:.3} simulated s in {wall_s:.3} wall s ({:.0}x)",
            simulated_s / wall_s
        );
    }
    outln!("verdict: {}", verdict.summary_line());
    for anomaly in verdict.anomalies.iter().take(SHOWN_ANOMALIES) {
        outln!("- {}: {}", anomaly.class, anomaly.explanation);
    }
    if verdict.anomalies.len() > SHOWN_ANOMALIES {
        outln!(
            "  ... {} more in verdict.json",
            verdict.anomalies.len() - SHOWN_ANOMALIES
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
    /// The shape of a history of events (a run's or a replay's).
    pub fn of_history(history: &History) -> Shape {
        let mut shape = Shape::default();
        for event in &history.events {
            shape.add(event.kind, event.f, event.time_ns);
        }
        shape
    }

    /// The shape of a history in checking form (`fencer check`'s).
    pub fn of_packed(history: &PackedHistory) -> Shape {
        let mut shape = Shape::default();
        for row in &history.rows {
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
            (
                EventType::Nemesis,
                Op::Pause
                | Op::ClockJump
                | Op::ClockDrift
                | Op::DropRenew
                | Op::DelayWrite
                | Op::Restart
                | Op::DelayAcquire
                | Op::DelayRenew
                | Op::DelayRelease
                | Op::LeaseEdge,
            ) => &mut self.faults,
            _ => return,
        };
        *counter += 1;
    }
}
