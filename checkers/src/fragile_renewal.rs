//! `fragile-renewal`: does a library's renewal period leave no room for one lost reply within
//! the TTL?
//!
//! A watchdog that renews every period `p` after its last answer confirms the lease until the
//! send plus the TTL. If one reply is lost, the next confirmation comes one more period later;
//! when `2 × p` reaches the TTL, that is after the lease may already have expired, so a single
//! dropped reply costs the lease (or, worse, the library does not notice). The period is read
//! from the history as the time between a lease's grant or renewal being answered and the next
//! renewal its worker's renewal task sends for it. Only gaps no fault overlaps are judged (no
//! fault of any kind, on any target, began in the gap or was still active at its start): a
//! pause or clock step stretches a worker's gaps, and a fault aimed at another worker's lease
//! or at the lock server can hold this worker's calls too. A warning unless strict: the run
//! may have lost no reply at all.
//!
//! Evidence: client calls (grants, renewals) and the nemesis's faults.

use fencer_harness::{EventType, Op, Sym};

use crate::context::Context;
use crate::explain::{secs, when};
use crate::findings::{Hits, Outcome};
use crate::index::{FastMap, FastSet};
use crate::process_roles::Roles;
use crate::verdict::{Anomaly, AnomalyClass, Severity};

const CLASS: AnomalyClass = AnomalyClass::FragileRenewal;

/// A lease's last answered grant or renewal, where its watchdog's next period starts.
#[derive(Clone, Copy)]
struct Answered {
    position: usize,
    time_ns: u64,
    ttl_ns: u64,
    /// A fault was active when it was answered.
    disturbed: bool,
}

/// The faults seen so far: when the latest began, and until when any of them lasts.
#[derive(Clone, Copy, Default)]
struct Faults {
    last_began_ns: Option<u64>,
    active_until_ns: u64,
}

impl Faults {
    fn saw(&mut self, time_ns: u64, duration_ns: Option<u64>) {
        self.last_began_ns = Some(time_ns);
        let until = time_ns.saturating_add(duration_ns.unwrap_or(0));
        self.active_until_ns = self.active_until_ns.max(until);
    }

    fn active_at(&self, time_ns: u64) -> bool {
        self.last_began_ns.is_some() && self.active_until_ns >= time_ns
    }

    fn began_since(&self, time_ns: u64) -> bool {
        self.last_began_ns.is_some_and(|began| began >= time_ns)
    }
}

/// A renewal sent half a TTL or more after the lease's last answer.
struct Hit {
    answered: usize,
    renew: usize,
    gap_ns: u64,
    ttl_ns: u64,
}

/// Runs the checker on the renewals the workers' libraries sent.
pub(crate) fn check(ctx: &Context<'_>) -> Outcome {
    let mut roles = Roles::new(ctx);
    let mut last: FastMap<Sym, Answered> = FastMap::default();
    let mut reported: FastSet<Sym> = FastSet::default();
    let mut faults = Faults::default();
    let mut hits = Hits::new();
    let wanted = |kind: EventType, f: Op| {
        kind == EventType::Nemesis
            || (kind == EventType::Ok && f == Op::Acquire)
            || f == Op::Renew
            || (kind == EventType::Invoke && f == Op::Release)
            || (kind == EventType::Notice && f == Op::Abandoned)
    };
    for (position, row) in ctx.rows_where(wanted) {
        if row.kind == EventType::Nemesis {
            faults.saw(row.time_ns, row.duration_ns());
            continue;
        }
        let Some(owner) = row.owner else {
            continue;
        };
        let role = roles.of(row.process);
        match (row.kind, row.f) {
            (EventType::Ok, Op::Acquire) if role.is_worker => {
                let Some(ttl_ns) = row.ttl_ns() else {
                    continue;
                };
                last.insert(
                    owner,
                    Answered {
                        position,
                        time_ns: row.time_ns,
                        ttl_ns,
                        disturbed: faults.active_at(row.time_ns),
                    },
                );
            }
            (EventType::Invoke, Op::Release) | (EventType::Notice, Op::Abandoned)
                if role.is_worker =>
            {
                last.remove(&owner);
            }
            (EventType::Invoke, Op::Renew) if role.is_renewal_task => {
                let Some(answered) = last.get(&owner).copied() else {
                    continue;
                };
                let gap_ns = row.time_ns.saturating_sub(answered.time_ns);
                if gap_ns.saturating_mul(2) >= answered.ttl_ns
                    && !answered.disturbed
                    && !faults.began_since(answered.time_ns)
                    && reported.insert(owner)
                {
                    hits.push(Hit {
                        answered: answered.position,
                        renew: position,
                        gap_ns,
                        ttl_ns: answered.ttl_ns,
                    });
                }
            }
            (kind, Op::Renew) if role.is_renewal_task && kind.is_completion() => {
                if let Some(answered) = last.get_mut(&owner) {
                    answered.position = position;
                    answered.time_ns = row.time_ns;
                    answered.disturbed = faults.active_at(row.time_ns);
                }
            }
            _ => {}
        }
    }
    let anomalies = hits.kept.iter().map(|hit| explain(ctx, hit)).collect();
    Outcome::ran(CLASS, "client calls", hits.count, anomalies, None)
}

