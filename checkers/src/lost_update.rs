//! The lock-counter's two questions: is an acknowledged increment missing from the final value
//! (`lost-update`), and did one logical increment (one write id) take effect twice
//! (`duplicate-effect`)?
//!
//! A lock-counter write is `read + 1`, so every write descends from the write its worker read
//! (the read names it by write id, or the store log tells which write held the value read).
//! The final value (the `final` process's read, else the store log's last write) descends from
//! a chain of writes back to the initial 0; an acknowledged write outside that chain was
//! overwritten by a write computed without it: its increment is lost.

use fencer_harness::{EventType, Op, RowRef, Sym};

use crate::context::{Context, is_store_log};
use crate::explain::{Story, at_store_order, count, faults_between, when};
use crate::findings::{Hits, Outcome, Undecided};
use crate::index::{FastMap, FastSet, Positions};
use crate::superseded::superseded_write_ids;
use crate::verdict::{Anomaly, AnomalyClass};

/// The process that reads every key once after all workers finished.
const FINAL_PROCESS: &str = "final";

/// A counter value as recorded (`None` or empty = the initial 0).
fn counter_of(ctx: &Context<'_>, row: &RowRef<'_>) -> Option<u64> {
    match ctx.text_of(row.value) {
        None | Some("") => Some(0),
        Some(text) => text.parse().ok(),
    }
}

/// Per key, the store's applied writes in order.
#[derive(Default)]
struct Applied {
    positions: Vec<usize>,
    write_ids: Vec<Option<Sym>>,
    values: Vec<Option<u64>>,
}

impl Applied {
    /// The write id of the latest application before `before` whose value is `value`.
    fn holding(&self, value: u64, before: usize) -> Option<Sym> {
        let end = self
            .positions
            .partition_point(|&position| position < before);
        (0..end)
            .rev()
            .find(|&slot| self.values[slot] == Some(value))
            .and_then(|slot| self.write_ids[slot])
    }
}

/// A write as the counter checkers name it: its key and its write id (unique per key only).
type WriteOf = (Sym, Sym);

/// What the counter checkers learn in one pass (strings as syms: maps are only looked up).
struct Counter {
    /// Per key, the store's applied writes.
    applied: FastMap<Sym, Applied>,
    /// For each write: the read its worker made before sending it (first send).
    read_of: FastMap<WriteOf, usize>,
    /// For each write: its first `ok` reply.
    acked: FastMap<WriteOf, usize>,
    /// Acknowledged write ids in reply order, with their key.
    acked_order: Vec<(Sym, Sym)>,
    /// The `final` process's read of each key (`ok`), in key (text) order.
    final_reads: Vec<(Sym, usize)>,
}

impl Counter {
    fn scan(ctx: &Context<'_>) -> Counter {
        let mut counter = Counter {
            applied: FastMap::default(),
            read_of: FastMap::default(),
            acked: FastMap::default(),
            acked_order: Vec::new(),
            final_reads: Vec::new(),
        };
        let final_process = ctx.sym(FINAL_PROCESS);
        let mut last_read: FastMap<Sym, usize> = FastMap::default();
        for (position, ref row) in ctx.rows.iter().enumerate() {
            let key = row.key;
            if is_store_log(row) {
                if let Some(key) = key {
                    let applied = counter.applied.entry(key).or_default();
                    applied.positions.push(position);
                    applied.write_ids.push(row.write_id);
                    applied.values.push(counter_of(ctx, row));
                }
                continue;
            }
            match (row.kind, row.f) {
                (EventType::Ok, Op::Read) => {
                    if Some(row.process) == final_process {
                        if let Some(key) = key {
                            counter.final_reads.push((key, position));
                        }
                    } else {
                        last_read.insert(row.process, position);
                    }
                }
                (EventType::Invoke, Op::Write) => {
                    if let (Some(key), Some(write_id), Some(&read)) =
                        (key, row.write_id, last_read.get(&row.process))
                    {
                        counter.read_of.entry((key, write_id)).or_insert(read);
                    }
                }
                (EventType::Ok, Op::Write) => {
                    if let (Some(write_id), Some(key)) = (row.write_id, key)
                        && !counter.acked.contains_key(&(key, write_id))
                    {
                        counter.acked.insert((key, write_id), position);
                        counter.acked_order.push((write_id, key));
                    }
                }
                _ => {}
            }
        }
        counter
            .final_reads
            .sort_unstable_by_key(|&(key, position)| (ctx.text(key), position));
        counter
    }

