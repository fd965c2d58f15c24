//! A verdict told as a story (`fencer explain`). Each anomaly's evidence events are numbered in
//! history order with both clocks, followed by the defence that failed and the remedy.
//!
//! The event sentences are the same ones the timeline's tooltips use
//! (`fencer_harness::words`), so the page and the terminal tell one story.

use std::fmt::Write;

use crate::{Anomaly, Verdict};
use fencer_harness::words::{both_clocks, describe, secs};
use fencer_harness::{Event, EventType, History, Op};

/// Which defence an anomaly class defeats, and what fixes it.
struct Lesson {
    defence: &'static str,
    remedy: &'static str,
}

/// Looked up by class name so classes added later get a sensible default.
fn lesson(class: &str) -> Lesson {
    match class {
        "stale-write-accepted" | "superseded-write-accepted" => Lesson {
            defence: "fencing",
            remedy: "check the fence inside the store's write, atomically with it (e.g. \
                     UPDATE ... WHERE fencing_token <= ?), so a write older than one already \
                     accepted is refused",
        },
        "foreign-release" | "zombie-renewal" => Lesson {
            defence: "owner token",
            remedy: "compare the caller's owner token with the lease's owner in the same atomic \
                     step as the release or renew (delete or extend only if the owner matches), \
                     and stop renewing once the work is done",
        },
        "overlapping-leases" => Lesson {
            defence: "lease exclusivity (owner token and expiry)",
            remedy: "never grant or revive a lease while another is valid: check expiry and \
                     owner atomically in the lock service, on its own clock",
        },
        "token-regression" => Lesson {
            defence: "fencing token monotonicity",
            remedy: "never derive tokens from a clock; use a counter that only grows and \
                     survives restarts (persisted, or above every token ever issued)",
        },
        "ack-mismatch" => Lesson {
            defence: "honest replies",
            remedy: "reply with what the store really applied, and record a call whose reply \
                     was lost as unknown (info), never as ok or fail",
        },
        _ => Lesson {
            defence: "the lease protocol",
            remedy: "see the anomaly's explanation in verdict.json",
        },
    }
}

/// The worker an anomaly is about: the process of its first cited client event.
fn offender<'h>(history: &'h History, anomaly: &Anomaly) -> Option<&'h str> {
    anomaly
        .events
        .iter()
        .filter_map(|&index| history.events.get(index as usize))
        .find(|event| event.f.is_client_op() && event.kind != EventType::Log)
        .map(|event| event.process.split(':').next().unwrap_or(&event.process))
}

/// Renewals of `worker` whose outcome was unknown or failed, between two history positions.
fn failed_renewals<'h>(history: &'h History, worker: &str, from: u64, to: u64) -> Vec<&'h Event> {
    let renewer = format!("{worker}:renew");
    history
        .events
        .iter()
        .skip(from as usize)
        .take((to.saturating_sub(from) + 1) as usize)
        .filter(|event| {
            event.process == renewer
                && event.f == Op::Renew
                && matches!(event.kind, EventType::Info | EventType::Fail)
        })
        .collect()
}

/// `fencing: the store accepted token 6 after it had accepted token 9`, when the evidence shows
/// the tokens.
fn what_failed(history: &History, anomaly: &Anomaly) -> String {
    let lesson = lesson(anomaly.class.name());
    let cited: Vec<&Event> = anomaly
        .events
        .iter()
        .filter_map(|&index| history.events.get(index as usize))
        .collect();
    let applied: Vec<u64> = cited
        .iter()
        .filter(|event| event.is(EventType::Log, Op::Write))
        .filter_map(|event| event.token)
        .collect();
    match (lesson.defence, applied.as_slice()) {
        ("fencing", [earlier @ .., last]) if earlier.iter().any(|t| t > last) => format!(
            "{}: the store accepted token {last} after it had accepted token {}",
            lesson.defence,
            earlier.iter().max().copied().unwrap_or_default()
        ),
        (defence, _) => defence.to_string(),
    }
}

/// The story of every anomaly in `verdict` (at most `limit`), or why there is none.
pub fn tell(history: &History, verdict: &Verdict, on_renew_failure: &str, limit: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "verdict: {}", verdict.summary_line());
    if verdict.anomalies.is_empty() {
        let _ = writeln!(
            out,
            "No anomaly to explain: every checker that ran found the history consistent{}.",
            if verdict.validity.name() == "unknown" {
                ", but calls with unknown outcome could hide one (see verdict.json's checkers)"
            } else {
                ""
            }
        );
        return out;
    }
    for (k, anomaly) in verdict.anomalies.iter().take(limit).enumerate() {
        let _ = writeln!(
            out,
            "\nAnomaly {} of {}: {}",
            k + 1,
            verdict.anomalies.len(),
            anomaly.class
        );
        for (step, &index) in anomaly.events.iter().enumerate() {
            let Some(event) = history.events.get(index as usize) else {
                let _ = writeln!(out, "  {}. event #{index} is not in the history", step + 1);
                continue;
            };
            let _ = writeln!(
                out,
                "  {}. {} — {} (#{index})",
                step + 1,
                both_clocks(event),
                describe(event)
            );
        }
        let _ = writeln!(out, "  In words: {}", anomaly.explanation);
        let _ = writeln!(
            out,
            "  Defence that failed: {}.",
            what_failed(history, anomaly)
        );
        let lesson = lesson(anomaly.class.name());
        let _ = writeln!(out, "  Remedy: {}.", lesson.remedy);
        let first = anomaly.events.first().copied().unwrap_or_default();
        let last = anomaly.events.last().copied().unwrap_or_default();
        if let Some(worker) = offender(history, anomaly) {
            let renewals = failed_renewals(history, worker, first, last);
            if let Some(renewal) = renewals.first() {
                let _ = writeln!(
                    out,
                    "  Renewal policy: {worker}'s renewal got no answer or failed at {} ({} time(s)) \
                     and it kept working{}. Remedy: stop protected work when a renewal's outcome \
                     is unknown (--on-renew-failure stop).",
                    secs(renewal.time_ns),
                    renewals.len(),
                    if on_renew_failure == "continue" {
                        " (--on-renew-failure continue)"
                    } else {
                        ""
                    }
                );
            }
        }
    }
    if verdict.anomalies.len() > limit {
        let _ = writeln!(
            out,
            "\n... {} more anomalies in verdict.json (--all tells them all)",
            verdict.anomalies.len() - limit
        );
    }
    out
}
