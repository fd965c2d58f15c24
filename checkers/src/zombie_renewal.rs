//! `zombie-renewal`: did a worker's renewal task renew a lease after the worker had released
//! it, abandoned it (its work was cancelled), or finished altogether?
//!
//! A renewal task must die with its lease. One that outlives it keeps renewing a lease nobody
//! uses (holding the lock against everyone else until the process dies), or, with a lock
//! service that does not compare owners, someone else's. The evidence is the client calls
//! alone: the renewal tasks of `wN` are the processes `wN:renew` (and `wN:renew-1`, ... while
//! several are alive at once), and a renew one *sends* for an owner token after `wN` sent that
//! token's release, after `wN` gave that lease up to its library unreleased (its `abandoned`
//! notice: the work under it was cancelled, so nothing of the worker's wants it renewed), or
//! after `wN` finished (its last event closed a release or a refused acquire) is a zombie,
//! whatever the lock service answers.

use fencer_harness::{EventType, Op, RowRef, Sym};

use crate::context::{Context, worker_of};
use crate::explain::{short_owner, when};
use crate::findings::{Hits, Outcome};
use crate::index::FastMap;
use crate::process_roles::Roles;
use crate::verdict::{Anomaly, AnomalyClass};

const CLASS: AnomalyClass = AnomalyClass::ZombieRenewal;

/// A renew sent too late, and what it was too late for.
struct Hit {
    renew: usize,
    /// The worker's release or abandonment of the same owner token, or its last event.
    after: usize,
    ended: Ended,
}

/// How the worker was done with the lease before its renewal task renewed it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ended {
    Released,
    Abandoned,
    Finished,
}

/// Runs the checker on the client calls.
pub(crate) fn check(ctx: &Context<'_>) -> Outcome {
    let mut roles = Roles::new(ctx);
    let mut released: FastMap<(Sym, Sym), usize> = FastMap::default();
    let mut hits = Hits::new();
    let wanted = |kind, f| {
        (kind == EventType::Invoke && matches!(f, Op::Renew | Op::Release))
            || (kind == EventType::Notice && f == Op::Abandoned)
    };
    for (position, ref row) in ctx.rows_where(wanted) {
        let Some(owner) = row.owner else {
            continue;
        };
        match row.f {
            Op::Release | Op::Abandoned if roles.of(row.process).is_worker => {
                released.entry((row.process, owner)).or_insert(position);
            }
            Op::Renew => {
                let role = roles.of(row.process);
                if !role.is_renewal_task {
                    continue;
                }
                let Some(worker) = role.worker else {
                    continue;
                };
                if let Some(&release) = released.get(&(worker, owner)) {
                    let ended = if ctx.rows.get(release).f == Op::Abandoned {
                        Ended::Abandoned
                    } else {
                        Ended::Released
                    };
                    hits.push(Hit {
                        renew: position,
                        after: release,
                        ended,
                    });
                } else if let Some(last) = ctx.last_client_call(worker)
                    && last < position
                    && has_finished(&ctx.rows.get(last))
                {
                    hits.push(Hit {
                        renew: position,
                        after: last,
                        ended: Ended::Finished,
                    });
                }
            }
            _ => {}
        }
    }
    let anomalies = hits.kept.iter().map(|hit| explain(ctx, hit)).collect();
    Outcome::ran(CLASS, "client calls", hits.count, anomalies, None)
}

/// Whether a worker whose last event is `last` had finished: its last call was a release, or
/// an acquire it was refused (it gave up). A history cut off while the worker held a lease
/// (last event a read, a write, a granted acquire) shows a live renewal, not a zombie.
fn has_finished(last: &RowRef<'_>) -> bool {
    last.kind.is_completion()
        && (last.f == Op::Release || (last.f == Op::Acquire && last.kind != EventType::Ok))
}