    /// The write id a read saw: named by the read, else the store log's write that held the
    /// value read. `Ok(None)` is the initial 0; `Err` when it cannot be told.
    fn seen_by(&self, ctx: &Context<'_>, read: usize) -> Result<Option<Sym>, ()> {
        let row = &ctx.rows.get(read);
        if let Some(write_id) = row.write_id {
            return Ok(Some(write_id));
        }
        match counter_of(ctx, row) {
            Some(0) => Ok(None),
            Some(value) => row
                .key
                .and_then(|key| self.applied.get(&key))
                .and_then(|applied| applied.holding(value, read))
                .map(Some)
                .ok_or(()),
            None => Err(()),
        }
    }
}

/// A key's final state: the key, the final read (if any) and the write it descends from
/// (`Err` when that cannot be told).
type FinalState = (Sym, Option<usize>, Result<Option<Sym>, ()>);

/// `lost-update`: acknowledged writes missing from the chain the final value descends from.
pub(crate) fn check_lost(ctx: &Context<'_>) -> Outcome {
    const CLASS: AnomalyClass = AnomalyClass::LostUpdate;
    let counter = Counter::scan(ctx);
    let evidence = if ctx.has_store_log {
        "final read + reads + store log"
    } else {
        "final read + reads"
    };
    // The final state of each key: the final read, else the store log's last write.
    let mut finals: Vec<FinalState> = Vec::new();
    for &(key, read) in &counter.final_reads {
        finals.push((key, Some(read), counter.seen_by(ctx, read)));
    }
    if finals.is_empty() {
        // In key text order (distinct keys have distinct texts).
        let mut keys: Vec<Sym> = counter.applied.keys().copied().collect();
        keys.sort_unstable_by_key(|&key| ctx.text(key));
        for key in keys {
            let applied = &counter.applied[&key];
            finals.push((key, None, Ok(applied.write_ids.last().copied().flatten())));
        }
    }
    if finals.is_empty() {
        return Outcome::skipped(CLASS, "needs the final read or the store log");
    }
    // A superseded write the store accepted and a newer holder then overwrote is fencing's
    // documented limit at work: counted apart, and a failure only under strict. Without the
    // store log, when the store applied a write is known only to lie between its send and its
    // reply: a write answered after a newer grant was sent may have been superseded.
    let excused_ids = if ctx.options.strict {
        FastMap::default()
    } else if ctx.has_store_log {
        superseded_write_ids(ctx)
    } else {
        possibly_superseded_write_ids(ctx)
    };
    let mut excused = 0usize;
    let mut hits = Hits::new();
    let mut unresolved = Undecided::new();
    for (key, final_read, final_write) in finals {
        let Ok(final_write) = final_write else {
            // Only a final read can fail to name its write (the log's last write is named).
            if let Some(read) = final_read {
                unresolved.push(read);
            }
            continue;
        };
        // Walk the chain back from the final write.
        let mut survived: FastSet<Sym> = FastSet::default();
        let mut cursor = final_write;
        while let Some(write_id) = cursor {
            if !survived.insert(write_id) {
                break;
            }
            cursor = match counter.read_of.get(&(key, write_id)) {
                Some(&read) => match counter.seen_by(ctx, read) {
                    Ok(parent) => parent,
                    Err(()) => {
                        unresolved.push(read);
                        None
                    }
                },
                None => None,
            };
        }
        for &(write_id, acked_key) in &counter.acked_order {
            if acked_key == key && !survived.contains(&write_id) {
                if excused_ids.contains_key(&(key, write_id)) {
                    excused += 1;
                    continue;
                }
                hits.push(Lost {
                    write_id,
                    key,
                    ok: counter.acked[&(key, write_id)],
                    final_read,
                });
            }
        }
    }
    let anomalies = hits
        .kept
        .iter()
        .map(|hit| explain_lost(ctx, &counter, hit))
        .collect();
    let inconclusive = unresolved.into_inconclusive(ctx, |unresolved| {
        format!(
            "{} whose write could not be identified",
            count(unresolved, "read saw a value", "reads saw values")
        )
    });
    let evidence = if excused > 0 && ctx.has_store_log {
        format!(
            "{evidence}; {} lost by superseded writes (fencing's documented limit, reported \
             as superseded-write-accepted; failures under strict)",
            count(excused, "increment", "increments")
        )
    } else if excused > 0 {
        format!(
            "{evidence}; {} lost by writes a newer grant may have superseded (fencing's \
             documented limit; failures under strict)",
            count(excused, "increment", "increments")
        )
    } else {
        evidence.to_string()
    };
    Outcome::ran(CLASS, &evidence, hits.count, anomalies, inconclusive)
}

