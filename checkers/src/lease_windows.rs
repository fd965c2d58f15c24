//! `overlapping-leases` from client replies: was a lease granted while another was still
//! valid by what the service had promised its holder?
//!
//! Without the lock service's log, the service's clock and its lease expiries are unknown, but
//! its promises are not: a grant or a renew answered `ok` with TTL `T` promises the lease for
//! `T` from the moment the service applied it, which is no earlier than the call was sent. So
//! a lease is guaranteed live, on a correct service, from its grant until at least
//!
//! ```text
//!   send time of the grant or of a renew answered ok  +  T
//! ```
//!
//! on the true clock, whatever the worker's own clock says (skew on workers changes nothing:
//! the history's true times order every event) and whether or not its worker was paused (the
//! promise is the service's). A grant to another owner with a higher token acknowledged before
//! that bound was given while the lease was live: two holders at once.
//!
//! Why the bound is sound (never reached by a correct service):
//! - a correct service applies a call between its invoke and its reply, grants tokens in grant
//!   order, keeps a lease live from its grant until it expires or is released (never
//!   revived), and expires it `T` after the grant or renew that set its expiry, measured on its
//!   own clock. The newer grant `g`, with the higher token, came after the older grant, and
//!   `g` is no later than its acknowledgement; so the older lease was live at `g` unless it had
//!   ended by then;
//! - a renew answered `ok` at service time `r` proves the lease live at `r` (a correct service
//!   refuses to renew an ended lease), so it lived on to at least `r + T`, and `r` is no
//!   earlier than the renew's send time; a renew with unknown outcome promised nothing and is
//!   no anchor (it can only have extended the lease, never shortened it);
//! - what may end a lease earlier caps the bound: a release by its holder, from the moment it
//!   was sent, whatever its answer (one with unknown outcome may have been applied, one refused
//!   says the service thought the lease gone), including a release still in flight when the
//!   renew was sent (it may apply just after); a renew refused as not-owner likewise; a restart
//!   of the lock server (it may lose every lease) and a forward step of its clock, from the
//!   moment they happened. Calls answered before an anchor was sent did not end the lease (it
//!   was live at the anchor);
//! - the service's clock may run fast: the fastest drift the history records on the lock
//!   server shortens `T` accordingly, and a margin of 1 ms plus 1000 ppm of `T` (twice NTP's
//!   500 ppm bound on slewing) covers clock resolution and unrecorded rate error;
//! - a superseded owner's release with unknown outcome does not cap the bound: on a correct
//!   service it cannot end another owner's lease. If it did, the service broke its contract
//!   either way (a foreign release instead of an overlapping grant), and the explanation says
//!   so;
//! - renews sent by an owner after a newer grant was acknowledged are not anchors: answered
//!   `ok`, they are `foreign-release`'s finding, not reported twice;
//! - a grant with a higher token acknowledged before the older lease's acquire was even sent
//!   came first in real time: the tokens went backwards (`token-regression`, a counter lost in
//!   a restart), so that grant is neither judged against the older lease's promise nor makes
//!   its holder's renews stale ([`crate::later_grants`]).

use std::cmp::Reverse;

use fencer_harness::{EventType, Op, Sym};

use crate::context::LOCK_SERVER;
use crate::context::{Context, worker_of};
use crate::explain::{Story, faults_between, secs, short_owner, when, who_owns};
use crate::findings::{Hits, Outcome};
use crate::index::FastMap;
use crate::later_grants::{Granted, LaterGrants};
use crate::verdict::{Anomaly, AnomalyClass};

const CLASS: AnomalyClass = AnomalyClass::OverlappingLeases;

/// Rate error of the service's clock the bound allows beyond recorded drift, in ppm.
const RATE_MARGIN_PPM: u64 = 1_000;

/// Clock resolution the bound allows, in nanoseconds.
const RESOLUTION_MARGIN_NS: u64 = 1_000_000;

