//! Lock replies held to the lock service's own log: `lock-reply-mismatch` (a reply that says
//! something the log contradicts) and `expired-lease-renewed` (a renew the log applied to a
//! lease it had already let end).
//!
//! A reply is matched with the log entries recorded between its call's invoke and its reply
//! for the same owner and operation (owner tokens are unique per acquisition): `ok` must have
//! one (and an acquire the same token), `fail` must have none, and `busy` also needs a live
//! lease to be busy about. The lock is known free at an acquire's invoke when every lease the
//! log granted on it was released or had expired by the latest lock clock reading (the log
//! entries' `local_ns`; a backward step of the lock server's clock forgets the reading, since
//! it can bring an expired lease back), and no grant or renew was logged on it while the
//! acquire was in flight. `info` replies promise nothing. Entries a restart logged (`error`
//! set) answer no call.
//!
//! A log read back from a real service after the run gives the service's order but not where
//! its entries fall among the calls. Its entries are then matched with the calls by count, per
//! owner and operation, which holds whatever the interleaving: an owner's logged entries
//! cannot be fewer than its calls told `ok` (each such call was applied), nor more than its
//! calls told `ok` or left unknown (each entry was some call's doing, and a `fail` promised it
//! was not); an acquire `ok` must find a grant with its token. `busy` needs the time of the
//! call among the log's changes, so it is not judged against such a log.

use fencer_harness::{EventType, Op, RowRef, Rows, Sym};

use crate::context::Context;
use crate::context::LOCK_SERVER;
use crate::explain::{at_time, secs_signed, when, who_owns};
use crate::findings::{Hits, Outcome};
use crate::index::FastMap;
use crate::numbering::SymTable;
use crate::verdict::{Anomaly, AnomalyClass};

/// What a reply claimed that the log contradicts.
pub(crate) enum Mismatch {
    /// `ok`, but no entry for the call.
    NotApplied,
    /// An acquire `ok` with a token the logged grant did not carry.
    OtherToken { logged: usize },
    /// `fail`, but the log applied the call.
    Applied { logged: usize },
    /// `busy`, while no lease was live.
    BusyWhileFree,
    /// `ok`, but a log read back after the run records fewer such calls by the owner than
    /// were told `ok`.
    FewerLogged { logged: usize, told_ok: usize },
    /// `fail`, but a log read back after the run records more such calls by the owner than
    /// were told `ok` or left unknown; `entry` is its last.
    MoreLogged {
        entry: usize,
        logged: usize,
        answered: usize,
    },
}

pub(crate) struct ReplyHit {
    invoke: usize,
    reply: usize,
    mismatch: Mismatch,
}

/// What [`ReplyScan`] noted when a lock call was sent.
#[derive(Clone, Copy)]
pub(crate) struct SentCall {
    /// For an acquire: the lock was free when it was sent.
    free: bool,
    /// Grants and renews logged on the lock before it was sent.
    entries: u64,
}

/// The leases the log shows on one lock, as (token, expiry on the lock clock) for those not
/// released, and how many grants and renews it has logged.
#[derive(Clone, Default)]
struct LockLeases {
    live: Vec<(u64, i64)>,
    entries: u64,
}

impl LockLeases {
    fn apply(&mut self, row: &RowRef<'_>) {
        match row.f {
            Op::Acquire => {
                // A grant replaces whatever lease came before it.
                self.live.clear();
                if let (Some(token), Some(expires_ns)) = (row.token(), row.expires_ns()) {
                    self.live.push((token, expires_ns));
                }
                self.entries += 1;
            }
            Op::Renew => {
                if let (Some(token), Some(expires_ns)) = (row.holder_token(), row.expires_ns()) {
                    match self.live.iter_mut().find(|(held, _)| *held == token) {
                        Some(lease) => lease.1 = expires_ns,
                        None => self.live.push((token, expires_ns)),
                    }
                }
                self.entries += 1;
            }
            Op::Release => {
                if let Some(token) = row.holder_token() {
                    self.live.retain(|(held, _)| *held != token);
                }
            }
            _ => {}
        }
    }

    /// True when no lease can be live at or after a lock clock reading of `now_ns`.
    fn is_free(&self, now_ns: Option<i64>) -> bool {
        self.live
            .iter()
            .all(|&(_, expires_ns)| now_ns.is_some_and(|now_ns| expires_ns <= now_ns))
    }
}

/// One owner's calls of one operation and the entries a log read back after the run records
/// for them, to be matched by count.
#[derive(Default)]
struct Tally {
    /// (invoke, reply) of the calls told `ok`.
    told_ok: Vec<(usize, usize)>,
    /// (invoke, reply) of the calls told `fail`.
    told_fail: Vec<(usize, usize)>,
    /// Calls sent.
    sent: usize,
    /// Positions of the entries logged for them.
    logged: Vec<usize>,
}