/// Acknowledged writes (by write id, with their `ok`) that a newer grant may have superseded:
/// an acquire of the lock that handed out the write's token, answered with a higher token,
/// was sent before the write was answered, so the store may have applied the write after that
/// grant.
fn possibly_superseded_write_ids(ctx: &Context<'_>) -> FastMap<WriteOf, usize> {
    // Per lock: acknowledged grants as (acquire invoke, token), in invoke order.
    let mut grants: FastMap<Sym, Vec<(usize, u64)>> = FastMap::default();
    let mut acquiring: FastMap<Sym, usize> = FastMap::default();
    for (position, ref row) in ctx.rows.iter().enumerate() {
        if row.f != Op::Acquire {
            continue;
        }
        match row.kind {
            EventType::Invoke => {
                acquiring.insert(row.process, position);
            }
            EventType::Ok => {
                if let (Some(invoke), Some(lock), Some(token)) =
                    (acquiring.remove(&row.process), row.lock, row.token())
                {
                    grants.entry(lock).or_default().push((invoke, token));
                }
            }
            _ => {
                acquiring.remove(&row.process);
            }
        }
    }
    // The highest token among grants sent up to each point.
    for sent in grants.values_mut() {
        sent.sort_unstable();
        let mut highest = 0;
        for (_, token) in sent.iter_mut() {
            highest = highest.max(*token);
            *token = highest;
        }
    }
    // A write's token is its writer's grant's: the lock of the writer's latest grant of that
    // token is the write's lock (every lock counts its own tokens, so a token alone names
    // none).
    let mut lock_of_lease: FastMap<(Sym, u64), Sym> = FastMap::default();
    let mut ids = FastMap::default();
    for (position, ref row) in ctx.rows.iter().enumerate() {
        if row.is(EventType::Ok, Op::Acquire) {
            if let (Some(lock), Some(token)) = (row.lock, row.token()) {
                lock_of_lease.insert((row.process, token), lock);
            }
            continue;
        }
        if !row.is(EventType::Ok, Op::Write) {
            continue;
        }
        let (Some(key), Some(write_id), Some(token)) = (row.key, row.write_id, row.token()) else {
            continue;
        };
        let Some(sent) = lock_of_lease
            .get(&(row.process, token))
            .and_then(|lock| grants.get(lock))
        else {
            continue;
        };
        let before = sent.partition_point(|&(invoke, _)| invoke < position);
        if before > 0 && sent[before - 1].1 > token {
            ids.insert((key, write_id), position);
        }
    }
    ids
}

/// An acknowledged increment missing from the final value's chain.
struct Lost {
    write_id: Sym,
    key: Sym,
    ok: usize,
    final_read: Option<usize>,
}

