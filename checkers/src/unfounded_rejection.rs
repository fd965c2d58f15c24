//! `unfounded-rejection`: did the store refuse a write as stale although it had accepted no
//! higher token for the key?
//!
//! A `Rejected` reply says the store had already accepted a newer token. Refusing is always
//! safe for the data, so no safety checker notices a store that refuses too much; but a false
//! refusal tells a live holder it has been superseded, and a store that refuses every new
//! holder stops all progress while every verdict stays valid. The reply is held to what the
//! store can have accepted before it refused: with the store's log, a write it applied with a
//! higher token (before the refusal, when the log is timed; anywhere in it, when it was read
//! back after the run); without it, a write sent with a higher token before the refusal and
//! not itself refused (`fail` means never applied; `ok` and unknown outcomes may have been).

use fencer_harness::{EventType, Op, RowRef, Sym};

use crate::context::{Context, is_store_log};
use crate::explain::{at_store_order, secs, when};
use crate::findings::{Hits, Outcome};
use crate::index::FastMap;
use crate::verdict::{Anomaly, AnomalyClass};

const CLASS: AnomalyClass = AnomalyClass::UnfoundedRejection;

/// Per key, writes that may have been accepted, as (history position, token) in position
/// order, with the highest token up to each entry and the entry that carried it.
#[derive(Default)]
struct Accepted {
    positions: Vec<usize>,
    highest: Vec<(u64, usize)>,
}

impl Accepted {
    fn push(&mut self, position: usize, token: u64) {
        let best = match self.highest.last() {
            Some(&(top, at)) if top >= token => (top, at),
            _ => (token, position),
        };
        self.positions.push(position);
        self.highest.push(best);
    }

    /// The highest token (and where it was sent) among entries before `before`.
    fn highest_before(&self, before: usize) -> Option<(u64, usize)> {
        let end = self
            .positions
            .partition_point(|&position| position < before);
        end.checked_sub(1).map(|last| self.highest[last])
    }
}

/// Without the store's log: by key, the writes sent and not refused, by their invoke (their
/// outcome is known only once they complete, so this takes its own pass).
fn sent_and_not_refused(ctx: &Context<'_>) -> FastMap<Sym, Accepted> {
    let mut open: FastMap<Sym, usize> = FastMap::default();
    let mut sent: Vec<usize> = Vec::new();
    for (position, ref row) in ctx.rows_where(|_, f| f == Op::Write) {
        if row.f != Op::Write {
            continue;
        }
        match row.kind {
            EventType::Invoke => {
                open.insert(row.process, position);
            }
            EventType::Ok | EventType::Info => sent.extend(open.remove(&row.process)),
            EventType::Fail => {
                open.remove(&row.process);
            }
            EventType::Nemesis | EventType::Log | EventType::Notice => {}
        }
    }
    sent.extend(open.into_values());
    sent.sort_unstable();
    let mut by_key: FastMap<Sym, Accepted> = FastMap::default();
    for invoke in sent {
        let row = &ctx.rows.get(invoke);
        if let (Some(key), Some(token)) = (row.key, row.token()) {
            by_key.entry(key).or_default().push(invoke, token);
        }
    }
    by_key
}

/// A refusal no accepted token justified: the reply, and the highest token the store can have
/// accepted by then (with where it was applied or sent), if any.
struct Hit {
    reply: usize,
    highest: Option<(u64, usize)>,
}

/// Keeps, per key, the highest token a store log entry applied and where.
fn record_applied(applied: &mut FastMap<Sym, (u64, usize)>, position: usize, row: &RowRef<'_>) {
    if let (true, Some(key), Some(token)) = (is_store_log(row), row.key, row.token()) {
        let top = applied.entry(key).or_insert((token, position));
        if token > top.0 {
            *top = (token, position);
        }
    }
}

/// A refusal as stale names the fence (`current_token`); other failures claim nothing.
fn is_refusal(row: &RowRef<'_>) -> bool {
    row.is(EventType::Fail, Op::Write) && row.current_token().is_some()
}

/// Runs the check on the store log if there is one, else on client replies. With a log
/// recorded as writes applied, one pass keeps each key's highest applied token; a log read
/// back after the run counts whole; without one, what may have been accepted is what was sent
/// and not refused.
pub(crate) fn check(ctx: &Context<'_>) -> Outcome {
    let mut hits = Hits::new();
    let mut judge = |position: usize, highest: Option<(u64, usize)>| {
        let row = &ctx.rows.get(position);
        if row.token().is_some() && highest.is_none_or(|(top, _)| Some(top) <= row.token()) {
            hits.push(Hit {
                reply: position,
                highest,
            });
        }
    };
    if ctx.has_store_log {
        let mut applied: FastMap<Sym, (u64, usize)> = FastMap::default();
        if !ctx.store_log_timed {
            for (position, ref row) in ctx.rows_where(|_, f| f == Op::Write) {
                record_applied(&mut applied, position, row);
            }
        }
        for (position, ref row) in ctx.rows_where(|_, f| f == Op::Write) {
            if ctx.store_log_timed {
                record_applied(&mut applied, position, row);
            }
            if is_refusal(row) {
                let highest = row.key.and_then(|key| applied.get(&key).copied());
                judge(position, highest);
            }
        }
    } else {
        let accepted = sent_and_not_refused(ctx);
        for (position, ref row) in ctx.rows_where(|_, f| f == Op::Write) {
            if is_refusal(row) {
                let highest = row
                    .key
                    .and_then(|key| accepted.get(&key))
                    .and_then(|accepted| accepted.highest_before(position));
                judge(position, highest);
            }
        }
    }
    let evidence = if ctx.has_store_log {
        "store log + client replies"
    } else {
        "client replies"
    };
    let anomalies = hits.kept.iter().map(|hit| explain(ctx, hit)).collect();
    Outcome::ran(CLASS, evidence, hits.count, anomalies, None)
}