/// Lock calls in flight by owner and operation, with the log entry that answered each so far.
///
/// A table by the owner's [`Sym::slot`], an entry per operation: nearly every acquire brings a
/// new owner token, so a hash map would take an insert and a removal per call. An owner may
/// have two calls of one operation in flight at once from two processes (a client's watchdog
/// renewing while its ownership check renews too); such calls share a [`Crowd`], which no log
/// entry is pinned to any one of.
struct Calling {
    /// [`Calling::PER_OWNER`] entries a slot: [`Calling::IDLE`], [`Calling::UNANSWERED`],
    /// [`Calling::CROWDED`], or the answering log entry's position plus 3.
    entries: Vec<u32>,
    /// The calls of an (owner, operation) entry that is [`Calling::CROWDED`].
    crowds: FastMap<(Sym, u8), Crowd>,
}

/// Two or more calls of one owner and operation in flight at once, and the log entries that
/// answered some of them.
#[derive(Default)]
struct Crowd {
    in_flight: u32,
    /// Entries logged while the crowd was in flight and claimed by no `ok` yet.
    unclaimed: std::collections::VecDeque<usize>,
    /// Calls of the crowd that completed with an unknown outcome: each may have been the
    /// doing of one unclaimed entry.
    unknown: u32,
}

/// What the log says about one completed call.
enum Answered {
    /// Nothing was logged for it.
    No,
    /// This entry answered it.
    By(usize),
    /// Calls in flight together left it open which entry was whose.
    Unsure,
}

impl Calling {
    /// Entries per owner: one each for acquire, renew and release.
    const PER_OWNER: usize = 3;
    /// No such call in flight.
    const IDLE: u32 = 0;
    /// A call in flight that no log entry has answered yet.
    const UNANSWERED: u32 = 1;
    /// Calls in flight together: see [`Calling::crowds`].
    const CROWDED: u32 = 2;

    /// A table for owners among `sym_count` syms (none for a log matched by count, which
    /// never calls on it).
    fn new(sym_count: usize) -> Calling {
        Calling {
            entries: vec![Calling::IDLE; sym_count * Calling::PER_OWNER],
            crowds: FastMap::default(),
        }
    }

    fn op(f: Op) -> u8 {
        match f {
            Op::Acquire => 0,
            Op::Renew => 1,
            Op::Release => 2,
            _ => unreachable!("lock calls are acquires, renews and releases, not {f:?}"),
        }
    }

    fn entry(&mut self, owner: Sym, f: Op) -> &mut u32 {
        &mut self.entries[owner.slot() * Calling::PER_OWNER + usize::from(Calling::op(f))]
    }

    /// `owner` sent an `f` call.
    fn sent(&mut self, owner: Sym, f: Op) {
        let entry = self.entry(owner, f);
        let before = *entry;
        *entry = match before {
            Calling::IDLE => Calling::UNANSWERED,
            _ => Calling::CROWDED,
        };
        if before == Calling::IDLE {
            return;
        }
        let crowd = self.crowds.entry((owner, Calling::op(f))).or_default();
        if before == Calling::CROWDED {
            crowd.in_flight += 1;
        } else {
            crowd.in_flight = 2;
            if before != Calling::UNANSWERED {
                crowd.unclaimed.push_back(before as usize - 3);
            }
        }
    }

    /// The log entry at `position` applied one of `owner`'s `f` calls, if one is in flight.
    fn answered(&mut self, owner: Sym, f: Op, position: usize) {
        let entry = self.entry(owner, f);
        match *entry {
            Calling::IDLE => {}
            Calling::CROWDED => {
                if let Some(crowd) = self.crowds.get_mut(&(owner, Calling::op(f))) {
                    crowd.unclaimed.push_back(position);
                }
            }
            _ => {
                *entry = u32::try_from(position + 3)
                    .expect("a history of over 4 billion events is beyond the checkers");
            }
        }
    }

