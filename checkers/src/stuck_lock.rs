//! `stuck-lock`: did the lock stay busy long after its last lease ended, with nobody granted?
//!
//! Safety checkers are satisfied by a lock service that never grants again; workers then wait
//! forever and every verdict stays valid. This is the bounded liveness check: once the holder's
//! lease has surely ended, acquires answered `busy` for longer than a TTL plus a margin, with
//! no grant in between, are reported (a warning unless strict). The margin is one more TTL,
//! and at least [`MIN_MARGIN_NS`]: services that round a lease up (etcd to whole seconds, and
//! to at least 2 s by default) hold it that much longer than asked, which is safe.
//!
//! Judged from client replies (the lock log is not needed), on the true clock, with upper
//! bounds on when each lease acknowledged on the lock can still be live (every one, whatever
//! its token: a service whose tokens regress still hands out real leases):
//! - a release answered `ok` ends the lease by its reply;
//! - otherwise the lease lapses by the reply to its grant or last renew plus the TTL (a renew
//!   applies no later than its reply); a renew with unknown outcome counts as applied by its
//!   completion (the margin covers a request still on the wire a little longer), and while a
//!   renew of a lease is in flight nothing is judged;
//! - an acquire with unknown outcome may have been granted: that hidden lease may hold the lock
//!   until its completion plus the TTL; while another acquire is in flight nothing is judged;
//! - the lock server's clock may run slow: a backward step of it (recorded against `lock`)
//!   lengthens every lease it can revive by the step, and the slowest recorded drift stretches
//!   every TTL.
//!
//! The lock is free once every bound has passed. A lease is forgotten once it is surely over
//! and a later grant came, so a superseded owner's renew answered later is not believed to
//! have kept the lock busy: if the service let it, that is the bug this check reports.

use fencer_harness::{EventType, Op, RowRef, Sym};

use crate::context::LOCK_SERVER;
use crate::context::{Context, worker_of};
use crate::explain::{count, secs, when};
use crate::findings::{Hits, Outcome};
use crate::numbering::SymTable;
use crate::verdict::{Anomaly, AnomalyClass};

const CLASS: AnomalyClass = AnomalyClass::StuckLock;

/// The least margin past a TTL before busy answers count as stuck.
pub(crate) const MIN_MARGIN_NS: u64 = 2_000_000_000;

/// How long after a lease with `ttl_ns` surely ended the lock may still answer busy.
fn patience_ns(ttl_ns: u64) -> u64 {
    ttl_ns.saturating_add(ttl_ns.max(MIN_MARGIN_NS))
}

/// One acknowledged lease on a lock, and the latest it can still be live.
#[derive(Clone, Copy)]
struct Lease {
    owner: Sym,
    /// Its fencing token, when the service (or library) handed one out.
    token: Option<u64>,
    /// The grant's `ok`.
    ok: usize,
    ttl_ns: u64,
    /// True time by which the lease has surely ended.
    ends_by_ns: u64,
    /// What set `ends_by_ns`: the grant's `ok`, a renew's completion or the release's `ok`.
    ended_by: usize,
    released: bool,
    /// Renews of it in flight.
    renewing: u32,
}

impl Lease {
    /// The lease may live until `ends_by_ns`, as the event at `position` shows: a renewal
    /// only ever pushes the bound later.
    fn live_until(&mut self, ends_by_ns: u64, position: usize) {
        if ends_by_ns > self.ends_by_ns {
            self.ends_by_ns = ends_by_ns;
            self.ended_by = position;
        }
    }
}

/// A stretch of busy answers past the point the lock was surely free.
#[derive(Clone, Copy)]
pub(crate) struct Stuck {
    /// The lease that ended last before the stretch, if any was granted.
    last: Option<Lease>,
    /// True time from which no lease could be live.
    free_ns: u64,
    /// The TTL the first busy acquire asked for.
    ttl_ns: u64,
    first_invoke: usize,
    first_reply: usize,
    last_reply: usize,
    answers: usize,
    /// The grant that ended the stretch, if one did.
    granted: Option<usize>,
}

#[derive(Clone, Default)]
struct LockState {
    /// Leases acknowledged and not yet surely over before a later grant.
    leases: Vec<Lease>,
    /// True time until which an acquire with unknown outcome may hold the lock.
    hidden_until_ns: u64,
    /// Acquires in flight.
    acquiring: u32,
    stuck: Option<Stuck>,
}

