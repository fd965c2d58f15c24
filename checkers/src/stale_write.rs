//! `stale-write-accepted`: did the store accept a write whose fencing token was lower than one
//! it had already accepted for the same key?
//!
//! This is the failure fencing tokens exist to prevent, so it is judged from the best evidence
//! available: the store's own log of applied writes when the history has one (exact order, even
//! for writes whose reply was lost), otherwise what clients were told (a write acknowledged
//! `ok` although a write with a higher token had been acknowledged before it was even sent).

use fencer_harness::{EventType, Op, Sym};

use crate::context::{Context, is_store_log, worker_of};
use crate::explain::{Story, at_store_order, count, faults_between, secs, when};
use crate::findings::{Hits, Outcome, Undecided};
use crate::index::{FastMap, FastSet};
use crate::verdict::{Anomaly, AnomalyClass};

const CLASS: AnomalyClass = AnomalyClass::StaleWriteAccepted;

/// Runs the checker on the store log if there is one, else on client replies.
pub(crate) fn check(ctx: &Context<'_>) -> Outcome {
    if ctx.has_store_log {
        from_store_log(ctx)
    } else {
        from_client_replies(ctx)
    }
}

/// A stale write and the write whose higher token it should have lost to (positions of store
/// log entries, or of `ok` completions in the fallback).
struct StaleHit {
    stale: usize,
    newer: usize,
}

fn from_store_log(ctx: &Context<'_>) -> Outcome {
    // Per key: the highest token applied so far, and the first write that carried it.
    let mut newest: FastMap<Sym, (u64, usize)> = FastMap::default();
    // A stale write applied twice is one stale write (the repeat is a duplicate effect).
    let mut reported: FastSet<(Sym, Sym)> = FastSet::default();
    let mut hits = Hits::new();
    let mut unreadable = Undecided::new();
    for (position, event) in ctx.rows.iter().enumerate() {
        if !is_store_log(event) {
            continue;
        }
        let (Some(key), Some(token)) = (event.key, event.token()) else {
            unreadable.push(position);
            continue;
        };
        match newest.get_mut(&key) {
            None => {
                newest.insert(key, (token, position));
            }
            Some((newest_token, newest_position)) => {
                if token < *newest_token {
                    let first_time = event
                        .write_id
                        .is_none_or(|write_id| reported.insert((key, write_id)));
                    if first_time {
                        hits.push(StaleHit {
                            stale: position,
                            newer: *newest_position,
                        });
                    }
                } else if token > *newest_token {
                    *newest_token = token;
                    *newest_position = position;
                }
            }
        }
    }
    let anomalies = hits
        .kept
        .iter()
        .map(|hit| explain_applied(ctx, hit))
        .collect();
    let inconclusive = unreadable.into_inconclusive(ctx, |unreadable| {
        format!(
            "{} a key or token",
            count(
                unreadable,
                "store log entry lacks",
                "store log entries lack"
            )
        )
    });
    Outcome::ran(CLASS, "store log", hits.count, anomalies, inconclusive)
}

/// A write call in flight, with the newest token already acknowledged for its key when it was
/// sent.
struct OpenWrite {
    invoke: usize,
    token: u64,
    newest_acked: Option<(u64, usize)>,
}

impl OpenWrite {
    fn is_behind(&self) -> bool {
        self.newest_acked
            .is_some_and(|(newest_token, _)| self.token < newest_token)
    }
}

