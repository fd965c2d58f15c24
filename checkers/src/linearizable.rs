//! `nonlinearizable-register`: is the protected value, read and written by the workers, a
//! linearizable register?
//!
//! Every write carries a unique write id and every read returns the id it saw, so with the
//! store's log of applied writes the check is read-mapping (Gibbons & Korach): the log fixes
//! the order of versions, and a read is explained iff the version it returned was current at
//! some instant between its invoke and its reply — applied before the reply, and not yet
//! replaced when the read was sent. One indexed pass over the reads.
//!
//! Without a store log the order of writes is unknown and a bounded Wing–Gong/Lowe search
//! (per key) looks for one; when its budget runs out the result is `unknown`.

use std::time::{Duration, Instant};

use fencer_harness::{EventType, Op, RowRef, Sym};

use crate::context::Context;
use crate::explain::{at_store_order, count, when};
use crate::findings::{Hits, Outcome, Undecided};
use crate::index::FastMap;
use crate::search::{Call, INITIAL, RegisterOp, Search, linearize};
use crate::verdict::{Anomaly, AnomalyClass};
use crate::versions::{StoreVersions, Version};

const CLASS: AnomalyClass = AnomalyClass::NonlinearizableRegister;

/// Runs the read-mapping check on the store log, else the bounded search.
pub(crate) fn check(ctx: &Context<'_>) -> Outcome {
    if ctx.has_store_log && ctx.store_log_timed {
        read_mapping(ctx)
    } else {
        search(ctx)
    }
}

/// What a read returned (or a write wrote), as it names it: the write id, else the value.
fn named(row: &RowRef<'_>) -> Option<Sym> {
    row.write_id.or(row.value)
}

/// A read that no instant of its interval explains.
struct Unexplained {
    invoke: usize,
    reply: usize,
    /// The application of the version read, if the store applied it before the reply.
    seen: Option<Version>,
    /// The next version, applied before the read was sent (when `seen` is known).
    replaced_by: Option<usize>,
}

fn read_mapping(ctx: &Context<'_>) -> Outcome {
    let versions = ctx.versions();
    let mut open: FastMap<Sym, usize> = FastMap::default();
    let mut hits = Hits::new();
    for (position, ref row) in ctx.rows_where(|_, f| f == Op::Read) {
        if row.f != Op::Read {
            continue;
        }
        match row.kind {
            EventType::Invoke => {
                open.insert(row.process, position);
            }
            EventType::Ok => {
                let Some(invoke) = open.remove(&row.process) else {
                    continue;
                };
                let Some(key) = row.key else {
                    continue;
                };
                match versions.seen_by(ctx, row, position) {
                    None => {
                        hits.push(Unexplained {
                            invoke,
                            reply: position,
                            seen: None,
                            replaced_by: None,
                        });
                    }
                    Some(seen) => {
                        if let Some(next) =
                            versions.next_after(key, seen).filter(|&next| next < invoke)
                        {
                            hits.push(Unexplained {
                                invoke,
                                reply: position,
                                seen: Some(seen),
                                replaced_by: Some(next),
                            });
                        }
                    }
                }
            }
            EventType::Fail | EventType::Info => {
                open.remove(&row.process);
            }
            EventType::Nemesis | EventType::Log | EventType::Notice => {}
        }
    }
    let anomalies = hits
        .kept
        .iter()
        .map(|hit| explain_read(ctx, versions, hit))
        .collect();
    Outcome::ran(
        CLASS,
        "store log + reads (read-mapping)",
        hits.count,
        anomalies,
        None,
    )
}