impl LockState {
    fn lease_of(&mut self, owner: Sym) -> Option<&mut Lease> {
        self.leases.iter_mut().find(|lease| lease.owner == owner)
    }

    /// The lease that can stay live longest.
    fn last_to_end(&self) -> Option<Lease> {
        self.leases
            .iter()
            .max_by_key(|lease| lease.ends_by_ns)
            .copied()
    }
}

/// The slowest a TTL can run on the lock server's clock, in true time.
fn stretched(ttl_ns: u64, slowest_drift_ppm: u64) -> u64 {
    if slowest_drift_ppm == 0 {
        return ttl_ns;
    }
    let slow = slowest_drift_ppm.min(999_999);
    u64::try_from(u128::from(ttl_ns) * 1_000_000 / u128::from(1_000_000 - slow)).unwrap_or(u64::MAX)
}

/// [`stretched`], remembered for the last TTL and drift (they rarely change).
#[derive(Default)]
struct StretchMemo {
    ttl_ns: u64,
    slowest_drift_ppm: u64,
    stretched_ns: u64,
}

impl StretchMemo {
    fn stretched(&mut self, ttl_ns: u64, slowest_drift_ppm: u64) -> u64 {
        if (self.ttl_ns, self.slowest_drift_ppm) != (ttl_ns, slowest_drift_ppm) {
            *self = StretchMemo {
                ttl_ns,
                slowest_drift_ppm,
                stretched_ns: stretched(ttl_ns, slowest_drift_ppm),
            };
        }
        self.stretched_ns
    }
}

/// The check as a state machine over the rows, fed by [`crate::lock_pass`] together with the
/// lock log's checks, so the lock's rows are read once.
pub(crate) struct StuckScan<'c> {
    lock_server: Option<Sym>,
    busy: Option<Sym>,
    start_ns: u64,
    /// The state of each lock called on so far.
    locks: SymTable<'c, Option<LockState>>,
    slowest_drift_ppm: u64,
    stretch: StretchMemo,
    hits: Hits<Stuck>,
}