/// The margin subtracted from a promised lease: clock resolution plus unrecorded rate error.
pub(crate) fn margin_ns(ttl_ns: u64) -> u64 {
    RESOLUTION_MARGIN_NS + ttl_ns / (1_000_000 / RATE_MARGIN_PPM)
}

/// A call that may have ended a lease: sent at `sent_ns`, answered at `answered_ns` (never,
/// when its outcome is unknown); a release, else a renew refused.
#[derive(Clone, Copy)]
struct Cap {
    sent_ns: u64,
    answered_ns: u64,
    release: bool,
}

/// What ended a promise: its TTL, or what may have ended the lease sooner.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Limit {
    Ttl,
    /// The holder's release, or a renew of it refused, sent at this true time.
    OwnCall {
        sent_ns: u64,
        release: bool,
    },
    /// A restart or forward clock step of the lock server at this true time.
    LockServer {
        at_ns: u64,
    },
}

/// One acknowledged grant and what its holder was told afterwards.
struct Lease {
    lock: Sym,
    owner: Sym,
    token: u64,
    /// Positions of the acquire's invoke and `ok`.
    invoke: usize,
    ok: usize,
    /// The shortest TTL the holder asked for, on the grant and every renew.
    ttl_ns: u64,
    /// Invoke positions of renews answered `ok` (not sent after a newer grant was known).
    renewed: Vec<usize>,
    /// Releases sent and renews refused by the holder.
    caps: Vec<Cap>,
}

/// Where a lease's promise came from and how long it ran.
#[derive(Clone, Copy)]
struct Promise {
    /// The invoke of the grant or renew whose send time the bound counts from.
    anchor: usize,
    /// True time until which the lease was guaranteed live, margin already taken off.
    until_ns: u64,
    limit: Limit,
}

/// A grant acknowledged while an older lease was still promised.
struct Hit {
    older: usize,
    promise: Promise,
    newer: usize,
}

/// What the pass learns: every acknowledged grant with its holder's later calls, and the lock
/// server's faults that can end or shorten leases.
struct Leases {
    leases: Vec<Lease>,
    /// Restarts and forward clock steps of the lock server, true times ascending.
    cuts_ns: Vec<u64>,
    /// The fastest drift set on the lock server's clock, in ppm (0 if none ran fast).
    fastest_drift_ppm: u64,
}

