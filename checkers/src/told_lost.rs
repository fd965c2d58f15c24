//! `write-after-lost-notice`: did a worker send a write under a lease its own lock client
//! library had already told it was lost?
//!
//! A library that notices the lease is gone (a renewal refused, a whole TTL with none
//! confirmed) tells its worker; from then on the worker must not act on the lease. What counts
//! is what the worker knew when it decided: a write is judged against the worker's last call
//! before it (normally the ownership check that cleared it). A `lost` notice for the lease the
//! worker holds (its last granted owner token) recorded before that call completed means the
//! worker had been told and wrote anyway. A notice that arrives after that call completed, while
//! the write is being prepared, is the narrow window only the store's fence can close, and is
//! not counted. Writes of abandoned work (`wN:late`) ask nothing and are not judged here.
//!
//! Evidence: the worker's own calls and notices, whatever the store did with the write.

use fencer_harness::{EventType, Op, Sym};

use crate::context::Context;
use crate::explain::{short_owner, when};
use crate::findings::{Hits, Outcome};
use crate::index::FastMap;
use crate::numbering::SymTable;
use crate::process_roles::Roles;
use crate::verdict::{Anomaly, AnomalyClass, Severity};

const CLASS: AnomalyClass = AnomalyClass::WriteAfterLostNotice;

/// A write sent after a `lost` notice for its lease.
struct Hit {
    notice: usize,
    /// The worker's last call's completion before the write.
    decided: usize,
    write: usize,
}

/// What one worker knew at each point: its lease and the completion of its last call.
#[derive(Clone, Copy, Default)]
struct Worker {
    owner: Option<Sym>,
    last_completion: Option<usize>,
}

/// Runs the checker on the workers' calls and notices.
pub(crate) fn check(ctx: &Context<'_>) -> Outcome {
    let mut roles = Roles::new(ctx);
    let mut workers: SymTable<'_, Worker> = ctx.per_process(Worker::default());
    let mut lost: FastMap<(Sym, Sym), usize> = FastMap::default();
    let mut hits = Hits::new();
    let wanted = |kind: EventType, f: Op| {
        (f.is_client_op() && kind != EventType::Nemesis && kind != EventType::Log)
            || (kind == EventType::Notice && f == Op::Lost)
    };
    for (position, row) in ctx.rows_where(wanted) {
        if !roles.of(row.process).is_worker {
            continue;
        }
        let worker = &mut workers[row.process];
        match (row.kind, row.f) {
            (EventType::Notice, _) => {
                if let Some(owner) = row.owner {
                    lost.entry((row.process, owner)).or_insert(position);
                }
            }
            (EventType::Invoke, Op::Write) => {
                let (Some(owner), Some(decided)) = (worker.owner, worker.last_completion) else {
                    continue;
                };
                if let Some(&notice) = lost.get(&(row.process, owner))
                    && notice < decided
                {
                    hits.push(Hit {
                        notice,
                        decided,
                        write: position,
                    });
                }
            }
            (EventType::Invoke, _) => {}
            (EventType::Ok, Op::Acquire) => {
                worker.owner = row.owner;
                worker.last_completion = Some(position);
            }
            (_, Op::Release) => {
                worker.owner = None;
                worker.last_completion = Some(position);
            }
            _ => worker.last_completion = Some(position),
        }
    }
    let anomalies = hits.kept.iter().map(|hit| explain(ctx, hit)).collect();
    Outcome::ran(
        CLASS,
        "client calls and notices",
        hits.count,
        anomalies,
        None,
    )
}

fn explain(ctx: &Context<'_>, hit: &Hit) -> Anomaly {
    let notice = ctx.at(hit.notice);
    let decided = ctx.at(hit.decided);
    let write = ctx.at(hit.write);
    let owner = short_owner(notice.owner.as_deref().unwrap_or("(none)"));
    let lock = notice.lock.as_deref().unwrap_or("(no lock)");
    let why = notice
        .error
        .as_deref()
        .map(|why| format!(" ({why})"))
        .unwrap_or_default();
    Anomaly {
        class: CLASS,
        severity: Severity::Failure,
        events: ctx.indexes([hit.notice, hit.decided, hit.write]),
        explanation: format!(
            "{worker}'s lock client told it {} that its lease of lock {lock} (owner {owner}) \
             was lost{why}; its {} that followed ended {}, and it still sent write {} with \
             token {} {}. A worker told its lease is lost must stop the work it protects; only \
             a fencing store can refuse what it sends after that.",
            when(ctx, &notice, "its"),
            decided.f.name(),
            when(ctx, &decided, "its"),
            write.write_id.as_deref().unwrap_or("?"),
            write.token.map_or("(none)".to_string(), |t| t.to_string()),
            when(ctx, &write, "its"),
            worker = notice.process,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::Builder;
    use crate::verdict::Validity;

    #[test]
    fn a_write_cleared_by_a_check_after_a_lost_notice_is_caught() {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, false);
        let notice = b.notice("w1", Op::Lost, "L", "o1", Some("renewal refused"));
        b.check("w1", "L", "o1", false);
        let write = b.invoke_write("w1", "k", 1, "w1-0");
        b.ok("w1");
        let outcome = b.judged_by(check);
        assert_eq!(outcome.report.validity, Validity::Invalid);
        assert_eq!(outcome.report.anomalies, 1);
        assert_eq!(outcome.anomalies[0].events, vec![notice, notice + 2, write]);
        let text = &outcome.anomalies[0].explanation;
        assert!(text.contains("was lost (renewal refused)"), "{text}");
        assert!(text.contains("its check that followed ended"), "{text}");
    }

    #[test]
    fn a_notice_while_the_write_was_prepared_or_for_another_lease_is_not_counted() {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, false);
        b.check("w1", "L", "o1", true);
        // Told after the check cleared the write: the window only a fence closes.
        b.notice("w1", Op::Lost, "L", "o1", None);
        b.write("w1", "k", 1, "w1-0", false);
        b.lock_call("w1", Op::Release, "L", "o1", EventType::Fail);
        // A new lease: the old lease's notice says nothing about it.
        b.acquire("w1", "L", "o2", 2, false);
        b.check("w1", "L", "o2", true);
        b.write("w1", "k", 2, "w1-1", false);
        // Another worker's notice says nothing about w1.
        b.notice("w2", Op::Lost, "L", "o2", None);
        b.check("w1", "L", "o2", true);
        b.write("w1", "k", 2, "w1-2", false);
        let outcome = b.judged_by(check);
        assert_eq!(outcome.report.validity, Validity::Valid);
        assert_eq!(outcome.report.anomalies, 0);
    }
}