fn explain(ctx: &Context<'_>, hit: &Hit) -> Anomaly {
    let renew = ctx.at(hit.renew);
    let after = ctx.at(hit.after);
    let owner = short_owner(renew.owner.as_deref().unwrap_or("(none)"));
    let lock = renew.lock.as_deref().unwrap_or("(no lock)");
    let worker = worker_of(&renew.process);
    let mut cited = vec![hit.after, hit.renew];
    let before = match hit.ended {
        Ended::Released => format!(
            "{worker} sent the release of lock {lock} for owner {owner} {}",
            when(ctx, &after, "its")
        ),
        Ended::Abandoned => format!(
            "{worker} gave up the lease of lock {lock} for owner {owner} unreleased, its work \
             cancelled, {}",
            when(ctx, &after, "its")
        ),
        Ended::Finished => format!(
            "{worker} finished (its last call, {} {}, ended {})",
            after.f.name(),
            event_kind(after.kind),
            when(ctx, &after, "its")
        ),
    };
    let outcome = match ctx.lookup().partner(hit.renew) {
        Some(reply) => {
            cited.push(reply);
            let reply = ctx.at(reply);
            match reply.kind {
                EventType::Ok => format!(
                    "and the lock service extended the lease {}",
                    when(ctx, &reply, "its")
                ),
                EventType::Fail => format!(
                    "and the lock service refused it ({}) {}",
                    reply.error.as_deref().unwrap_or("no reason given"),
                    when(ctx, &reply, "its")
                ),
                _ => format!("and its outcome is unknown {}", when(ctx, &reply, "its")),
            }
        }
        None => "and it never completed".to_string(),
    };
    Anomaly {
        class: CLASS,
        severity: crate::verdict::Severity::Failure,
        events: ctx.indexes(cited),
        explanation: format!(
            "{before}; afterwards its renewal task {} still sent a renew of lock {lock} for \
             owner {owner} {}, {outcome}. A renewal task must stop before its worker releases \
             or abandons the lease or finishes; one that outlives it keeps a dead lease alive \
             and holds off every other worker.",
            renew.process,
            when(ctx, &renew, "its")
        ),
    }
}

fn event_kind(kind: EventType) -> &'static str {
    match kind {
        EventType::Invoke => "(sent)",
        EventType::Ok => "ok",
        EventType::Fail => "failed",
        EventType::Info => "unknown",
        EventType::Nemesis | EventType::Log | EventType::Notice => "",
    }
}

#[cfg(test)]
mod tests {
    use fencer_harness::PackedHistory;

    use super::*;
    use crate::testkit::Builder;
    use crate::verdict::Validity;

    fn renew(b: &mut Builder, process: &str, owner: &str, ok: bool) -> u64 {
        let invoke = b.invoke_lock_call(process, Op::Renew, "L", owner);
        if ok {
            b.ok(process);
        } else {
            b.fail(process, "not-owner");
        }
        invoke
    }

    fn release(b: &mut Builder, process: &str, owner: &str) -> u64 {
        let invoke = b.invoke_lock_call(process, Op::Release, "L", owner);
        b.ok(process);
        invoke
    }