fn explain_lost(ctx: &Context<'_>, counter: &Counter, hit: &Lost) -> Anomaly {
    let lookup = ctx.lookup();
    let ok = ctx.at(hit.ok);
    let invoke = lookup.partner(hit.ok).unwrap_or(hit.ok);
    let mut cited = vec![invoke, hit.ok];
    let mut story = Story::new(ok.process.as_str());
    if let Some(&read) = counter.read_of.get(&(hit.key, hit.write_id)) {
        cited.push(read);
        let read_event = ctx.at(read);
        story.add(
            read,
            format!(
                "read counter {} {}",
                read_event.value.as_deref().unwrap_or("0"),
                when(ctx, &read_event, "its")
            ),
        );
    }
    let invoke_event = ctx.at(invoke);
    story.add(
        invoke,
        format!(
            "sent write {} = {} with token {} {}",
            ctx.text(hit.write_id),
            ok.value.as_deref().unwrap_or("?"),
            ok.token.map_or("(none)".into(), |token| token.to_string()),
            when(ctx, &invoke_event, "its")
        ),
    );
    let faults = faults_between(ctx, &ok.process, invoke, hit.ok);
    story.add_faults(ctx, &faults);
    cited.extend(faults);
    story.add(hit.ok, format!("was told ok {}", when(ctx, &ok, "its")));
    let key = ok.key.as_deref().unwrap_or("(no key)");
    let mut overwritten = String::new();
    if let Some(applied) = ctx
        .rows
        .get(hit.ok)
        .key
        .and_then(|key| counter.applied.get(&key))
    {
        let mine: Vec<usize> = (0..applied.positions.len())
            .filter(|&slot| applied.write_ids[slot] == Some(hit.write_id))
            .collect();
        if let Some(&slot) = mine.last() {
            cited.push(applied.positions[slot]);
            let mine_applied = ctx.at(applied.positions[slot]);
            story.add(
                applied.positions[slot],
                format!(
                    "the store applied it {}",
                    at_store_order(ctx, &mine_applied)
                ),
            );
            if let Some(next) = first_overwriter(ctx, counter, hit.key, applied, slot) {
                let next_event = ctx.at(next);
                cited.push(next);
                let next_id = next_event.write_id.as_deref().unwrap_or("(no id)");
                let from = ctx
                    .rows
                    .get(next)
                    .write_id
                    .and_then(|id| counter.read_of.get(&(hit.key, id)))
                    .map(|&read| {
                        cited.push(read);
                        let read = ctx.at(read);
                        format!(
                            ", computed by {} from its read of {} {}",
                            read.process,
                            read.value.as_deref().unwrap_or("0"),
                            when(ctx, &read, "its")
                        )
                    })
                    .unwrap_or_default();
                overwritten = format!(
                    " It was overwritten by write {next_id} = {} {}{from}, which did not \
                     include it.",
                    next_event.value.as_deref().unwrap_or("?"),
                    at_store_order(ctx, &next_event)
                );
            }
        } else {
            overwritten = " The store log has no application of it.".to_string();
        }
    }
    let final_part = match hit.final_read {
        Some(read) => {
            cited.push(read);
            let read = ctx.at(read);
            format!(
                "the final read of {key} returned {} {}",
                read.value.as_deref().unwrap_or("0"),
                when(ctx, &read, "its")
            )
        }
        None => format!("the store's last write to {key} does not descend from it"),
    };
    Anomaly {
        class: AnomalyClass::LostUpdate,
        severity: crate::verdict::Severity::Failure,
        events: ctx.indexes(cited),
        explanation: format!(
            "{}; but {final_part}, and that value does not descend from this increment.{overwritten} \
             An acknowledged increment was lost: two read-modify-write cycles overlapped, so the \
             lock did not make them exclusive, or the store accepted a write computed from a \
             stale read.",
            story.render()
        ),
    }
}

/// Where the store first applied, after the application in `slot` of `applied` (the lost
/// write's, on `key`), a write that does not descend from the lost write: the write that
/// overwrote it. Later writes computed from the lost one (its own worker's next increments,
/// say) carried its increment on and are passed over; a write whose ancestry cannot be told is
/// not named. `None` when no such write is known.
fn first_overwriter(
    ctx: &Context<'_>,
    counter: &Counter,
    key: Sym,
    applied: &Applied,
    slot: usize,
) -> Option<usize> {
    let lost = applied.write_ids[slot]?;
    let lost_at = applied.positions[slot];
    // The store position of each write's first application, to stop a walk back once it
    // passes the lost write's (nothing applied before it can descend from it).
    let mut first_applied: FastMap<Sym, usize> = FastMap::default();
    for (index, write_id) in applied.write_ids.iter().enumerate() {
        if let Some(write_id) = write_id {
            first_applied
                .entry(*write_id)
                .or_insert(applied.positions[index]);
        }
    }
    let descends = |write_id: Sym| -> Option<bool> {
        let mut seen: FastSet<Sym> = FastSet::default();
        let mut cursor = Some(write_id);
        while let Some(write_id) = cursor {
            if write_id == lost {
                return Some(true);
            }
            if !seen.insert(write_id)
                || first_applied
                    .get(&write_id)
                    .is_some_and(|&position| position < lost_at)
            {
                return Some(false);
            }
            let Some(&read) = counter.read_of.get(&(key, write_id)) else {
                return Some(false);
            };
            cursor = counter.seen_by(ctx, read).ok()?;
        }
        Some(false)
    };
    for later in slot + 1..applied.positions.len() {
        let write_id = applied.write_ids[later]?;
        if write_id == lost {
            continue;
        }
        if !descends(write_id)? {
            return Some(applied.positions[later]);
        }
    }
    None
}