fn scan(ctx: &Context<'_>) -> Leases {
    let lock_server = ctx.sym(LOCK_SERVER);
    let mut scanned = Leases {
        leases: Vec::new(),
        cuts_ns: Vec::new(),
        fastest_drift_ppm: 0,
    };
    // The latest lease granted to each owner, and each lock's acknowledged grants.
    let mut lease_of: FastMap<Sym, usize> = FastMap::default();
    let mut grants: FastMap<Sym, LaterGrants> = FastMap::default();
    // Calls in flight by process: the invoke, and for a renew whether it was sent stale.
    let mut open: FastMap<Sym, (usize, bool)> = FastMap::default();
    for (position, ref row) in ctx.rows.iter().enumerate() {
        match row.kind {
            EventType::Nemesis => {
                if row.target.is_none() || row.target != lock_server {
                    continue;
                }
                match row.f {
                    Op::Restart => scanned.cuts_ns.push(row.time_ns),
                    Op::ClockJump if row.jump_ns().is_some_and(|jump| jump > 0) => {
                        scanned.cuts_ns.push(row.time_ns);
                    }
                    Op::ClockDrift => {
                        let fast = row.drift_ppm().unwrap_or_default().max(0) as u64;
                        scanned.fastest_drift_ppm = scanned.fastest_drift_ppm.max(fast);
                    }
                    _ => {}
                }
            }
            EventType::Invoke => {
                if !matches!(row.f, Op::Acquire | Op::Renew | Op::Release) {
                    continue;
                }
                let stale = match (row.lock, row.owner) {
                    (Some(lock), Some(owner)) => {
                        let own = lease_of.get(&owner).map(|&lease| &scanned.leases[lease]);
                        own.is_some_and(|own| {
                            grants
                                .get(&lock)
                                .and_then(|grants| grants.highest_after(own.invoke))
                                .is_some_and(|newer| newer.token > own.token)
                        })
                    }
                    _ => false,
                };
                if row.f == Op::Renew
                    && let Some(&lease) = row.owner.and_then(|owner| lease_of.get(&owner))
                    && let Some(ttl_ns) = row.ttl_ns()
                {
                    let lease = &mut scanned.leases[lease];
                    lease.ttl_ns = lease.ttl_ns.min(ttl_ns);
                }
                open.insert(row.process, (position, stale));
            }
            EventType::Ok | EventType::Fail | EventType::Info => {
                let Some((invoke, stale)) = open.remove(&row.process) else {
                    continue;
                };
                let (Some(lock), Some(owner)) = (row.lock, row.owner) else {
                    continue;
                };
                let sent_ns = ctx.rows.get(invoke).time_ns;
                let answered_ns = if row.kind == EventType::Info {
                    u64::MAX
                } else {
                    row.time_ns
                };
                match (row.f, row.kind) {
                    (Op::Acquire, EventType::Ok) => {
                        let (Some(token), Some(ttl_ns)) =
                            (row.token(), ctx.rows.get(invoke).ttl_ns())
                        else {
                            continue;
                        };
                        lease_of.insert(owner, scanned.leases.len());
                        scanned.leases.push(Lease {
                            lock,
                            owner,
                            token,
                            invoke,
                            ok: position,
                            ttl_ns,
                            renewed: Vec::new(),
                            caps: Vec::new(),
                        });
                        grants.entry(lock).or_default().push(Granted {
                            token,
                            owner,
                            ok: position,
                        });
                    }
                    (Op::Renew, EventType::Ok) if !stale => {
                        if let Some(&lease) = lease_of.get(&owner) {
                            scanned.leases[lease].renewed.push(invoke);
                        }
                    }
                    (Op::Release, _) | (Op::Renew, EventType::Fail) => {
                        if let Some(&lease) = lease_of.get(&owner) {
                            scanned.leases[lease].caps.push(Cap {
                                sent_ns,
                                answered_ns,
                                release: row.f == Op::Release,
                            });
                        }
                    }
                    _ => {}
                }
            }
            EventType::Log | EventType::Notice => {}
        }
    }
    // Releases never answered may have been applied at any time after they were sent.
    let mut unanswered: Vec<usize> = open.into_values().map(|(invoke, _)| invoke).collect();
    unanswered.sort_unstable();
    for invoke in unanswered {
        let row = &ctx.rows.get(invoke);
        if row.f == Op::Release
            && let Some(&lease) = row.owner.and_then(|owner| lease_of.get(&owner))
        {
            scanned.leases[lease].caps.push(Cap {
                sent_ns: row.time_ns,
                answered_ns: u64::MAX,
                release: true,
            });
        }
    }
    scanned
}

impl Leases {
    /// The longest guarantee any of `lease`'s anchors gives (see the module docs).
    fn promise(&self, ctx: &Context<'_>, lease: &Lease) -> Option<Promise> {
        let ttl_ns =
            u128::from(lease.ttl_ns) * 1_000_000 / (1_000_000 + u128::from(self.fastest_drift_ppm));
        let ttl_ns = u64::try_from(ttl_ns).unwrap_or(u64::MAX);
        let margin_ns = margin_ns(lease.ttl_ns);
        std::iter::once(lease.invoke)
            .chain(lease.renewed.iter().copied())
            .filter_map(|anchor| {
                let sent_ns = ctx.rows.get(anchor).time_ns;
                let mut until_ns = sent_ns.saturating_add(ttl_ns);
                let mut limit = Limit::Ttl;
                let cut = self.cuts_ns.partition_point(|&cut| cut < sent_ns);
                if let Some(&cut) = self.cuts_ns.get(cut)
                    && cut < until_ns
                {
                    until_ns = cut;
                    limit = Limit::LockServer { at_ns: cut };
                }
                for cap in &lease.caps {
                    let ends_ns = cap.sent_ns.max(sent_ns);
                    if cap.answered_ns >= sent_ns && ends_ns < until_ns {
                        until_ns = ends_ns;
                        limit = Limit::OwnCall {
                            sent_ns: cap.sent_ns,
                            release: cap.release,
                        };
                    }
                }
                let until_ns = until_ns.checked_sub(margin_ns)?;
                Some(Promise {
                    anchor,
                    until_ns,
                    limit,
                })
            })
            .max_by_key(|promise| promise.until_ns)
    }
}