fn explain_read(ctx: &Context<'_>, versions: &StoreVersions, hit: &Unexplained) -> Anomaly {
    let invoke = ctx.at(hit.invoke);
    let reply = ctx.at(hit.reply);
    let reply_row = &ctx.rows.get(hit.reply);
    let key = reply.key.as_deref().unwrap_or("(no key)");
    let name = ctx
        .text_of(named(reply_row))
        .map_or("the initial (empty) value".to_string(), |id| {
            format!("write {id}")
        });
    let mut cited = vec![hit.invoke, hit.reply];
    let why = match (hit.seen, hit.replaced_by) {
        (Some(seen), Some(next)) => {
            cited.push(next);
            let current = match seen {
                Version::Initial => String::new(),
                Version::Applied(applied) => {
                    cited.push(applied);
                    let applied = ctx.at(applied);
                    format!(" (the store applied it {})", at_store_order(ctx, &applied))
                }
            };
            let next_event = ctx.at(next);
            format!(
                "{name}{current} had already been replaced by write {} {} before the read was \
                 sent",
                next_event.write_id.as_deref().unwrap_or("(no id)"),
                at_store_order(ctx, &next_event)
            )
        }
        _ => {
            let later = reply_row.key.zip(reply_row.write_id).and_then(|(key, id)| {
                versions
                    .applied_before(key, id, usize::MAX)
                    .filter(|&applied| applied > hit.reply)
            });
            match later {
                Some(applied) => {
                    cited.push(applied);
                    let applied = ctx.at(applied);
                    format!(
                        "the store applied {name} only {}, after the read had returned",
                        at_store_order(ctx, &applied)
                    )
                }
                None => format!("the store never applied {name} to key {key}"),
            }
        }
    };
    Anomaly {
        class: CLASS,
        severity: crate::verdict::Severity::Failure,
        events: ctx.indexes(cited),
        explanation: format!(
            "{} read key {key} {} and got {name} (reply {}); but {why}. No instant between \
             the read's invoke and reply had that value, so the register is not linearizable.",
            invoke.process,
            when(ctx, &invoke, "its"),
            when(ctx, &reply, "its"),
        ),
    }
}

/// One key's calls for the search, and where they came from.
#[derive(Default)]
struct KeyCalls {
    calls: Vec<Call>,
    /// Write id (or value) names, numbered from 0 for the search.
    names: Vec<Sym>,
    index_of: FastMap<Sym, u32>,
}

impl KeyCalls {
    fn intern(&mut self, name: Sym) -> u32 {
        if let Some(&index) = self.index_of.get(&name) {
            return index;
        }
        let index = self.names.len() as u32;
        self.names.push(name);
        self.index_of.insert(name, index);
        index
    }
}

