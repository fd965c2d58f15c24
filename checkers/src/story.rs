//! A verdict told as a story (`fencer explain`). Each anomaly's evidence events are numbered in
//! history order with both clocks, followed by the defence that failed and the remedy.
//!
//! The event sentences are the same ones the timeline's tooltips use
//! (`fencer_harness::words`), so the page and the terminal tell one story. The story is for a
//! terminal: every piece of it taken from the history or the verdict is escaped
//! ([`fencer_harness::terminal::escape`]) before it joins a line.

use std::fmt::Write;

use crate::{Anomaly, AnomalyClass, Validity, Verdict};
use fencer_harness::terminal::escape;
use fencer_harness::words::{LogTiming, describe, secs, when_known};
use fencer_harness::{Event, EventType, History, Op, roles};

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
        "ack-mismatch" | "phantom-read" => Lesson {
            defence: "honest replies",
            remedy: "reply with what the store really applied, and record a call whose reply \
                     was lost as unknown (info), never as ok or fail",
        },
        "unfounded-rejection" => Lesson {
            defence: "honest replies",
            remedy: "refuse a write as stale only when the store has accepted a higher token \
                     for that key: compare with the stored fence (WHERE fence <= ?), not with \
                     anything the client or a cache believes",
        },
        "lock-reply-mismatch" => Lesson {
            defence: "honest replies",
            remedy: "answer ok only for a change the lock service applied, busy only while an \
                     unexpired lease is held, and unknown when the outcome cannot be told",
        },
        "expired-lease-renewed" => Lesson {
            defence: "lease expiry",
            remedy: "renew only a lease that is still live on the service's clock, checked \
                     atomically with the extension; an expired lease must be acquired again",
        },
        "stuck-lock" => Lesson {
            defence: "liveness",
            remedy: "let every lease lapse at its TTL on the service's clock, and free the lock \
                     when its holder releases it (no session or key that outlives its lease)",
        },
        "duplicate-effect" | "lost-update" => Lesson {
            defence: "idempotent writes",
            remedy: "give every write an id the store records atomically with its effect, so a \
                     retried or delayed copy is recognised and applied once",
        },
        "stale-read" | "nonlinearizable-register" => Lesson {
            defence: "linearizable store",
            remedy: "serve reads from the store's current state (the primary, a quorum read), \
                     never from a replica or cache that may lag behind acknowledged writes",
        },
        "write-after-lost-notice" | "silent-lease-loss" => Lesson {
            defence: "the lock client's notice of a lost lease",
            remedy: "have the library tell its caller as soon as a renewal is refused or a TTL \
                     passes unconfirmed, and have the caller stop the protected work once told \
                     (and fence the store for the writes already on their way)",
        },
        "stale-ownership-check" => Lesson {
            defence: "the lock client's ownership check",
            remedy: "answer \"do I still hold it?\" by asking the lock service (an owner-checked \
                     renew or read), never from a flag, a cache or the client's own clock alone",
        },
        "fragile-renewal" => Lesson {
            defence: "auto-renewal",
            remedy: "renew at most every third of the TTL, so one lost reply still leaves a \
                     renewal before the lease expires",
        },
        "abandoned-lease" => Lesson {
            defence: "auto-renewal that ends with its caller",
            remedy: "tie the renewal loop to the work it serves (its context or scope), so a \
                     cancelled caller's lease lapses instead of being renewed for nobody",
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
        .map(|event| roles::worker_of(&event.process))
}