    #[test]
    fn a_renew_after_the_workers_release_is_a_zombie() {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, false);
        renew(&mut b, "w1:renew", "o1", true);
        let released = release(&mut b, "w1", "o1");
        b.acquire("w1", "L", "o2", 2, false);
        b.at(3.0);
        let zombie = renew(&mut b, "w1:renew", "o1", false);
        let history = b.build();
        let packed = PackedHistory::pack(&history);
        let outcome = check(&Context::new(&packed));
        assert_eq!(outcome.report.validity, Validity::Invalid);
        assert_eq!(outcome.report.anomalies, 1);
        assert_eq!(
            outcome.anomalies[0].events,
            vec![released, zombie, zombie + 1]
        );
        let text = &outcome.anomalies[0].explanation;
        for needle in [
            "w1 sent the release of lock L for owner o1",
            "renewal task w1:renew still sent a renew of lock L for owner o1 at 3.000s (its clock 3.000s)",
            "refused it (not-owner)",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in: {text}");
        }
    }

    #[test]
    fn a_renew_after_the_worker_abandoned_the_lease_is_a_zombie() {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, false);
        // In flight when the work was cancelled: not a zombie.
        b.invoke_lock_call("w1:renew", Op::Renew, "L", "o1");
        let abandoned = b.notice("w1", Op::Abandoned, "L", "o1", None);
        b.ok("w1:renew");
        b.at(3.0);
        let zombie = renew(&mut b, "w1:renew", "o1", true);
        let history = b.build();
        let packed = PackedHistory::pack(&history);
        let outcome = check(&Context::new(&packed));
        assert_eq!(outcome.report.anomalies, 1);
        assert_eq!(
            outcome.anomalies[0].events,
            vec![abandoned, zombie, zombie + 1]
        );
        let text = &outcome.anomalies[0].explanation;
        assert!(
            text.starts_with("w1 gave up the lease of lock L for owner o1 unreleased"),
            "{text}"
        );
    }

    #[test]
    fn a_zombie_in_a_second_renewal_slot_is_a_zombie_too() {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, false);
        release(&mut b, "w1", "o1");
        // The first lease's task is still alive, so the second lease's task is `w1:renew-1`.
        b.acquire("w1", "L", "o2", 2, false);
        renew(&mut b, "w1:renew-1", "o2", true);
        release(&mut b, "w1", "o2");
        let zombie = renew(&mut b, "w1:renew-1", "o2", false);
        let history = b.build();
        let packed = PackedHistory::pack(&history);
        let outcome = check(&Context::new(&packed));
        assert_eq!(outcome.report.anomalies, 1);
        assert!(outcome.anomalies[0].events.contains(&zombie));
        let text = &outcome.anomalies[0].explanation;
        assert!(
            text.contains("renewal task w1:renew-1 still sent"),
            "{text}"
        );
    }

    #[test]
    fn a_renew_after_the_worker_finished_is_a_zombie() {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, false);
        // w1 gives up on a second lease and finishes; its first lease's task lives on.
        b.invoke_acquire("w1", "L", "o2");
        b.fail("w1", "busy");
        b.at(5.0);
        renew(&mut b, "w1:renew", "o1", true);
        let history = b.build();
        let packed = PackedHistory::pack(&history);
        let outcome = check(&Context::new(&packed));
        assert_eq!(outcome.report.anomalies, 1);
        let text = &outcome.anomalies[0].explanation;
        assert!(
            text.starts_with("w1 finished (its last call, acquire failed"),
            "{text}"
        );
        assert!(text.contains("extended the lease"), "{text}");
    }

    #[test]
    fn a_history_cut_off_while_the_lease_is_held_has_no_zombie() {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, false);
        b.write("w1", "k", 1, "w1-0", false);
        b.at(5.0);
        renew(&mut b, "w1:renew", "o1", true);
        let history = b.build();
        let packed = PackedHistory::pack(&history);
        let outcome = check(&Context::new(&packed));
        assert_eq!(outcome.report.validity, Validity::Valid);
    }

    #[test]
    fn renewals_while_the_lease_is_held_are_silent() {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, false);
        renew(&mut b, "w1:renew", "o1", true);
        // A renew sent before the release but answered after it is not a zombie.
        b.invoke_lock_call("w1:renew", Op::Renew, "L", "o1");
        b.invoke_lock_call("w1", Op::Release, "L", "o1");
        b.ok("w1:renew");
        b.ok("w1");
        // Another worker's release of its own token says nothing about w1's renewals.
        b.acquire("w2", "L", "o2", 2, false);
        release(&mut b, "w2", "o2");
        let history = b.build();
        let packed = PackedHistory::pack(&history);
        let outcome = check(&Context::new(&packed));
        assert_eq!(outcome.report.validity, Validity::Valid);
        assert_eq!(outcome.report.anomalies, 0);
    }
}
