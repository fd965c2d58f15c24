//! `token-regression`: did a grant carry a fencing token not greater than an earlier grant's
//! on the same lock?
//!
//! Fencing only works if tokens strictly increase per lock; a counter reset on restart or a
//! token derived from a clock that jumped back hands a newer holder a token a store will treat
//! as older. Grants in the lock service's log must increase in log order. Client replies are
//! checked too (an acquire acknowledged with a token not above one already acknowledged
//! before it was sent), because a service can log one token and hand out another; a client
//! regression already explained by the log is not reported twice.
//!
//! One root cause (a reset) makes every following grant regress until the tokens climb past
//! the old maximum, so regressions against the same earlier grant are one anomaly with repeats.

use fencer_harness::{Event, EventType, Op, RowRef, Sym};

use crate::context::{Context, LOCK_SERVER, is_lock_log};
use crate::explain::{Story, at_time, count, faults_between, secs, when, who_owns};
use crate::findings::{Hits, Outcome};
use crate::index::{FastMap, FastSet};
use crate::numbering::SymTable;
use crate::verdict::{Anomaly, AnomalyClass};

const CLASS: AnomalyClass = AnomalyClass::TokenRegression;

const RULE: &str = "Fencing tokens must strictly increase per lock, or a store fencing on them \
                    cannot tell a newer holder from an older one.";

/// A grant whose token did not exceed the earlier grant `earlier`; `repeats` more grants
/// regressed against the same earlier grant, the last at `last`.
struct Regression {
    grant: usize,
    earlier: usize,
    repeats: usize,
    last: usize,
}

/// Per lock: the highest token so far and the grant that carried it first.
type Highest = FastMap<Sym, (u64, usize)>;

/// Counts `grant` against `earlier`, folding it into an earlier anomaly against the same grant.
fn record(
    hits: &mut Hits<Regression>,
    seen: &mut FastMap<(Sym, usize), Option<usize>>,
    lock: Sym,
    grant: usize,
    earlier: usize,
) {
    match seen.get(&(lock, earlier)) {
        Some(&slot) => {
            if let Some(slot) = slot {
                let hit = &mut hits.kept[slot];
                hit.repeats += 1;
                hit.last = grant;
            }
        }
        None => {
            let slot = hits.push(Regression {
                grant,
                earlier,
                repeats: 0,
                last: grant,
            });
            seen.insert((lock, earlier), slot);
        }
    }
}

/// An acquire `ok` whose token was not above the highest one acknowledged on its lock before
/// the acquire was sent.
#[derive(Clone, Copy)]
pub(crate) struct AckedRegression {
    lock: Sym,
    ok: usize,
    /// The `ok` of the first grant of that highest token.
    earlier: usize,
    owner: Option<Sym>,
}

/// The check on client replies as a state machine over the acquire rows, fed by
/// [`crate::lock_pass`] so the lock's rows are read once; the regressions it finds are judged
/// against the log's once the pass is over.
pub(crate) struct AckedTokens<'c> {
    /// Per lock, the highest token acknowledged so far and its `ok`.
    highest_acked: SymTable<'c, Option<(u64, usize)>>,
    /// Per process, the acquire in flight: `highest_acked` for its lock when it was sent.
    open: SymTable<'c, Option<Option<(u64, usize)>>>,
    /// In history order.
    pub regressions: Vec<AckedRegression>,
}

impl<'c> AckedTokens<'c> {
    pub fn new(ctx: &'c Context<'_>) -> AckedTokens<'c> {
        AckedTokens {
            highest_acked: ctx.per_lock(None),
            open: ctx.per_process(None),
            regressions: Vec::new(),
        }
    }

    /// An acquire row (`row`, at `position`) on `lock`.
    #[inline]
    pub fn acquire(&mut self, position: usize, row: &RowRef<'_>, lock: Sym) {
        match row.kind {
            EventType::Invoke => {
                self.open[row.process] = Some(self.highest_acked[lock]);
            }
            EventType::Ok => {
                let before = self.open[row.process].take().flatten();
                let Some(token) = row.token() else { return };
                if let Some((top, earlier)) = before
                    && token <= top
                {
                    self.regressions.push(AckedRegression {
                        lock,
                        ok: position,
                        earlier,
                        owner: row.owner,
                    });
                }
                let entry = self.highest_acked[lock].get_or_insert((token, position));
                if token > entry.0 {
                    *entry = (token, position);
                }
            }
            EventType::Fail | EventType::Info => {
                self.open[row.process] = None;
            }
            EventType::Nemesis | EventType::Log | EventType::Notice => {}
        }
    }
}