    /// `owner`'s `f` call completed as `kind`: the log entry that answered it, if the log
    /// can tell.
    fn completed(&mut self, owner: Sym, f: Op, kind: EventType) -> Answered {
        let entry = self.entry(owner, f);
        match std::mem::replace(entry, Calling::IDLE) {
            Calling::IDLE | Calling::UNANSWERED => return Answered::No,
            Calling::CROWDED => {}
            answered => return Answered::By(answered as usize - 3),
        }
        let key = (owner, Calling::op(f));
        let crowd = self
            .crowds
            .get_mut(&key)
            .expect("a crowded entry has its crowd");
        crowd.in_flight -= 1;
        let answered = match kind {
            EventType::Ok => crowd
                .unclaimed
                .pop_front()
                .map_or(Answered::No, Answered::By),
            // The entries left are more than the calls still in flight and those of unknown
            // outcome could each have made: one of them was this call's.
            EventType::Fail
                if crowd.unclaimed.len() > (crowd.in_flight + crowd.unknown) as usize =>
            {
                Answered::By(*crowd.unclaimed.back().expect("more entries than none"))
            }
            EventType::Fail => Answered::Unsure,
            _ => {
                crowd.unknown += 1;
                Answered::Unsure
            }
        };
        if crowd.in_flight == 0 {
            self.crowds.remove(&key);
        } else {
            *self.entry(owner, f) = Calling::CROWDED;
        }
        answered
    }
}

/// `lock-reply-mismatch` as a state machine over the rows, fed by [`crate::lock_pass`].
pub(crate) struct ReplyScan<'c> {
    /// The log was recorded among the calls ([`Context::lock_log_timed`]); else it is matched
    /// by count, in `tallies`.
    timed: bool,
    tallies: FastMap<(Sym, Op), Tally>,
    lock_server: Option<Sym>,
    busy: Option<Sym>,
    locks: SymTable<'c, LockLeases>,
    /// The lock server's clock as its log last read it; forgotten on a backward step.
    reading: Option<i64>,
    calling: Calling,
    pub hits: Hits<ReplyHit>,
}

impl<'c> ReplyScan<'c> {
    pub fn new(ctx: &'c Context<'_>) -> ReplyScan<'c> {
        let timed = ctx.lock_log_timed;
        ReplyScan {
            timed,
            tallies: FastMap::default(),
            lock_server: ctx.sym(LOCK_SERVER),
            busy: ctx.sym("busy"),
            locks: ctx.per_lock(LockLeases::default()),
            reading: None,
            calling: Calling::new(if timed { ctx.sym_count() } else { 0 }),
            hits: Hits::new(),
        }
    }

    /// A fault: a backward step of the lock server's clock forgets the reading.
    pub fn nemesis(&mut self, row: &RowRef<'_>) {
        if row.f == Op::ClockJump
            && row.target.is_some()
            && row.target == self.lock_server
            && row.jump_ns().is_some_and(|jump| jump < 0)
        {
            self.reading = None;
        }
    }

    /// A lock log entry.
    pub fn log(&mut self, position: usize, row: &RowRef<'_>) {
        if !self.timed {
            if row.error.is_none()
                && let Some(owner) = row.owner
            {
                self.tallies
                    .entry((owner, row.f))
                    .or_default()
                    .logged
                    .push(position);
            }
            return;
        }
        if let Some(local_ns) = row.local_ns() {
            self.reading = Some(self.reading.map_or(local_ns, |now| now.max(local_ns)));
        }
        if let Some(lock) = row.lock {
            self.locks[lock].apply(row);
        }
        if row.error.is_none()
            && let Some(owner) = row.owner
        {
            self.calling.answered(owner, row.f, position);
        }
    }

    /// A lock call by `owner` on `lock` was sent: what to remember until it completes.
    #[inline]
    pub fn invoke(&mut self, row: &RowRef<'_>, lock: Sym, owner: Sym) -> SentCall {
        if !self.timed {
            self.tallies.entry((owner, row.f)).or_default().sent += 1;
            return SentCall {
                free: false,
                entries: 0,
            };
        }
        self.calling.sent(owner, row.f);
        let leases = &self.locks[lock];
        SentCall {
            free: row.f == Op::Acquire && leases.is_free(self.reading),
            entries: leases.entries,
        }
    }

    /// The call sent at `invoke` (noted as `sent`) by `owner` on `lock` completed at
    /// `position` (`row`); `rows` are the history's.
    #[inline]
    pub fn completion(
        &mut self,
        rows: &Rows,
        position: usize,
        invoke: usize,
        sent: SentCall,
        (lock, owner): (Sym, Sym),
    ) {
        let row = &rows.get(position);
        if !self.timed {
            let tally = self.tallies.entry((owner, row.f)).or_default();
            match row.kind {
                EventType::Ok => tally.told_ok.push((invoke, position)),
                EventType::Fail => tally.told_fail.push((invoke, position)),
                _ => {}
            }
            return;
        }
        let token_of = |logged: usize| rows.get(logged).token();
        let logged = self.calling.completed(owner, row.f, row.kind);
        let mismatch = match (row.kind, logged) {
            (_, Answered::Unsure) => None,
            (EventType::Ok, Answered::No) => Some(Mismatch::NotApplied),
            (EventType::Ok, Answered::By(logged))
                if row.f == Op::Acquire && token_of(logged) != row.token() =>
            {
                Some(Mismatch::OtherToken { logged })
            }
            (EventType::Fail, Answered::By(logged)) => Some(Mismatch::Applied { logged }),
            (EventType::Fail, Answered::No)
                if row.f == Op::Acquire
                    && sent.free
                    && row.error.is_some()
                    && row.error == self.busy
                    && self.locks[lock].entries == sent.entries =>
            {
                Some(Mismatch::BusyWhileFree)
            }
            _ => None,
        };
        if let Some(mismatch) = mismatch {
            self.hits.push(ReplyHit {
                invoke,
                reply: position,
                mismatch,
            });
        }
    }
}

