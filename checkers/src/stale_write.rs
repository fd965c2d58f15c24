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
    for (position, ref event) in ctx.rows_where(|kind, _| kind == EventType::Log) {
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

/// A write sent with a token below one already acknowledged for its key, not (yet) answered
/// `ok` or `fail`: applied or not, until a read shows it was.
#[derive(Clone, Copy)]
struct Unanswered {
    invoke: usize,
    /// The `ok` of the newer write it fell behind.
    newer: usize,
    /// Whether a read has already convicted it.
    reported: bool,
}

/// The writes that sent one value to one key, told apart by write id: sends of one id are one
/// write (a retry); a send without an id may be any write.
#[derive(Clone, Copy)]
enum Writers {
    /// Every send so far carried this id (or the only send carried none).
    One(Option<Sym>),
    /// Two different writes sent it.
    Several,
}

impl Writers {
    fn add(&mut self, write_id: Option<Sym>) {
        if let Writers::One(first) = *self
            && (first.is_none() || first != write_id)
        {
            *self = Writers::Several;
        }
    }
}

/// A stale write proven accepted from client replies: its invoke, the newer write's `ok` it
/// fell behind, and the proof (its own `ok`, or a read that returned it).
struct RepliedHit {
    invoke: usize,
    newer: usize,
    proof: usize,
}

/// Judges what clients were told and what reads saw, without the store's log.
///
/// Two signs prove a stale write was accepted: its `ok` (it was sent after a write with a
/// higher token had been acknowledged, so the store applied it after that one), and a read
/// that returned a stale write whose reply had not come (a read returns only what the store
/// applied, and the store applied it after its send). A stale write with unknown outcome that
/// no read returned is consistent with a store that refused it and changes nothing any
/// recorded reply says: it leaves the checker valid, as Jepsen treats an indeterminate
/// operation. Only a read that names its value without a write id, when another write sent the
/// same value, leaves the checker undecided.
fn from_client_replies(ctx: &Context<'_>) -> Outcome {
    // Per key: the highest token of an acknowledged write, and that write's `ok`.
    let mut newest_acked: FastMap<Sym, (u64, usize)> = FastMap::default();
    let mut open: FastMap<Sym, OpenWrite> = FastMap::default();
    // Stale writes not answered `ok` or `fail`, by key and write id, and by key and value for
    // reads that name no write id.
    let mut unanswered: FastMap<(Sym, Sym), Unanswered> = FastMap::default();
    let mut unanswered_values: FastMap<(Sym, Sym), Sym> = FastMap::default();
    // Which writes sent each value to each key (a value two writes wrote names neither; one
    // write resent is still one write).
    let mut writers_of_value: FastMap<(Sym, Sym), Writers> = FastMap::default();
    let mut hits = Hits::new();
    let mut ambiguous = Undecided::new();
    for (position, ref event) in ctx.rows_where(|_, f| matches!(f, Op::Read | Op::Write)) {
        match (event.kind, event.f) {
            (EventType::Invoke, Op::Write) => {
                let (Some(key), Some(token)) = (event.key, event.token()) else {
                    continue;
                };
                if let Some(value) = event.value {
                    writers_of_value
                        .entry((key, value))
                        .and_modify(|writers| writers.add(event.write_id))
                        .or_insert(Writers::One(event.write_id));
                }
                let call = OpenWrite {
                    invoke: position,
                    token,
                    newest_acked: newest_acked.get(&key).copied(),
                };
                if let (Some((_, newer)), Some(write_id)) = (call.newest_acked, event.write_id)
                    && call.is_behind()
                {
                    let stale = Unanswered {
                        invoke: position,
                        newer,
                        reported: false,
                    };
                    unanswered.insert((key, write_id), stale);
                    if let Some(value) = event.value {
                        unanswered_values.insert((key, value), write_id);
                    }
                }
                open.insert(event.process, call);
            }
            (EventType::Ok | EventType::Fail, Op::Write) => {
                let Some(call) = open.remove(&event.process) else {
                    continue;
                };
                let (Some(key), ok) = (event.key, event.kind == EventType::Ok) else {
                    continue;
                };
                // Answered: no longer unknown (a read of a write answered fail is a phantom
                // read, judged there).
                let read_first = event
                    .write_id
                    .and_then(|write_id| unanswered.remove(&(key, write_id)))
                    .is_some_and(|stale| stale.reported);
                if !ok {
                    continue;
                }
                if let Some((_, newer)) = call.newest_acked.filter(|_| call.is_behind())
                    && !read_first
                {
                    hits.push(RepliedHit {
                        invoke: call.invoke,
                        newer,
                        proof: position,
                    });
                }
                let entry = newest_acked.entry(key).or_insert((call.token, position));
                if call.token > entry.0 {
                    *entry = (call.token, position);
                }
            }
            (EventType::Info, Op::Write) => {
                open.remove(&event.process);
            }
            (EventType::Ok, Op::Read) => {
                let Some(key) = event.key else { continue };
                let named = match (event.write_id, event.value) {
                    (Some(write_id), _) => Some(write_id),
                    (None, Some(value)) => {
                        let write_id = unanswered_values.get(&(key, value)).copied();
                        let unique =
                            matches!(writers_of_value.get(&(key, value)), Some(Writers::One(_)));
                        match write_id {
                            Some(write_id) if !unique => {
                                if let Some(stale) = unanswered.get(&(key, write_id)) {
                                    ambiguous.push_citing(position, stale.invoke);
                                }
                                None
                            }
                            other => other,
                        }
                    }
                    (None, None) => None,
                };
                if let Some(stale) = named.and_then(|id| unanswered.get_mut(&(key, id)))
                    && !stale.reported
                {
                    stale.reported = true;
                    hits.push(RepliedHit {
                        invoke: stale.invoke,
                        newer: stale.newer,
                        proof: position,
                    });
                }
            }
            _ => {}
        }
    }
    let anomalies = hits
        .kept
        .iter()
        .map(|hit| explain_replied(ctx, hit))
        .collect();
    let inconclusive = ambiguous.into_inconclusive(ctx, |reads| {
        format!(
            "{} by value only, which a stale write with unknown outcome and another write both \
             sent",
            count(reads, "read named what it saw", "reads named what they saw")
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
                    when(ctx, &granted, "its")
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
            when(ctx, &call, "its")
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
    let applied = at_store_order(ctx, &stale);
    let newer_seq = newer.seq.map_or("unknown".into(), |seq| seq.to_string());
    let newer_when = if ctx.timing.is_timed(newer.kind, newer.f) {
        format!("at {}, store order {newer_seq}", secs(newer.time_ns))
    } else {
        format!("store order {newer_seq}")
    };
    let already = format!(
        "after it had already accepted token {} (write {newer_id}{newer_writer} {newer_when})",
        newer.token.unwrap_or_default(),
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

fn explain_replied(ctx: &Context<'_>, hit: &RepliedHit) -> Anomaly {
    let proof = ctx.at(hit.proof);
    let newer = ctx.at(hit.newer);
    let (mut story, mut cited) = writer_story(ctx, hit.invoke, hit.proof);
    cited.extend([hit.newer, hit.proof]);
    let before = format!(
        "the store had already acknowledged token {} to {} (write {}, ok at {}) before that \
         write was sent",
        newer.token.unwrap_or_default(),
        newer.process,
        newer.write_id.as_deref().unwrap_or("(no id)"),
        secs(newer.time_ns)
    );
    if proof.f == Op::Write {
        story.add(
            hit.proof,
            format!("was told ok {} although {before}", when(ctx, &proof, "its")),
        );
    } else {
        let sent = ctx.at(hit.invoke);
        let (at, reply) = match ctx.lookup().partner(hit.invoke) {
            Some(reply) if reply < hit.proof => {
                cited.push(reply);
                let event = ctx.at(reply);
                let text = format!(
                    "got no answer (unknown outcome, {}) {}",
                    event.error.as_deref().unwrap_or("no reason given"),
                    when(ctx, &event, "its")
                );
                (reply, text)
            }
            _ => (hit.invoke, "had no answer yet".to_string()),
        };
        story.add(at, format!("{reply}, although {before}"));
        story.add(
            hit.proof,
            format!(
                "then {}'s read of key {} returned write {} {}, so the store had applied it",
                proof.process,
                proof.key.as_deref().unwrap_or("(no key)"),
                sent.write_id.as_deref().unwrap_or("(no id)"),
                when(ctx, &proof, "its"),
            ),
        );
    }
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

    fn read(b: &mut Builder, process: &str, write_id: Option<&str>, value: &str) -> u64 {
        b.read(process, "k", |e| {
            e.write_id = write_id.map(str::to_string);
            e.value = Some(value.into());
        })
    }

    #[test]
    fn a_stale_write_with_unknown_outcome_that_no_read_saw_is_no_evidence() {
        let mut b = Builder::new();
        b.write("w2", "k", 2, "new", false);
        b.invoke_write("w1", "k", 1, "old");
        b.info("w1");
        b.invoke_write("w3", "k", 1, "never-answered");
        // Reads that saw the newer write say the stale ones were refused, or not yet applied.
        read(&mut b, "w4", Some("new"), "v-new");
        let outcome = run(&b);
        assert_eq!(outcome.report.validity, Validity::Valid);
        assert_eq!(outcome.report.inconclusive, None);
    }

    #[test]
    fn a_read_of_a_stale_write_whose_reply_was_lost_proves_it_was_accepted() {
        let mut b = Builder::new();
        let newer = b.write("w2", "k", 2, "new", false);
        let invoke = b.invoke_write("w1", "k", 1, "old");
        let lost = b.info("w1");
        b.at(3.0);
        let seen = read(&mut b, "w4", Some("old"), "v-old");
        read(&mut b, "w4", Some("old"), "v-old");
        let outcome = run(&b);
        assert_eq!(outcome.report.validity, Validity::Invalid);
        assert_eq!(outcome.report.anomalies, 1);
        let anomaly = &outcome.anomalies[0];
        assert_eq!(anomaly.events, vec![newer, invoke, lost, seen]);
        let text = &anomaly.explanation;
        for needle in [
            "w1 sent write old with token 1 to key k at 0.002s",
            "got no answer (unknown outcome, timeout) at 0.003s",
            "although the store had already acknowledged token 2 to w2 (write new, ok at 0.001s)",
            "and then w4's read of key k returned write old at 3.001s (its clock 3.001s), so the \
             store had applied it",
            "no store log",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in: {text}");
        }
    }

    #[test]
    fn a_stale_write_read_in_flight_and_then_acknowledged_is_one_anomaly() {
        let mut b = Builder::new();
        b.write("w2", "k", 2, "new", false);
        b.invoke_write("w1", "k", 1, "old");
        read(&mut b, "w4", Some("old"), "v-old");
        b.ok("w1");
        let outcome = run(&b);
        assert_eq!(outcome.report.anomalies, 1);
        assert!(
            outcome.anomalies[0]
                .explanation
                .contains("had no answer yet"),
            "{}",
            outcome.anomalies[0].explanation
        );
    }

    #[test]
    fn a_read_naming_only_a_value_two_writes_sent_is_undecided() {
        let mut b = Builder::new();
        b.write("w2", "k", 2, "new", false);
        let stale = b.invoke_write("w1", "k", 1, "same");
        b.info("w1");
        // Another write (not stale) sent the same value.
        b.invoke("w3", Op::Write, |e| {
            e.key = Some("k".into());
            e.token = Some(3);
            e.write_id = Some("other".into());
            e.value = Some("v-same".into());
        });
        b.ok("w3");
        let seen = read(&mut b, "w4", None, "v-same");
        let outcome = run(&b);
        assert_eq!(outcome.report.validity, Validity::Unknown);
        let why = outcome.report.inconclusive.unwrap();
        assert_eq!(why.events, vec![stale, seen]);
        assert_eq!(
            why.count, 1,
            "one read is undecided, the stale write is cited"
        );
        assert_eq!(
            why.reason,
            "1 read named what it saw by value only, which a stale write with unknown outcome \
             and another write both sent"
        );
        // A value only the stale write sent names it.
        let mut b = Builder::new();
        b.write("w2", "k", 2, "new", false);
        b.invoke_write("w1", "k", 1, "mine");
        b.info("w1");
        read(&mut b, "w4", None, "v-mine");
        assert_eq!(run(&b).report.validity, Validity::Invalid);
    }

    #[test]
    fn a_stale_write_resent_and_read_by_value_is_still_one_write() {
        let mut b = Builder::new();
        b.write("w2", "k", 2, "new", false);
        // The stale write times out and is resent with the same id, value and token.
        b.invoke_write("w1", "k", 1, "old");
        b.info("w1");
        let resent = b.invoke_write("w1", "k", 1, "old");
        b.info("w1");
        let seen = read(&mut b, "w4", None, "v-old");
        let outcome = run(&b);
        assert_eq!(outcome.report.validity, Validity::Invalid);
        assert_eq!(outcome.report.inconclusive, None);
        let events = &outcome.anomalies[0].events;
        assert!(
            events.contains(&resent) && events.contains(&seen),
            "{events:?}"
        );
    }
}