/// `duplicate-effect`: one write id applied twice (store log), else acknowledged twice.
pub(crate) fn check_duplicates(ctx: &Context<'_>) -> Outcome {
    const CLASS: AnomalyClass = AnomalyClass::DuplicateEffect;
    let logged = ctx.has_store_log;
    // A write without a key counts as one to the empty key (always held), as it always has.
    let empty = ctx.sym("");
    let mut seen: FastMap<(Option<Sym>, Sym), usize> = FastMap::default();
    let mut invokes: FastMap<Sym, Positions> = FastMap::default();
    let mut hits = Hits::new();
    for (position, ref row) in ctx.rows.iter().enumerate() {
        let Some(write_id) = row.write_id else {
            continue;
        };
        if row.is(EventType::Invoke, Op::Write) {
            Positions::record(&mut invokes, write_id, position);
        }
        let effect = if logged {
            is_store_log(row)
        } else {
            row.is(EventType::Ok, Op::Write)
        };
        if !effect {
            continue;
        }
        let key = row.key.or(empty);
        match seen.get(&(key, write_id)) {
            Some(&first) => {
                hits.push((first, position));
            }
            None => {
                seen.insert((key, write_id), position);
            }
        }
    }
    let anomalies = hits
        .kept
        .iter()
        .map(|&(first, again)| explain_duplicate(ctx, &invokes, first, again))
        .collect();
    let evidence = if logged {
        "store log"
    } else {
        "client replies"
    };
    Outcome::ran(CLASS, evidence, hits.count, anomalies, None)
}

fn explain_duplicate(
    ctx: &Context<'_>,
    invokes: &FastMap<Sym, Positions>,
    first: usize,
    again: usize,
) -> Anomaly {
    let event = ctx.at(again);
    let write_id = event.write_id.as_deref().unwrap_or("(no id)");
    let mut cited = vec![first, again];
    let describe = |position: usize| {
        let event = ctx.at(position);
        if event.kind == EventType::Log {
            at_store_order(ctx, &event)
        } else {
            format!("(ok to {}) {}", event.process, when(ctx, &event, "its"))
        }
    };
    let mut sends = Vec::new();
    if let Some(positions) = ctx
        .rows
        .get(again)
        .write_id
        .and_then(|write_id| invokes.get(&write_id))
    {
        let mut cursor = positions.first_from(0);
        while let Some(position) = cursor.filter(|&position| position < again) {
            cited.push(position);
            sends.push(position);
            cursor = positions.first_from(position + 1);
        }
    }
    let sent = match sends.as_slice() {
        [] => "no client call in the history sent it".to_string(),
        [only] => {
            let send = ctx.at(*only);
            format!("{} sent it once {}", send.process, when(ctx, &send, "its"))
        }
        [first_send, .., last_send] => {
            let first_event = ctx.at(*first_send);
            let last_event = ctx.at(*last_send);
            let process = first_event.process.as_str();
            let faults = faults_between(ctx, process, *first_send, again);
            let mut story = Story::new(process);
            story.add(
                *first_send,
                format!("sent it {}", when(ctx, &first_event, "its")),
            );
            story.add_faults(ctx, &faults);
            cited.extend(faults);
            story.add(
                *last_send,
                format!(
                    "sent it again ({}) {}",
                    count(sends.len(), "send", "sends"),
                    when(ctx, &last_event, "its")
                ),
            );
            story.render()
        }
    };
    Anomaly {
        class: AnomalyClass::DuplicateEffect,
        severity: crate::verdict::Severity::Failure,
        events: ctx.indexes(cited),
        explanation: format!(
            "Write {write_id} = {} with token {} to key {} took effect twice: {} and again {}; \
             {sent}. One logical operation must take effect once: fencing refuses lower tokens, \
             not a repeat of the same generation, so a retry needs an idempotency key.",
            event.value.as_deref().unwrap_or("?"),
            event
                .token
                .map_or("(none)".into(), |token| token.to_string()),
            event.key.as_deref().unwrap_or("(no key)"),
            describe(first),
            describe(again),
        ),
    }
}

