//! `phantom-read`: did a read return a write that cannot have been in the store?
//!
//! A read returns the last applied write's token, id and value. So what it names must be a
//! write some client sent to that key before the read returned, carrying that token and value;
//! one whose every send had been answered `fail` (definitely not applied) by then, with none
//! still in flight, cannot be there; and with the store's log, it must be a write the store
//! applied (before the read returned, when the log is timed). A read that names no write id is held to its value instead: some write must
//! have sent it (the initial value, no value, `""` or `0`, is never a phantom).
//!
//! Stale or lost values are other checkers' questions; this one catches a store that invents,
//! corrupts or resurrects data.

use fencer_harness::{EventType, Op, RowRef, Sym};

use crate::context::Context;
use crate::explain::{at_store_order, when};
use crate::findings::{Hits, Outcome};
use crate::index::FastMap;
use crate::verdict::{Anomaly, AnomalyClass};

const CLASS: AnomalyClass = AnomalyClass::PhantomRead;

/// The first send of one write id to one key, and what its sends were told so far.
struct Sent {
    invoke: usize,
    token: Option<u64>,
    value: Option<Sym>,
    /// Some send was answered `ok` or `info`.
    maybe_applied: bool,
    /// Sends not answered yet.
    in_flight: u32,
}

/// What a phantom read contradicts.
enum Why {
    /// No write with that id (or value) was sent to the key before the read returned.
    NeverSent,
    /// The write was sent with another token or value (its first send).
    Altered { sent: usize },
    /// Every send of the write had been refused before the read returned.
    Refused { sent: usize },
    /// The store log never applied it (before the read returned, if the log is timed).
    NeverApplied { sent: usize },
}

struct Hit {
    invoke: usize,
    reply: usize,
    why: Why,
}

/// Whether a value may be the register's initial one.
fn is_initial(text: &str) -> bool {
    text.is_empty() || text == "0"
}

/// Judges a read that names write `write_id` of `key`, answered at `reply`.
fn judge_named(
    ctx: &Context<'_>,
    sent: Option<&Sent>,
    read: &RowRef<'_>,
    key: Sym,
    write_id: Sym,
    reply: usize,
) -> Option<Why> {
    let Some(sent) = sent else {
        return Some(Why::NeverSent);
    };
    let altered = read.token().is_some_and(|token| Some(token) != sent.token)
        || read.value.is_some_and(|value| Some(value) != sent.value);
    if altered {
        return Some(Why::Altered { sent: sent.invoke });
    }
    if !sent.maybe_applied && sent.in_flight == 0 {
        return Some(Why::Refused { sent: sent.invoke });
    }
    // A log read back after the run has no times: any application counts.
    let before = if ctx.store_log_timed {
        reply
    } else {
        usize::MAX
    };
    let applied = ctx.versions().applied_before(key, write_id, before);
    (ctx.has_store_log && applied.is_none()).then_some(Why::NeverApplied { sent: sent.invoke })
}

/// Runs the check on client calls (and the store log, if any), in one pass; reads that name
/// only a value are judged after it, against every value sent before them.
pub(crate) fn check(ctx: &Context<'_>) -> Outcome {
    let mut sent: FastMap<(Sym, Sym), Sent> = FastMap::default();
    let mut writing: FastMap<Sym, (Sym, Sym)> = FastMap::default();
    let mut reading: FastMap<Sym, usize> = FastMap::default();
    let mut by_value: Vec<(usize, usize)> = Vec::new();
    let mut found: Vec<Hit> = Vec::new();
    for (position, ref row) in ctx.rows_where(|_, f| matches!(f, Op::Read | Op::Write)) {
        match (row.f, row.kind) {
            (Op::Write, EventType::Invoke) => {
                let (Some(key), Some(write_id)) = (row.key, row.write_id) else {
                    continue;
                };
                let entry = sent.entry((key, write_id)).or_insert(Sent {
                    invoke: position,
                    token: row.token(),
                    value: row.value,
                    maybe_applied: false,
                    in_flight: 0,
                });
                entry.in_flight += 1;
                writing.insert(row.process, (key, write_id));
            }
            (Op::Write, kind) if kind.is_completion() => {
                if let Some(write) = writing.remove(&row.process)
                    && let Some(entry) = sent.get_mut(&write)
                {
                    entry.in_flight = entry.in_flight.saturating_sub(1);
                    entry.maybe_applied |= kind != EventType::Fail;
                }
            }
            (Op::Read, EventType::Invoke) => {
                reading.insert(row.process, position);
            }
            (Op::Read, EventType::Ok) => {
                let (Some(invoke), Some(key)) = (reading.remove(&row.process), row.key) else {
                    continue;
                };
                match row.write_id {
                    Some(write_id) => {
                        let why = judge_named(
                            ctx,
                            sent.get(&(key, write_id)),
                            row,
                            key,
                            write_id,
                            position,
                        );
                        if let Some(why) = why {
                            found.push(Hit {
                                invoke,
                                reply: position,
                                why,
                            });
                        }
                    }
                    None => {
                        if row.value.is_some_and(|value| !is_initial(ctx.text(value))) {
                            by_value.push((invoke, position));
                        }
                    }
                }
            }
            (Op::Read, _) => {
                reading.remove(&row.process);
            }
            _ => {}
        }
    }
    if !by_value.is_empty() {
        found.extend(values_never_sent(ctx, &by_value));
        found.sort_by_key(|hit| hit.reply);
    }
    let mut hits = Hits::new();
    for hit in found {
        hits.push(hit);
    }
    let evidence = if ctx.has_store_log {
        "client calls + store log"
    } else {
        "client calls"
    };
    let anomalies = hits.kept.iter().map(|hit| explain(ctx, hit)).collect();
    Outcome::ran(CLASS, evidence, hits.count, anomalies, None)
}

