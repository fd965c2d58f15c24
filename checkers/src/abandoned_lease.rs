//! `abandoned-lease`: was a lease kept alive after its worker gave it up unreleased?
//!
//! When the work under a lease is cancelled (the request it served went away, its deadline
//! passed), the worker hands the lease back to its library without releasing it (its
//! `abandoned` notice). The lease should then lapse within a TTL; a renewal loop that lives on
//! keeps it for nobody, and every other worker waits. Proof: a renewal of that lease *sent*
//! after the abandonment and answered `ok` by the service, which extends the lease past the
//! abandonment plus a TTL. A warning unless strict: the lock is held up, no data is harmed.
//! (The renewal itself, sent by a task that should have died, is a `zombie-renewal` too.)
//!
//! Evidence: client calls and the worker's notices.

use fencer_harness::{EventType, Op, Sym};

use crate::context::Context;
use crate::explain::{short_owner, when};
use crate::findings::{Hits, Outcome};
use crate::index::{FastMap, FastSet};
use crate::numbering::SymTable;
use crate::verdict::{Anomaly, AnomalyClass, Severity};

const CLASS: AnomalyClass = AnomalyClass::AbandonedLease;

/// A renewal confirmed after the lease was abandoned.
struct Hit {
    abandoned: usize,
    renew: usize,
    ok: usize,
}

/// Runs the checker on renewals and abandonments.
pub(crate) fn check(ctx: &Context<'_>) -> Outcome {
    if ctx
        .rows_where(|kind, f| kind == EventType::Notice && f == Op::Abandoned)
        .next()
        .is_none()
    {
        return Outcome::ran(CLASS, "client calls and notices", 0, Vec::new(), None);
    }
    let mut abandoned: FastMap<Sym, usize> = FastMap::default();
    let mut in_flight: SymTable<'_, Option<(usize, usize)>> = ctx.per_process(None);
    let mut reported: FastSet<Sym> = FastSet::default();
    let mut hits = Hits::new();
    let wanted = |kind: EventType, f: Op| {
        f == Op::Renew || (kind == EventType::Notice && f == Op::Abandoned)
    };
    for (position, row) in ctx.rows_where(wanted) {
        let Some(owner) = row.owner else {
            continue;
        };
        match (row.kind, row.f) {
            (EventType::Notice, _) => {
                abandoned.entry(owner).or_insert(position);
            }
            (EventType::Invoke, _) => {
                in_flight[row.process] = abandoned.get(&owner).map(|&at| (at, position));
            }
            (EventType::Ok, _) => {
                if let Some((at, renew)) = in_flight[row.process].take()
                    && reported.insert(owner)
                {
                    hits.push(Hit {
                        abandoned: at,
                        renew,
                        ok: position,
                    });
                }
            }
            _ => in_flight[row.process] = None,
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
    let abandoned = ctx.at(hit.abandoned);
    let renew = ctx.at(hit.renew);
    let ok = ctx.at(hit.ok);
    let owner = short_owner(abandoned.owner.as_deref().unwrap_or("(none)"));
    let lock = abandoned.lock.as_deref().unwrap_or("(no lock)");
    Anomaly {
        class: CLASS,
        severity: Severity::Failure,
        events: ctx.indexes([hit.abandoned, hit.renew, hit.ok]),
        explanation: format!(
            "{worker} gave up its lease of lock {lock} (owner {owner}) unreleased {}, its work \
             cancelled; {} renewed that lease afterwards (sent {}, confirmed {}), keeping the \
             lock held for nobody past the abandonment plus a TTL. A renewal loop must end \
             with the work it serves.",
            when(ctx, &abandoned, "its"),
            renew.process,
            when(ctx, &renew, "its"),
            when(ctx, &ok, "its"),
            worker = abandoned.process,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::Builder;
    use crate::verdict::Validity;

    #[test]
    fn a_renewal_confirmed_after_the_abandonment_is_caught_once_per_lease() {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, false);
        let abandoned = b.notice("w1", Op::Abandoned, "L", "o1", None);
        b.at(3.0);
        let renew = b.lock_call("w1:renew", Op::Renew, "L", "o1", EventType::Ok);
        b.at(6.0);
        b.lock_call("w1:renew", Op::Renew, "L", "o1", EventType::Ok);
        let outcome = b.judged_by(check);
        assert_eq!(outcome.report.validity, Validity::Invalid);
        assert_eq!(outcome.report.anomalies, 1);
        assert_eq!(
            outcome.anomalies[0].events,
            vec![abandoned, renew, renew + 1]
        );
    }

    #[test]
    fn a_renewal_in_flight_at_the_abandonment_or_refused_after_it_is_not_caught() {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, false);
        b.invoke_lock_call("w1:renew", Op::Renew, "L", "o1");
        b.notice("w1", Op::Abandoned, "L", "o1", None);
        b.ok("w1:renew");
        b.at(3.0);
        b.lock_call("w1:renew", Op::Renew, "L", "o1", EventType::Fail);
        // Renewals of a lease nobody abandoned are fine.
        b.acquire("w2", "L", "o2", 2, false);
        b.lock_call("w2:renew", Op::Renew, "L", "o2", EventType::Ok);
        let outcome = b.judged_by(check);
        assert_eq!(outcome.report.validity, Validity::Valid);
        assert_eq!(outcome.report.anomalies, 0);
    }
}
