//! `overlapping-leases`: were two leases on one lock valid at the same time, by the lock
//! service's own account?
//!
//! Replays the lock service's log per lock: a grant replaces the current lease, a renew of the
//! current lease moves its expiry, a release ends it. Expiry is judged on the lock server's
//! clock (`local_ns` vs `expires_ns`), because that is the clock the service promises to use;
//! an overlap here is a bug in the service's logic, not in anyone's clock. Two shapes count:
//! a grant while the current lease is unreleased and unexpired, and a renew that revives a
//! replaced lease while the newer one is live.
//!
//! Without the lock service's log, a worker never learns another's expiry, but every holder
//! knows what the service promised it: [`crate::lease_windows`] judges grants against those
//! promises from client replies.

use fencer_harness::{Event, EventType, Op, RowRef, Sym};

use crate::context::{Context, is_lock_log};
use crate::explain::{Story, at_time, count, faults_between, secs, secs_signed, when, who_owns};
use crate::findings::{Hits, Outcome, Undecided};
use crate::index::FastMap;
use crate::verdict::{Anomaly, AnomalyClass};

const CLASS: AnomalyClass = AnomalyClass::OverlappingLeases;

/// Runs the checker on the lock service's log if there is one, else on client replies.
pub(crate) fn check(ctx: &Context<'_>) -> Outcome {
    if !ctx.has_lock_log {
        return crate::lease_windows::check(ctx);
    }
    let mut current: FastMap<Sym, Lease> = FastMap::default();
    let mut hits = Hits::new();
    // (lock, revived token, newest token) -> slot of the first hit, if it was kept.
    let mut revived: FastMap<(Sym, u64, u64), Option<usize>> = FastMap::default();
    let mut unreadable = Undecided::new();
    for (position, ref row) in ctx.rows_where(|kind, _| kind == EventType::Log) {
        if !is_lock_log(row) {
            continue;
        }
        let Some(lock) = row.lock else {
            unreadable.push(position);
            continue;
        };
        match row.f {
            Op::Acquire => {
                let (Some(token), Some(owner), Some(now_ns), Some(expires_ns)) =
                    (row.token(), row.owner, row.local_ns(), row.expires_ns())
                else {
                    unreadable.push(position);
                    continue;
                };
                if let Some(&previous) = current.get(&lock)
                    && previous.is_live_at(now_ns)
                {
                    hits.push(Hit::Granted {
                        previous,
                        grant: position,
                    });
                }
                current.insert(
                    lock,
                    Lease {
                        grant: position,
                        extended: None,
                        token,
                        owner,
                        expires_ns,
                        released: false,
                    },
                );
            }
            Op::Renew => {
                let Some(lease) = current.get_mut(&lock) else {
                    continue;
                };
                if lease.is_touched_by(row) {
                    // The service says it extended the lease: it is live again, whatever came
                    // before.
                    if let Some(expires_ns) = row.expires_ns() {
                        lease.expires_ns = expires_ns;
                        lease.extended = Some(position);
                        lease.released = false;
                    }
                    continue;
                }
                let (Some(old_token), Some(now_ns)) = (row.holder_token(), row.local_ns()) else {
                    unreadable.push(position);
                    continue;
                };
                if old_token < lease.token && lease.is_live_at(now_ns) {
                    let root = (lock, old_token, lease.token);
                    match revived.get(&root) {
                        Some(&slot) => {
                            if let Some(Hit::Revived { repeats, last, .. }) =
                                slot.map(|slot| &mut hits.kept[slot])
                            {
                                *repeats += 1;
                                *last = position;
                            }
                        }
                        None => {
                            let slot = hits.push(Hit::Revived {
                                newest: *lease,
                                renew: position,
                                repeats: 0,
                                last: position,
                            });
                            revived.insert(root, slot);
                        }
                    }
                }
            }
            Op::Release => {
                if let Some(lease) = current.get_mut(&lock)
                    && lease.is_touched_by(row)
                {
                    lease.released = true;
                }
            }
            _ => {}
        }
    }
    let anomalies = hits.kept.iter().map(|hit| explain(ctx, hit)).collect();
    let inconclusive = unreadable.into_inconclusive(ctx, |unreadable| {
        format!(
            "{} a lock, token, owner or server clock reading",
            count(unreadable, "lock log entry lacks", "lock log entries lack")
        )
    });
    Outcome::ran(CLASS, "lock log", hits.count, anomalies, inconclusive)
}

/// The lease a lock service considers current on one lock.
#[derive(Clone, Copy)]
struct Lease {
    /// Position of its grant.
    grant: usize,
    /// Position of the latest renew that extended it.
    extended: Option<usize>,
    token: u64,
    owner: Sym,
    /// On the lock server's clock.
    expires_ns: i64,
    released: bool,
}

impl Lease {
    fn is_live_at(&self, now_ns: i64) -> bool {
        !self.released && self.expires_ns > now_ns
    }

    /// True if a renew or release log entry applied to this lease.
    fn is_touched_by(&self, row: &RowRef<'_>) -> bool {
        match row.holder_token() {
            Some(token) => token == self.token,
            None => row.holder == Some(self.owner),
        }
    }
}