impl<'c> StuckScan<'c> {
    pub fn new(ctx: &'c Context<'_>) -> StuckScan<'c> {
        StuckScan {
            lock_server: ctx.sym(LOCK_SERVER),
            busy: ctx.sym("busy"),
            start_ns: ctx.rows.first().map_or(0, |row| row.time_ns),
            locks: ctx.per_lock(None),
            slowest_drift_ppm: 0,
            stretch: StretchMemo::default(),
            hits: Hits::new(),
        }
    }

    /// A fault: only the lock server's clock matters.
    pub fn nemesis(&mut self, row: &RowRef<'_>) {
        if row.target.is_none() || row.target != self.lock_server {
            return;
        }
        match row.f {
            Op::ClockJump if row.jump_ns().is_some_and(|jump| jump < 0) => {
                let back_ns = row.jump_ns().unwrap_or_default().unsigned_abs();
                for state in self.locks.values_mut().flatten() {
                    for lease in state.leases.iter_mut().filter(|lease| !lease.released) {
                        lease.ends_by_ns = lease.ends_by_ns.saturating_add(back_ns);
                    }
                    state.hidden_until_ns = state.hidden_until_ns.saturating_add(back_ns);
                }
            }
            Op::ClockDrift => {
                let slow = row.drift_ppm().unwrap_or_default().min(0).unsigned_abs();
                self.slowest_drift_ppm = self.slowest_drift_ppm.max(slow);
            }
            _ => {}
        }
    }

    /// A lock call (`row`, an invoke) by `owner` on `lock` was sent.
    pub fn invoke(&mut self, row: &RowRef<'_>, lock: Sym, owner: Sym) {
        let state = self.locks[lock].get_or_insert_with(LockState::default);
        match row.f {
            Op::Acquire => state.acquiring += 1,
            Op::Renew => {
                if let Some(lease) = state.lease_of(owner) {
                    lease.renewing += 1;
                }
            }
            _ => {}
        }
    }

    /// A lock client library said at `position` (`row`) that its auto-renewal extended
    /// `owner`'s lease: a library that talks to the service itself (an `exec:` child) renews
    /// without fencer seeing the call, and the lease may then live until the notice plus its
    /// TTL.
    pub fn renewed_notice(&mut self, position: usize, row: &RowRef<'_>, lock: Sym, owner: Sym) {
        let Some(state) = self.locks[lock].as_mut() else {
            return;
        };
        let Some(lease) = state.lease_of(owner) else {
            return;
        };
        if lease.released {
            return;
        }
        let ttl_ns = self.stretch.stretched(lease.ttl_ns, self.slowest_drift_ppm);
        lease.live_until(row.time_ns.saturating_add(ttl_ns), position);
    }

    /// The lock call sent at `invoke` completed at `position` (`row`).
    #[inline]
    pub fn completion(
        &mut self,
        ctx: &Context<'_>,
        position: usize,
        row: &RowRef<'_>,
        invoke: usize,
        lock: Sym,
        owner: Sym,
    ) {
        // The TTL the call asked for, as the slowest drift so far stretches it (read only where
        // needed: most completions are busy answers judged no further).
        let (stretch, slowest_drift_ppm) = (&mut self.stretch, self.slowest_drift_ppm);
        let mut ttl_ns = || {
            stretch.stretched(
                ctx.rows.get(invoke).ttl_ns().unwrap_or_default(),
                slowest_drift_ppm,
            )
        };
        let (busy, start_ns) = (self.busy, self.start_ns);
        let state = self.locks[lock].get_or_insert_with(LockState::default);
        let now_ns = row.time_ns;
        match (row.f, row.kind) {
            (Op::Acquire, EventType::Ok) => {
                state.acquiring = state.acquiring.saturating_sub(1);
                // A grant without a fencing token (most Redis lock libraries) is a lease too.
                let token = row.token();
                if let Some(mut stuck) = state.stuck.take() {
                    stuck.granted = Some(position);
                    self.hits.push(stuck);
                }
                // Leases surely over by now can no longer hold the lock.
                state
                    .leases
                    .retain(|lease| lease.ends_by_ns > now_ns && !lease.released);
                let ttl_ns = ttl_ns();
                state.leases.push(Lease {
                    owner,
                    token,
                    ok: position,
                    ttl_ns,
                    ends_by_ns: now_ns.saturating_add(ttl_ns),
                    ended_by: position,
                    released: false,
                    renewing: 0,
                });
            }
            (Op::Acquire, EventType::Info) => {
                state.acquiring = state.acquiring.saturating_sub(1);
                state.hidden_until_ns = state.hidden_until_ns.max(now_ns.saturating_add(ttl_ns()));
            }
            (Op::Acquire, EventType::Fail) => {
                state.acquiring = state.acquiring.saturating_sub(1);
                // Another acquire in flight is the common case on a busy lock: checked first.
                if state.acquiring > 0 || row.error.is_none() || row.error != busy {
                    return;
                }
                let renewing = state
                    .leases
                    .iter()
                    .any(|lease| !lease.released && lease.renewing > 0);
                if renewing {
                    return;
                }
                let ttl_ns = ttl_ns();
                let last = state.last_to_end();
                let free_ns = last
                    .map_or(start_ns, |lease| lease.ends_by_ns)
                    .max(state.hidden_until_ns);
                let lease_ns = last.map_or(ttl_ns, |lease| lease.ttl_ns);
                if ctx.rows.get(invoke).time_ns < free_ns.saturating_add(patience_ns(lease_ns)) {
                    return;
                }
                match state.stuck.as_mut() {
                    Some(stuck) => {
                        stuck.last_reply = position;
                        stuck.answers += 1;
                    }
                    None => {
                        state.stuck = Some(Stuck {
                            last,
                            free_ns,
                            ttl_ns,
                            first_invoke: invoke,
                            first_reply: position,
                            last_reply: position,
                            answers: 1,
                            granted: None,
                        });
                    }
                }
            }
            (Op::Renew, kind) => {
                let Some(lease) = state.lease_of(owner) else {
                    return;
                };
                lease.renewing = lease.renewing.saturating_sub(1);
                if lease.released || kind == EventType::Fail {
                    return;
                }
                lease.live_until(now_ns.saturating_add(ttl_ns()), position);
            }
            (Op::Release, EventType::Ok) => {
                if let Some(lease) = state.lease_of(owner) {
                    lease.released = true;
                    lease.ends_by_ns = lease.ends_by_ns.min(now_ns);
                    lease.ended_by = position;
                }
            }
            _ => {}
        }
    }

    /// The stuck stretches found, each ended by a grant or by the end of the history, in the
    /// order they began.
    pub fn finish(mut self) -> Hits<Stuck> {
        let mut unfinished: Vec<Stuck> = self
            .locks
            .into_values()
            .flatten()
            .filter_map(|state| state.stuck)
            .collect();
        unfinished.sort_unstable_by_key(|stuck| stuck.first_reply);
        for stuck in unfinished {
            self.hits.push(stuck);
        }
        self.hits.kept.sort_by_key(|stuck| stuck.first_reply);
        self.hits
    }
}