fn search(ctx: &Context<'_>) -> Outcome {
    let started = Instant::now();
    let deadline = started + Duration::from_millis(ctx.options.search_budget_ms);
    let mut keys: FastMap<Sym, KeyCalls> = FastMap::default();
    let mut key_order: Vec<Sym> = Vec::new();
    let mut open: FastMap<Sym, (usize, Option<Sym>)> = FastMap::default();
    for (position, ref row) in ctx.rows_where(|_, f| matches!(f, Op::Read | Op::Write)) {
        if !matches!(row.f, Op::Read | Op::Write) {
            continue;
        }
        match row.kind {
            EventType::Invoke => {
                open.insert(row.process, (position, row.key));
            }
            EventType::Ok | EventType::Fail | EventType::Info => {
                let Some((invoke, Some(key))) = open.remove(&row.process) else {
                    continue;
                };
                let reply = (row.kind == EventType::Ok).then_some(position);
                let taken = row.kind != EventType::Fail;
                let calls = keys.entry(key).or_insert_with(|| {
                    key_order.push(key);
                    KeyCalls::default()
                });
                match row.f {
                    Op::Write if taken => {
                        if let Some(name) = named(&ctx.rows.get(invoke)) {
                            let id = calls.intern(name);
                            calls.calls.push(Call {
                                invoke,
                                reply,
                                op: RegisterOp::Write(id),
                            });
                        }
                    }
                    Op::Read if reply.is_some() => {
                        let seen = named(row).map_or(INITIAL, |name| calls.intern(name));
                        calls.calls.push(Call {
                            invoke,
                            reply,
                            op: RegisterOp::Read(seen),
                        });
                    }
                    _ => {}
                }
            }
            EventType::Nemesis | EventType::Log | EventType::Notice => {}
        }
    }
    // Calls never answered may still have taken effect (writes only). Taken in history order,
    // not the map's, so the search numbers them the same way on every machine.
    let mut unanswered: Vec<(usize, Option<Sym>)> = open.into_values().collect();
    unanswered.sort_unstable_by_key(|&(invoke, _)| invoke);
    for (invoke, key) in unanswered {
        let row = &ctx.rows.get(invoke);
        if let (Op::Write, Some(key), Some(name)) = (row.f, key, named(row))
            && let Some(calls) = keys.get_mut(&key)
        {
            let id = calls.intern(name);
            calls.calls.push(Call {
                invoke,
                reply: None,
                op: RegisterOp::Write(id),
            });
        }
    }
    // A write with unknown outcome that no read saw can always be linearized last (as if it
    // never happened) without changing what any read returned: leave it out of the search,
    // where every such write would otherwise multiply the states to explore.
    for calls in keys.values_mut() {
        let mut observed = vec![false; calls.names.len()];
        for call in &calls.calls {
            if let RegisterOp::Read(id) = call.op
                && id != INITIAL
            {
                observed[id as usize] = true;
            }
        }
        calls.calls.retain(|call| match call.op {
            RegisterOp::Write(id) => call.reply.is_some() || observed[id as usize],
            RegisterOp::Read(_) => true,
        });
        calls.calls.sort_by_key(|call| call.invoke);
    }
    // Keys are searched (and reported) in text order; distinct keys have distinct texts.
    key_order.sort_unstable_by_key(|&key| ctx.text(key));
    let mut hits = Hits::new();
    let mut out_of_budget = Vec::new();
    // The unknown-outcome writes of the keys left unsettled: the calls that multiplied the
    // orders to try.
    let mut unsettled = Undecided::new();
    for key in key_order {
        let calls = &keys[&key];
        match linearize(&calls.calls, deadline) {
            Search::Linearizable => {}
            Search::Violation {
                blocked,
                state,
                depth,
            } => {
                hits.push((key, blocked, state, depth));
            }
            Search::OutOfBudget { explored } => {
                for call in &calls.calls {
                    if call.reply.is_none() {
                        unsettled.push(call.invoke);
                    }
                }
                out_of_budget.push(format!(
                    "key {} ({}, {} explored)",
                    ctx.text(key),
                    count(calls.calls.len(), "call", "calls"),
                    count(explored, "state", "states")
                ));
            }
        }
    }
    let anomalies = hits
        .kept
        .iter()
        .map(|&(key, blocked, state, depth)| {
            explain_search(ctx, ctx.text(key), &keys[&key], blocked, state, depth)
        })
        .collect();
    let inconclusive = (!out_of_budget.is_empty()).then(|| {
        let mut reason = format!(
            "the {} ms search budget ran out on {}",
            ctx.options.search_budget_ms,
            out_of_budget.join(", ")
        );
        if unsettled.count() > 0 {
            reason.push_str("; the writes with unknown outcome it had to place");
        }
        unsettled.with_reason(ctx, reason)
    });
    Outcome::ran(
        CLASS,
        "client replies (linearizability search)",
        hits.count,
        anomalies,
        inconclusive,
    )
}

