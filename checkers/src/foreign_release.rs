//! `foreign-release`: did a release or renew by a stale owner remove or extend another owner's
//! lease?
//!
//! A lock service must compare the caller's owner token with the live lease atomically with
//! the change; if it does not, a worker waking from a pause can end (or keep alive) a lease
//! that now belongs to someone else. The lock service's log says exactly whose lease each
//! renew and release touched (`owner` != `holder`). Without it, the client-visible sign is a
//! renew or release acknowledged `ok` to an owner after a newer owner's acquire had already
//! been acknowledged: the service let a stale owner act.
//!
//! A stale owner's renew or release with unknown outcome (its reply lost, or the call
//! cancelled as its worker woke up and stopped renewing) acknowledged nothing, and a correct
//! service refused it: it is evidence only through what it would have done to the newer lease,
//! and that is judged where it shows. A release that ended the newer lease early lets a third
//! owner be granted inside that lease (`overlapping-leases` from client replies); a renew that
//! kept it alive keeps acquires busy past its end (`stuck-lock`). With no such sign the
//! history is consistent with a correct service, so such calls leave this checker valid.
//!
//! A stale renewal task keeps renewing, so one stale owner touching one lease is reported once,
//! with the number of repeats.

use fencer_harness::{EventType, Op, Sym};

use crate::context::{Context, is_lock_log, worker_of};
use crate::explain::{
    Story, at_time, count, faults_between, secs, secs_signed, short_owner, when, who_owns,
};
use crate::findings::{Hits, Outcome};
use crate::index::FastMap;
use crate::later_grants::{Granted, LaterGrants};
use crate::verdict::{Anomaly, AnomalyClass};

const CLASS: AnomalyClass = AnomalyClass::ForeignRelease;

const RULE: &str = "A lock service must apply a renew or release only when the caller's owner \
                    token matches the live lease, compared atomically with the change.";

/// Runs the checker on the lock service's log if there is one, else on client replies.
pub(crate) fn check(ctx: &Context<'_>) -> Outcome {
    if ctx.has_lock_log {
        from_lock_log(ctx)
    } else {
        from_client_replies(ctx)
    }
}

/// The first log entry in which one owner touched another's lease, and how often it recurred.
struct LoggedHit {
    applied: usize,
    /// The requester's owner token.
    owner: Sym,
    /// The owner token of the lease it touched.
    holder: Sym,
    repeats: usize,
    last: usize,
}

fn from_lock_log(ctx: &Context<'_>) -> Outcome {
    let mut hits = Hits::new();
    // A log entry without a lock counts as one on the lock named "" (which every string table
    // holds).
    let no_lock = ctx.sym("");
    // (lock, requester, holder token) -> slot of the first hit, if it was kept.
    let mut seen: FastMap<(Option<Sym>, Sym, u64), Option<usize>> = FastMap::default();
    for (position, ref row) in ctx.rows_where(|kind, _| kind == EventType::Log) {
        if !is_lock_log(row) || row.f == Op::Acquire {
            continue;
        }
        let (Some(owner), Some(holder)) = (row.owner, row.holder) else {
            continue;
        };
        if owner == holder {
            continue;
        }
        let root = (
            row.lock.or(no_lock),
            owner,
            row.holder_token().unwrap_or_default(),
        );
        match seen.get(&root) {
            Some(&slot) => {
                if let Some(slot) = slot {
                    let hit: &mut LoggedHit = &mut hits.kept[slot];
                    hit.repeats += 1;
                    hit.last = position;
                }
            }
            None => {
                let slot = hits.push(LoggedHit {
                    applied: position,
                    owner,
                    holder,
                    repeats: 0,
                    last: position,
                });
                seen.insert(root, slot);
            }
        }
    }
    let anomalies = hits
        .kept
        .iter()
        .map(|hit| explain_logged(ctx, hit))
        .collect();
    Outcome::ran(CLASS, "lock log", hits.count, anomalies, None)
}

/// A renew or release in flight whose owner was already superseded when it was sent.
struct StaleCall {
    invoke: usize,
    /// The caller's owner token.
    owner: Sym,
    own_ok: usize,
    newer: Granted,
}

/// A stale renew or release acknowledged `ok`, and how often the same owner repeated it.
struct AckedHit {
    call: StaleCall,
    ok: usize,
    repeats: usize,
    last: usize,
}

