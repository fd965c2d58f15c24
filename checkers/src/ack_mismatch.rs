//! `ack-mismatch`: was a worker told `ok` for a write the store never applied, or told `fail`
//! (definitely not applied) for a write the store applied?
//!
//! Workers act on replies: an `ok` that did not happen is a lost acknowledged write, a `fail`
//! that did happen lets a worker retry or give up on an effect that is already there. Only the
//! store's log can tell (writes are matched by `write_id`); `info` replies promise nothing and
//! are fine either way. Without the store's log the checker is skipped.
//!
//! A reply is matched against the store log entries between its call's invoke and the next
//! invoke of the same write id (a retry), so a retried write is not blamed on its first try.

use fencer_harness::{EventType, Op, Sym};

use crate::context::{Context, is_store_log};
use crate::explain::{Story, at_store_order, count, faults_between, when};
use crate::findings::{Hits, Outcome, Undecided};
use crate::index::{FastMap, Positions};
use crate::verdict::{Anomaly, AnomalyClass};

const CLASS: AnomalyClass = AnomalyClass::AckMismatch;

/// A write reply that contradicts the store log: the reply, its invoke, for a `fail` the
/// store log entry that applied it, and for an `ok` the key's newest applied write before the
/// reply when its token is higher than the call's (what a fenced store refuses the call for).
struct Mismatch {
    invoke: usize,
    reply: usize,
    applied: Option<usize>,
    higher_before: Option<usize>,
}

/// Runs the checker on the store log and client replies, or reports it skipped.
pub(crate) fn check(ctx: &Context<'_>) -> Outcome {
    if !ctx.has_store_log {
        return Outcome::skipped(CLASS, "needs the store's log of applied writes");
    }
    // By key and write id: a write id names one write of one key, not one across keys.
    let mut applied: FastMap<(Option<Sym>, Sym), Positions> = FastMap::default();
    let mut invokes: FastMap<(Option<Sym>, Sym), Positions> = FastMap::default();
    let mut applied_to_key: FastMap<Option<Sym>, Positions> = FastMap::default();
    let logged_or_sent =
        |kind, f| f == Op::Write && matches!(kind, EventType::Log | EventType::Invoke);
    for (position, ref event) in ctx.rows_where(logged_or_sent) {
        let Some(write_id) = event.write_id else {
            continue;
        };
        let id = (event.key, write_id);
        if is_store_log(event) {
            Positions::record(&mut applied, id, position);
            Positions::record(&mut applied_to_key, event.key, position);
        } else if event.is(EventType::Invoke, Op::Write) {
            Positions::record(&mut invokes, id, position);
        }
    }

    let mut hits = Hits::new();
    let mut unmatched = Undecided::new();
    let mut open: FastMap<Sym, usize> = FastMap::default();
    for (position, ref event) in ctx.rows_where(|_, f| f == Op::Write) {
        if event.f != Op::Write {
            continue;
        }
        match event.kind {
            EventType::Invoke => {
                open.insert(event.process, position);
            }
            EventType::Ok | EventType::Fail => {
                let Some(invoke) = open.remove(&event.process) else {
                    continue;
                };
                let Some(write_id) = event.write_id else {
                    unmatched.push(position);
                    continue;
                };
                let id = (event.key, write_id);
                let retry = invokes
                    .get(&id)
                    .and_then(|all| all.first_from(invoke + 1))
                    .unwrap_or(usize::MAX);
                let applied_here = applied
                    .get(&id)
                    .and_then(|all| all.first_from(invoke))
                    .filter(|&log| log < retry);
                let contradicts = match event.kind {
                    EventType::Ok => applied_here.is_none(),
                    _ => applied_here.is_some(),
                };
                if contradicts {
                    let token = ctx.at(invoke).token;
                    let higher_before = (event.kind == EventType::Ok)
                        .then(|| applied_to_key.get(&event.key)?.last_before(position))
                        .flatten()
                        .filter(|&log| ctx.at(log).token > token);
                    hits.push(Mismatch {
                        invoke,
                        reply: position,
                        applied: applied_here,
                        higher_before,
                    });
                }
            }
            EventType::Info => {
                open.remove(&event.process);
            }
            EventType::Nemesis | EventType::Log | EventType::Notice => {}
        }
    }
    let anomalies = hits.kept.iter().map(|hit| explain(ctx, hit)).collect();
    let inconclusive = unmatched.into_inconclusive(ctx, |unmatched| {
        format!(
            "{} no write id and could not be matched",
            count(unmatched, "write reply carries", "write replies carry")
        )
    });
    Outcome::ran(
        CLASS,
        "store log + client replies",
        hits.count,
        anomalies,
        inconclusive,
    )
}