fn explain_search(
    ctx: &Context<'_>,
    key: &str,
    calls: &KeyCalls,
    blocked: usize,
    state: u32,
    depth: usize,
) -> Anomaly {
    let call = calls.calls[blocked];
    let name_of = |id: u32| {
        if id == INITIAL {
            "the initial (empty) value".to_string()
        } else {
            format!("write {}", ctx.text(calls.names[id as usize]))
        }
    };
    let invoke = ctx.at(call.invoke);
    let mut cited = vec![call.invoke];
    cited.extend(call.reply);
    let what = match call.op {
        RegisterOp::Read(id) => format!("read key {key} and got {}", name_of(id)),
        RegisterOp::Write(id) => format!("wrote {} to key {key}", name_of(id)),
    };
    let replied = call
        .reply
        .map(|reply| {
            let reply = ctx.at(reply);
            format!(", reply {}", when(ctx, &reply, "its"))
        })
        .unwrap_or_default();
    // The write the register held at the dead end, as evidence.
    if state != INITIAL {
        let holder = calls
            .calls
            .iter()
            .find(|other| other.op == RegisterOp::Write(state));
        if let Some(holder) = holder {
            cited.push(holder.invoke);
            cited.extend(holder.reply);
        }
    }
    if let RegisterOp::Read(id) = call.op
        && id != INITIAL
        && let Some(source) = calls
            .calls
            .iter()
            .find(|other| other.op == RegisterOp::Write(id))
    {
        cited.push(source.invoke);
        cited.extend(source.reply);
    }
    Anomaly {
        class: CLASS,
        severity: crate::verdict::Severity::Failure,
        events: ctx.indexes(cited),
        explanation: format!(
            "No order of the {} on key {key} explains what the workers saw (judged from client \
             replies; the history has no store log). The deepest attempt placed {depth} of them \
             and then had to place: {} {what} (sent {}{replied}), while the register held {}. \
             The register is not linearizable.",
            count(calls.calls.len(), "reads and writes", "reads and writes"),
            invoke.process,
            when(ctx, &invoke, "its"),
            name_of(state),
        ),
    }
}

#[cfg(test)]
mod tests {
    use fencer_harness::PackedHistory;

    use super::*;
    use crate::options::CheckOptions;
    use crate::testkit::Builder;
    use crate::verdict::Validity;

    fn read(b: &mut Builder, process: &str, seen: Option<&str>) -> u64 {
        b.invoke(process, Op::Read, |e| e.key = Some("k".into()));
        b.complete(process, EventType::Ok, |e| {
            e.write_id = seen.map(str::to_string)
        })
    }

    fn run(b: &Builder, budget_ms: u64) -> Outcome {
        let history = PackedHistory::pack(&b.build());
        let options = CheckOptions {
            search_budget_ms: budget_ms,
            ..CheckOptions::default()
        };
        check(&Context::with_options(&history, options))
    }

    /// Writes a then b; a reader sees b, then (after both completed) a: not linearizable.
    fn flip_flop(logged: bool) -> Builder {
        let mut b = Builder::new();
        b.write("w1", "k", 1, "a", logged);
        b.write("w2", "k", 2, "b", logged);
        read(&mut b, "r", Some("b"));
        read(&mut b, "r", Some("a"));
        b
    }

    #[test]
    fn reading_an_overwritten_version_is_not_linearizable_both_ways() {
        let logged = run(&flip_flop(true), 10_000);
        assert_eq!(logged.report.validity, Validity::Invalid);
        assert_eq!(logged.report.anomalies, 1);
        let text = &logged.anomalies[0].explanation;
        assert!(text.contains("got write a"), "{text}");
        assert!(text.contains("already been replaced by write b"), "{text}");
        let searched = run(&flip_flop(false), 10_000);
        assert_eq!(searched.report.validity, Validity::Invalid);
        assert_eq!(
            searched.report.evidence,
            "client replies (linearizability search)"
        );
        let text = &searched.anomalies[0].explanation;
        assert!(text.contains("r read key k and got write a"), "{text}");
        assert!(text.contains("while the register held write b"), "{text}");
    }