/// Judges what clients were told, without the lock service's log: a call is stale when a
/// grant to another owner with a higher token was acknowledged after the caller's own acquire
/// was sent (see [`crate::later_grants`] for why not before).
fn from_client_replies(ctx: &Context<'_>) -> Outcome {
    let mut grants: FastMap<Sym, LaterGrants> = FastMap::default();
    // Per process, where its acquire in flight was sent; per owner, its grant's token, `ok`
    // and send.
    let mut acquiring: FastMap<Sym, usize> = FastMap::default();
    let mut grant_of: FastMap<Sym, (u64, usize, usize)> = FastMap::default();
    // Calls in flight by process; only counted once the scan is over, never listed.
    let mut open: FastMap<Sym, Option<StaleCall>> = FastMap::default();
    let mut hits: Hits<AckedHit> = Hits::new();
    let mut seen: FastMap<(Sym, Sym), Option<usize>> = FastMap::default();
    for (position, ref row) in ctx.rows.iter().enumerate() {
        let (Some(lock), Some(owner)) = (row.lock, row.owner) else {
            continue;
        };
        match (row.kind, row.f) {
            (EventType::Invoke, Op::Acquire) => {
                acquiring.insert(row.process, position);
            }
            (EventType::Ok, Op::Acquire) => {
                let sent = acquiring.remove(&row.process);
                let Some(token) = row.token() else { continue };
                grant_of.insert(owner, (token, position, sent.unwrap_or(position)));
                grants.entry(lock).or_default().push(Granted {
                    token,
                    owner,
                    ok: position,
                });
            }
            (EventType::Fail | EventType::Info, Op::Acquire) => {
                acquiring.remove(&row.process);
            }
            (EventType::Invoke, Op::Renew | Op::Release) => {
                let stale = grant_of.get(&owner).and_then(|&(own_token, own_ok, sent)| {
                    let newer = grants.get(&lock)?.highest_after(sent)?;
                    (newer.token > own_token && newer.owner != owner).then_some(StaleCall {
                        invoke: position,
                        owner,
                        own_ok,
                        newer,
                    })
                });
                open.insert(row.process, stale);
            }
            (EventType::Ok, Op::Renew | Op::Release) => {
                let Some(Some(call)) = open.remove(&row.process) else {
                    continue;
                };
                match seen.get(&(lock, owner)) {
                    Some(&slot) => {
                        if let Some(slot) = slot {
                            let hit: &mut AckedHit = &mut hits.kept[slot];
                            hit.repeats += 1;
                            hit.last = position;
                        }
                    }
                    None => {
                        let slot = hits.push(AckedHit {
                            call,
                            ok: position,
                            repeats: 0,
                            last: position,
                        });
                        seen.insert((lock, owner), slot);
                    }
                }
            }
            (EventType::Fail | EventType::Info, Op::Renew | Op::Release) => {
                open.remove(&row.process);
            }
            _ => {}
        }
    }
    let anomalies = hits
        .kept
        .iter()
        .map(|hit| explain_acked(ctx, hit))
        .collect();
    Outcome::ran(CLASS, "client replies", hits.count, anomalies, None)
}

/// The requester's story up to the point its call was sent: its grant, its call and the faults
/// in between. Returns the story and the positions it cites.
fn requester_story(
    ctx: &Context<'_>,
    owner: Sym,
    call: Option<usize>,
    f: Op,
    until: usize,
) -> (Story, Vec<usize>) {
    let lookup = ctx.lookup();
    let process = call.map(|call| ctx.text(ctx.rows.get(call).process));
    let subject = match process {
        Some(process) => format!(
            "{} (owner {})",
            worker_of(process),
            short_owner(ctx.text(owner))
        ),
        None => who_owns(ctx, ctx.text(owner)),
    };
    let mut story = Story::new(subject);
    let mut cited = Vec::new();
    let mut from = call.unwrap_or(until);
    if let Some(ok) = lookup.client_grant(owner) {
        let granted = ctx.at(ok);
        story.add(
            ok,
            format!(
                "acquired lock {} with token {} {}",
                granted.lock.as_deref().unwrap_or("?"),
                granted.token.unwrap_or_default(),
                when(ctx, &granted, "its")
            ),
        );
        cited.push(ok);
        from = lookup.partner(ok).unwrap_or(ok);
    } else if let Some(log) = lookup.log_grant(owner) {
        let granted = ctx.at(log);
        story.add(
            log,
            format!(
                "was granted lock {} with token {} {}",
                granted.lock.as_deref().unwrap_or("?"),
                granted.token.unwrap_or_default(),
                when(ctx, &granted, "lock")
            ),
        );
        cited.push(log);
        from = log;
    }
    if let Some(call) = call {
        let sent = ctx.at(call);
        let from_task = if worker_of(&sent.process) == sent.process {
            String::new()
        } else {
            format!(" from {}", sent.process)
        };
        story.add(
            call,
            format!(
                "sent a {} of lock {}{from_task} {}",
                f.name(),
                sent.lock.as_deref().unwrap_or("?"),
                when(ctx, &sent, "its")
            ),
        );
        cited.push(call);
    }
    if let Some(process) = process.or_else(|| lookup.process_of_owner(ctx, owner)) {
        let faults = faults_between(ctx, process, from, until);
        story.add_faults(ctx, &faults);
        cited.extend(faults);
    }
    (story, cited)
}