enum Hit {
    /// A grant at `grant` while `previous` was live.
    Granted { previous: Lease, grant: usize },
    /// A renew at `renew` of a lease older than `newest`, which was live; repeated
    /// `repeats` more times up to `last`.
    Revived {
        newest: Lease,
        renew: usize,
        repeats: usize,
        last: usize,
    },
}

fn explain(ctx: &Context<'_>, hit: &Hit) -> Anomaly {
    match hit {
        Hit::Granted { previous, grant } => explain_grant(ctx, previous, *grant),
        Hit::Revived {
            newest,
            renew,
            repeats,
            last,
        } => explain_revival(ctx, newest, *renew, *repeats, *last),
    }
}

/// What the nemesis did to the lock server between two of its log entries, as a sentence.
fn server_faults(
    ctx: &Context<'_>,
    server: &Event,
    from: usize,
    to: usize,
) -> (String, Vec<usize>) {
    let faults = faults_between(ctx, &server.process, from, to);
    let mut story = Story::new(format!("Meanwhile the lock server ({})", server.process));
    story.add_faults(ctx, &faults);
    let text = if story.is_empty() {
        String::new()
    } else {
        format!(" {}.", story.render())
    };
    (text, faults)
}

/// `the lease with token 2 held by w1 (owner o1), granted at 1.000s and last extended at
/// 3.000s,`
fn describe_lease(ctx: &Context<'_>, lease: &Lease) -> String {
    let extended = lease.extended.map_or(String::new(), |renew| {
        format!(" and last extended {}", at_time(ctx, &ctx.at(renew)))
    });
    format!(
        "the lease with token {} held by {}, granted {}{extended},",
        lease.token,
        who_owns(ctx, ctx.text(lease.owner)),
        at_time(ctx, &ctx.at(lease.grant))
    )
}

fn explain_grant(ctx: &Context<'_>, previous: &Lease, grant: usize) -> Anomaly {
    let granted = ctx.at(grant);
    let now_ns = granted.local_ns.unwrap_or_default();
    let (faults_text, faults) = server_faults(ctx, &granted, previous.grant, grant);
    let mut cited = vec![previous.grant, grant];
    cited.extend(previous.extended);
    cited.extend(faults);
    Anomaly {
        class: CLASS,
        severity: crate::verdict::Severity::Failure,
        events: ctx.indexes(cited),
        explanation: format!(
            "On lock {} the lock service granted token {} to {} {}, while {} was still valid \
             until lock clock {} ({} longer) and had not been released: for that time both \
             could act as the holder.{faults_text} A lock service must not grant a lease while \
             an unexpired one exists, judged on its own clock.",
            granted.lock.as_deref().unwrap_or("?"),
            granted.token.unwrap_or_default(),
            who_owns(ctx, granted.owner.as_deref().unwrap_or_default()),
            when(ctx, &granted, "lock"),
            describe_lease(ctx, previous),
            secs_signed(previous.expires_ns),
            secs(previous.expires_ns.abs_diff(now_ns)),
        ),
    }
}

fn explain_revival(
    ctx: &Context<'_>,
    newest: &Lease,
    renew: usize,
    repeats: usize,
    last: usize,
) -> Anomaly {
    let renewed = ctx.at(renew);
    let lookup = ctx.lookup();
    let old_holder = renewed.holder.as_deref().unwrap_or_default();
    let requester = renewed.owner.as_deref().unwrap_or_default();
    let old_token = renewed.holder_token.unwrap_or_default();
    let replaced = if requester == old_holder {
        format!("its own replaced lease with token {old_token}")
    } else {
        format!(
            "the replaced lease with token {old_token} held by {}",
            who_owns(ctx, old_holder)
        )
    };
    let (faults_text, faults) = server_faults(ctx, &renewed, newest.grant, renew);
    let mut cited = vec![newest.grant, renew];
    cited.extend(newest.extended);
    cited.extend(
        ctx.sym(old_holder)
            .and_then(|holder| lookup.log_grant(holder)),
    );
    cited.extend(faults);
    let until = renewed.expires_ns.map_or(String::new(), |expires_ns| {
        format!(
            ", extending it until lock clock {}",
            secs_signed(expires_ns)
        )
    });
    let repeats = if repeats > 0 {
        format!(
            " It renewed that replaced lease {}, the last {}.",
            count(repeats, "more time", "more times"),
            at_time(ctx, &ctx.at(last))
        )
    } else {
        String::new()
    };
    Anomaly {
        class: CLASS,
        severity: crate::verdict::Severity::Failure,
        events: ctx.indexes(cited),
        explanation: format!(
            "On lock {} the lock service applied a renew by {} to {} {}{until}, while {} was \
             live until lock clock {}: two leases were valid at once.{repeats}{faults_text} A \
             renew must never revive a lease that a newer grant has replaced.",
            renewed.lock.as_deref().unwrap_or("?"),
            who_owns(ctx, requester),
            replaced,
            when(ctx, &renewed, "lock"),
            describe_lease(ctx, newest),
            secs_signed(newest.expires_ns),
        ),
    }
}