fn explain(ctx: &Context<'_>, hit: &Hit) -> Anomaly {
    let invoke = ctx.lookup().partner(hit.reply).unwrap_or(hit.reply);
    let call = ctx.at(invoke);
    let reply = ctx.at(hit.reply);
    let token = call.token.unwrap_or_default();
    let key = call.key.as_deref().unwrap_or("(no key)");
    let mut cited = vec![invoke, hit.reply];
    let accepted = match hit.highest {
        None if ctx.has_store_log => format!("the store's log shows no write applied to key {key}"),
        None => format!("no write to key {key} had been sent that the store did not refuse"),
        Some((top, at)) => {
            cited.push(at);
            let source = ctx.at(at);
            if source.kind == EventType::Log {
                let order = if ctx.store_log_timed {
                    at_store_order(ctx, &source)
                } else {
                    format!(
                        "(store order {})",
                        source.seq.map_or("unknown".into(), |seq| seq.to_string())
                    )
                };
                format!(
                    "the highest token the store had applied to key {key} was {top} (write {} \
                     {order})",
                    source.write_id.as_deref().unwrap_or("(no id)")
                )
            } else {
                format!(
                    "the highest token sent to key {key} and not refused was {top} ({}'s write \
                     {}, sent at {})",
                    source.process,
                    source.write_id.as_deref().unwrap_or("(no id)"),
                    secs(source.time_ns)
                )
            }
        }
    };
    Anomaly {
        class: CLASS,
        severity: crate::verdict::Severity::Failure,
        events: ctx.indexes(cited),
        explanation: format!(
            "{} sent write {} with token {token} to key {key} {} and was told it was rejected \
             as stale (current token {}) {}; but {accepted}, none above {token}. A store may \
             refuse a write only after accepting a newer token: a false refusal tells a live \
             holder it was superseded, and a store that refuses every new holder stops all \
             progress while no safety check notices.",
            call.process,
            call.write_id.as_deref().unwrap_or("(no id)"),
            when(ctx, &call, "its"),
            reply.current_token.unwrap_or_default(),
            when(ctx, &reply, "its"),
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

    #[test]
    fn a_refusal_after_a_higher_token_was_accepted_is_founded_both_ways() {
        for logged in [true, false] {
            let mut b = Builder::new();
            b.write("w2", "k", 2, "w2-0", logged);
            b.rejected_write("w1", "k", 1, "w1-0", 2);
            // Equal tokens are allowed, so only a higher one justifies a refusal.
            b.rejected_write("w3", "k", 1, "w3-0", 2);
            let outcome = run(&b);
            assert_eq!(outcome.report.validity, Validity::Valid, "logged {logged}");
        }
        // Without the log, a higher write still in flight, or answered unknown, may have been
        // accepted already.
        let mut b = Builder::new();
        b.invoke_write("w2", "k", 5, "w2-0");
        b.rejected_write("w1", "k", 1, "w1-0", 5);
        b.info("w2");
        assert_eq!(run(&b).report.validity, Validity::Valid);
    }

    #[test]
    fn a_refusal_no_accepted_token_justifies_is_unfounded_both_ways() {
        for logged in [true, false] {
            let mut b = Builder::new();
            // The store log entry when logged, else the write's invoke (the ok is next).
            let accepted = b.write("w0", "k", 3, "w0-0", logged) - u64::from(!logged);
            // A higher write the store refused (fail: never applied) justifies nothing.
            b.rejected_write("w2", "k", 8, "w2-0", 9);
            let invoke = b.invoke_write("w1", "k", 4, "w1-0");
            let refused = b.complete("w1", EventType::Fail, |e| {
                e.current_token = Some(9);
                e.error = Some("rejected".into());
            });
            let outcome = run(&b);
            assert_eq!(
                outcome.report.validity,
                Validity::Invalid,
                "logged {logged}"
            );
            // w2's refusal (8 > 3) and w1's.
            assert_eq!(outcome.report.anomalies, 2);
            let anomaly = &outcome.anomalies[1];
            assert_eq!(anomaly.events, vec![accepted, invoke, refused]);
            let text = &anomaly.explanation;
            assert!(
                text.starts_with("w1 sent write w1-0 with token 4 to key k at 0.00"),
                "{text}"
            );
            assert!(
                text.contains("was told it was rejected as stale (current token 9)"),
                "{text}"
            );
            let source = if logged {
                "the highest token the store had applied to key k was 3 (write w0-0 at"
            } else {
                "the highest token sent to key k and not refused was 3 (w0's write w0-0, sent at"
            };
            assert!(text.contains(source), "{text}");
        }
    }

    #[test]
    fn a_refusal_of_the_first_write_is_unfounded() {
        let mut b = Builder::new();
        b.rejected_write("w1", "k", 1, "w1-0", 0);
        let outcome = run(&b);
        assert_eq!(outcome.report.anomalies, 1);
        assert!(
            outcome.anomalies[0]
                .explanation
                .contains("no write to key k had been sent that the store did not refuse"),
            "{}",
            outcome.anomalies[0].explanation
        );
        // A failure that names no fence (the store was unreachable) claims nothing.
        let mut b = Builder::new();
        b.invoke_write("w1", "k", 1, "w1-0");
        b.fail("w1", "connection refused");
        assert_eq!(run(&b).report.validity, Validity::Valid);
    }
}
