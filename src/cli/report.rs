//! Printing what a run found: counts, the verdict, the first anomalies in plain words.

use fencer::{History, Verdict};
use fencer_harness::{Event, EventType, Op};

/// How many anomaly explanations a summary prints before pointing at verdict.json.
const SHOWN_ANOMALIES: usize = 5;

/// Prints the history's shape and the verdict with its first explanations.
pub fn print_summary(history: &History, verdict: &Verdict, wall_s: f64) {
    // One pass: on a 10,000,000-event history each extra pass over the events is noticeable.
    let mut shape = Shape::default();
    for event in &history.events {
        shape.add(event);
    }
    let simulated_s = history.events.last().map_or(0.0, |e| e.time_s());
    println!(
        "history: {} events; {} grants, {} writes applied, {} rejected, {} unknown; {} faults",
        history.events.len(),
        shape.grants,
        shape.writes_applied,
        shape.writes_rejected,
        shape.writes_unknown,
        shape.faults,
    );
    if wall_s > 0.0 {
        println!(
            "time: {simulated_s:.3} simulated s in {wall_s:.3} wall s ({:.0}x)",
            simulated_s / wall_s
        );
    }
    println!("verdict: {}", verdict.summary_line());
    for anomaly in verdict.anomalies.iter().take(SHOWN_ANOMALIES) {
        println!("- {}: {}", anomaly.class, anomaly.explanation);
    }
    if verdict.anomalies.len() > SHOWN_ANOMALIES {
        println!(
            "  ... {} more in verdict.json",
            verdict.anomalies.len() - SHOWN_ANOMALIES
        );
    }
}

/// The counts the summary's history line shows.
#[derive(Default)]
struct Shape {
    grants: usize,
    writes_applied: usize,
    writes_rejected: usize,
    writes_unknown: usize,
    faults: usize,
}

impl Shape {
    fn add(&mut self, event: &Event) {
        let counter = match (event.kind, event.f) {
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
                | Op::Restart,
            ) => &mut self.faults,
            _ => return,
        };
        *counter += 1;
    }
}
