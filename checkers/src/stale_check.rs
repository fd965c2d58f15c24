//! `stale-ownership-check`: did a lock client library answer "held" to an ownership check
//! after the lease had provably ended?
//!
//! A library's "do I still hold it?" is the worker's last word before it writes. One answered
//! from a local flag, a cache or the worker's own clock can say "held" for a lease the service
//! has long since given to someone else. The proof here is a later grant to another owner: an
//! acquire of the same lock by another owner token, *sent* after this lease was granted and
//! answered `ok` before the check began. A lock service grants one lease at a time, so this
//! lease had ended before the check was asked; a check answering "held" then is false. (When
//! the service itself granted two at once, `overlapping-leases` says so too.)
//!
//! Evidence: client calls (grants and checks) alone.

use fencer_harness::{EventType, Op, Sym};

use crate::context::Context;
use crate::explain::{short_owner, when};
use crate::findings::{Hits, Outcome};
use crate::index::FastMap;
use crate::numbering::SymTable;
use crate::verdict::{Anomaly, AnomalyClass, Severity};

const CLASS: AnomalyClass = AnomalyClass::StaleOwnershipCheck;

/// A grant answered `ok`: its owner and where its acquire was sent and answered.
#[derive(Clone, Copy)]
struct Grant {
    owner: Sym,
    invoke: usize,
    ok: usize,
}

/// A check answered held after another owner's later grant.
struct Hit {
    grant: usize,
    rival_grant: usize,
    check: usize,
    held: usize,
}

/// Runs the checker on the grants and checks the workers recorded.
pub(crate) fn check(ctx: &Context<'_>) -> Outcome {
    if ctx
        .rows_where(|kind, f| kind == EventType::Ok && f == Op::Check)
        .next()
        .is_none()
    {
        return Outcome::ran(CLASS, "client calls", 0, Vec::new(), None);
    }
    // Per process: its acquire or check in flight.
    let mut open: SymTable<'_, Option<usize>> = ctx.per_process(None);
    // Per owner token: its grant.
    let mut granted: FastMap<Sym, Grant> = FastMap::default();
    // Per lock: the answered grant sent last.
    let mut latest: SymTable<'_, Option<Grant>> = ctx.per_lock(None);
    // Per process: the check in flight and the rival grant that had superseded its lease.
    let mut suspect: SymTable<'_, Option<(usize, usize, usize)>> = ctx.per_process(None);
    let mut hits = Hits::new();
    let wanted = |_: EventType, f: Op| matches!(f, Op::Acquire | Op::Check);
    for (position, row) in ctx.rows_where(wanted) {
        let (Some(lock), Some(owner)) = (row.lock, row.owner) else {
            continue;
        };
        match (row.kind, row.f) {
            (EventType::Invoke, Op::Acquire) => open[row.process] = Some(position),
            (EventType::Ok, Op::Acquire) => {
                let Some(invoke) = open[row.process].take() else {
                    continue;
                };
                let grant = Grant {
                    owner,
                    invoke,
                    ok: position,
                };
                granted.insert(owner, grant);
                let newer = latest[lock].is_none_or(|last| last.invoke < invoke);
                if newer {
                    latest[lock] = Some(grant);
                }
            }
            (EventType::Invoke, Op::Check) => {
                suspect[row.process] = granted.get(&owner).and_then(|own| {
                    let rival = latest[lock]?;
                    (rival.owner != owner && rival.invoke > own.ok)
                        .then_some((own.ok, rival.ok, position))
                });
            }
            (EventType::Ok, Op::Check) => {
                if let Some((grant, rival_grant, check)) = suspect[row.process].take() {
                    hits.push(Hit {
                        grant,
                        rival_grant,
                        check,
                        held: position,
                    });
                }
            }
            (_, Op::Check) => suspect[row.process] = None,
            (_, Op::Acquire) if row.kind.is_completion() => open[row.process] = None,
            _ => {}
        }
    }
    let anomalies = hits.kept.iter().map(|hit| explain(ctx, hit)).collect();
    Outcome::ran(CLASS, "client calls", hits.count, anomalies, None)
}

fn explain(ctx: &Context<'_>, hit: &Hit) -> Anomaly {
    let grant = ctx.at(hit.grant);
    let rival = ctx.at(hit.rival_grant);
    let held = ctx.at(hit.held);
    let owner = short_owner(grant.owner.as_deref().unwrap_or("(none)"));
    let rival_owner = short_owner(rival.owner.as_deref().unwrap_or("(none)"));
    let lock = grant.lock.as_deref().unwrap_or("(no lock)");
    Anomaly {
        class: CLASS,
        severity: Severity::Failure,
        events: ctx.indexes([hit.grant, hit.rival_grant, hit.check, hit.held]),
        explanation: format!(
            "{worker} was granted lock {lock} as owner {owner} {}; {} asked for the lock as \
             owner {rival_owner} after that and was granted it {}; a lock service grants one lease \
             at a time, so {worker}'s lease had ended by then (inferred from that grant, not \
             seen in a lock log); yet when {worker} then asked its lock client whether it still held the \
             lock, the client answered that it did {}. An ownership check must ask the lock \
             service (or be sure of its own clock): one answered from a flag or a cache clears \
             writes for a lease that is gone.",
            when(ctx, &grant, "its"),
            rival.process,
            when(ctx, &rival, "its"),
            when(ctx, &held, "its"),
            worker = grant.process,
        ),
    }
}

#[cfg(test)]
mod tests {
    use crate::testkit::Builder;
    use crate::verdict::Validity;

    #[test]
    fn a_check_answered_held_after_a_rival_was_granted_the_lock_is_caught() {
        let mut b = Builder::new();
        let granted = b.acquire("w1", "L", "o1", 1, false);
        b.check("w1", "L", "o1", true);
        b.at(12.0);
        let rival = b.acquire("w2", "L", "o2", 2, false);
        let check = b.check("w1", "L", "o1", true);
        let outcome = b.judged_by(super::check);
        assert_eq!(outcome.report.validity, Validity::Invalid);
        assert_eq!(outcome.report.anomalies, 1);
        assert_eq!(
            outcome.anomalies[0].events,
            vec![granted, rival, check, check + 1]
        );
        let text = &outcome.anomalies[0].explanation;
        assert!(text.contains("w2 asked for the lock as owner o2"), "{text}");
    }

    #[test]
    fn checks_before_the_rival_grant_or_answered_not_held_or_of_the_new_holder_are_sound() {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, false);
        // The rival's acquire is in flight while w1 checks: its grant is not yet proof.
        b.invoke_acquire("w2", "L", "o2");
        b.check("w1", "L", "o1", true);
        b.at(12.0);
        b.ok_acquire("w2", 2);
        b.check("w1", "L", "o1", false);
        b.check("w2", "L", "o2", true);
        // A rival whose acquire was sent before w1's grant (answered late) proves nothing.
        b.invoke_acquire("w3", "L", "o3");
        b.acquire("w1", "L", "o4", 4, false);
        b.ok_acquire("w3", 3);
        b.check("w1", "L", "o4", true);
        let outcome = b.judged_by(super::check);
        assert_eq!(outcome.report.validity, Validity::Valid);
        assert_eq!(outcome.report.anomalies, 0);
    }
}