impl ReplyScan<'_> {
    /// Matches the calls with a log read back after the run, by count (nothing to do for a
    /// timed log, matched as it went), and hands over every mismatch in history order.
    pub fn finish(mut self, rows: &Rows) -> Hits<ReplyHit> {
        let mut found = Vec::new();
        for ((_, f), tally) in &self.tallies {
            let logged = tally.logged.len();
            let told_ok = tally.told_ok.len();
            if *f == Op::Acquire {
                // Owner tokens are per acquisition: a grant must carry the token told.
                for &(invoke, reply) in &tally.told_ok {
                    let token = rows.get(reply).token();
                    if tally
                        .logged
                        .iter()
                        .any(|&entry| rows.get(entry).token() == token)
                    {
                        continue;
                    }
                    let mismatch = match tally.logged.first() {
                        Some(&logged) => Mismatch::OtherToken { logged },
                        None => Mismatch::NotApplied,
                    };
                    found.push((invoke, reply, mismatch));
                }
            } else if logged < told_ok {
                for &(invoke, reply) in &tally.told_ok[logged..] {
                    found.push((invoke, reply, Mismatch::FewerLogged { logged, told_ok }));
                }
            }
            let unknown = tally.sent - told_ok - tally.told_fail.len();
            if let (Some(&(invoke, reply)), Some(&entry)) =
                (tally.told_fail.last(), tally.logged.last())
                && logged > told_ok + unknown
            {
                let answered = told_ok + unknown;
                let mismatch = Mismatch::MoreLogged {
                    entry,
                    logged,
                    answered,
                };
                found.push((invoke, reply, mismatch));
            }
        }
        found.sort_by_key(|&(invoke, reply, _)| (reply, invoke));
        for (invoke, reply, mismatch) in found {
            self.hits.push(ReplyHit {
                invoke,
                reply,
                mismatch,
            });
        }
        self.hits
    }
}

/// `lock-reply-mismatch`: every lock reply against the log, from the lock pass.
pub(crate) fn check_replies(ctx: &Context<'_>) -> Outcome {
    const CLASS: AnomalyClass = AnomalyClass::LockReplyMismatch;
    if !ctx.has_lock_log {
        return Outcome::skipped(CLASS, "needs the lock service's log");
    }
    let hits = &ctx.lock_pass().replies;
    let anomalies = hits
        .kept
        .iter()
        .map(|hit| explain_reply(ctx, hit))
        .collect();
    let evidence = if ctx.lock_log_timed {
        "lock log + client replies"
    } else {
        "lock log read back (matched by count) + client replies"
    };
    Outcome::ran(CLASS, evidence, hits.count, anomalies, None)
}

