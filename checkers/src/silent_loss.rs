//! `silent-lease-loss`: did the lock service refuse a worker's library a renewal of a lease the
//! worker still held, with the library never telling the worker the lease was lost?
//!
//! A watchdog that logs "could not extend lock" and carries on leaves its worker working under a
//! lease that is gone; the worker learns nothing until its write (if the store fences) or never.
//! Here a refusal is a renew of the worker's lease, sent by one of its library's tasks
//! (`wN:renew…`, `wN:check`) before the worker released or abandoned that lease, and answered
//! `fail` (not applied: the service said no), or a `renew-refused` notice of the worker, which a
//! library fencer does not see call the service (an `exec:` child) sends when the service refuses
//! one of its own renewals, reported before the worker released or abandoned that lease. The
//! library must tell its worker `lost` for that lease (a notice anywhere in the history counts).
//! A renew whose reply was lost is not a refusal: the renewal may have been applied. A warning
//! unless strict: the loss itself may have harmed nothing, the silence is what leaves the worker
//! blind.
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
            || (kind == EventType::Notice
                && matches!(f, Op::Lost | Op::Abandoned | Op::RenewRefused))
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
            (EventType::Notice, Op::RenewRefused) if role.is_worker => {
                let lease = (row.process, owner);
                if !done.contains(&lease) && seen.insert(lease) {
                    refused.push((lease, position));
                }
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
    let reason = refused.error.as_deref().unwrap_or("no reason given");
    // The sentence is about the refusal, not a process: whose clock the reading is, is said.
    let clock = format!("{worker}'s");
    let mut cited = vec![refusal];
    let refusal_was = if refused.f == Op::RenewRefused {
        format!(
            "{worker}'s lock client reported that the lock service refused its renewal of lock \
             {lock} for owner {owner} ({reason}); the report reached fencer {}, before {worker} \
             released or gave up that lease",
            when(ctx, &refused, &clock)
        )
    } else {
        if let Some(invoke) = ctx.lookup().partner(refusal) {
            cited.insert(0, invoke);
        }
        format!(
            "the lock service refused {}'s renewal of lock {lock} for owner {owner} ({reason}) \
             {}, sent before {worker} released or gave up that lease",
            refused.process,
            when(ctx, &refused, &clock),
        )
    };
    Anomaly {
        class: CLASS,
        severity: Severity::Failure,
        events: ctx.indexes(cited),
        explanation: format!(
            "{refusal_was}; its lock client sent {worker} no `lost` notice for that lease in the \
             whole history. A library that swallows a refused renewal leaves its worker working \
             under a lease that is gone (an ownership check that asks the service may still \
             answer not held)."
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

    #[test]
    fn a_reported_refusal_counts_until_the_lease_is_released_and_a_lost_notice_answers_it() {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, false);
        let silent = b.notice("w1", Op::RenewRefused, "L", "o1", Some("NotAcquired"));
        b.lock_call("w1", Op::Release, "L", "o1", EventType::Fail);
        b.acquire("w1", "L", "o2", 2, false);
        b.notice("w1", Op::RenewRefused, "L", "o2", Some("NotAcquired"));
        b.notice("w1", Op::Lost, "L", "o2", Some("renewal refused"));
        b.lock_call("w1", Op::Release, "L", "o2", EventType::Fail);
        b.acquire("w1", "L", "o3", 3, false);
        b.lock_call("w1", Op::Release, "L", "o3", EventType::Ok);
        // Reported after the worker released: the refusal may have come after it too.
        b.notice("w1", Op::RenewRefused, "L", "o3", Some("NotAcquired"));
        let outcome = b.judged_by(check);
        assert_eq!(outcome.report.anomalies, 1);
        assert_eq!(outcome.anomalies[0].events, vec![silent]);
        let text = &outcome.anomalies[0].explanation;
        assert!(
            text.starts_with(
                "w1's lock client reported that the lock service refused its renewal of lock L \
                 for owner o1 (NotAcquired); the report reached fencer at 0.002s (w1's clock \
                 0.002s), before w1 released"
            ),
            "{text}"
        );
        assert!(
            text.contains("its lock client sent w1 no `lost` notice for that lease in the whole"),
            "{text}"
        );
    }
}