/// The check's report, from the lock pass.
pub(crate) fn check(ctx: &Context<'_>) -> Outcome {
    let hits = &ctx.lock_pass().stuck;
    let anomalies = hits.kept.iter().map(|stuck| explain(ctx, stuck)).collect();
    Outcome::ran(CLASS, "client replies", hits.count, anomalies, None)
}

fn explain(ctx: &Context<'_>, stuck: &Stuck) -> Anomaly {
    let first = ctx.at(stuck.first_invoke);
    let last = ctx.at(stuck.last_reply);
    let lock = first.lock.as_deref().unwrap_or("?");
    let mut cited = vec![stuck.first_invoke, stuck.first_reply, stuck.last_reply];
    let ended = match stuck.last {
        Some(holder) => {
            cited.extend([holder.ok, holder.ended_by]);
            let granted = ctx.at(holder.ok);
            let end = ctx.at(holder.ended_by);
            let how = if holder.released {
                format!("its release was answered ok {}", when(ctx, &end, "its"))
            } else if holder.ended_by == holder.ok {
                format!(
                    "with no renew answered, its TTL ran out by {} at the latest (the grant's \
                     reply plus its {} TTL)",
                    secs(holder.ends_by_ns),
                    secs(holder.ttl_ns)
                )
            } else {
                format!(
                    "its last renew was answered {}, so its TTL ran out by {} at the latest (plus \
                     its {} TTL)",
                    when(ctx, &end, "its"),
                    secs(holder.ends_by_ns),
                    secs(holder.ttl_ns)
                )
            };
            let token = holder
                .token
                .map_or_else(|| "no token".to_string(), |token| format!("token {token}"));
            format!(
                "{} held it with {token} (granted {}), and {how}",
                worker_of(&granted.process),
                when(ctx, &granted, "its")
            )
        }
        None => "nobody had been granted it".to_string(),
    };
    let hidden = if stuck
        .last
        .is_none_or(|holder| stuck.free_ns > holder.ends_by_ns)
    {
        format!(
            "; acquires with unknown outcome could have held it until {}",
            secs(stuck.free_ns)
        )
    } else {
        String::new()
    };
    // Only an answered release shows a lease ended; a TTL running out is the contract, which a
    // lease kept alive where no reply shows it (a ZooKeeper session's pings) does not follow.
    let inferred = if hidden.is_empty() && stuck.last.is_some_and(|holder| holder.released) {
        ""
    } else {
        " That it was free is inferred from the TTL: a lease kept alive where the history cannot \
         see it (a ZooKeeper session's pings, say) would still have been held."
    };
    let until = match stuck.granted {
        Some(granted) => {
            cited.push(granted);
            let granted = ctx.at(granted);
            format!(
                "until {} was granted it {}",
                granted.process,
                when(ctx, &granted, "its")
            )
        }
        None => "until the history ended".to_string(),
    };
    Anomaly {
        class: CLASS,
        severity: crate::verdict::Severity::Failure,
        events: ctx.indexes(cited),
        explanation: format!(
            "On lock {lock} {ended}{hidden}. Yet {} were all answered busy, the first sent by {} \
             {}, the last answered to {} {}, {until}, with no grant in between: the lock stayed busy for more than \
             {} (its TTL plus a margin) after it was free. Judged from client replies: a lock service must grant a \
             lock nobody holds; one that keeps answering busy stops every worker (a liveness \
             failure, a warning unless strict).{inferred}",
            count(stuck.answers, "acquire", "acquires"),
            first.process,
            when(ctx, &first, "its"),
            last.process,
            when(ctx, &last, "its"),
            secs(patience_ns(
                stuck.last.map_or(stuck.ttl_ns, |holder| holder.ttl_ns)
            )),
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
        check(&Context::new(&PackedHistory::pack(&builder.build())))
    }

    /// w1 is granted L (TTL 10 s) and releases it at 1 s (`released`) or lets it lapse; w2
    /// asks every 5 s from 2 s to 42 s and is refused every time.
    fn refused_after(released: bool) -> (Builder, u64) {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, false);
        if released {
            b.at(1.0);
            b.invoke_lock_call("w1", Op::Release, "L", "o1");
            b.ok("w1");
        }
        let mut first_stuck = 0;
        for n in 0..9 {
            b.at(2.0 + 5.0 * f64::from(n));
            let invoke = b.busy("w2", "L", &format!("o2-{n}"));
            // Free from 1.001 s (release) or 10.001 s (lapse); stuck from 20 s more.
            let stuck_from = if released { 21.001 } else { 30.001 };
            if first_stuck == 0 && 2.0 + 5.0 * f64::from(n) >= stuck_from {
                first_stuck = invoke;
            }
        }
        (b, first_stuck)
    }

    #[test]
    fn busy_answers_long_after_a_release_or_a_lapse_are_a_stuck_lock() {
        for released in [true, false] {
            let (b, first) = refused_after(released);
            let outcome = run(&b);
            assert_eq!(outcome.report.anomalies, 1, "released {released}");
            let anomaly = &outcome.anomalies[0];
            assert!(anomaly.events.contains(&first), "{:?}", anomaly.events);
            let text = &anomaly.explanation;
            let how = if released {
                "its release was answered ok at 1.001s"
            } else {
                "with no renew answered, its TTL ran out by 10.001s at the latest"
            };
            for needle in [
                "On lock L w1 held it with token 1 (granted at 0.001s",
                how,
                "were all answered busy",
                "until the history ended",
            ] {
                assert!(text.contains(needle), "missing {needle:?} in: {text}");
            }
            // An answered release shows the lease ended; a TTL running out is only inferred.
            assert_eq!(
                text.contains("That it was free is inferred from the TTL"),
                !released,
                "{text}"
            );
        }
    }

    #[test]
    fn a_lease_its_library_says_it_renewed_is_not_stuck_while_the_notices_go_on() {
        // w1's library renews on its own (fencer sees no renew calls) and says so every 3 s
        // until 45 s: w2's busy answers up to 42.5 s are the lease's, not a stuck lock.
        // Its library hands out no fencing token, as most Redis lock libraries do.
        let mut b = Builder::new();
        b.invoke_acquire("w1", "L", "o1");
        b.ok("w1");
        let notices = (1..=15).map(|n| (3.0 * f64::from(n), None));
        let asks = (0..9).map(|n| (2.5 + 5.0 * f64::from(n), Some(n)));
        let mut events: Vec<(f64, Option<i32>)> = notices.chain(asks).collect();
        events.sort_by(|a, b| a.0.total_cmp(&b.0));
        for (at, ask) in events {
            b.at(at);
            match ask {
                None => {
                    b.notice("w1", Op::Renewed, "L", "o1", None);
                }
                Some(n) => {
                    b.busy("w2", "L", &format!("o2-{n}"));
                }
            }
        }
        assert_eq!(run(&b).report.anomalies, 0);
        // The same busy answers without the notices are a stuck lock.
        let (without, _) = refused_after(false);
        assert_eq!(run(&without).report.anomalies, 1);
    }

    #[test]
    fn the_margin_is_one_more_ttl_and_at_least_two_seconds() {
        assert_eq!(patience_ns(10_000_000_000), 20_000_000_000);
        assert_eq!(patience_ns(300_000_000), 2_300_000_000);
        // A 300 ms lease its service held for 2 s is not stuck; one held for 3 s is.
        let acquire = |b: &mut Builder, process: &str, owner: &str| {
            b.invoke(process, Op::Acquire, |e| {
                e.lock = Some("L".into());
                e.owner = Some(owner.into());
                e.ttl_ns = Some(300_000_000);
            })
        };
        let after = |busy_at: f64| {
            let mut b = Builder::new();
            acquire(&mut b, "w1", "o1");
            b.ok_acquire("w1", 1);
            b.at(busy_at);
            acquire(&mut b, "w2", "o2");
            b.fail("w2", "busy");
            run(&b).report.anomalies
        };
        assert_eq!(after(2.0), 0);
        assert_eq!(after(3.0), 1);
    }

    #[test]
    fn a_grant_with_a_regressed_token_still_holds_the_lock() {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 5, false);
        b.lock_call("w1", Op::Release, "L", "o1", EventType::Ok);
        // The service lost its counter: token 1 again, a real lease, kept alive by renewals.
        b.acquire("w2", "L", "o2", 1, false);
        for n in 1..12 {
            b.at(3.0 * f64::from(n));
            b.lock_call("w2:renew", Op::Renew, "L", "o2", EventType::Ok);
            b.busy("w3", "L", &format!("o3-{n}"));
        }
        assert_eq!(run(&b).report.validity, Validity::Valid);
    }

    #[test]
    fn a_lock_held_by_renewals_or_granted_again_is_not_stuck() {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, false);
        for n in 0..10 {
            b.at(3.0 * f64::from(n + 1));
            b.invoke_lock_call("w1:renew", Op::Renew, "L", "o1");
            // Renew replies lost: the renewals may still have kept the lease.
            if n % 2 == 0 {
                b.ok("w1:renew")
            } else {
                b.info("w1:renew")
            };
            b.busy("w2", "L", &format!("o2-{n}"));
        }
        assert_eq!(run(&b).report.validity, Validity::Valid);
        // Busy only within the TTL plus its margin of the end, then granted.
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, false);
        b.at(25.0);
        b.busy("w2", "L", "o2");
        b.acquire("w2", "L", "o3", 2, false);
        assert_eq!(run(&b).report.validity, Validity::Valid);
    }

    #[test]
    fn an_acquire_with_unknown_outcome_or_in_flight_may_hold_the_lock() {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, false);
        b.at(15.0);
        b.invoke_acquire("w3", "L", "o3");
        b.info("w3");
        // Free by 10.001 s, but w3 may hold it until 15.001 + 10 s.
        b.at(34.0);
        b.busy("w2", "L", "o2");
        assert_eq!(run(&b).report.validity, Validity::Valid);
        b.at(36.0);
        b.invoke_acquire("w4", "L", "o4");
        b.busy("w2", "L", "o5");
        b.info("w4");
        assert_eq!(run(&b).report.validity, Validity::Valid);
        b.at(70.0);
        b.busy("w2", "L", "o6");
        let outcome = run(&b);
        assert_eq!(outcome.report.anomalies, 1);
        assert!(
            outcome.anomalies[0]
                .explanation
                .contains("acquires with unknown outcome could have held it until 46.003s"),
            "{}",
            outcome.anomalies[0].explanation
        );
    }

    #[test]
    fn a_slow_or_stepped_back_lock_clock_lengthens_leases() {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, false);
        b.at(5.0);
        b.nemesis(Op::ClockJump, LOCK_SERVER, |e| {
            e.jump_ns = Some(-20_000_000_000)
        });
        b.at(35.0);
        b.busy("w2", "L", "o2");
        assert_eq!(run(&b).report.validity, Validity::Valid);
        let mut b = Builder::new();
        b.nemesis(Op::ClockDrift, LOCK_SERVER, |e| {
            e.drift_ppm = Some(-500_000)
        });
        b.acquire("w1", "L", "o1", 1, false);
        b.at(35.0);
        b.busy("w2", "L", "o2");
        assert_eq!(run(&b).report.validity, Validity::Valid);
    }

    #[test]
    fn the_first_and_the_last_refused_acquire_are_named_by_their_own_workers() {
        let mut b = Builder::new();
        for (n, process) in ["w2", "w2", "w2", "w4"].into_iter().enumerate() {
            b.at(10.0 * n as f64);
            b.busy(process, "L", &format!("o{n}"));
        }
        b.acquire("w3", "L", "o9", 1, false);
        let outcome = run(&b);
        assert_eq!(outcome.report.anomalies, 1);
        let text = &outcome.anomalies[0].explanation;
        assert!(text.contains("the first sent by w2 at 20.000s"), "{text}");
        assert!(text.contains("the last answered to w4 at 30."), "{text}");
        assert!(!text.contains("from w2"), "{text}");
    }

    #[test]
    fn a_lock_nobody_was_ever_granted_can_be_stuck_and_a_grant_ends_the_stretch() {
        let mut b = Builder::new();
        for n in 0..4 {
            b.at(10.0 * f64::from(n));
            b.busy("w2", "L", &format!("o{n}"));
        }
        let granted = b.acquire("w3", "L", "o9", 1, false);
        let outcome = run(&b);
        assert_eq!(outcome.report.anomalies, 1);
        let anomaly = &outcome.anomalies[0];
        assert!(anomaly.events.contains(&granted));
        let text = &anomaly.explanation;
        assert!(
            text.starts_with("On lock L nobody had been granted it"),
            "{text}"
        );
        assert!(
            text.contains("2 acquires were all answered busy, the first sent by w2 at 20.000s"),
            "{text}"
        );
        assert!(text.contains("until w3 was granted it at"), "{text}");
    }
}