fn explain_reply(ctx: &Context<'_>, hit: &ReplyHit) -> Anomaly {
    let call = ctx.at(hit.invoke);
    let reply = ctx.at(hit.reply);
    let lock = call.lock.as_deref().unwrap_or("?");
    let f = call.f.name();
    let mut cited = vec![hit.invoke, hit.reply];
    let told = match (reply.kind, reply.token) {
        (EventType::Ok, Some(token)) if call.f == Op::Acquire => {
            format!("was told it acquired token {token}")
        }
        (EventType::Ok, _) => "was told ok".to_string(),
        _ => format!(
            "was told it failed ({})",
            reply.error.as_deref().unwrap_or("no reason given")
        ),
    };
    let but = match hit.mismatch {
        Mismatch::NotApplied => format!(
            "the lock service's log records no {f} by that owner while the call was in flight"
        ),
        Mismatch::OtherToken { logged } => {
            cited.push(logged);
            let logged = ctx.at(logged);
            format!(
                "the lock service logged that grant with token {} {}",
                logged.token.unwrap_or_default(),
                when(ctx, &logged, "lock")
            )
        }
        Mismatch::Applied { logged } => {
            cited.push(logged);
            let logged = ctx.at(logged);
            format!(
                "the lock service's log shows it applied that {f} {}",
                when(ctx, &logged, "lock")
            )
        }
        Mismatch::BusyWhileFree => format!(
            "by the lock service's own log no lease on lock {lock} was live when the acquire \
             was sent (every lease granted had been released or had expired by its clock), and \
             it logged no grant or renew on the lock until it answered"
        ),
        Mismatch::FewerLogged { logged, told_ok } => format!(
            "the lock service's log, read back after the run, records {logged} {f} by that \
             owner, and {told_ok} of its {f} calls were told ok"
        ),
        Mismatch::MoreLogged {
            entry,
            logged,
            answered,
        } => {
            cited.push(entry);
            format!(
                "the lock service's log, read back after the run, records {logged} {f} by that \
                 owner, and only {answered} of its {f} calls were told ok or left unknown"
            )
        }
    };
    let rule = match hit.mismatch {
        Mismatch::BusyWhileFree => {
            "Busy must mean someone holds an unexpired lease: a service that refuses a free \
             lock holds off every worker for nothing."
        }
        _ => {
            "A lock reply must say what the service did: ok only for an applied call (with the \
             token it granted), fail only for one it did not apply; otherwise the reply must \
             be unknown."
        }
    };
    Anomaly {
        class: AnomalyClass::LockReplyMismatch,
        severity: crate::verdict::Severity::Failure,
        events: ctx.indexes(cited),
        explanation: format!(
            "{} sent {} {f} of lock {lock} as owner {} {} and {told} {}; but {but}. {rule}",
            call.process,
            if call.f == Op::Acquire { "an" } else { "a" },
            fencer_harness::words::short_owner(call.owner.as_deref().unwrap_or_default()),
            when(ctx, &call, "its"),
            when(ctx, &reply, "its"),
        ),
    }
}

/// One lease as the log tells it.
#[derive(Clone, Copy)]
struct Logged {
    grant: usize,
    owner: Sym,
    expires_ns: i64,
    /// The entry that released it, if one did.
    released: Option<usize>,
}

/// A renew the log applied to an ended lease.
pub(crate) struct RenewHit {
    renew: usize,
    lease: Logged,
}

/// `expired-lease-renewed` as a state machine over the lock log, fed by [`crate::lock_pass`].
pub(crate) struct RenewalScan {
    leases: FastMap<(Sym, u64), Logged>,
    /// Per lock: the token of the newest grant.
    current: FastMap<Sym, u64>,
    pub hits: Hits<RenewHit>,
}

impl RenewalScan {
    pub fn new() -> RenewalScan {
        RenewalScan {
            leases: FastMap::default(),
            current: FastMap::default(),
            hits: Hits::new(),
        }
    }

    /// A lock log entry.
    pub fn log(&mut self, position: usize, row: &RowRef<'_>) {
        let Some(lock) = row.lock else { return };
        match row.f {
            Op::Acquire => {
                if let (Some(token), Some(owner), Some(expires_ns)) =
                    (row.token(), row.owner, row.expires_ns())
                {
                    self.leases.insert(
                        (lock, token),
                        Logged {
                            grant: position,
                            owner,
                            expires_ns,
                            released: None,
                        },
                    );
                    self.current.insert(lock, token);
                }
            }
            Op::Release => {
                if let Some(lease) = row
                    .holder_token()
                    .and_then(|token| self.leases.get_mut(&(lock, token)))
                {
                    lease.released = Some(position);
                }
            }
            Op::Renew => {
                let (Some(token), Some(now_ns), Some(expires_ns)) =
                    (row.holder_token(), row.local_ns(), row.expires_ns())
                else {
                    return;
                };
                let leases = &self.leases;
                let newer_live = self.current.get(&lock).is_some_and(|&newest| {
                    newest > token
                        && leases.get(&(lock, newest)).is_some_and(|newer| {
                            newer.released.is_none() && newer.expires_ns > now_ns
                        })
                });
                let Some(lease) = self.leases.get_mut(&(lock, token)) else {
                    return;
                };
                if (lease.released.is_some() || lease.expires_ns <= now_ns) && !newer_live {
                    self.hits.push(RenewHit {
                        renew: position,
                        lease: *lease,
                    });
                }
                lease.expires_ns = expires_ns;
                lease.released = None;
            }
            _ => {}
        }
    }
}

/// `expired-lease-renewed`: renews the log applied to leases it shows ended, while no newer
/// lease was live (with one live, `overlapping-leases` reports it), from the lock pass.
pub(crate) fn check_renewals(ctx: &Context<'_>) -> Outcome {
    const CLASS: AnomalyClass = AnomalyClass::ExpiredLeaseRenewed;
    if !ctx.has_lock_log {
        return Outcome::skipped(CLASS, "needs the lock service's log");
    }
    let hits = &ctx.lock_pass().renewals;
    let anomalies = hits
        .kept
        .iter()
        .map(|hit| explain_renewal(ctx, hit))
        .collect();
    Outcome::ran(CLASS, "lock log", hits.count, anomalies, None)
}