fn explain(ctx: &Context<'_>, hit: &Mismatch) -> Anomaly {
    let call = ctx.at(hit.invoke);
    let reply = ctx.at(hit.reply);
    let write_id = call.write_id.as_deref().unwrap_or("(no id)");
    let mut story = Story::new(call.process.as_str());
    story.add(
        hit.invoke,
        format!(
            "sent write {write_id} with token {} to key {} {}",
            call.token
                .map_or("(none)".into(), |token| token.to_string()),
            call.key.as_deref().unwrap_or("(no key)"),
            when(ctx, &call, "its")
        ),
    );
    let faults = faults_between(ctx, &call.process, hit.invoke, hit.reply);
    story.add_faults(ctx, &faults);
    let mut cited = vec![hit.invoke, hit.reply];
    cited.extend(faults);
    cited.extend(hit.applied);
    cited.extend(hit.higher_before);
    let verdict = match hit.applied {
        None => {
            story.add(
                hit.reply,
                format!("was told ok {}", when(ctx, &reply, "its")),
            );
            let higher = hit.higher_before.map_or(String::new(), |log| {
                let log = ctx.at(log);
                format!(
                    "; before that reply the store had applied write {} with token {}, higher \
                     than this write's, {}",
                    log.write_id.as_deref().unwrap_or("(no id)"),
                    log.token.map_or("(none)".into(), |token| token.to_string()),
                    at_store_order(ctx, &log)
                )
            });
            format!(
                "but the store never applied it: no store log entry carries write id \
                 {write_id} for that call{higher}. The store acknowledged a write it did not \
                 apply (a lost acknowledged write); ok must mean applied."
            )
        }
        Some(applied) => {
            let log = ctx.at(applied);
            let told = match (reply.error.as_deref(), reply.current_token) {
                (Some("rejected"), Some(current)) => {
                    format!("was told it was rejected (current token {current})")
                }
                (Some(error), _) => format!("was told it failed ({error})"),
                (None, _) => "was told it failed".to_string(),
            };
            story.add(hit.reply, format!("{told} {}", when(ctx, &reply, "its")));
            format!(
                "but the store applied it {}. A worker told fail believes the \
                 write did not happen and may retry or give up on an effect that is already \
                 there; fail must mean definitely not applied, otherwise the reply must be \
                 unknown (info).",
                at_store_order(ctx, &log)
            )
        }
    };
    Anomaly {
        class: CLASS,
        severity: crate::verdict::Severity::Failure,
        events: ctx.indexes(cited),
        explanation: format!("{}, {verdict}", story.render()),
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

    #[test]
    fn ok_for_a_write_the_store_never_applied_is_a_mismatch() {
        let mut b = Builder::new();
        b.write("w0", "k", 1, "w0-0", true);
        let invoke = b.invoke_write("w1", "k", 2, "w1-0");
        let pause = b.pause("w1", 2.0);
        let ok = b.ok("w1");
        let outcome = run(&b);
        assert_eq!(outcome.report.validity, Validity::Invalid);
        assert_eq!(outcome.report.evidence, "store log + client replies");
        assert_eq!(outcome.report.anomalies, 1);
        let anomaly = &outcome.anomalies[0];
        assert_eq!(anomaly.class, AnomalyClass::AckMismatch);
        assert_eq!(anomaly.events, vec![invoke, pause, ok]);
        let text = &anomaly.explanation;
        assert!(
            text.contains("w1 sent write w1-0 with token 2 to key k"),
            "{text}"
        );
        assert!(text.contains("was paused 2.000s"), "{text}");
        assert!(text.contains("never applied it"), "{text}");
    }

    #[test]
    fn an_ok_for_a_refused_stale_write_names_the_higher_token_the_store_held() {
        let mut b = Builder::new();
        let invoke = b.invoke_write("w1", "k", 2, "w1-0");
        let newer = b.write("w0", "k", 3, "w0-0", true);
        // Applied after the reply: it cannot be why the store refused the call.
        let ok = b.ok("w1");
        b.write("w2", "k", 4, "w2-0", true);
        let outcome = run(&b);
        assert_eq!(outcome.report.anomalies, 1);
        assert_eq!(outcome.anomalies[0].events, vec![invoke, newer, ok]);
        let text = &outcome.anomalies[0].explanation;
        assert!(
            text.contains(
                "before that reply the store had applied write w0-0 with token 3, higher than \
                 this write's, at"
            ),
            "{text}"
        );
    }

    #[test]
    fn an_ok_for_a_write_no_higher_token_preceded_names_none() {
        let mut b = Builder::new();
        b.write("w0", "k", 2, "w0-0", true);
        b.invoke_write("w1", "k", 2, "w1-0");
        b.ok("w1");
        let outcome = run(&b);
        assert_eq!(outcome.report.anomalies, 1);
        let text = &outcome.anomalies[0].explanation;
        assert!(!text.contains("higher than"), "{text}");
    }

    #[test]
    fn fail_for_a_write_the_store_applied_is_a_mismatch() {
        let mut b = Builder::new();
        b.applied("k", 5, "w9-0");
        let invoke = b.invoke_write("w1", "k", 2, "w1-0");
        let applied = b.applied("k", 2, "w1-0");
        let fail = b.complete("w1", EventType::Fail, |e| {
            e.current_token = Some(5);
            e.error = Some("rejected".into());
        });
        let outcome = run(&b);
        assert_eq!(outcome.report.anomalies, 1);
        assert_eq!(outcome.anomalies[0].events, vec![invoke, applied, fail]);
        let text = &outcome.anomalies[0].explanation;
        assert!(
            text.contains("was told it was rejected (current token 5)"),
            "{text}"
        );
        assert!(
            text.contains("but the store applied it at 0.002s (store clock 0.002s, store order 2)"),
            "{text}"
        );
    }

    #[test]
    fn the_same_write_id_applied_to_another_key_does_not_vouch_for_an_ok() {
        let mut b = Builder::new();
        // `x` on key `k` is told ok, but the store applied `x` only to `j`, meanwhile.
        b.invoke_write("w0", "j", 1, "x");
        b.invoke_write("w1", "k", 1, "x");
        b.applied("j", 1, "x");
        b.ok("w0");
        let ok = b.ok("w1");
        let outcome = run(&b);
        assert_eq!(outcome.report.anomalies, 1);
        assert!(outcome.anomalies[0].events.contains(&ok));
    }

    #[test]
    fn truthful_replies_and_unknown_ones_are_fine() {
        let mut b = Builder::new();
        b.write("w0", "k", 3, "w0-0", true);
        b.rejected_write("w1", "k", 2, "w1-0", 3);
        // Unknown outcome: applied or not, info promises nothing.
        b.invoke_write("w2", "k", 4, "w2-0");
        b.applied("k", 4, "w2-0");
        b.info("w2");
        b.invoke_write("w3", "k", 5, "w3-0");
        b.info("w3");
        // A retry: the first try failed before the store saw it, the second applied.
        b.rejected_write("w4", "k", 6, "w4-0", 5);
        b.write("w4", "k", 6, "w4-0", true);
        let outcome = run(&b);
        assert_eq!(
            outcome.report.validity,
            Validity::Valid,
            "{:?}",
            outcome.anomalies
        );
    }

    #[test]
    fn without_a_store_log_the_checker_is_skipped() {
        let mut b = Builder::new();
        b.write("w0", "k", 3, "w0-0", false);
        let outcome = run(&b);
        assert_eq!(
            outcome.report.skipped.as_deref(),
            Some("needs the store's log of applied writes")
        );
    }
}
