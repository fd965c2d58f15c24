//! `stale-read`: did a read return a version older than a write that had completed (been
//! acknowledged) before the read began?
//!
//! With the store log the order of versions is known exactly; without it, real time alone still
//! convicts a read that saw write x although x completed before some write W was sent and W
//! completed before the read was sent.

use fencer_harness::{EventType, Op, Sym};

use crate::context::Context;
use crate::explain::{at_store_order, when};
use crate::findings::{Hits, Outcome};
use crate::index::FastMap;
use crate::verdict::{Anomaly, AnomalyClass};
use crate::versions::Version;

const CLASS: AnomalyClass = AnomalyClass::StaleRead;

/// Reads in flight per process: the invoke, and the newest acknowledged write (its store
/// position or invoke, and its `ok`) when the read was sent.
type OpenReads = FastMap<Sym, (usize, Option<(usize, usize)>)>;

/// A stale read: its invoke and reply, the newer write's `ok`, and where the store applied the
/// version read and the newer write (store log only).
struct Hit {
    invoke: usize,
    reply: usize,
    newer_ok: usize,
    seen_applied: Option<usize>,
    newer_applied: Option<usize>,
}

/// Runs the checker on the store log if there is one, else on client replies.
pub(crate) fn check(ctx: &Context<'_>) -> Outcome {
    if ctx.has_store_log && ctx.store_log_timed {
        from_store_log(ctx)
    } else {
        from_client_replies(ctx)
    }
}

fn from_store_log(ctx: &Context<'_>) -> Outcome {
    let versions = ctx.versions();
    // Per key: the newest version (by store position) among acknowledged writes, and its ok.
    let mut newest_acked: FastMap<Sym, (usize, usize)> = FastMap::default();
    let mut open_reads: OpenReads = FastMap::default();
    let mut hits = Hits::new();
    for (position, ref row) in ctx.rows_where(|_, f| matches!(f, Op::Read | Op::Write)) {
        let Some(key) = row.key else {
            continue;
        };
        match (row.kind, row.f) {
            (EventType::Ok, Op::Write) => {
                if let Some(applied) = row
                    .write_id
                    .and_then(|id| versions.applied_before(key, id, position))
                {
                    let newest = newest_acked.entry(key).or_insert((applied, position));
                    if applied > newest.0 {
                        *newest = (applied, position);
                    }
                }
            }
            (EventType::Invoke, Op::Read) => {
                open_reads.insert(row.process, (position, newest_acked.get(&key).copied()));
            }
            (EventType::Ok, Op::Read) => {
                let Some((invoke, newest)) = open_reads.remove(&row.process) else {
                    continue;
                };
                let Some(seen) = versions.seen_by(ctx, row, position) else {
                    continue;
                };
                if let Some((newer_applied, newer_ok)) = newest
                    && Version::Applied(newer_applied) > seen
                {
                    hits.push(Hit {
                        invoke,
                        reply: position,
                        newer_ok,
                        seen_applied: match seen {
                            Version::Applied(applied) => Some(applied),
                            Version::Initial => None,
                        },
                        newer_applied: Some(newer_applied),
                    });
                }
            }
            (EventType::Fail | EventType::Info, Op::Read) => {
                open_reads.remove(&row.process);
            }
            _ => {}
        }
    }
    finish(ctx, "store log + client replies", hits)
}