fn explain_logged(ctx: &Context<'_>, hit: &LoggedHit) -> Anomaly {
    let lookup = ctx.lookup();
    let applied = ctx.at(hit.applied);
    let owner = ctx.text(hit.owner);
    let lock = applied.lock.as_deref().unwrap_or("?");
    let holder_token = applied
        .holder_token
        .map_or("unknown".into(), |token| token.to_string());
    let call = lookup.lock_call(hit.owner, applied.f, hit.applied);
    let (story, mut cited) = requester_story(ctx, hit.owner, call, applied.f, hit.applied);
    cited.push(hit.applied);
    let requester = call.map_or_else(
        || format!("owner {}", short_owner(owner)),
        |call| worker_of(&ctx.at(call).process).to_string(),
    );
    let holder_who = who_owns(ctx, ctx.text(hit.holder));
    let holder_grant = match lookup.log_grant(hit.holder) {
        Some(grant) => {
            cited.push(grant);
            format!(
                " {holder_who} had been granted lock {lock} with token {holder_token} {}.",
                when(ctx, &ctx.at(grant), "lock")
            )
        }
        None => String::new(),
    };
    let effect = match (applied.f, applied.expires_ns) {
        (Op::Renew, Some(expires_ns)) => format!(
            "extending a lease {requester} did not hold until lock clock {}",
            secs_signed(expires_ns)
        ),
        (Op::Renew, None) => format!("extending a lease {requester} did not hold"),
        _ => format!("ending a lease {requester} did not hold"),
    };
    let repeats = if hit.repeats > 0 {
        format!(
            " It applied {} from the same owner to that lease, the last {}.",
            count(
                hit.repeats,
                &format!("more {}", applied.f.name()),
                &format!("more {}s", applied.f.name())
            ),
            at_time(ctx, &ctx.at(hit.last))
        )
    } else {
        String::new()
    };
    Anomaly {
        class: CLASS,
        severity: crate::verdict::Severity::Failure,
        events: ctx.indexes(cited),
        explanation: format!(
            "{}.{holder_grant} The lock service applied {requester}'s {} to the lease with \
             token {holder_token} held by {holder_who} {}, {effect}.{repeats} {RULE}",
            story.render(),
            applied.f.name(),
            when(ctx, &applied, "lock"),
        ),
    }
}