fn from_client_replies(ctx: &Context<'_>) -> Outcome {
    // Per key: the highest token of an acknowledged write, and that write's `ok`.
    let mut newest_acked: FastMap<Sym, (u64, usize)> = FastMap::default();
    let mut open: FastMap<Sym, OpenWrite> = FastMap::default();
    let mut hits = Hits::new();
    let mut maybe_stale = Undecided::new();
    for (position, event) in ctx.rows.iter().enumerate() {
        if event.f != Op::Write {
            continue;
        }
        match event.kind {
            EventType::Invoke => {
                if let (Some(key), Some(token)) = (event.key, event.token()) {
                    open.insert(
                        event.process,
                        OpenWrite {
                            invoke: position,
                            token,
                            newest_acked: newest_acked.get(&key).copied(),
                        },
                    );
                }
            }
            EventType::Ok => {
                let Some(call) = open.remove(&event.process) else {
                    continue;
                };
                if let Some((_, newer)) = call.newest_acked.filter(|_| call.is_behind()) {
                    hits.push(StaleHit {
                        stale: position,
                        newer,
                    });
                }
                if let Some(key) = event.key {
                    let entry = newest_acked.entry(key).or_insert((call.token, position));
                    if call.token > entry.0 {
                        *entry = (call.token, position);
                    }
                }
            }
            EventType::Info => {
                if open
                    .remove(&event.process)
                    .is_some_and(|call| call.is_behind())
                {
                    maybe_stale.push(position);
                }
            }
            EventType::Fail => {
                open.remove(&event.process);
            }
            EventType::Nemesis | EventType::Log => {}
        }
    }
    // Calls never completed are as unknown as `info` ones.
    let mut never_answered: Vec<usize> = open
        .values()
        .filter(|call| call.is_behind())
        .map(|call| call.invoke)
        .collect();
    never_answered.sort_unstable();
    for invoke in never_answered {
        maybe_stale.push(invoke);
    }
    let anomalies = hits
        .kept
        .iter()
        .map(|hit| explain_acknowledged(ctx, hit))
        .collect();
    let inconclusive = maybe_stale.into_inconclusive(ctx, |maybe_stale| {
        format!(
            "{} with unknown outcome carried a token below one already acknowledged for the \
             key and may have been applied",
            count(maybe_stale, "write", "writes")
        )
    });
    Outcome::ran(CLASS, "client replies", hits.count, anomalies, inconclusive)
}

/// The story of the worker that sent the write invoked at `invoke`: its grant of the write's
/// token, the write, and the faults that hit it until `until`. Returns the story and the
/// positions it cites.
pub(crate) fn writer_story(ctx: &Context<'_>, invoke: usize, until: usize) -> (Story, Vec<usize>) {
    let lookup = ctx.lookup();
    let call = ctx.at(invoke);
    let token = call.token.unwrap_or_default();
    let mut story = Story::new(call.process.as_str());
    let mut cited = vec![invoke];
    let grant = lookup.grant_to_worker(worker_of(&call.process), token, invoke);
    let from = match grant {
        Some(grant) => {
            let granted = ctx.at(grant);
            let lock = granted.lock.as_deref().unwrap_or("its lock");
            story.add(
                grant,
                format!(
                    "acquired lock {lock} with token {token} {}",
                    when(&granted, "its")
                ),
            );
            cited.push(grant);
            lookup.partner(grant).unwrap_or(grant)
        }
        None => invoke,
    };
    story.add(
        invoke,
        format!(
            "sent write {} with token {token} to key {} {}",
            call.write_id.as_deref().unwrap_or("(no id)"),
            call.key.as_deref().unwrap_or("(no key)"),
            when(&call, "its")
        ),
    );
    let faults = faults_between(ctx, &call.process, from, until);
    story.add_faults(ctx, &faults);
    cited.extend(faults);
    (story, cited)
}