#[cfg(test)]
mod tests {
    use fencer_harness::{Event, PackedHistory};

    use super::*;
    use crate::testkit::Builder;
    use crate::verdict::Validity;

    /// `process` reads the counter (`seen` = the write id it saw, `value`), then writes
    /// `value + 1` as `write_id` with `token`; the store applies it when `logged`.
    fn increment(
        b: &mut Builder,
        process: &str,
        seen: Option<&str>,
        value: u64,
        write_id: &str,
        token: u64,
        logged: bool,
    ) {
        read(b, process, seen, value);
        write(b, process, value + 1, write_id, token, logged);
    }

    /// `process` writes `value` as `write_id` with `token`; the store applies it when `logged`.
    fn write(b: &mut Builder, process: &str, value: u64, write_id: &str, token: u64, logged: bool) {
        let fill = |e: &mut Event| {
            e.key = Some("counter-1".into());
            e.token = Some(token);
            e.write_id = Some(write_id.into());
            e.value = Some(value.to_string());
        };
        b.invoke(process, Op::Write, fill);
        if logged {
            b.log("store", Op::Write, fill);
        }
        b.ok(process);
    }

    fn read(b: &mut Builder, process: &str, seen: Option<&str>, value: u64) -> u64 {
        b.invoke(process, Op::Read, |e| e.key = Some("counter-1".into()));
        b.complete(process, EventType::Ok, |e| {
            e.write_id = seen.map(str::to_string);
            e.value = (value > 0).then(|| value.to_string());
        })
    }

    fn run(b: &Builder) -> (Outcome, Outcome) {
        let history = PackedHistory::pack(&b.build());
        let ctx = Context::new(&history);
        (check_lost(&ctx), check_duplicates(&ctx))
    }

    #[test]
    fn sequential_increments_lose_nothing() {
        for logged in [true, false] {
            let mut b = Builder::new();
            increment(&mut b, "w0", None, 0, "w0-0", 1, logged);
            increment(&mut b, "w1", Some("w0-0"), 1, "w1-0", 2, logged);
            increment(&mut b, "w0", Some("w1-0"), 2, "w0-1", 3, logged);
            read(&mut b, "final", Some("w0-1"), 3);
            let (lost, duplicates) = run(&b);
            assert_eq!(lost.report.validity, Validity::Valid, "{:?}", lost.report);
            assert_eq!(duplicates.report.validity, Validity::Valid);
        }
    }

    #[test]
    fn two_increments_from_the_same_read_lose_one() {
        for logged in [true, false] {
            let mut b = Builder::new();
            increment(&mut b, "w0", None, 0, "w0-0", 1, logged);
            // w1 and w2 both read 1; w2's write overwrites w1's.
            read(&mut b, "w1", Some("w0-0"), 1);
            read(&mut b, "w2", Some("w0-0"), 1);
            write(&mut b, "w1", 2, "w1-0", 2, logged);
            write(&mut b, "w2", 2, "w2-0", 3, logged);
            read(&mut b, "final", Some("w2-0"), 2);
            let (lost, _) = run(&b);
            assert_eq!(lost.report.validity, Validity::Invalid, "logged {logged}");
            assert_eq!(lost.report.anomalies, 1);
            let text = &lost.anomalies[0].explanation;
            assert!(text.starts_with("w1 read counter 1"), "{text}");
            assert!(text.contains("sent write w1-0 = 2 with token 2"), "{text}");
            assert!(
                text.contains("the final read of counter-1 returned 2"),
                "{text}"
            );
            if logged {
                assert!(
                    text.contains(
                        "overwritten by write w2-0 = 2 at 0.013s (store clock 0.013s, store order \
                         unknown), computed by w2 from its read of 1 at 0.008s"
                    ),
                    "{text}"
                );
            }
        }
    }