/// Renewals of `worker` whose outcome was unknown or failed, between two history positions.
fn failed_renewals<'h>(history: &'h History, worker: &str, from: u64, to: u64) -> Vec<&'h Event> {
    history
        .events
        .iter()
        .skip(from as usize)
        .take((to.saturating_sub(from) + 1) as usize)
        .filter(|event| {
            roles::is_renewal_task(&event.process)
                && roles::worker_of(&event.process) == worker
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
    let restart = cited
        .iter()
        .find(|event| event.is(EventType::Nemesis, Op::Restart));
    match (lesson.defence, applied.as_slice()) {
        ("fencing", [earlier @ .., last]) if earlier.iter().any(|t| t > last) => format!(
            "{}: the store accepted token {last} after it had accepted token {}",
            lesson.defence,
            earlier.iter().max().copied().unwrap_or_default()
        ),
        (defence @ "fencing token monotonicity", _) if restart.is_some() => format!(
            "{defence}: the lock service restarted at {} and its tokens went backwards; \
             inferred, not seen: its token counter did not survive the restart",
            secs(restart.map_or(0, |event| event.time_ns))
        ),
        (defence, _) => defence.to_string(),
    }
}

/// The order anomalies are told in: token regressions first, then the rest in the verdict's
/// order. Tokens going backwards (a counter lost in a restart, a clock stepped back) is a
/// cause: every judgement that orders leases or writes by token follows from it, so the story
/// leads with it rather than with what it set off.
fn telling_order(verdict: &Verdict) -> Vec<&Anomaly> {
    let mut order: Vec<&Anomaly> = verdict.anomalies.iter().collect();
    order.sort_by_key(|anomaly| anomaly.class != AnomalyClass::TokenRegression);
    order
}

/// Each check that could not conclude, why, and the first events that left it undecided.
fn tell_inconclusive(out: &mut String, history: &History, verdict: &Verdict, timing: LogTiming) {
    const SHOWN_EVENTS: usize = 5;
    for (class, why) in verdict.inconclusive() {
        let Some(why) = why else {
            let _ = writeln!(out, "\n{class}: could not conclude");
            continue;
        };
        let _ = writeln!(
            out,
            "\n{class}: could not conclude: {}",
            escape(&why.reason)
        );
        for &index in why.events.iter().take(SHOWN_EVENTS) {
            if let Some(event) = history.events.get(index as usize) {
                let _ = writeln!(
                    out,
                    "  - {} — {} (#{index})",
                    escape(&when_known(event, timing)),
                    escape(&describe(event))
                );
            }
        }
        let more = why.count.saturating_sub(why.events.len().min(SHOWN_EVENTS));
        if more > 0 {
            let _ = writeln!(out, "  ... and {more} more such events");
        }
    }
}

/// The story of every anomaly in `verdict` (at most `limit`), or why there is none.
pub fn tell(history: &History, verdict: &Verdict, on_renew_failure: &str, limit: usize) -> String {
    let mut out = String::new();
    // An entry of a log read back after the run is told by its order or clock, not its time.
    let timing = LogTiming::of_events(&history.events);
    let _ = writeln!(out, "verdict: {}", escape(&verdict.summary_line()));
    if let Some(why) = &verdict.unknown_because {
        let _ = writeln!(
            out,
            "Nothing to explain, and nothing to vouch for: {}.",
            escape(why)
        );
        return out;
    }
    if verdict.anomalies.is_empty() {
        let unknown = verdict.validity == Validity::Unknown;
        let _ = writeln!(
            out,
            "No anomaly to explain: every checker that ran found the history consistent{}.",
            if unknown {
                ", but these checks could not conclude, and what they could not decide could \
                 hide one"
            } else {
                ""
            }
        );
        if unknown {
            tell_inconclusive(&mut out, history, verdict, timing);
        }
        return out;
    }
    for (k, anomaly) in telling_order(verdict).into_iter().take(limit).enumerate() {
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
                escape(&when_known(event, timing)),
                escape(&describe(event))
            );
        }
        let _ = writeln!(out, "  In words: {}", escape(&anomaly.explanation));
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
                    "  Renewal policy: {}'s renewal got no answer or failed at {} ({} time(s)) \
                     and it kept working{}. Remedy: stop protected work when a renewal's outcome \
                     is unknown (--on-renew-failure stop).",
                    escape(worker),
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

#[cfg(test)]
mod tests {
    use fencer_harness::Op;

    use super::*;
    use crate::check;
    use crate::testkit::Builder;

    #[test]
    fn an_unknown_verdict_names_each_undecided_check_and_its_events() {
        let mut b = Builder::new();
        b.write("w2", "k", 2, "w2-0", true);
        // A store log entry without a token cannot be ordered against the others.
        b.log("store", Op::Write, |e| e.key = Some("k".into()));
        let history = b.build();
        let verdict = check(&history);
        let story = tell(&history, &verdict, "stop", 5);
        assert!(story.contains("could not conclude, and what"), "{story}");
        assert!(
            story.contains(
                "stale-write-accepted: could not conclude: 1 store log entry lacks a key or token"
            ),
            "{story}"
        );
        assert!(story.contains("(#3)"), "{story}");
    }

    #[test]
    fn a_token_counter_lost_in_a_restart_is_told_first() {
        // Without a lock log: the restart loses the counter (w1 gets token 1 after token 7),
        // and later w1, paused, releases after w2 was granted token 2.
        let mut b = Builder::new();
        b.acquire("w0", "L", "o0", 7, false);
        b.nemesis(Op::Restart, "lock", |e| e.duration_ns = Some(1_000_000_000));
        b.nemesis(Op::Recover, "lock", |_| {});
        b.acquire("w1", "L", "o1", 1, false);
        b.pause("w1", 12.0);
        b.acquire("w2", "L", "o2", 2, false);
        b.lock_call("w1", Op::Release, "L", "o1", EventType::Ok);
        let history = b.build();
        let verdict = crate::check_with(
            &history,
            &crate::CheckOptions {
                workload: crate::Workload::Mutex,
                ..crate::CheckOptions::default()
            },
        );
        assert_eq!(verdict.anomalies[0].class, AnomalyClass::ForeignRelease);
        let story = tell(&history, &verdict, "stop", 5);
        let first = story
            .split("\nAnomaly ")
            .nth(1)
            .expect("an anomaly is told");
        assert!(first.starts_with("1 of 2: token-regression"), "{story}");
        assert!(
            first.contains(
                "Defence that failed: fencing token monotonicity: the lock service restarted at \
                 0.002s and its tokens went backwards"
            ),
            "{story}"
        );
        assert!(
            first.contains("Remedy: never derive tokens from a clock"),
            "{story}"
        );
    }

    #[test]
    fn an_empty_history_is_told_as_unjudgeable() {
        let history = History::default();
        let story = tell(&history, &check(&history), "stop", 5);
        assert!(
            story.contains(
                "Nothing to explain, and nothing to vouch for: the history holds no events"
            ),
            "{story}"
        );
        assert!(!story.contains("found the history consistent"), "{story}");
    }

    #[test]
    fn every_anomaly_class_has_a_lesson_of_its_own() {
        for class in crate::AnomalyClass::ALL {
            assert_ne!(
                lesson(class.name()).defence,
                "the lease protocol",
                "{class} falls back to the default lesson"
            );
        }
    }
}