fn explain_applied(ctx: &Context<'_>, hit: &StaleHit) -> Anomaly {
    let lookup = ctx.lookup();
    let stale = ctx.at(hit.stale);
    let newer = ctx.at(hit.newer);
    let token = stale.token.unwrap_or_default();
    let write_id = stale.write_id.as_deref();
    let newer_id = newer.write_id.as_deref().unwrap_or("(no id)");
    let newer_writer = newer
        .write_id
        .as_deref()
        .and_then(|id| lookup.write_invoke(ctx.sym(id)?, hit.newer))
        .map(|invoke| format!(" from {}", ctx.at(invoke).process))
        .unwrap_or_default();
    let applied = at_store_order(&stale);
    let already = format!(
        "after it had already accepted token {} (write {newer_id}{newer_writer} at {}, store \
         order {})",
        newer.token.unwrap_or_default(),
        secs(newer.time_ns),
        newer.seq.map_or("unknown".into(), |seq| seq.to_string())
    );
    let mut cited = vec![hit.newer, hit.stale];
    let told = match write_id.and_then(|id| lookup.write_invoke(ctx.sym(id)?, hit.stale)) {
        Some(invoke) => {
            let (mut story, story_cited) = writer_story(ctx, invoke, hit.stale);
            cited.extend(story_cited);
            story.add(
                hit.stale,
                format!("the store applied that write {applied} {already}"),
            );
            story.render()
        }
        None => format!(
            "The store applied write {} with token {token} to key {} {applied}, {already}; no \
             client call in the history sent that write",
            write_id.unwrap_or("(no id)"),
            stale.key.as_deref().unwrap_or("(no key)"),
        ),
    };
    Anomaly {
        class: CLASS,
        severity: crate::verdict::Severity::Failure,
        events: ctx.indexes(cited),
        explanation: format!(
            "{told}. The store must refuse a write whose fencing token is lower than one it has \
             accepted for the key; it did not compare fencing tokens atomically with the write."
        ),
    }
}

fn explain_acknowledged(ctx: &Context<'_>, hit: &StaleHit) -> Anomaly {
    let stale = ctx.at(hit.stale);
    let newer = ctx.at(hit.newer);
    let invoke = ctx.lookup().partner(hit.stale).unwrap_or(hit.stale);
    let (mut story, mut cited) = writer_story(ctx, invoke, hit.stale);
    cited.extend([hit.newer, hit.stale]);
    story.add(
        hit.stale,
        format!(
            "was told ok {} although the store had already acknowledged token {} to {} (write \
             {}, ok at {}) before that write was sent",
            when(&stale, "its"),
            newer.token.unwrap_or_default(),
            newer.process,
            newer.write_id.as_deref().unwrap_or("(no id)"),
            secs(newer.time_ns)
        ),
    );
    Anomaly {
        class: CLASS,
        severity: crate::verdict::Severity::Failure,
        events: ctx.indexes(cited),
        explanation: format!(
            "{}. Judged from client replies (the history has no store log): the store accepted a \
             write with a lower fencing token than one it had already acknowledged for the key, \
             so it did not compare fencing tokens atomically with the write.",
            story.render()
        ),
    }
}

#[cfg(test)]
mod tests {
    use fencer_harness::PackedHistory;

    use super::*;
    use crate::testkit::Builder;
    use crate::verdict::Validity;

    fn run(builder: &Builder) -> Outcome {
        check(&Context::new(&PackedHistory::pack(&builder.build())))
    }

    /// w1 holds token 1, is paused past its lease, w3 takes token 2 and writes; w1 wakes up
    /// and writes with token 1. `fenced` decides whether the store refuses it.
    fn paused_holder(fenced: bool, logged: bool) -> (Builder, [u64; 6]) {
        let mut b = Builder::new();
        b.at(0.002);
        let w1_grant = b.acquire("w1", "L", "o1", 1, logged);
        let w1_first = b.write("w1", "k", 1, "w1-0", logged);
        b.at(0.5);
        let pause = b.pause("w1", 12.0);
        b.at(10.7);
        b.acquire("w3", "L", "o3", 2, logged);
        let w3_write = b.write("w3", "k", 2, "w3-0", logged);
        b.at(12.5);
        let resume = b.resume("w1");
        let w1_invoke = b.invoke_write("w1", "k", 1, "w1-1");
        let w1_outcome = if fenced {
            b.complete("w1", EventType::Fail, |e| {
                e.current_token = Some(2);
                e.error = Some("rejected".into());
            })
        } else if logged {
            let applied = b.applied("k", 1, "w1-1");
            b.ok("w1");
            applied
        } else {
            b.ok("w1")
        };
        let _ = w1_first;
        (
            b,
            [w1_grant, pause, w3_write, resume, w1_invoke, w1_outcome],
        )
    }