fn explain(ctx: &Context<'_>, hit: &Hit) -> Anomaly {
    let answered = ctx.at(hit.answered);
    let renew = ctx.at(hit.renew);
    let lock = renew.lock.as_deref().unwrap_or("(no lock)");
    let owner = crate::explain::short_owner(renew.owner.as_deref().unwrap_or("(none)"));
    Anomaly {
        class: CLASS,
        severity: Severity::Failure,
        events: ctx.indexes([hit.answered, hit.renew]),
        explanation: format!(
            "the lease of lock {lock} for owner {owner} was last answered {} ({} {}); its \
             renewal task {} sent the next renewal {}, {} later with no fault active in \
             between: at least half the {} TTL. One lost reply \
             and the renewal after it comes when the lease may already have expired; a \
             renewal period must leave room for a lost reply within the TTL.",
            when(ctx, &answered, "its"),
            answered.f.name(),
            answered.kind.name(),
            renew.process,
            when(ctx, &renew, "its"),
            secs(hit.gap_ns),
            secs(hit.ttl_ns),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{Builder, s};
    use crate::verdict::Validity;

    #[test]
    fn a_renewal_half_a_ttl_after_the_grant_is_fragile() {
        let mut b = Builder::new();
        let granted = b.acquire("w1", "L", "o1", 1, false);
        b.at(5.1);
        let renew = b.lock_call("w1:renew", Op::Renew, "L", "o1", EventType::Ok);
        b.at(11.0);
        b.lock_call("w1:renew", Op::Renew, "L", "o1", EventType::Ok);
        let outcome = b.judged_by(check);
        assert_eq!(outcome.report.validity, Validity::Invalid);
        assert_eq!(outcome.report.anomalies, 1, "reported once per lease");
        assert_eq!(outcome.anomalies[0].events, vec![granted, renew]);
        let text = &outcome.anomalies[0].explanation;
        assert!(text.contains("at least half the 10.000s TTL"), "{text}");
    }

    #[test]
    fn a_short_period_or_a_gap_a_pause_stretched_is_not_fragile() {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, false);
        b.at(3.0);
        b.lock_call("w1:renew", Op::Renew, "L", "o1", EventType::Ok);
        b.at(4.0);
        b.pause("w1", 8.0);
        b.at(12.0);
        b.resume("w1");
        b.lock_call("w1:renew", Op::Renew, "L", "o1", EventType::Ok);
        b.at(14.9);
        b.lock_call("w1:renew", Op::Renew, "L", "o1", EventType::Ok);
        // A fault aimed at another worker may hold this one's calls too.
        b.at(15.0);
        b.nemesis(Op::LeaseEdge, "w2", |e| e.duration_ns = Some(s(10.0)));
        b.at(21.0);
        b.lock_call("w1:renew", Op::Renew, "L", "o1", EventType::Ok);
        // The check task's renewals are not the watchdog's period.
        b.at(25.0);
        b.lock_call("w1:check", Op::Renew, "L", "o1", EventType::Ok);
        b.lock_call("w1", Op::Release, "L", "o1", EventType::Ok);
        let outcome = b.judged_by(check);
        assert_eq!(outcome.report.validity, Validity::Valid);
        assert_eq!(outcome.report.anomalies, 0);
    }
}