/// The lease with the longest promise among those added so far whose acquire was sent before
/// a given point (the first added of equals): a Fenwick tree of maxima over one lock's leases,
/// ranked by where their acquire was sent. A lease whose acquire went out after a newer grant
/// was acknowledged came after that grant in real time, whatever its token
/// ([`crate::later_grants`]), so its promise says nothing about it.
struct LongestPromise {
    /// Where each lease's acquire was sent, ascending: a lease's rank.
    sent: Vec<usize>,
    /// Per tree node, the best promise below it: (until, earliest added first, lease).
    tree: Vec<Option<(u64, Reverse<usize>, usize)>>,
    added: usize,
}

impl LongestPromise {
    fn new(mut sent: Vec<usize>) -> LongestPromise {
        sent.sort_unstable();
        LongestPromise {
            tree: vec![None; sent.len() + 1],
            sent,
            added: 0,
        }
    }

    /// Adds `lease`, whose acquire was sent at position `invoke`, promised until `until_ns`.
    fn add(&mut self, invoke: usize, until_ns: u64, lease: usize) {
        let entry = Some((until_ns, Reverse(self.added), lease));
        self.added += 1;
        let mut node = self.sent.partition_point(|&sent| sent < invoke) + 1;
        while node < self.tree.len() {
            self.tree[node] = self.tree[node].max(entry);
            node += node & node.wrapping_neg();
        }
    }

    /// The lease with the longest promise among those whose acquire was sent before
    /// `position`.
    fn sent_before(&self, position: usize) -> Option<usize> {
        let mut node = self.sent.partition_point(|&sent| sent < position);
        let mut best = None;
        while node > 0 {
            best = best.max(self.tree[node]);
            node -= node & node.wrapping_neg();
        }
        best.map(|(_, _, lease)| lease)
    }
}

/// Runs the check on client replies (the history has no lock log).
pub(crate) fn check(ctx: &Context<'_>) -> Outcome {
    let scanned = scan(ctx);
    // Per lock, the grants in token order (ties in history order).
    let mut by_lock: FastMap<Sym, Vec<usize>> = FastMap::default();
    for (index, lease) in scanned.leases.iter().enumerate() {
        by_lock.entry(lease.lock).or_default().push(index);
    }
    let mut found: Vec<Hit> = Vec::new();
    let mut promises: Vec<Option<Promise>> = vec![None; scanned.leases.len()];
    for grants in by_lock.values_mut() {
        grants.sort_by_key(|&index| (scanned.leases[index].token, scanned.leases[index].ok));
        // The promises of grants with lower tokens than the current group.
        let mut longest = LongestPromise::new(
            grants
                .iter()
                .map(|&index| scanned.leases[index].invoke)
                .collect(),
        );
        let mut group_start = 0;
        while group_start < grants.len() {
            let token = scanned.leases[grants[group_start]].token;
            let group_end = grants[group_start..]
                .iter()
                .position(|&index| scanned.leases[index].token != token)
                .map_or(grants.len(), |offset| group_start + offset);
            for &newer in &grants[group_start..group_end] {
                let lease = &scanned.leases[newer];
                if let Some(older) = longest.sent_before(lease.ok)
                    && let Some(promise) = promises[older]
                    && ctx.rows.get(lease.ok).time_ns < promise.until_ns
                    && scanned.leases[older].owner != lease.owner
                {
                    found.push(Hit {
                        older,
                        promise,
                        newer,
                    });
                }
            }
            for &older in &grants[group_start..group_end] {
                if let Some(promise) = scanned.promise(ctx, &scanned.leases[older]) {
                    longest.add(scanned.leases[older].invoke, promise.until_ns, older);
                    promises[older] = Some(promise);
                }
            }
            group_start = group_end;
        }
    }
    // Report in the order the newer grants were acknowledged.
    found.sort_by_key(|hit| scanned.leases[hit.newer].ok);
    let mut hits = Hits::new();
    for hit in found {
        hits.push(hit);
    }
    let anomalies = hits
        .kept
        .iter()
        .map(|hit| explain(ctx, &scanned, hit))
        .collect();
    Outcome::ran(CLASS, "client replies", hits.count, anomalies, None)
}