fn explain_acked(ctx: &Context<'_>, hit: &AckedHit) -> Anomaly {
    let call = ctx.at(hit.call.invoke);
    let (mut story, mut cited) =
        requester_story(ctx, hit.call.owner, Some(hit.call.invoke), call.f, hit.ok);
    let ok = ctx.at(hit.ok);
    story.add(hit.ok, format!("was told ok {}", when(ctx, &ok, "its")));
    cited.extend([hit.call.own_ok, hit.call.newer.ok, hit.ok]);
    let newer = ctx.at(hit.call.newer.ok);
    let repeats = if hit.repeats > 0 {
        format!(
            " The same owner's {}s on lock {} were acknowledged {}, the last at {}.",
            call.f.name(),
            call.lock.as_deref().unwrap_or("?"),
            count(hit.repeats, "more time", "more times"),
            secs(ctx.at(hit.last).time_ns)
        )
    } else {
        String::new()
    };
    Anomaly {
        class: CLASS,
        severity: crate::verdict::Severity::Failure,
        events: ctx.indexes(cited),
        explanation: format!(
            "{}. Before that {} was sent, {} had already been told it acquired lock {} with the \
             newer token {} at {}.{repeats} Judged from client replies (the history has no lock \
             log): a superseded owner was told its {} succeeded. The replies cannot tell which \
             happened: the lock service acted on {}'s lease, revived a replaced one, or did \
             nothing while the caller was told ok (a client that reports success for a lease \
             it no longer holds). {RULE}",
            story.render(),
            call.f.name(),
            newer.process,
            call.lock.as_deref().unwrap_or("?"),
            hit.call.newer.token,
            secs(newer.time_ns),
            call.f.name(),
            newer.process,
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

    /// w0 holds token 1, is paused past its lease, w1 acquires token 2, w0 wakes and
    /// releases. `broken` decides whether the service applies w0's release to w1's lease.
    fn stale_release(broken: bool) -> (Builder, [u64; 6]) {
        let mut b = Builder::new();
        let w0_grant = b.acquire("w0", "L", "o0", 1, true);
        b.at(0.5);
        let pause = b.pause("w0", 12.0);
        b.at(10.1);
        b.invoke_acquire("w1", "L", "o1");
        let w1_grant = b.grant("L", "o1", 2, 10.0);
        b.ok_acquire("w1", 2);
        b.at(12.5);
        b.resume("w0");
        let release = b.invoke_lock_call("w0", Op::Release, "L", "o0");
        let applied = if broken {
            let applied = b.lock_log(Op::Release, "L", "o0", "o1", 2, 0.0);
            b.ok("w0");
            applied
        } else {
            b.fail("w0", "not-owner")
        };
        (b, [w0_grant, pause, w1_grant, release, applied, 0])
    }

    #[test]
    fn release_logged_against_another_owners_lease_is_foreign() {
        let (b, [w0_grant, pause, w1_grant, release, applied, _]) = stale_release(true);
        let outcome = run(&b);
        assert_eq!(outcome.report.validity, Validity::Invalid);
        assert_eq!(outcome.report.evidence, "lock log");
        assert_eq!(outcome.report.anomalies, 1);
        let anomaly = &outcome.anomalies[0];
        assert_eq!(anomaly.class, AnomalyClass::ForeignRelease);
        // The resume right after the pause is cited too: it is a fault on w0 in the window.
        assert_eq!(
            anomaly.events,
            vec![w0_grant, pause, w1_grant, release - 1, release, applied]
        );
        let text = &anomaly.explanation;
        for needle in [
            "w0 (owner o0) acquired lock L with token 1 at 0.002s (its clock 0.002s)",
            "was paused 12.000s from 0.500s to 12.500s",
            "sent a release of lock L at 12.501s",
            "w1 (owner o1) had been granted lock L with token 2 at 10.101s (lock clock 10.101s)",
            "applied w0's release to the lease with token 2 held by w1 (owner o1) at 12.502s",
            "ending a lease w0 did not hold",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in: {text}");
        }
    }

    #[test]
    fn stale_release_refused_by_the_service_is_valid() {
        let (b, _) = stale_release(false);
        let outcome = run(&b);
        assert_eq!(outcome.report.validity, Validity::Valid);
        assert_eq!(outcome.report.anomalies, 0);
    }

    #[test]
    fn a_stale_renewal_loop_is_one_anomaly_with_repeats() {
        let mut b = Builder::new();
        b.acquire("w0", "L", "o0", 1, true);
        b.acquire("w1", "L", "o1", 2, true);
        for _ in 0..3 {
            b.invoke_lock_call("w0:renew", Op::Renew, "L", "o0");
            b.lock_log(Op::Renew, "L", "o0", "o1", 2, 10.0);
            b.ok("w0:renew");
        }
        // The rightful holder renewing its own lease is fine.
        b.invoke_lock_call("w1:renew", Op::Renew, "L", "o1");
        b.lock_log(Op::Renew, "L", "o1", "o1", 2, 10.0);
        b.ok("w1:renew");
        let outcome = run(&b);
        assert_eq!(outcome.report.anomalies, 1);
        let text = &outcome.anomalies[0].explanation;
        assert!(text.contains("2 more renews"), "{text}");
        assert!(text.contains("extending a lease w0 did not hold"), "{text}");
    }

    #[test]
    fn client_replies_show_a_stale_renew_acknowledged_after_a_newer_grant() {
        let mut b = Builder::new();
        let own = b.acquire("w0", "L", "o0", 1, false);
        let pause = b.pause("w0", 12.0);
        let newer = b.acquire("w1", "L", "o1", 2, false);
        let invoke = b.invoke_lock_call("w0:renew", Op::Renew, "L", "o0");
        let ok = b.ok("w0:renew");
        b.invoke_lock_call("w0:renew", Op::Renew, "L", "o0");
        b.ok("w0:renew");
        let outcome = run(&b);
        assert_eq!(outcome.report.validity, Validity::Invalid);
        assert_eq!(outcome.report.evidence, "client replies");
        assert_eq!(outcome.report.anomalies, 1);
        assert_eq!(
            outcome.anomalies[0].events,
            vec![own, pause, newer, invoke, ok]
        );
        let text = &outcome.anomalies[0].explanation;
        assert!(
            text.contains("w1 had already been told it acquired lock L with the newer token 2"),
            "{text}"
        );
        assert!(text.contains("acknowledged 1 more time,"), "{text}");
        assert!(
            text.contains("w0 (owner o0) acquired lock L with token 1"),
            "{text}"
        );
        assert!(
            text.contains("sent a renew of lock L from w0:renew at"),
            "{text}"
        );
        // Replies alone do not say what the service did: the text names each possibility.
        assert!(
            text.contains(
                "a superseded owner was told its renew succeeded. The replies cannot tell which \
                 happened: the lock service acted on w1's lease, revived a replaced one, or did \
                 nothing while the caller was told ok"
            ),
            "{text}"
        );
    }

    /// Without a lock log: w0 holds token 7 when the lock service restarts and loses its
    /// counter; w1 is granted token 1 afterwards and renews and releases its own lease.
    fn granted_after_a_counter_reset() -> Builder {
        let mut b = Builder::new();
        b.acquire("w0", "L", "o0", 7, false);
        b.nemesis(Op::Restart, "lock", |e| e.duration_ns = Some(1_000_000_000));
        b.nemesis(Op::Recover, "lock", |_| {});
        b.acquire("w1", "L", "o1", 1, false);
        for _ in 0..3 {
            b.lock_call("w1:renew", Op::Renew, "L", "o1", EventType::Ok);
        }
        b
    }

    #[test]
    fn the_rightful_owner_after_a_counter_reset_is_not_a_foreign_owner() {
        let mut b = granted_after_a_counter_reset();
        b.lock_call("w1", Op::Release, "L", "o1", EventType::Ok);
        let outcome = run(&b);
        assert_eq!(outcome.report.evidence, "client replies");
        assert_eq!(
            outcome.report.validity,
            Validity::Valid,
            "{:?}",
            outcome.anomalies
        );
    }

    #[test]
    fn after_a_counter_reset_a_superseded_owner_is_still_caught() {
        let mut b = granted_after_a_counter_reset();
        b.pause("w1", 12.0);
        let newer = b.acquire("w2", "L", "o2", 2, false);
        let release = b.invoke_lock_call("w1", Op::Release, "L", "o1");
        b.ok("w1");
        let outcome = run(&b);
        assert_eq!(outcome.report.validity, Validity::Invalid);
        assert_eq!(outcome.report.anomalies, 1);
        let events = &outcome.anomalies[0].events;
        assert!(
            events.contains(&newer) && events.contains(&release),
            "{events:?}"
        );
    }

    #[test]
    fn client_replies_do_not_blame_a_renew_sent_before_the_newer_grant() {
        let mut b = Builder::new();
        b.acquire("w0", "L", "o0", 1, false);
        b.invoke_lock_call("w0:renew", Op::Renew, "L", "o0");
        b.acquire("w1", "L", "o1", 2, false);
        b.ok("w0:renew");
        // A superseded owner told not-owner, and one whose reply was lost.
        b.invoke_lock_call("w0", Op::Release, "L", "o0");
        b.fail("w0", "not-owner");
        let outcome = run(&b);
        assert_eq!(outcome.report.validity, Validity::Valid);
        // A superseded owner's calls whose outcome is unknown acknowledged nothing: a lost
        // release reply, a renew cancelled as its worker stopped renewing, one never answered.
        b.invoke_lock_call("w0", Op::Release, "L", "o0");
        b.info("w0");
        b.invoke_lock_call("w0:renew", Op::Renew, "L", "o0");
        b.complete("w0:renew", EventType::Info, |e| {
            e.error = Some("cancelled".into())
        });
        b.invoke_lock_call("w0:renew", Op::Renew, "L", "o0");
        let outcome = run(&b);
        assert_eq!(outcome.report.validity, Validity::Valid);
        assert_eq!(outcome.report.inconclusive, None);
        // Acknowledged, the same renew is the anomaly.
        b.ok("w0:renew");
        assert_eq!(run(&b).report.validity, Validity::Invalid);
    }
}