    #[test]
    fn the_overwriter_named_is_the_first_later_write_that_left_the_increment_out() {
        let mut b = Builder::new();
        increment(&mut b, "w0", None, 0, "w0-0", 1, true);
        // w1 reads 1 and stalls; w0 goes on twice, each increment from its own last write;
        // w1's late write of 2 then wipes out both of w0's.
        read(&mut b, "w1", Some("w0-0"), 1);
        increment(&mut b, "w0", Some("w0-0"), 1, "w0-1", 2, true);
        increment(&mut b, "w0", Some("w0-1"), 2, "w0-2", 3, true);
        write(&mut b, "w1", 2, "w1-0", 4, true);
        read(&mut b, "final", Some("w1-0"), 2);
        let (lost, _) = run(&b);
        assert_eq!(lost.report.anomalies, 2);
        for anomaly in &lost.anomalies {
            let text = &anomaly.explanation;
            assert!(text.contains("overwritten by write w1-0 = 2 "), "{text}");
            assert!(
                text.contains("computed by w1 from its read of 1 "),
                "{text}"
            );
            assert!(!text.contains("overwritten by write w0-"), "{text}");
        }
    }

    #[test]
    fn an_increment_lost_to_a_superseded_write_fails_only_under_strict() {
        let mut b = Builder::new();
        b.grant("L", "o1", 1, 10.0);
        read(&mut b, "w1", None, 0);
        // w1's lease ends; w2 gets token 2 and reads before w1's late write lands.
        b.grant("L", "o2", 2, 10.0);
        read(&mut b, "w2", None, 0);
        write(&mut b, "w1", 1, "w1-0", 1, true);
        write(&mut b, "w2", 1, "w2-0", 2, true);
        read(&mut b, "final", Some("w2-0"), 1);
        let history = PackedHistory::pack(&b.build());
        let lenient = check_lost(&Context::new(&history));
        assert_eq!(lenient.report.validity, Validity::Valid);
        assert!(
            lenient
                .report
                .evidence
                .contains("1 increment lost by superseded writes"),
            "{}",
            lenient.report.evidence
        );
        let strict = crate::options::CheckOptions {
            strict: true,
            ..crate::options::CheckOptions::default()
        };
        let strict = check_lost(&Context::with_options(&history, strict));
        assert_eq!(strict.report.validity, Validity::Invalid);
        assert_eq!(strict.report.anomalies, 1);
    }

    #[test]
    fn without_the_store_log_an_increment_a_newer_grant_may_have_superseded_is_excused() {
        // w1 (token 1) reads 0; w2 is granted token 2 and reads 0; w1's write, sent before
        // w2's acquire but answered after it was sent, and w2's both apply.
        let lost_to = |w2_acquires_first: bool| {
            let mut b = Builder::new();
            b.acquire("w1", "L", "o1", 1, false);
            read(&mut b, "w1", None, 0);
            if w2_acquires_first {
                b.invoke_write("w1", "counter-1", 1, "w1-0");
                b.acquire("w2", "L", "o2", 2, false);
                b.complete("w1", EventType::Ok, |e| e.value = Some("1".into()));
            } else {
                write(&mut b, "w1", 1, "w1-0", 1, false);
                b.acquire("w2", "L", "o2", 2, false);
            }
            read(&mut b, "w2", None, 0);
            write(&mut b, "w2", 1, "w2-0", 2, false);
            read(&mut b, "final", Some("w2-0"), 1);
            run(&b).0
        };
        let excused = lost_to(true);
        assert_eq!(excused.report.validity, Validity::Valid);
        assert!(
            excused
                .report
                .evidence
                .contains("1 increment lost by writes a newer grant may have superseded"),
            "{}",
            excused.report.evidence
        );
        // Answered before the newer acquire was even sent: the store had it before that
        // grant, and losing it is the store's or the lock's fault.
        assert_eq!(lost_to(false).report.validity, Validity::Invalid);
    }