fn from_client_replies(ctx: &Context<'_>) -> Outcome {
    // Per key and write id (ids are unique per key, not across keys): its first `ok`.
    let mut acked: FastMap<(Sym, Sym), usize> = FastMap::default();
    let mut open_writes: FastMap<Sym, usize> = FastMap::default();
    // Per key: among acknowledged writes, the one sent last (invoke position) and its ok.
    let mut latest_sent_acked: FastMap<Sym, (usize, usize)> = FastMap::default();
    let mut open_reads: OpenReads = FastMap::default();
    let mut hits = Hits::new();
    for (position, ref row) in ctx.rows_where(|_, f| matches!(f, Op::Read | Op::Write)) {
        let Some(key) = row.key else {
            continue;
        };
        match (row.kind, row.f) {
            (EventType::Invoke, Op::Write) => {
                open_writes.insert(row.process, position);
            }
            (EventType::Ok, Op::Write) => {
                let Some(invoke) = open_writes.remove(&row.process) else {
                    continue;
                };
                if let Some(write_id) = row.write_id {
                    acked.entry((key, write_id)).or_insert(position);
                }
                let latest = latest_sent_acked.entry(key).or_insert((invoke, position));
                if invoke > latest.0 {
                    *latest = (invoke, position);
                }
            }
            (EventType::Fail | EventType::Info, Op::Write) => {
                open_writes.remove(&row.process);
            }
            (EventType::Invoke, Op::Read) => {
                open_reads.insert(
                    row.process,
                    (position, latest_sent_acked.get(&key).copied()),
                );
            }
            (EventType::Ok, Op::Read) => {
                let Some((invoke, latest)) = open_reads.remove(&row.process) else {
                    continue;
                };
                let Some((newer_sent, newer_ok)) = latest else {
                    continue;
                };
                // The version read must have completed before the newer write was sent.
                let seen_ok = match (row.write_id, row.value) {
                    (Some(write_id), _) => match acked.get(&(key, write_id)) {
                        Some(&ok) => Some(ok),
                        None => {
                            continue;
                        }
                    },
                    (None, None) => None,
                    (None, Some(_)) => {
                        continue;
                    }
                };
                if seen_ok.is_none_or(|ok| ok < newer_sent) {
                    hits.push(Hit {
                        invoke,
                        reply: position,
                        newer_ok,
                        seen_applied: seen_ok,
                        newer_applied: None,
                    });
                }
            }
            (EventType::Fail | EventType::Info, Op::Read) => {
                open_reads.remove(&row.process);
            }
            _ => {}
        }
    }
    finish(ctx, "client replies", hits)
}

fn finish(ctx: &Context<'_>, evidence: &str, hits: Hits<Hit>) -> Outcome {
    let anomalies = hits.kept.iter().map(|hit| explain(ctx, hit)).collect();
    Outcome::ran(CLASS, evidence, hits.count, anomalies, None)
}