/// Runs the checker on the lock service's log (if any) and on client replies.
pub(crate) fn check(ctx: &Context<'_>) -> Outcome {
    let mut log_hits = Hits::new();
    let mut regressed_owners: FastSet<Sym> = FastSet::default();
    if ctx.has_lock_log {
        let mut highest = Highest::default();
        let mut seen = FastMap::default();
        let logged_grant = |kind, f| kind == EventType::Log && f == Op::Acquire;
        for (position, ref row) in ctx.rows_where(logged_grant) {
            if !(is_lock_log(row) && row.f == Op::Acquire) {
                continue;
            }
            let (Some(lock), Some(token)) = (row.lock, row.token()) else {
                continue;
            };
            match highest.get(&lock) {
                Some(&(top, earlier)) if token <= top => {
                    record(&mut log_hits, &mut seen, lock, position, earlier);
                    regressed_owners.extend(row.owner);
                }
                _ => {
                    highest.insert(lock, (token, position));
                }
            }
        }
    }

    let mut client_hits = Hits::new();
    let mut seen = FastMap::default();
    for regression in &ctx.lock_pass().acked_regressions {
        let explained = regression
            .owner
            .is_some_and(|owner| regressed_owners.contains(&owner));
        if !explained {
            let AckedRegression {
                lock, ok, earlier, ..
            } = *regression;
            record(&mut client_hits, &mut seen, lock, ok, earlier);
        }
    }

    let mut anomalies: Vec<Anomaly> = log_hits
        .kept
        .iter()
        .map(|hit| explain_logged(ctx, hit))
        .collect();
    let room = crate::verdict::MAX_ANOMALIES_PER_CLASS.saturating_sub(anomalies.len());
    anomalies.extend(
        client_hits
            .kept
            .iter()
            .take(room)
            .map(|hit| explain_acked(ctx, hit)),
    );
    let evidence = if ctx.has_lock_log {
        "lock log + client replies"
    } else {
        "client replies"
    };
    Outcome::ran(
        CLASS,
        evidence,
        log_hits.count + client_hits.count,
        anomalies,
        None,
    )
}

/// ` 2 later grants on lock L also carried tokens not above 5, the last (token 4) at 9.000s.`
/// `told` names what regressed, singular and plural.
fn repeats_text(
    ctx: &Context<'_>,
    hit: &Regression,
    lock: &str,
    top: u64,
    told: (&str, &str),
) -> String {
    if hit.repeats == 0 {
        return String::new();
    }
    let last = ctx.at(hit.last);
    let carried = if hit.repeats == 1 {
        "carried a token"
    } else {
        "carried tokens"
    };
    format!(
        " {} on lock {lock} also {carried} not above {top}, the last (token {}) {}.",
        count(hit.repeats, told.0, told.1),
        last.token.unwrap_or_default(),
        at_time(ctx, &last)
    )
}

/// What the nemesis did to the lock server between two positions, as a sentence.
fn server_faults(ctx: &Context<'_>, server: &str, from: usize, to: usize) -> (String, Vec<usize>) {
    let faults = faults_between(ctx, server, from, to);
    let mut story = Story::new(format!("In between, the lock server ({server})"));
    story.add_faults(ctx, &faults);
    let text = if story.is_empty() {
        String::new()
    } else {
        format!(" {}.", story.render())
    };
    (text, faults)
}

fn owner_of(ctx: &Context<'_>, event: &Event) -> String {
    who_owns(ctx, event.owner.as_deref().unwrap_or_default())
}

fn explain_logged(ctx: &Context<'_>, hit: &Regression) -> Anomaly {
    let grant = ctx.at(hit.grant);
    let earlier = ctx.at(hit.earlier);
    let lock = grant.lock.as_deref().unwrap_or("?");
    let top = earlier.token.unwrap_or_default();
    let (faults_text, faults) = server_faults(ctx, &grant.process, hit.earlier, hit.grant);
    let mut cited = vec![hit.earlier, hit.grant];
    cited.extend(faults);
    Anomaly {
        class: CLASS,
        severity: crate::verdict::Severity::Failure,
        events: ctx.indexes(cited),
        explanation: format!(
            "On lock {lock} the lock service granted token {} to {} {} after it had already \
             granted token {top} to {} {}.{}{faults_text} {RULE}",
            grant.token.unwrap_or_default(),
            owner_of(ctx, &grant),
            when(ctx, &grant, "lock"),
            owner_of(ctx, &earlier),
            when(ctx, &earlier, "lock"),
            repeats_text(ctx, hit, lock, top, ("later grant", "later grants")),
        ),
    }
}