/// The reads (invoke, reply) among `reads` whose value no write sent to their key before they
/// returned.
fn values_never_sent(ctx: &Context<'_>, reads: &[(usize, usize)]) -> Vec<Hit> {
    let mut first_sent: FastMap<(Sym, Sym), usize> = FastMap::default();
    for (position, ref row) in ctx.rows_where(|kind, f| kind == EventType::Invoke && f == Op::Write)
    {
        if let (true, Some(key), Some(value)) =
            (row.is(EventType::Invoke, Op::Write), row.key, row.value)
        {
            first_sent.entry((key, value)).or_insert(position);
        }
    }
    reads
        .iter()
        .filter(|&&(_, reply)| {
            let row = &ctx.rows.get(reply);
            row.key
                .zip(row.value)
                .and_then(|read| first_sent.get(&read))
                .is_none_or(|&sent| sent > reply)
        })
        .map(|&(invoke, reply)| Hit {
            invoke,
            reply,
            why: Why::NeverSent,
        })
        .collect()
}

fn explain(ctx: &Context<'_>, hit: &Hit) -> Anomaly {
    let invoke = ctx.at(hit.invoke);
    let reply = ctx.at(hit.reply);
    let key = reply.key.as_deref().unwrap_or("(no key)");
    let mut cited = vec![hit.invoke, hit.reply];
    let seen = match (reply.write_id.as_deref(), reply.value.as_deref()) {
        (Some(id), _) => format!(
            "write {id} (token {}, value {})",
            reply
                .token
                .map_or("(none)".to_string(), |token| token.to_string()),
            reply.value.as_deref().unwrap_or("(none)")
        ),
        (None, value) => format!("value {}", value.unwrap_or("(none)")),
    };
    let sent_phrase = |sent: usize| {
        let call = ctx.at(sent);
        format!(
            "{} sent write {} with token {} and value {} {}",
            call.process,
            call.write_id.as_deref().unwrap_or("(no id)"),
            call.token
                .map_or("(none)".to_string(), |token| token.to_string()),
            call.value.as_deref().unwrap_or("(none)"),
            when(ctx, &call, "its")
        )
    };
    let why = match hit.why {
        Why::NeverSent => format!("no client had sent that to key {key} before the read returned"),
        Why::Altered { sent } => {
            cited.push(sent);
            format!(
                "{}: the read does not return what was written",
                sent_phrase(sent)
            )
        }
        Why::Refused { sent } => {
            cited.push(sent);
            format!(
                "{}, and every send of it was answered fail (definitely not applied)",
                sent_phrase(sent)
            )
        }
        Why::NeverApplied { sent } => {
            cited.push(sent);
            let row = &ctx.rows.get(hit.reply);
            let later = row
                .key
                .zip(row.write_id)
                .and_then(|(key, write_id)| {
                    ctx.versions().applied_before(key, write_id, usize::MAX)
                })
                .filter(|&applied| applied > hit.reply);
            match later {
                Some(applied) => {
                    cited.push(applied);
                    format!(
                        "{}, but the store applied it only {}, after the read had returned",
                        sent_phrase(sent),
                        at_store_order(ctx, &ctx.at(applied))
                    )
                }
                None => format!(
                    "{}, but the store's log never applied it",
                    sent_phrase(sent)
                ),
            }
        }
    };
    Anomaly {
        class: CLASS,
        severity: crate::verdict::Severity::Failure,
        events: ctx.indexes(cited),
        explanation: format!(
            "{} read key {key} {} and got {seen} (reply {}); but {why}. A read must return a \
             write the store applied, as it was written; this store returned data that cannot \
             have been there.",
            invoke.process,
            when(ctx, &invoke, "its"),
            when(ctx, &reply, "its"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use fencer_harness::{Event, PackedHistory};

    use super::*;
    use crate::testkit::Builder;
    use crate::verdict::Validity;

    fn run(builder: &Builder) -> Outcome {
        check(&Context::new(&PackedHistory::pack(&builder.build())))
    }

    fn saw(write_id: &str, token: u64) -> impl FnOnce(&mut Event) {
        let write_id = write_id.to_string();
        move |e| {
            e.token = Some(token);
            e.value = Some(format!("v-{write_id}"));
            e.write_id = Some(write_id);
        }
    }

    #[test]
    fn reads_of_written_values_and_of_the_initial_one_are_real_both_ways() {
        for logged in [true, false] {
            let mut b = Builder::new();
            b.read("r", "k", |e| e.token = Some(0));
            b.read("r", "k", |e| e.value = Some("0".into()));
            b.write("w1", "k", 1, "a", logged);
            b.read("r", "k", saw("a", 1));
            // A write whose reply was lost may have been applied.
            b.invoke_write("w2", "k", 2, "b");
            if logged {
                b.applied("k", 2, "b");
            }
            b.info("w2");
            b.read("r", "k", saw("b", 2));
            // A store that returns values only, which some write sent.
            b.read("r", "k", |e| e.value = Some("v-b".into()));
            let outcome = run(&b);
            assert_eq!(outcome.report.validity, Validity::Valid, "logged {logged}");
        }
    }

    #[test]
    fn a_read_of_a_write_nobody_sent_or_sent_otherwise_is_a_phantom() {
        let mut b = Builder::new();
        let sent = b.invoke_write("w1", "k", 1, "a");
        b.ok("w1");
        let invented = b.read("r", "k", saw("z", 1));
        let altered = b.read("r", "k", saw("a", 7));
        b.read("r", "k", |e| e.value = Some("v-nobody".into()));
        let outcome = run(&b);
        assert_eq!(outcome.report.anomalies, 3);
        assert!(outcome.anomalies[0].events.contains(&invented));
        let text = &outcome.anomalies[0].explanation;
        assert!(text.contains("got write z (token 1, value v-z)"), "{text}");
        assert!(
            text.contains("no client had sent that to key k before the read returned"),
            "{text}"
        );
        assert!(outcome.anomalies[1].events.contains(&altered));
        assert!(outcome.anomalies[1].events.contains(&sent));
        assert!(
            outcome.anomalies[1]
                .explanation
                .contains("w1 sent write a with token 1 and value v-a"),
            "{}",
            outcome.anomalies[1].explanation
        );
        assert!(
            outcome.anomalies[2]
                .explanation
                .contains("got value v-nobody"),
            "{}",
            outcome.anomalies[2].explanation
        );
    }

    #[test]
    fn a_read_of_a_refused_or_unapplied_write_is_a_phantom() {
        let mut b = Builder::new();
        b.write("w0", "k", 5, "top", false);
        b.rejected_write("w1", "k", 1, "old", 5);
        b.read("r", "k", saw("old", 1));
        let outcome = run(&b);
        assert_eq!(outcome.report.anomalies, 1);
        assert!(
            outcome.anomalies[0]
                .explanation
                .contains("every send of it was answered fail"),
            "{}",
            outcome.anomalies[0].explanation
        );
        // With the store log: sent, answered unknown, never applied before the read.
        let mut b = Builder::new();
        b.invoke_write("w1", "k", 1, "a");
        b.info("w1");
        b.read("r", "k", saw("a", 1));
        b.applied("k", 1, "a");
        // A later call answered after a log entry: the log was recorded as writes applied.
        b.write("w2", "k", 2, "b", true);
        let outcome = run(&b);
        assert_eq!(outcome.report.anomalies, 1);
        assert!(
            outcome.anomalies[0]
                .explanation
                .contains("the store applied it only at"),
            "{}",
            outcome.anomalies[0].explanation
        );
    }
}