fn explain(ctx: &Context<'_>, hit: &Hit) -> Anomaly {
    let invoke = ctx.at(hit.invoke);
    let reply = ctx.at(hit.reply);
    let newer_ok = ctx.at(hit.newer_ok);
    let key = reply.key.as_deref().unwrap_or("(no key)");
    let mut cited = vec![hit.invoke, hit.reply, hit.newer_ok];
    cited.extend(hit.seen_applied);
    cited.extend(hit.newer_applied);
    let seen = match (reply.write_id.as_deref(), hit.seen_applied) {
        (None, _) if reply.value.is_none() => "the initial (empty) value".to_string(),
        (id, Some(applied)) => {
            let applied = ctx.at(applied);
            let name = id.map_or_else(
                || format!("value {}", reply.value.as_deref().unwrap_or("?")),
                |id| format!("write {id}"),
            );
            if applied.kind == EventType::Log {
                format!(
                    "{name}, which the store applied {}",
                    at_store_order(ctx, &applied)
                )
            } else {
                format!(
                    "{name}, acknowledged to {} {}",
                    applied.process,
                    when(ctx, &applied, "its")
                )
            }
        }
        (id, None) => id.map_or_else(
            || format!("value {}", reply.value.as_deref().unwrap_or("?")),
            |id| format!("write {id}"),
        ),
    };
    let newer = match hit.newer_applied {
        Some(applied) => {
            let applied = ctx.at(applied);
            format!(
                "the store had applied write {} {} and acknowledged it to {} {}",
                newer_ok.write_id.as_deref().unwrap_or("(no id)"),
                at_store_order(ctx, &applied),
                newer_ok.process,
                when(ctx, &newer_ok, "its")
            )
        }
        None => {
            let sent = ctx.lookup().partner(hit.newer_ok).unwrap_or(hit.newer_ok);
            cited.push(sent);
            let sent = ctx.at(sent);
            format!(
                "write {} by {} was sent {} after that version was acknowledged, and was \
                 acknowledged {}",
                newer_ok.write_id.as_deref().unwrap_or("(no id)"),
                newer_ok.process,
                when(ctx, &sent, "its"),
                when(ctx, &newer_ok, "its")
            )
        }
    };
    Anomaly {
        class: CLASS,
        severity: crate::verdict::Severity::Failure,
        events: ctx.indexes(cited),
        explanation: format!(
            "{} read key {key} {} and got {seen} (reply {}); but {newer}, before the read \
             began. A read must return the latest completed write or a newer one; this one \
             returned an older version.",
            invoke.process,
            when(ctx, &invoke, "its"),
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

    fn read(b: &mut Builder, process: &str, key: &str, seen: Option<&str>) -> u64 {
        b.invoke(process, Op::Read, |e| e.key = Some(key.into()));
        b.complete(process, EventType::Ok, |e| {
            e.write_id = seen.map(str::to_string);
            e.value = seen.map(|id| format!("v-{id}"));
        })
    }

    #[test]
    fn a_read_missing_a_completed_write_is_stale_both_ways() {
        for logged in [true, false] {
            let mut b = Builder::new();
            b.write("w1", "k", 1, "a", logged);
            b.write("w2", "k", 2, "b", logged);
            b.at(1.0);
            let stale = read(&mut b, "w3", "k", Some("a"));
            let history = PackedHistory::pack(&b.build());
            let outcome = check(&Context::new(&history));
            assert_eq!(
                outcome.report.validity,
                Validity::Invalid,
                "logged {logged}"
            );
            assert_eq!(outcome.report.anomalies, 1);
            assert!(outcome.anomalies[0].events.contains(&stale));
            let text = &outcome.anomalies[0].explanation;
            assert!(
                text.starts_with("w3 read key k at 1.000s (its clock 1.000s) and got write a"),
                "{text}"
            );
            assert!(text.contains("write b"), "{text}");
        }
    }

    #[test]
    fn reading_the_initial_value_after_a_completed_write_is_stale() {
        let mut b = Builder::new();
        b.write("w1", "k", 1, "a", true);
        read(&mut b, "w3", "k", None);
        let history = PackedHistory::pack(&b.build());
        let outcome = check(&Context::new(&history));
        assert_eq!(outcome.report.anomalies, 1);
        assert!(
            outcome.anomalies[0]
                .explanation
                .contains("the initial (empty) value")
        );
    }

    #[test]
    fn reads_of_the_latest_or_a_concurrent_write_are_silent() {
        for logged in [true, false] {
            let mut b = Builder::new();
            b.write("w1", "k", 1, "a", logged);
            read(&mut b, "w3", "k", Some("a"));
            // w2's write is concurrent with w3's read: either answer is fine.
            b.invoke_write("w2", "k", 2, "b");
            b.invoke("w3", Op::Read, |e| e.key = Some("k".into()));
            if logged {
                b.applied("k", 2, "b");
            }
            b.complete("w3", EventType::Ok, |e| {
                e.write_id = Some("a".into());
                e.value = Some("v-a".into());
            });
            b.ok("w2");
            read(&mut b, "w3", "k", Some("b"));
            // Another key's writes say nothing about k.
            b.write("w4", "other", 9, "z", logged);
            read(&mut b, "w3", "k", Some("b"));
            let history = PackedHistory::pack(&b.build());
            let outcome = check(&Context::new(&history));
            assert_eq!(outcome.report.validity, Validity::Valid, "logged {logged}");
        }
    }

    #[test]
    fn a_write_id_on_another_key_dates_nothing_on_this_one() {
        // Write id `x` was acknowledged early on key `j`; on key `k` it was sent after `w`
        // completed and acknowledged later, so a read of `x` on `k` is current, not stale.
        let mut b = Builder::new();
        b.write("w1", "j", 1, "x", false);
        b.write("w2", "k", 2, "w", false);
        b.write("w3", "k", 3, "x", false);
        read(&mut b, "w4", "k", Some("x"));
        let history = PackedHistory::pack(&b.build());
        let outcome = check(&Context::new(&history));
        assert_eq!(outcome.report.validity, Validity::Valid);
    }
}