    /// Two overlapping writes and reads during them: any order of the writes explains them.
    fn concurrent(logged: bool, info: bool) -> Builder {
        let mut b = Builder::new();
        b.invoke_write("w1", "k", 1, "a");
        b.invoke_write("w2", "k", 2, "b");
        if logged {
            b.applied("k", 2, "b");
        }
        read(&mut b, "r", Some("b"));
        if logged {
            b.applied("k", 1, "a");
        }
        if info {
            b.info("w1");
        } else {
            b.ok("w1");
        }
        b.ok("w2");
        read(&mut b, "r", Some("a"));
        read(&mut b, "r", Some("a"));
        b
    }

    #[test]
    fn concurrent_writes_and_unknown_writes_are_linearizable_both_ways() {
        for logged in [true, false] {
            for info in [true, false] {
                let outcome = run(&concurrent(logged, info), 10_000);
                assert_eq!(
                    outcome.report.validity,
                    Validity::Valid,
                    "logged {logged} info {info}: {:?}",
                    outcome.anomalies
                );
            }
        }
    }

    #[test]
    fn an_unknown_write_settled_by_the_store_log() {
        // w1's write timed out; the log says it was applied before the read: reading the
        // initial value after that is not linearizable, reading a is.
        for (seen, valid) in [(None, false), (Some("a"), true)] {
            let mut b = Builder::new();
            b.invoke_write("w1", "k", 1, "a");
            b.applied("k", 1, "a");
            b.info("w1");
            read(&mut b, "r", seen);
            let outcome = run(&b, 10_000);
            assert_eq!(
                outcome.report.validity == Validity::Valid,
                valid,
                "{seen:?}"
            );
        }
    }

    #[test]
    fn a_read_of_a_write_never_applied_is_not_linearizable() {
        let mut b = Builder::new();
        b.write("w1", "k", 1, "a", true);
        b.rejected_write("w2", "k", 0, "ghost", 1);
        read(&mut b, "r", Some("ghost"));
        let outcome = run(&b, 10_000);
        assert_eq!(outcome.report.anomalies, 1);
        assert!(
            outcome.anomalies[0]
                .explanation
                .contains("the store never applied write ghost to key k"),
            "{}",
            outcome.anomalies[0].explanation
        );
    }

    #[test]
    fn unknown_writes_nobody_read_do_not_blow_up_the_search() {
        // 40 timed-out writes stay concurrent with everything after them: 2^40 subsets for a
        // naive search. None was read, so none needs placing.
        let mut b = Builder::new();
        for n in 0..40 {
            b.invoke_write(&format!("z{n}"), "k", 1, &format!("lost-{n}"));
            b.info(&format!("z{n}"));
        }
        for n in 0..20 {
            let id = format!("w-{n}");
            b.write("w", "k", 1, &id, false);
            read(&mut b, "r", Some(&id));
        }
        let outcome = run(&b, 5_000);
        assert_eq!(
            outcome.report.validity,
            Validity::Valid,
            "{:?}",
            outcome.report
        );
        // ... but a read of the initial value after an acknowledged write is still caught.
        read(&mut b, "r", None);
        assert_eq!(run(&b, 5_000).report.validity, Validity::Invalid);
    }

    #[test]
    fn the_search_says_unknown_when_its_budget_is_spent_naming_the_unknown_writes() {
        let outcome = run(&concurrent(false, true), 0);
        assert_eq!(outcome.report.validity, Validity::Unknown);
        let why = outcome.report.inconclusive.as_ref().unwrap();
        assert!(
            why.reason
                .starts_with("the 0 ms search budget ran out on key k (5 calls"),
            "{why:?}"
        );
        assert!(
            why.reason
                .ends_with("the writes with unknown outcome it had to place"),
            "{why:?}"
        );
        // w1's write (invoked first), which read "a" saw but whose reply was lost.
        assert_eq!((why.events.clone(), why.count), (vec![0], 1));
        let answered = run(&concurrent(false, false), 0);
        let why = answered.report.inconclusive.unwrap();
        assert_eq!((why.events.len(), why.count), (0, 0));
    }
}