    #[test]
    fn a_write_id_used_on_another_counter_hides_no_lost_increment() {
        let on = |key: &'static str, value: u64, write_id: &'static str| {
            move |e: &mut Event| {
                e.key = Some(key.into());
                e.token = Some(1);
                e.write_id = Some(write_id.into());
                e.value = Some(value.to_string());
            }
        };
        let read_of = |b: &mut Builder, process: &str, key: &str, seen: Option<&str>| {
            b.read(process, key, |e| {
                e.write_id = seen.map(str::to_string);
                e.value = seen.map(|_| "1".to_string());
            });
        };
        let mut b = Builder::new();
        // Counter a: one increment, write id `x`.
        read_of(&mut b, "w0", "a", None);
        b.invoke("w0", Op::Write, on("a", 1, "x"));
        b.ok("w0");
        // Counter b: two increments from the same read; `y` overwrites the other `x`.
        read_of(&mut b, "w1", "b", None);
        read_of(&mut b, "w2", "b", None);
        b.invoke("w1", Op::Write, on("b", 1, "x"));
        let lost = b.ok("w1");
        b.invoke("w2", Op::Write, on("b", 1, "y"));
        b.ok("w2");
        read_of(&mut b, "final", "a", Some("x"));
        read_of(&mut b, "final", "b", Some("y"));
        let (outcome, _) = run(&b);
        assert_eq!(outcome.report.anomalies, 1, "{:?}", outcome.report);
        assert!(outcome.anomalies[0].events.contains(&lost));
    }

    #[test]
    fn a_grant_on_another_lock_with_the_same_token_excuses_nothing() {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, false);
        read(&mut b, "w1", None, 0);
        b.invoke_write("w1", "counter-1", 1, "w1-0");
        // Lock M counts its own tokens: its grant of token 2 says nothing about lock L.
        b.acquire("w8", "M", "o8", 1, false);
        b.acquire("w9", "M", "o9", 2, false);
        b.complete("w1", EventType::Ok, |e| e.value = Some("1".into()));
        b.acquire("w2", "L", "o2", 2, false);
        read(&mut b, "w2", None, 0);
        write(&mut b, "w2", 1, "w2-0", 2, false);
        read(&mut b, "final", Some("w2-0"), 1);
        let (lost, _) = run(&b);
        assert_eq!(lost.report.validity, Validity::Invalid, "{:?}", lost.report);
        assert_eq!(lost.report.anomalies, 1);
    }

    #[test]
    fn reads_without_write_ids_are_resolved_through_the_store_log() {
        let mut b = Builder::new();
        increment(&mut b, "w0", None, 0, "w0-0", 1, true);
        increment(&mut b, "w1", None, 1, "w1-0", 2, true);
        // A late write computed from the initial read overwrites both.
        increment(&mut b, "w2", None, 0, "w2-0", 3, true);
        read(&mut b, "final", None, 1);
        let (lost, _) = run(&b);
        assert_eq!(lost.report.anomalies, 2, "{:?}", lost.report);
        assert!(
            lost.anomalies[1]
                .explanation
                .contains("overwritten by write w2-0 = 1"),
            "{}",
            lost.anomalies[1].explanation
        );
    }

    #[test]
    fn a_write_id_applied_twice_is_a_duplicate_effect() {
        let mut b = Builder::new();
        increment(&mut b, "w0", None, 0, "w0-0", 1, true);
        b.pause("w0", 2.0);
        write(&mut b, "w0", 1, "w0-0", 1, true);
        let (_, duplicates) = run(&b);
        assert_eq!(duplicates.report.validity, Validity::Invalid);
        assert_eq!(duplicates.report.anomalies, 1);
        let text = &duplicates.anomalies[0].explanation;
        assert!(
            text.starts_with("Write w0-0 = 1 with token 1 to key counter-1 took effect twice"),
            "{text}"
        );
        assert!(text.contains("w0 sent it at"), "{text}");
        assert!(text.contains("was paused 2.000s"), "{text}");
        assert!(text.contains("sent it again (2 sends)"), "{text}");
    }
}