    #[test]
    fn store_log_write_with_lower_token_after_higher_is_stale() {
        let (b, [grant, pause, newer, resume, invoke, applied]) = paused_holder(false, true);
        let outcome = run(&b);
        assert_eq!(outcome.report.validity, Validity::Invalid);
        assert_eq!(outcome.report.anomalies, 1);
        assert_eq!(outcome.report.evidence, "store log");
        let anomaly = &outcome.anomalies[0];
        assert_eq!(anomaly.class, AnomalyClass::StaleWriteAccepted);
        assert_eq!(
            anomaly.events,
            vec![grant, pause, newer, resume, invoke, applied]
        );
        let text = &anomaly.explanation;
        for needle in [
            "w1 acquired lock L with token 1 at 0.004s (its clock 0.004s)",
            "was paused 12.000s from 0.500s to 12.500s",
            "sent write w1-1 with token 1 to key k at 12.501s",
            "the store applied that write at 12.502s (store clock 12.502s, store order 3)",
            "already accepted token 2 (write w3-0 from w3 at 10.704s, store order 2)",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in: {text}");
        }
    }

    #[test]
    fn fenced_store_refusing_the_late_write_is_valid() {
        let (b, _) = paused_holder(true, true);
        let outcome = run(&b);
        assert_eq!(outcome.report.validity, Validity::Valid);
        assert_eq!(outcome.report.anomalies, 0);
        assert!(outcome.anomalies.is_empty());
    }

    #[test]
    fn equal_tokens_and_other_keys_are_not_stale() {
        let mut b = Builder::new();
        b.applied("k", 2, "a");
        b.applied("k", 2, "b");
        b.applied("other", 1, "c");
        b.applied("k", 3, "d");
        let outcome = run(&b);
        assert_eq!(outcome.report.validity, Validity::Valid);
    }

    #[test]
    fn stale_write_applied_twice_is_reported_once_but_each_stale_write_counts() {
        let mut b = Builder::new();
        b.applied("k", 5, "new");
        let first = b.applied("k", 3, "old");
        b.applied("k", 3, "old");
        let second = b.applied("k", 4, "older");
        let outcome = run(&b);
        assert_eq!(outcome.report.anomalies, 2);
        assert_eq!(outcome.anomalies[0].events, vec![0, first]);
        assert_eq!(outcome.anomalies[1].events, vec![0, second]);
        assert!(
            outcome.anomalies[0]
                .explanation
                .contains("no client call in the history sent that write"),
            "{}",
            outcome.anomalies[0].explanation
        );
    }

    #[test]
    fn client_replies_show_a_stale_write_acknowledged_after_a_newer_one() {
        let (b, [grant, pause, newer_ok, resume, invoke, stale_ok]) = paused_holder(false, false);
        let outcome = run(&b);
        assert_eq!(outcome.report.validity, Validity::Invalid);
        assert_eq!(outcome.report.evidence, "client replies");
        assert_eq!(outcome.report.anomalies, 1);
        assert_eq!(
            outcome.anomalies[0].events,
            vec![grant, pause, newer_ok, resume, invoke, stale_ok]
        );
        let text = &outcome.anomalies[0].explanation;
        assert!(
            text.contains("already acknowledged token 2 to w3"),
            "{text}"
        );
        assert!(text.contains("no store log"), "{text}");
    }

    #[test]
    fn client_replies_do_not_blame_writes_sent_before_the_newer_ack() {
        let mut b = Builder::new();
        b.invoke_write("w1", "k", 1, "old");
        b.write("w2", "k", 2, "new", false);
        b.ok("w1");
        let outcome = run(&b);
        assert_eq!(outcome.report.validity, Validity::Valid);
        assert_eq!(outcome.report.anomalies, 0);
    }

    #[test]
    fn client_replies_with_a_timed_out_stale_write_are_inconclusive() {
        let mut b = Builder::new();
        b.write("w2", "k", 2, "new", false);
        b.invoke_write("w1", "k", 1, "old");
        let info = b.info("w1");
        let never = b.invoke_write("w3", "k", 1, "never-answered");
        let outcome = run(&b);
        assert_eq!(outcome.report.validity, Validity::Unknown);
        let why = outcome.report.inconclusive.unwrap();
        assert!(
            why.reason.starts_with("2 writes with unknown outcome"),
            "{}",
            why.reason
        );
        assert_eq!(why.events, vec![info, never]);
    }
}