fn explain_acked(ctx: &Context<'_>, hit: &Regression) -> Anomaly {
    let ok = ctx.at(hit.grant);
    let earlier = ctx.at(hit.earlier);
    let lock = ok.lock.as_deref().unwrap_or("?");
    let top = earlier.token.unwrap_or_default();
    let invoke = ctx.lookup().partner(hit.grant).unwrap_or(hit.grant);
    let (faults_text, faults) = server_faults(ctx, LOCK_SERVER, hit.earlier, hit.grant);
    let mut cited = vec![hit.earlier, invoke, hit.grant];
    cited.extend(faults);
    Anomaly {
        class: CLASS,
        severity: crate::verdict::Severity::Failure,
        events: ctx.indexes(cited),
        explanation: format!(
            "{} sent an acquire of lock {lock} {} and was told it got token {} {}, although {} \
             had already been told it acquired lock {lock} with token {top} at {}, before that \
             acquire was sent.{}{faults_text} Judged from client replies. {RULE}",
            ok.process,
            when(ctx, &ctx.at(invoke), "its"),
            ok.token.unwrap_or_default(),
            when(ctx, &ok, "its"),
            earlier.process,
            secs(earlier.time_ns),
            repeats_text(
                ctx,
                hit,
                lock,
                top,
                ("later acknowledged acquire", "later acknowledged acquires")
            ),
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
    fn grants_after_a_counter_reset_are_one_regression() {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 4, true);
        let top = b.acquire("w2", "L", "o2", 5, true) - 1;
        let jump = b.nemesis(Op::ClockJump, "lock", |e| e.jump_ns = Some(-60_000_000_000));
        let first = b.grant("L", "o3", 1, 10.0);
        b.grant("L", "o4", 2, 10.0);
        b.grant("L", "o5", 5, 10.0);
        b.grant("L", "o6", 6, 10.0);
        let outcome = run(&b);
        assert_eq!(outcome.report.validity, Validity::Invalid);
        assert_eq!(outcome.report.evidence, "lock log + client replies");
        assert_eq!(outcome.report.anomalies, 1);
        let anomaly = &outcome.anomalies[0];
        assert_eq!(anomaly.events, vec![top, jump, first]);
        let text = &anomaly.explanation;
        for needle in [
            "granted token 1 to owner o3 at 0.007s (lock clock 0.007s)",
            "after it had already granted token 5 to w2 (owner o2) at 0.004s",
            "2 later grants on lock L also carried tokens not above 5, the last (token 5)",
            "the lock server (lock) had its clock jumped backward 60.000s",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in: {text}");
        }
    }

    #[test]
    fn strictly_increasing_grants_per_lock_are_valid() {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, true);
        b.acquire("w2", "L", "o2", 2, true);
        b.acquire("w3", "M", "o3", 1, true);
        b.acquire("w1", "L", "o4", 7, true);
        let outcome = run(&b);
        assert_eq!(outcome.report.validity, Validity::Valid);
        assert_eq!(outcome.report.anomalies, 0);
    }

    #[test]
    fn client_replies_show_a_token_not_above_an_acknowledged_one() {
        let mut b = Builder::new();
        let earlier = b.acquire("w1", "L", "o1", 3, false);
        let invoke = b.invoke_acquire("w2", "L", "o2");
        let ok = b.ok_acquire("w2", 3);
        let outcome = run(&b);
        assert_eq!(outcome.report.evidence, "client replies");
        assert_eq!(outcome.report.anomalies, 1);
        assert_eq!(outcome.anomalies[0].events, vec![earlier, invoke, ok]);
        let text = &outcome.anomalies[0].explanation;
        assert!(text.contains("w2 sent an acquire of lock L"), "{text}");
        assert!(text.contains("told it got token 3"), "{text}");
        assert!(
            text.contains("w1 had already been told it acquired lock L with token 3"),
            "{text}"
        );
    }

    #[test]
    fn client_replies_do_not_blame_concurrent_acquires() {
        let mut b = Builder::new();
        b.invoke_acquire("w2", "L", "o2");
        b.acquire("w1", "L", "o1", 3, false);
        b.ok_acquire("w2", 2);
        let outcome = run(&b);
        assert_eq!(outcome.report.validity, Validity::Valid);
    }

    #[test]
    fn a_regression_in_the_log_and_in_the_reply_is_reported_once() {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 5, true);
        b.acquire("w2", "L", "o2", 1, true);
        let outcome = run(&b);
        assert_eq!(outcome.report.anomalies, 1);
        assert_eq!(outcome.anomalies.len(), 1);
        assert!(
            outcome.anomalies[0]
                .explanation
                .starts_with("On lock L the lock service")
        );
    }
}