fn explain_renewal(ctx: &Context<'_>, hit: &RenewHit) -> Anomaly {
    let renew = ctx.at(hit.renew);
    let lock = renew.lock.as_deref().unwrap_or("?");
    let mut cited = vec![hit.lease.grant, hit.renew];
    let ended = match hit.lease.released {
        Some(release) => {
            cited.push(release);
            let release = ctx.at(release);
            let how = if release.error.is_some() {
                " (lost in a restart)"
            } else {
                ""
            };
            format!(
                "it had released that lease {}{how}",
                when(ctx, &release, "lock")
            )
        }
        None => format!(
            "that lease had expired at lock clock {}",
            secs_signed(hit.lease.expires_ns)
        ),
    };
    Anomaly {
        class: AnomalyClass::ExpiredLeaseRenewed,
        severity: crate::verdict::Severity::Failure,
        events: ctx.indexes(cited),
        explanation: format!(
            "On lock {lock} the lock service renewed the lease with token {} held by {} \
             (granted {}) {}, although by its own log {ended}. No newer lease was live, so \
             no two holders overlapped, but a renew must never revive an ended lease: the \
             holder was told it still holds a lock it had lost (a warning unless strict; with \
             a newer lease live this is overlapping-leases).",
            renew.holder_token.unwrap_or_default(),
            who_owns(ctx, ctx.text(hit.lease.owner)),
            at_time(ctx, &ctx.at(hit.lease.grant)),
            when(ctx, &renew, "lock"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use fencer_harness::PackedHistory;

    use super::*;
    use crate::testkit::Builder;
    use crate::verdict::Validity;

    fn replies(builder: &Builder) -> Outcome {
        check_replies(&Context::new(&PackedHistory::pack(&builder.build())))
    }

    fn renewals(builder: &Builder) -> Outcome {
        check_renewals(&Context::new(&PackedHistory::pack(&builder.build())))
    }

    /// w1 holds L (token 1), renews and releases it; w2 is refused while w1 holds it and then
    /// granted token 2: every reply as the log tells it.
    fn truthful() -> Builder {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, true);
        b.invoke_acquire("w2", "L", "o2");
        b.fail("w2", "busy");
        b.at(3.0);
        b.invoke_lock_call("w1:renew", Op::Renew, "L", "o1");
        b.lock_log(Op::Renew, "L", "o1", "o1", 1, 10.0);
        b.ok("w1:renew");
        b.invoke_lock_call("w1", Op::Release, "L", "o1");
        b.lock_log(Op::Release, "L", "o1", "o1", 1, 0.0);
        b.ok("w1");
        // A stale renew refused, a call whose outcome is unknown.
        b.invoke_lock_call("w1:renew", Op::Renew, "L", "o1");
        b.fail("w1:renew", "not-owner");
        b.invoke_lock_call("w1", Op::Release, "L", "o1");
        b.info("w1");
        b.acquire("w2", "L", "o2", 2, true);
        b
    }

    #[test]
    fn replies_that_tell_what_the_log_shows_match() {
        let outcome = replies(&truthful());
        assert_eq!(outcome.report.validity, Validity::Valid);
        assert_eq!(outcome.report.evidence, "lock log + client replies");
        // A busy answer while the lease is unexpired, and after it lapsed but before the
        // lock clock was read past its expiry, is not blamed.
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, true);
        b.at(12.0);
        b.invoke_acquire("w2", "L", "o2");
        b.fail("w2", "busy");
        assert_eq!(replies(&b).report.validity, Validity::Valid);
    }

    #[test]
    fn an_ok_the_log_never_applied_and_a_grant_with_another_token_mismatch() {
        let mut b = Builder::new();
        let invoke = b.invoke_acquire("w1", "L", "o1");
        let logged = b.grant("L", "o1", 7, 10.0);
        let ok = b.ok_acquire("w1", 3);
        let renew = b.invoke_lock_call("w1:renew", Op::Renew, "L", "o1");
        let renewed = b.ok("w1:renew");
        let outcome = replies(&b);
        assert_eq!(outcome.report.anomalies, 2);
        assert_eq!(outcome.anomalies[0].events, vec![invoke, logged, ok]);
        let text = &outcome.anomalies[0].explanation;
        assert!(
            text.starts_with("w1 sent an acquire of lock L as owner o1 at 0.000s"),
            "{text}"
        );
        assert!(
            text.contains("was told it acquired token 3 at 0.002s"),
            "{text}"
        );
        assert!(
            text.contains("logged that grant with token 7 at 0.001s (lock clock 0.001s)"),
            "{text}"
        );
        assert_eq!(outcome.anomalies[1].events, vec![renew, renewed]);
        assert!(
            outcome.anomalies[1]
                .explanation
                .contains("records no renew by that owner while the call was in flight"),
            "{}",
            outcome.anomalies[1].explanation
        );
    }

    #[test]
    fn a_fail_the_log_applied_mismatches() {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, true);
        b.invoke_lock_call("w1", Op::Release, "L", "o1");
        let logged = b.lock_log(Op::Release, "L", "o1", "o1", 1, 0.0);
        b.fail("w1", "not-owner");
        let outcome = replies(&b);
        assert_eq!(outcome.report.anomalies, 1);
        assert!(outcome.anomalies[0].events.contains(&logged));
        assert!(
            outcome.anomalies[0]
                .explanation
                .contains("was told it failed (not-owner)"),
            "{}",
            outcome.anomalies[0].explanation
        );
        // A restart's release of the lease answers no call.
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, true);
        b.invoke_lock_call("w1", Op::Release, "L", "o1");
        b.log("lock", Op::Release, |e| {
            e.lock = Some("L".into());
            e.owner = Some("o1".into());
            e.holder = Some("o1".into());
            e.holder_token = Some(1);
            e.local_ns = Some(3_000_000);
            e.error = Some("restart".into());
        });
        b.fail("w1", "connection refused");
        assert_eq!(replies(&b).report.validity, Validity::Valid);
    }

    #[test]
    fn busy_while_the_log_shows_the_lock_free_mismatches() {
        // Released, then busy.
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, true);
        b.invoke_lock_call("w1", Op::Release, "L", "o1");
        b.lock_log(Op::Release, "L", "o1", "o1", 1, 0.0);
        b.ok("w1");
        let invoke = b.invoke_acquire("w2", "L", "o2");
        b.fail("w2", "busy");
        let outcome = replies(&b);
        assert_eq!(outcome.report.anomalies, 1);
        assert_eq!(outcome.anomalies[0].events[0], invoke);
        assert!(
            outcome.anomalies[0]
                .explanation
                .contains("no lease on lock L was live when the acquire was sent"),
            "{}",
            outcome.anomalies[0].explanation
        );
        // Expired by a later lock clock reading (another lock's grant), then busy.
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, true);
        b.at(10.5);
        b.acquire("w3", "M", "o3", 1, true);
        b.invoke_acquire("w2", "L", "o2");
        b.fail("w2", "busy");
        assert_eq!(replies(&b).report.anomalies, 1);
        // ... unless the lock server's clock stepped back since that reading.
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, true);
        b.at(10.5);
        b.acquire("w3", "M", "o3", 1, true);
        b.nemesis(Op::ClockJump, LOCK_SERVER, |e| {
            e.jump_ns = Some(-5_000_000_000)
        });
        b.invoke_acquire("w2", "L", "o2");
        b.fail("w2", "busy");
        assert_eq!(replies(&b).report.validity, Validity::Valid);
        // ... or a grant was logged on the lock while the acquire was in flight.
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, true);
        b.invoke_lock_call("w1", Op::Release, "L", "o1");
        b.lock_log(Op::Release, "L", "o1", "o1", 1, 0.0);
        b.ok("w1");
        b.invoke_acquire("w2", "L", "o2");
        b.acquire("w3", "L", "o3", 2, true);
        b.fail("w2", "busy");
        assert_eq!(replies(&b).report.validity, Validity::Valid);
    }

    /// The calls of [`truthful`] with the log read back after the run, as a real service's
    /// is: every entry after every call. `extra` adds calls before the log is appended.
    fn read_back(extra: impl FnOnce(&mut Builder), log: impl FnOnce(&mut Builder)) -> Builder {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, false);
        b.invoke_acquire("w2", "L", "o2");
        b.fail("w2", "busy");
        b.invoke_lock_call("w1:renew", Op::Renew, "L", "o1");
        b.ok("w1:renew");
        b.invoke_lock_call("w1", Op::Release, "L", "o1");
        b.ok("w1");
        b.invoke_lock_call("w1:renew", Op::Renew, "L", "o1");
        b.fail("w1:renew", "not-owner");
        // A busy answer while the log (read back) shows the lock free: not judged untimed.
        b.invoke_acquire("w3", "L", "o3");
        b.fail("w3", "busy");
        b.acquire("w2", "L", "o4", 2, false);
        extra(&mut b);
        b.grant("L", "o1", 1, 10.0);
        b.lock_log(Op::Renew, "L", "o1", "o1", 1, 10.0);
        b.lock_log(Op::Release, "L", "o1", "o1", 1, 0.0);
        b.grant("L", "o4", 2, 10.0);
        log(&mut b);
        b
    }

    #[test]
    fn a_log_read_back_after_the_run_is_matched_by_count() {
        let truthful = read_back(|_| {}, |_| {});
        let packed = PackedHistory::pack(&truthful.build());
        assert!(!Context::new(&packed).lock_log_timed);
        let outcome = replies(&truthful);
        assert_eq!(
            outcome.report.validity,
            Validity::Valid,
            "{:?}",
            outcome.anomalies
        );

        // A release told ok that the log never applied.
        let mut release = 0;
        let outcome = replies(&read_back(
            |b| {
                b.invoke_lock_call("w2", Op::Release, "L", "o4");
                release = b.ok("w2");
            },
            |_| {},
        ));
        assert_eq!(outcome.report.anomalies, 1);
        assert!(outcome.anomalies[0].events.contains(&release));
        let text = &outcome.anomalies[0].explanation;
        assert!(
            text.contains("read back after the run, records 0 release by that owner, and 1 of"),
            "{text}"
        );

        // A renew told not-owner that the log applied (one more entry than calls told ok or
        // left unknown).
        let outcome = replies(&read_back(
            |_| {},
            |b| {
                b.lock_log(Op::Renew, "L", "o1", "o1", 1, 10.0);
            },
        ));
        assert_eq!(outcome.report.anomalies, 1);
        let text = &outcome.anomalies[0].explanation;
        assert!(text.contains("was told it failed (not-owner)"), "{text}");
        assert!(
            text.contains("records 2 renew by that owner, and only 1 of its renew calls"),
            "{text}"
        );
        // ... unless another renew's outcome is unknown: it may be the one applied.
        let outcome = replies(&read_back(
            |b| {
                b.invoke_lock_call("w1:renew", Op::Renew, "L", "o1");
                b.info("w1:renew");
            },
            |b| {
                b.lock_log(Op::Renew, "L", "o1", "o1", 1, 10.0);
            },
        ));
        assert_eq!(outcome.report.validity, Validity::Valid);

        // An acquire told a token the grant does not carry.
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 3, false);
        b.grant("L", "o1", 7, 10.0);
        let outcome = replies(&b);
        assert_eq!(outcome.report.anomalies, 1);
        assert!(
            outcome.anomalies[0]
                .explanation
                .contains("logged that grant with token 7"),
            "{}",
            outcome.anomalies[0].explanation
        );
    }

    #[test]
    fn without_a_lock_log_both_are_skipped() {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, false);
        assert!(replies(&b).report.skipped.is_some());
        assert!(renewals(&b).report.skipped.is_some());
    }

    #[test]
    fn renewals_of_live_leases_are_fine() {
        assert_eq!(renewals(&truthful()).report.validity, Validity::Valid);
    }

    #[test]
    fn a_renew_of_an_expired_or_released_lease_with_none_newer_live_is_reported() {
        let mut b = Builder::new();
        let grant = b.acquire("w1", "L", "o1", 1, true) - 1;
        b.at(12.0);
        b.invoke_lock_call("w1:renew", Op::Renew, "L", "o1");
        let expired = b.lock_log(Op::Renew, "L", "o1", "o1", 1, 10.0);
        b.ok("w1:renew");
        b.invoke_lock_call("w1", Op::Release, "L", "o1");
        b.lock_log(Op::Release, "L", "o1", "o1", 1, 0.0);
        b.ok("w1");
        b.invoke_lock_call("w1:renew", Op::Renew, "L", "o1");
        let released = b.lock_log(Op::Renew, "L", "o1", "o1", 1, 10.0);
        b.ok("w1:renew");
        let outcome = renewals(&b);
        assert_eq!(outcome.report.anomalies, 2);
        assert_eq!(outcome.anomalies[0].events, vec![grant, expired]);
        let text = &outcome.anomalies[0].explanation;
        assert!(
            text.contains("renewed the lease with token 1 held by w1 (owner o1)"),
            "{text}"
        );
        assert!(
            text.contains("that lease had expired at lock clock 10.001s"),
            "{text}"
        );
        assert!(
            outcome.anomalies[1]
                .explanation
                .contains("it had released that lease at 12.004s"),
            "{}",
            outcome.anomalies[1].explanation
        );
        assert!(outcome.anomalies[1].events.contains(&released));
    }

    #[test]
    fn a_revival_while_a_newer_lease_is_live_is_left_to_overlapping_leases() {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, true);
        b.at(10.5);
        b.acquire("w2", "L", "o2", 2, true);
        b.invoke_lock_call("w1:renew", Op::Renew, "L", "o1");
        b.lock_log(Op::Renew, "L", "o1", "o1", 1, 10.0);
        b.ok("w1:renew");
        assert_eq!(renewals(&b).report.validity, Validity::Valid);
    }
}
