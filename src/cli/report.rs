//! Printing what a run found: counts, the verdict, the first anomalies in plain words.

use fencer::{History, Verdict};
use fencer_harness::{EventType, Op};

/// How many anomaly explanations a summary prints before pointing at verdict.json.
const SHOWN_ANOMALIES: usize = 5;

/// Prints the history's shape and the verdict with its first explanations.
pub fn print_summary(history: &History, verdict: &Verdict, wall_s: f64) {
    let count = |kind: EventType, f: Op| history.events.iter().filter(|e| e.is(kind, f)).count();
    let faults = history
        .events
        .iter()
        .filter(|e| {
            e.kind == EventType::Nemesis
                && matches!(
                    e.f,
                    Op::Pause
                        | Op::ClockJump
                        | Op::ClockDrift
                        | Op::DropRenew
                        | Op::DelayWrite
                        | Op::Restart
                )
        })
        .count();
    let simulated_s = history.events.last().map_or(0.0, |e| e.time_s());
    println!(
        "history: {} events; {} grants, {} writes applied, {} rejected, {} unknown; {} faults",
        history.events.len(),
        count(EventType::Ok, Op::Acquire),
        count(EventType::Log, Op::Write),
        count(EventType::Fail, Op::Write),
        count(EventType::Info, Op::Write),
        faults,
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
