//! `silent-lease-loss`: did the lock service refuse a worker's library a renewal of a lease the
//! worker still held, with the library never telling the worker the lease was lost?
//!
//! A watchdog that logs "could not extend lock" and carries on leaves its worker working under
//! a lease that is gone; the worker learns nothing until its write (if the store fences) or
//! never. Here a refusal is a renew of the worker's lease, sent by one of its library's tasks
//! (`wN:renew…`, `wN:check`) before the worker released or abandoned that lease, and answered
//! `fail` (not applied: the service said no). The library must then tell its worker `lost`
//! for that lease, at any point after. A renew whose reply was lost is not a refusal: the
//! renewal may have been applied. A warning unless strict: the loss itself may have harmed
//! nothing, the silence is what leaves the worker blind.
//!
//! Evidence: client calls and notices.

use fencer_harness::{EventType, Op, Sym};

use crate::context::Context;
use crate::explain::{short_owner, when};
use crate::findings::{Hits, Outcome};
use crate::index::{FastMap, FastSet};
use crate::process_roles::Roles;
use crate::verdict::{Anomaly, AnomalyClass, Severity};

const CLASS: AnomalyClass = AnomalyClass::SilentLeaseLoss;

/// Runs the checker on the workers' renewals and notices.
pub(crate) fn check(ctx: &Context<'_>) -> Outcome {
    let mut roles = Roles::new(ctx);
    // Per (worker, owner): where the worker released or abandoned the lease.
    let mut done: FastSet<(Sym, Sym)> = FastSet::default();
    let mut told: FastSet<(Sym, Sym)> = FastSet::default();
    // Per renewing process: the renew in flight, if it was sent while the lease was held.
    let mut in_flight: FastMap<Sym, (Sym, Sym)> = FastMap::default();
    // The first refusal of each lease, in history order.
    let mut refused: Vec<((Sym, Sym), usize)> = Vec::new();
    let mut seen: FastSet<(Sym, Sym)> = FastSet::default();
    let wanted = |kind: EventType, f: Op| {
        matches!(f, Op::Renew | Op::Release)
            || (kind == EventType::Notice && matches!(f, Op::Lost | Op::Abandoned))
    };
    for (position, row) in ctx.rows_where(wanted) {
        let Some(owner) = row.owner else {
            continue;
        };
        let role = roles.of(row.process);
        match (row.kind, row.f) {
            (EventType::Notice, Op::Lost) if role.is_worker => {
                told.insert((row.process, owner));
            }
            (EventType::Notice, Op::Abandoned) | (EventType::Invoke, Op::Release)
                if role.is_worker =>
            {
                done.insert((row.process, owner));
            }
            (EventType::Invoke, Op::Renew) if role.is_renewal_task || role.is_check_task => {
                if let Some(worker) = role.worker
                    && !done.contains(&(worker, owner))
                {
                    in_flight.insert(row.process, (worker, owner));
                }
            }
            (EventType::Fail, Op::Renew) => {
                if let Some(lease) = in_flight.remove(&row.process)
                    && seen.insert(lease)
                {
                    refused.push((lease, position));
                }
            }
            (kind, Op::Renew) if kind.is_completion() => {
                in_flight.remove(&row.process);
            }
            _ => {}
        }
    }
    let mut hits = Hits::new();
    for (lease, refusal) in refused {
        if !told.contains(&lease) {
            hits.push(refusal);
        }
    }
    let anomalies = hits.kept.iter().map(|&at| explain(ctx, at)).collect();
    Outcome::ran(
        CLASS,
        "client calls and notices",
        hits.count,
        anomalies,
        None,
    )
}

fn explain(ctx: &Context<'_>, refusal: usize) -> Anomaly {
    let refused = ctx.at(refusal);
    let owner = short_owner(refused.owner.as_deref().unwrap_or("(none)"));
    let lock = refused.lock.as_deref().unwrap_or("(no lock)");
    let worker = crate::context::worker_of(&refused.process);
    let mut cited = vec![refusal];
    if let Some(invoke) = ctx.lookup().partner(refusal) {
        cited.insert(0, invoke);
    }
    Anomaly {
        class: CLASS,
        severity: Severity::Failure,
        events: ctx.indexes(cited),
        explanation: format!(
            "the lock service refused {}'s renewal of lock {lock} for owner {owner} ({}) {}, \
             sent before {worker} released or gave up that lease; its lock client never \
             told {worker} the lease was lost, in the rest of the history. A library that \
             swallows a refused renewal leaves its worker working under a lease that is gone.",
            refused.process,
            refused.error.as_deref().unwrap_or("no reason given"),
            when(ctx, &refused, "its"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::Builder;
    use crate::verdict::Validity;

    #[test]
    fn a_refused_renewal_nobody_told_the_worker_of_is_caught() {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, false);
        b.at(12.0);
        let renew = b.lock_call("w1:renew", Op::Renew, "L", "o1", EventType::Fail);
        b.lock_call("w1", Op::Release, "L", "o1", EventType::Fail);
        let outcome = b.judged_by(check);
        assert_eq!(outcome.report.validity, Validity::Invalid);
        assert_eq!(outcome.report.anomalies, 1);
        assert_eq!(outcome.anomalies[0].events, vec![renew, renew + 1]);
        let text = &outcome.anomalies[0].explanation;
        assert!(
            text.starts_with("the lock service refused w1:renew's renewal"),
            "{text}"
        );
    }

    #[test]
    fn a_told_refusal_an_unanswered_renewal_and_a_renewal_after_release_are_not_silent() {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, false);
        b.lock_call("w1:renew", Op::Renew, "L", "o1", EventType::Fail);
        b.notice("w1", Op::Lost, "L", "o1", Some("renewal refused"));
        b.acquire("w1", "L", "o2", 2, false);
        b.lock_call("w1:renew", Op::Renew, "L", "o2", EventType::Info);
        b.lock_call("w1:check", Op::Renew, "L", "o2", EventType::Ok);
        b.lock_call("w1", Op::Release, "L", "o2", EventType::Ok);
        // A zombie's refusal is zombie-renewal's business.
        b.lock_call("w1:renew", Op::Renew, "L", "o2", EventType::Fail);
        let outcome = b.judged_by(check);
        assert_eq!(outcome.report.validity, Validity::Valid);
        assert_eq!(outcome.report.anomalies, 0);
    }
}