/// Releases with unknown outcome that owners other than the older lease's holder sent on the
/// lock between the older grant and the newer grant's acknowledgement: on a broken service
/// one of them may have ended the older lease.
fn foreign_unknown_releases(ctx: &Context<'_>, older: &Lease, newer: &Lease) -> Vec<usize> {
    let lookup = ctx.lookup();
    (older.invoke..newer.ok)
        .filter(|&position| {
            let row = &ctx.rows.get(position);
            row.is(EventType::Invoke, Op::Release)
                && row.lock == Some(older.lock)
                && row.owner.is_some_and(|owner| owner != older.owner)
                && lookup
                    .partner(position)
                    .is_none_or(|reply| ctx.rows.get(reply).kind == EventType::Info)
        })
        .take(3)
        .collect()
}

fn explain(ctx: &Context<'_>, scanned: &Leases, hit: &Hit) -> Anomaly {
    let older = &scanned.leases[hit.older];
    let newer = &scanned.leases[hit.newer];
    let granted = ctx.at(newer.ok);
    let old_grant = ctx.at(older.ok);
    let anchor = ctx.at(hit.promise.anchor);
    let lock = granted.lock.as_deref().unwrap_or("?");
    let holder = worker_of(&old_grant.process).to_string();
    let mut cited = vec![older.ok, hit.promise.anchor, newer.invoke, newer.ok];
    let promised_by = if hit.promise.anchor == older.invoke {
        format!(
            "its acquire, sent {}, was answered with token {} {}",
            when(ctx, &anchor, "its"),
            older.token,
            when(ctx, &old_grant, "its")
        )
    } else {
        let reply = ctx.lookup().partner(hit.promise.anchor);
        cited.extend(reply);
        let answered = reply.map_or(String::new(), |reply| {
            format!(" and answered ok {}", when(ctx, &ctx.at(reply), "its"))
        });
        format!(
            "it held token {} since {}, and its renew from {}, sent {}, was applied{answered}",
            older.token,
            secs(old_grant.time_ns),
            anchor.process,
            when(ctx, &anchor, "its")
        )
    };
    let mut story = Story::new(format!("Meanwhile {holder}"));
    let faults = faults_between(ctx, &old_grant.process, older.ok, newer.ok);
    story.add_faults(ctx, &faults);
    cited.extend(&faults);
    let faults_text = if story.is_empty() {
        String::new()
    } else {
        format!(
            " {}; the lease is the service's promise, whatever its holder does.",
            story.render()
        )
    };
    let limit = match hit.promise.limit {
        Limit::Ttl => format!("its {} TTL counted from that send", secs(older.ttl_ns)),
        Limit::OwnCall { sent_ns, release } => format!(
            "its {} TTL counted from that send, cut short by the {} it sent at {}",
            secs(older.ttl_ns),
            if release {
                "release"
            } else {
                "renew refused as not-owner"
            },
            secs(sent_ns)
        ),
        Limit::LockServer { at_ns } => format!(
            "its {} TTL counted from that send, cut short by a restart or forward clock step of \
             the lock server at {}",
            secs(older.ttl_ns),
            secs(at_ns)
        ),
    };
    let foreign = foreign_unknown_releases(ctx, older, newer);
    let foreign_text = match foreign.first() {
        Some(&release) => {
            let sent = ctx.at(release);
            format!(
                " Or the service applied {}'s release with unknown outcome (owner {}, sent {}) \
                 to {holder}'s lease, which is a foreign release: either way it broke its \
                 contract.",
                worker_of(&sent.process),
                short_owner(sent.owner.as_deref().unwrap_or_default()),
                when(ctx, &sent, "its")
            )
        }
        None => String::new(),
    };
    cited.extend(&foreign);
    Anomaly {
        class: CLASS,
        severity: crate::verdict::Severity::Failure,
        events: ctx.indexes(cited),
        explanation: format!(
            "On lock {lock} {} was told it acquired token {} {}, while the lease of {} was \
             still valid by the service's own promise: {promised_by}, so the service owed it \
             the lock until at least {} ({limit}, less {} for clock error), and {holder} had \
             sent no release by then. For that time both could act as the holder.{faults_text} Judged from client replies (the history has no lock log): \
             the lock service granted a lease while an unexpired one existed.{foreign_text} A \
             lock service must not grant a lease while an unexpired one exists, judged on its \
             own clock.",
            granted.process,
            newer.token,
            when(ctx, &granted, "its"),
            who_owns(ctx, ctx.text(older.owner)),
            secs(hit.promise.until_ns),
            secs(margin_ns(older.ttl_ns)),
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
        check(&Context::new(&PackedHistory::pack(&history)))
    }

    /// w1 is granted token 1 at 0 s (TTL 10 s), renews at `renew_at` (if any) with `renewed`
    /// as the answer, and w2 is granted token 2 at `granted_at`.
    fn two_grants(renew_at: Option<(f64, EventType)>, granted_at: f64) -> Builder {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, false);
        if let Some((at, kind)) = renew_at {
            b.at(at);
            b.lock_call("w1:renew", Op::Renew, "L", "o1", kind);
        }
        b.at(granted_at);
        b.acquire("w2", "L", "o2", 2, false);
        b
    }

    #[test]
    fn a_grant_inside_the_promise_of_the_grant_before_it_overlaps() {
        let b = two_grants(None, 5.0);
        let outcome = run(&b);
        assert_eq!(outcome.report.validity, Validity::Invalid);
        assert_eq!(outcome.report.evidence, "client replies");
        assert_eq!(outcome.report.anomalies, 1);
        let anomaly = &outcome.anomalies[0];
        // w1's acquire (invoke = anchor, ok) and w2's acquire (invoke, ok).
        assert_eq!(anomaly.events, vec![0, 1, 2, 3]);
        let text = &anomaly.explanation;
        for needle in [
            "On lock L w2 was told it acquired token 2 at 5.001s (its clock 5.001s)",
            "while the lease of w1 (owner o1) was still valid",
            "its acquire, sent at 0.000s (its clock 0.000s), was answered with token 1 at 0.001s",
            "until at least 9.989s (its 10.000s TTL counted from that send, less 0.011s",
            "no lock log",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in: {text}");
        }
    }

    #[test]
    fn a_renew_answered_ok_extends_the_promise_from_its_send_time() {
        let outcome = run(&two_grants(Some((8.0, EventType::Ok)), 17.0));
        assert_eq!(outcome.report.anomalies, 1);
        let text = &outcome.anomalies[0].explanation;
        assert!(
            text.contains("its renew from w1:renew, sent at 8.000s (its clock 8.000s), was applied and answered ok at 8.001s"),
            "{text}"
        );
        assert!(text.contains("until at least 17.989s"), "{text}");
        // Past the renewed promise, and past the grant's when the renew's outcome is unknown
        // or it was refused, the lock was free.
        for (renewed, granted_at) in [
            (EventType::Ok, 17.995),
            (EventType::Info, 10.5),
            (EventType::Fail, 8.5),
        ] {
            let outcome = run(&two_grants(Some((8.0, renewed)), granted_at));
            assert_eq!(outcome.report.validity, Validity::Valid, "{renewed:?}");
        }
    }

    #[test]
    fn the_margin_forgives_clock_resolution_and_rate_error_only() {
        assert_eq!(margin_ns(10_000_000_000), 11_000_000);
        assert_eq!(run(&two_grants(None, 9.987)).report.anomalies, 1);
        assert_eq!(run(&two_grants(None, 9.989)).report.anomalies, 0);
    }

    #[test]
    fn a_grant_that_came_first_in_real_time_is_judged_by_real_time_not_its_token() {
        // w1 holds token 7 when the lock server restarts and loses its counter; w2 is granted
        // token 1 after it. Token order would put w1's grant inside w2's lease.
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 7, false);
        b.at(2.0);
        b.nemesis(Op::Restart, LOCK_SERVER, |e| {
            e.duration_ns = Some(1_000_000_000)
        });
        b.at(4.0);
        b.acquire("w2", "L", "o2", 1, false);
        b.lock_call("w2:renew", Op::Renew, "L", "o2", EventType::Ok);
        let outcome = run(&b);
        assert_eq!(
            outcome.report.validity,
            Validity::Valid,
            "{:?}",
            outcome.anomalies
        );
        // After the reset, a grant inside w2's promise still overlaps it; w2's renew, sent
        // before any grant outranked its token, is an anchor.
        b.at(9.0);
        let newer = b.acquire("w3", "L", "o3", 2, false);
        let outcome = run(&b);
        assert_eq!(outcome.report.anomalies, 1);
        assert!(outcome.anomalies[0].events.contains(&newer));
        assert!(
            outcome.anomalies[0]
                .explanation
                .contains("its renew from w2:renew"),
            "{}",
            outcome.anomalies[0].explanation
        );
    }

    #[test]
    fn a_release_or_a_lock_server_fault_may_end_the_lease_early() {
        // w1's release, whatever its answer, ends the promise from its send time.
        for kind in [EventType::Ok, EventType::Fail, EventType::Info] {
            let mut b = Builder::new();
            b.acquire("w1", "L", "o1", 1, false);
            b.at(3.0);
            b.invoke_lock_call("w1", Op::Release, "L", "o1");
            b.complete("w1", kind, |_| {});
            b.acquire("w2", "L", "o2", 2, false);
            assert_eq!(run(&b).report.validity, Validity::Valid, "{kind:?}");
        }
        // A release still in flight when a renew was sent may apply right after that renew.
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, false);
        b.at(3.0);
        b.invoke_lock_call("w1", Op::Release, "L", "o1");
        b.lock_call("w1:renew", Op::Renew, "L", "o1", EventType::Ok);
        b.at(4.0);
        b.acquire("w2", "L", "o2", 2, false);
        assert_eq!(run(&b).report.validity, Validity::Valid);
        // A restart or a forward step of the lock server's clock may end every lease.
        for fault in [Op::Restart, Op::ClockJump] {
            let mut b = Builder::new();
            b.acquire("w1", "L", "o1", 1, false);
            b.at(2.0);
            b.nemesis(fault, LOCK_SERVER, |e| e.jump_ns = Some(5_000_000_000));
            b.at(4.0);
            b.acquire("w2", "L", "o2", 2, false);
            assert_eq!(run(&b).report.validity, Validity::Valid, "{fault:?}");
        }
        // ... but a backward step only lengthens leases, and a worker's faults change nothing.
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, false);
        b.at(2.0);
        b.nemesis(Op::ClockJump, LOCK_SERVER, |e| {
            e.jump_ns = Some(-5_000_000_000)
        });
        b.nemesis(Op::ClockJump, "w1", |e| e.jump_ns = Some(60_000_000_000));
        b.pause("w1", 20.0);
        b.skew("w2", 30.0);
        b.at(4.0);
        b.acquire("w2", "L", "o2", 2, false);
        let outcome = run(&b);
        assert_eq!(outcome.report.anomalies, 1);
        let text = &outcome.anomalies[0].explanation;
        assert!(
            text.contains(
                "Meanwhile w1 had its clock jumped forward 60.000s at 2.001s and was paused 20.000s"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_promise_cut_short_says_by_what() {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, false);
        b.at(3.0);
        b.acquire("w2", "L", "o2", 2, false);
        b.at(4.0);
        b.lock_call("w1", Op::Release, "L", "o1", EventType::Fail);
        let outcome = run(&b);
        assert_eq!(outcome.report.anomalies, 1);
        let text = &outcome.anomalies[0].explanation;
        assert!(
            text.contains(
                "until at least 3.989s (its 10.000s TTL counted from that send, cut short by the \
                 release it sent at 4.000s, less 0.011s for clock error)"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_fast_lock_server_clock_shortens_the_promise() {
        let mut b = Builder::new();
        b.nemesis(Op::ClockDrift, LOCK_SERVER, |e| e.drift_ppm = Some(50_000));
        b.acquire("w1", "L", "o1", 1, false);
        b.at(9.6);
        b.acquire("w2", "L", "o2", 2, false);
        // 10 s on a clock 5 % fast is 9.524 s of true time.
        assert_eq!(run(&b).report.validity, Validity::Valid);
        let mut b = Builder::new();
        b.nemesis(Op::ClockDrift, LOCK_SERVER, |e| e.drift_ppm = Some(-50_000));
        b.acquire("w1", "L", "o1", 1, false);
        b.at(9.6);
        b.acquire("w2", "L", "o2", 2, false);
        assert_eq!(run(&b).report.anomalies, 1);
    }

    #[test]
    fn tokens_order_concurrent_grants_and_other_locks_do_not_conflict() {
        // w2's acquire was sent before w1's was answered; its higher token says it came later.
        let mut b = Builder::new();
        b.invoke_acquire("w1", "L", "o1");
        b.invoke_acquire("w2", "L", "o2");
        b.ok_acquire("w2", 2);
        b.ok_acquire("w1", 1);
        let outcome = run(&b);
        assert_eq!(outcome.report.anomalies, 1);
        assert!(
            outcome.anomalies[0]
                .explanation
                .starts_with("On lock L w2 was told it acquired token 2"),
            "{}",
            outcome.anomalies[0].explanation
        );
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, false);
        b.acquire("w2", "M", "o2", 1, false);
        assert_eq!(run(&b).report.validity, Validity::Valid);
    }

    #[test]
    fn a_stale_renew_acknowledged_is_foreign_release_s_finding_not_an_anchor() {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, false);
        b.at(10.5);
        b.acquire("w2", "L", "o2", 2, false);
        b.at(11.0);
        b.lock_call("w1:renew", Op::Renew, "L", "o1", EventType::Ok);
        b.at(12.0);
        b.invoke_lock_call("w2", Op::Release, "L", "o2");
        b.ok("w2");
        b.acquire("w3", "L", "o3", 3, false);
        assert_eq!(run(&b).report.validity, Validity::Valid);
    }

    #[test]
    fn a_superseded_owners_lost_release_does_not_excuse_the_grant_but_is_named() {
        let mut b = Builder::new();
        b.acquire("w0", "L", "o0", 1, false);
        b.at(10.5);
        b.acquire("w1", "L", "o1", 2, false);
        b.at(12.0);
        let release = b.invoke_lock_call("w0", Op::Release, "L", "o0");
        b.info("w0");
        b.at(13.0);
        b.acquire("w2", "L", "o2", 3, false);
        let outcome = run(&b);
        assert_eq!(outcome.report.anomalies, 1);
        let anomaly = &outcome.anomalies[0];
        assert!(anomaly.events.contains(&release));
        assert!(
            anomaly.explanation.contains(
                "Or the service applied w0's release with unknown outcome (owner o0, sent at \
                 12.000s (its clock 12.000s)) to w1's lease"
            ),
            "{}",
            anomaly.explanation
        );
    }
}