#[cfg(test)]
mod tests {
    use fencer_harness::PackedHistory;

    use super::*;
    use crate::testkit::Builder;
    use crate::verdict::Validity;

    fn run(builder: &Builder) -> Outcome {
        let history = builder.build();
        let packed = PackedHistory::pack(&history);
        check(&Context::new(&packed))
    }

    #[test]
    fn grant_while_the_previous_lease_is_unexpired_overlaps() {
        let mut b = Builder::new();
        b.at(1.0);
        let first = b.acquire("w1", "L", "o1", 2, true) - 1;
        b.at(3.0);
        b.invoke_lock_call("w1:renew", Op::Renew, "L", "o1");
        let renewed = b.lock_log(Op::Renew, "L", "o1", "o1", 2, 8.0);
        b.ok("w1:renew");
        b.at(4.0);
        let jump = b.nemesis(Op::ClockJump, "lock", |e| e.jump_ns = Some(-2_000_000_000));
        b.at(5.0);
        b.skew("lock", -2.0);
        b.invoke_acquire("w2", "L", "o2");
        let second = b.grant("L", "o2", 3, 10.0);
        b.ok_acquire("w2", 3);
        let outcome = run(&b);
        assert_eq!(outcome.report.validity, Validity::Invalid);
        assert_eq!(outcome.report.anomalies, 1);
        assert_eq!(outcome.report.evidence, "lock log");
        let anomaly = &outcome.anomalies[0];
        assert_eq!(anomaly.events, vec![first, renewed, jump, second]);
        let text = &anomaly.explanation;
        for needle in [
            "On lock L the lock service granted token 3 to w2 (owner o2) at 5.001s (lock clock 3.001s)",
            "the lease with token 2 held by w1 (owner o1), granted at 1.001s and last extended at 3.001s, was still valid",
            "still valid until lock clock 11.001s (8.000s longer)",
            "Meanwhile the lock server (lock) had its clock jumped backward 2.000s at 4.000s.",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in: {text}");
        }
    }

    #[test]
    fn grant_after_expiry_or_release_does_not_overlap() {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, true);
        b.at(10.5);
        b.acquire("w2", "L", "o2", 2, true);
        b.invoke_lock_call("w2", Op::Release, "L", "o2");
        b.lock_log(Op::Release, "L", "o2", "o2", 2, 0.0);
        b.ok("w2");
        b.acquire("w3", "L", "o3", 3, true);
        // Another lock's lease does not conflict with L's.
        b.acquire("w4", "M", "o4", 1, true);
        let outcome = run(&b);
        assert_eq!(outcome.report.validity, Validity::Valid);
        assert_eq!(outcome.report.anomalies, 0);
    }

    #[test]
    fn renew_reviving_a_replaced_lease_while_the_newer_is_live_overlaps() {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, true);
        b.at(10.5);
        let newer = b.acquire("w2", "L", "o2", 2, true) - 1;
        b.at(11.0);
        b.invoke_lock_call("w1:renew", Op::Renew, "L", "o1");
        let revive = b.lock_log(Op::Renew, "L", "o1", "o1", 1, 10.0);
        b.ok("w1:renew");
        b.invoke_lock_call("w1:renew", Op::Renew, "L", "o1");
        b.lock_log(Op::Renew, "L", "o1", "o1", 1, 10.0);
        b.ok("w1:renew");
        let outcome = run(&b);
        assert_eq!(outcome.report.anomalies, 1);
        let anomaly = &outcome.anomalies[0];
        // The old lease's grant is cited too.
        assert_eq!(anomaly.events, vec![1, newer, revive]);
        let text = &anomaly.explanation;
        assert!(
            text.contains(
                "renew by w1 (owner o1) to its own replaced lease with token 1 at 11.001s"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "while the lease with token 2 held by w2 (owner o2), granted at 10.501s, was live"
            ),
            "{text}"
        );
        assert!(text.contains("1 more time,"), "{text}");
    }

    #[test]
    fn renew_of_a_replaced_lease_after_the_newer_one_was_released_does_not_overlap() {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, true);
        b.at(10.5);
        b.acquire("w2", "L", "o2", 2, true);
        b.invoke_lock_call("w2", Op::Release, "L", "o2");
        b.lock_log(Op::Release, "L", "o2", "o2", 2, 0.0);
        b.ok("w2");
        b.invoke_lock_call("w1:renew", Op::Renew, "L", "o1");
        b.lock_log(Op::Renew, "L", "o1", "o1", 1, 10.0);
        b.ok("w1:renew");
        let outcome = run(&b);
        assert_eq!(outcome.report.validity, Validity::Valid);
    }

    #[test]
    fn without_a_lock_log_the_checker_judges_client_replies() {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, false);
        b.acquire("w2", "L", "o2", 2, false);
        let outcome = run(&b);
        assert_eq!(outcome.report.skipped, None);
        assert_eq!(outcome.report.evidence, "client replies");
        assert_eq!(outcome.report.anomalies, 1);
    }
}
