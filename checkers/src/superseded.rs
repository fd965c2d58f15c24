//! `superseded-write-accepted`: did the store accept a write whose token the lock service had
//! already superseded (a newer grant on the lock), before the store had seen the newer token?
//!
//! This is the documented limit of fencing: a store can only refuse a token once it has seen a
//! higher one, so an old holder's write that overtakes the new holder's first write is applied.
//! It is reported as a warning unless the check is strict. A write whose token is below one the
//! store had already applied is `stale-write-accepted` instead, and is not reported here.

use fencer_harness::{EventType, Op, RowRef, Sym};

use crate::context::{Context, LOCK_SERVER, is_lock_log, is_store_log};
use crate::explain::{Story, at_store_order, faults_between, when, who_owns};
use crate::findings::{Hits, Outcome};
use crate::index::FastMap;
use crate::stale_write::writer_story;
use crate::verdict::{Anomaly, AnomalyClass};

const CLASS: AnomalyClass = AnomalyClass::SupersededWriteAccepted;

/// An applied write and the newer grant that superseded its token.
struct Hit {
    applied: usize,
    newer_grant: usize,
    store_fence: Option<u64>,
}

/// Runs the checker on the store log, with grants from the lock log when it was recorded as the
/// service went (else acquire replies: a log appended after the run puts every grant after
/// every write).
pub(crate) fn check(ctx: &Context<'_>) -> Outcome {
    if !ctx.has_store_log {
        return Outcome::skipped(CLASS, "needs the store's log of applied writes");
    }
    if !ctx.store_log_timed {
        return Outcome::skipped(
            CLASS,
            "needs a store log recorded as writes were applied (this one was read back after the run)",
        );
    }
    let mut hits = Hits::new();
    scan(ctx, |hit| {
        hits.push(hit);
    });
    let anomalies = hits.kept.iter().map(|hit| explain(ctx, hit)).collect();
    let evidence = if grants_from_lock_log(ctx) {
        "lock log + store log"
    } else {
        "acquire replies + store log"
    };
    Outcome::ran(CLASS, evidence, hits.count, anomalies, None)
}

/// The keys and write ids of every superseded write the store accepted (empty without a store
/// log): other checkers excuse what follows from fencing's documented limit unless strict.
pub(crate) fn superseded_write_ids(ctx: &Context<'_>) -> FastMap<(Sym, Sym), usize> {
    let mut ids = FastMap::default();
    if ctx.has_store_log {
        scan(ctx, |hit| {
            let applied = &ctx.rows.get(hit.applied);
            if let (Some(key), Some(write_id)) = (applied.key, applied.write_id) {
                ids.insert((key, write_id), hit.applied);
            }
        });
    }
    ids
}

/// Whether grants are read from the lock log: only one interleaved with the store log tells
/// which grants came before which applied write.
fn grants_from_lock_log(ctx: &Context<'_>) -> bool {
    ctx.has_lock_log && ctx.lock_log_timed
}

/// Calls `on_hit` for every applied write whose token a newer grant had superseded before
/// the store saw any higher token.
fn scan(ctx: &Context<'_>, mut on_hit: impl FnMut(Hit)) {
    let from_lock_log = grants_from_lock_log(ctx);
    let is_grant = |event: &RowRef<'_>| {
        if from_lock_log {
            is_lock_log(event) && event.f == Op::Acquire
        } else {
            event.is(EventType::Ok, Op::Acquire)
        }
    };
    // Per lock: the newest token granted so far and its grant's position.
    let mut newest_grant: FastMap<Sym, (u64, usize)> = FastMap::default();
    // Which lock handed out a token (tokens are per lock; the latest grant wins).
    let mut lock_of_token: FastMap<u64, Sym> = FastMap::default();
    // Per key: the highest token the store has applied.
    let mut store_fence: FastMap<Sym, u64> = FastMap::default();
    let grant_or_applied = |kind, f| {
        matches!(
            (kind, f),
            (EventType::Log | EventType::Ok, Op::Acquire) | (EventType::Log, Op::Write)
        )
    };
    for (position, ref event) in ctx.rows_where(grant_or_applied) {
        if is_grant(event) {
            if let (Some(lock), Some(token)) = (event.lock, event.token()) {
                lock_of_token.insert(token, lock);
                let newest = newest_grant.entry(lock).or_insert((token, position));
                if token > newest.0 {
                    *newest = (token, position);
                }
            }
            continue;
        }
        if !is_store_log(event) {
            continue;
        }
        let (Some(key), Some(token)) = (event.key, event.token()) else {
            continue;
        };
        let fence = store_fence.get(&key).copied();
        if fence.is_none_or(|fence| token >= fence)
            && let Some(lock) = lock_of_token.get(&token)
            && let Some(&(newest, grant)) = newest_grant.get(lock)
            && newest > token
        {
            on_hit(Hit {
                applied: position,
                newer_grant: grant,
                store_fence: fence,
            });
        }
        let fence = store_fence.entry(key).or_insert(token);
        *fence = (*fence).max(token);
    }
}

fn explain(ctx: &Context<'_>, hit: &Hit) -> Anomaly {
    let applied = ctx.at(hit.applied);
    let grant = ctx.at(hit.newer_grant);
    let token = applied.token.unwrap_or_default();
    let newer = grant.token.unwrap_or_default();
    let lock = grant.lock.as_deref().unwrap_or("(no lock)");
    let key = applied.key.as_deref().unwrap_or("(no key)");
    let write_id = applied.write_id.as_deref().unwrap_or("(no id)");
    let holder = grant
        .owner
        .as_deref()
        .map_or_else(|| grant.process.clone(), |owner| who_owns(ctx, owner));
    let granted_by = if grant.kind == EventType::Log {
        format!(
            "the lock service granted lock {lock} to {holder} with token {newer} {}",
            when(ctx, &grant, "lock")
        )
    } else {
        format!(
            "{} was granted lock {lock} with token {newer} {}",
            grant.process,
            when(ctx, &grant, "its")
        )
    };
    let fence = hit.store_fence.map_or(
        format!("the store had not seen any token for key {key} yet"),
        |fence| format!("the store had seen only token {fence} for key {key}"),
    );
    let mut cited = vec![hit.newer_grant, hit.applied];
    let told = match applied
        .write_id
        .as_deref()
        .and_then(|id| ctx.lookup().write_invoke(ctx.sym(id)?, hit.applied))
    {
        Some(invoke) => {
            let (mut story, story_cited) = writer_story(ctx, invoke, hit.applied);
            cited.extend(story_cited);
            story.add(
                hit.applied,
                format!(
                    "the store applied that write {}",
                    at_store_order(ctx, &applied)
                ),
            );
            story.render()
        }
        None => format!(
            "The store applied write {write_id} with token {token} to key {key} {}",
            at_store_order(ctx, &applied)
        ),
    };
    // What happened to the lock server between the old grant and the newer one (a restart, a
    // clock jump) often explains why the old lease ended early.
    let old_grant = applied
        .write_id
        .as_deref()
        .and_then(|id| ctx.lookup().write_invoke(ctx.sym(id)?, hit.applied))
        .and_then(|invoke| {
            let call = ctx.at(invoke);
            ctx.lookup()
                .grant_to_worker(crate::context::worker_of(&call.process), token, invoke)
        })
        .unwrap_or(0);
    let faults = faults_between(ctx, LOCK_SERVER, old_grant, hit.newer_grant);
    let mut server = Story::new("Meanwhile the lock server");
    server.add_faults(ctx, &faults);
    let server = if server.is_empty() {
        String::new()
    } else {
        format!(" {}.", server.render())
    };
    cited.extend(faults);
    Anomaly {
        class: CLASS,
        severity: crate::verdict::Severity::Failure,
        events: ctx.indexes(cited),
        explanation: format!(
            "{told}; but {granted_by}, before that, and {fence}, so it could not know token {token} was superseded.{server} This is the documented \
             limit of fencing: a store refuses an old token only after a newer one has reached \
             it (a warning unless checking is strict)."
        ),
    }
}

#[cfg(test)]
mod tests {
    use fencer_harness::PackedHistory;

    use super::*;
    use crate::testkit::Builder;
    use crate::verdict::Validity;

    /// w1 (token 1) is paused past its lease; w3 is granted token 2; w1's late write reaches
    /// the store before (`overtakes`) or after w3's first write.
    fn late_old_holder(overtakes: bool) -> Builder {
        late_old_holder_logged(overtakes, true)
    }

    /// [`late_old_holder`], its grants logged as the lock service made them (`as_they_happen`)
    /// or appended after the run, as a real service's log is.
    fn late_old_holder_logged(overtakes: bool, as_they_happen: bool) -> Builder {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, as_they_happen);
        b.write("w1", "k", 1, "w1-0", true);
        b.pause("w1", 12.0);
        b.nemesis(Op::Restart, "lock", |e| e.duration_ns = Some(1_000_000_000));
        b.at(10.7);
        b.acquire("w3", "L", "o3", 2, as_they_happen);
        if !overtakes {
            b.write("w3", "k", 2, "w3-0", true);
        }
        b.at(12.5);
        b.resume("w1");
        if overtakes {
            b.write("w1", "k", 1, "w1-1", true);
            b.write("w3", "k", 2, "w3-0", true);
        } else {
            b.rejected_write("w1", "k", 1, "w1-1", 2);
        }
        if !as_they_happen {
            b.grant("L", "o1", 1, 10.0);
            b.grant("L", "o3", 2, 10.0);
        }
        b
    }

    #[test]
    fn a_lock_log_appended_after_the_run_leaves_the_grants_to_the_acquire_replies() {
        let history = late_old_holder_logged(true, false).build();
        let packed = PackedHistory::pack(&history);
        let ctx = Context::new(&packed);
        assert!(ctx.has_lock_log && !ctx.lock_log_timed);
        let outcome = check(&ctx);
        assert_eq!(outcome.report.evidence, "acquire replies + store log");
        assert_eq!(outcome.report.anomalies, 1);
        let timed = late_old_holder(true).build();
        let timed = check(&Context::new(&PackedHistory::pack(&timed)));
        assert_eq!(timed.report.evidence, "lock log + store log");
    }

    #[test]
    fn an_old_write_overtaking_the_new_holders_first_write_is_superseded() {
        let history = late_old_holder(true).build();
        let outcome = check(&Context::new(&PackedHistory::pack(&history)));
        assert_eq!(outcome.report.validity, Validity::Invalid);
        assert_eq!(outcome.report.anomalies, 1);
        let text = &outcome.anomalies[0].explanation;
        for needle in [
            "w1 acquired lock L with token 1",
            "was paused 12.000s",
            "sent write w1-1 with token 1",
            "granted lock L to w3 (owner o3) with token 2 at 10.701s (lock clock 10.701s)",
            "the store had seen only token 1 for key k",
            "Meanwhile the lock server was restarted at 0.007s, down for 1.000s.",
            "documented limit of fencing",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in: {text}");
        }
    }

    #[test]
    fn a_fenced_store_that_saw_the_newer_token_first_is_silent() {
        let history = late_old_holder(false).build();
        let outcome = check(&Context::new(&PackedHistory::pack(&history)));
        assert_eq!(outcome.report.validity, Validity::Valid);
        assert_eq!(outcome.report.anomalies, 0);
    }

    #[test]
    fn a_write_below_the_store_fence_is_stale_not_superseded() {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, true);
        b.acquire("w2", "L", "o2", 2, true);
        b.write("w2", "k", 2, "w2-0", true);
        b.write("w1", "k", 1, "w1-0", true);
        let history = b.build();
        let outcome = check(&Context::new(&PackedHistory::pack(&history)));
        assert_eq!(outcome.report.anomalies, 0);
    }

    #[test]
    fn warnings_do_not_fail_the_verdict_unless_strict() {
        let history = late_old_holder(true).build();
        let verdict = crate::check(&history);
        assert_eq!(verdict.validity, Validity::Valid);
        assert_eq!(verdict.warning_counts["superseded-write-accepted"], 1);
        assert!(
            verdict.anomaly_counts.is_empty(),
            "{:?}",
            verdict.anomaly_counts
        );
        let warning = verdict
            .anomalies
            .iter()
            .find(|anomaly| anomaly.class == CLASS)
            .expect("the warning is explained");
        assert_eq!(warning.severity, crate::Severity::Warning);
        assert!(
            verdict
                .summary_line()
                .ends_with("; warnings: 1 superseded-write-accepted"),
            "{}",
            verdict.summary_line()
        );
        let json = serde_json::to_string(&verdict).unwrap();
        assert!(json.contains("\"severity\":\"warning\""), "{json}");
        let strict = crate::check_with(
            &history,
            &crate::CheckOptions {
                strict: true,
                ..crate::CheckOptions::default()
            },
        );
        assert_eq!(strict.validity, Validity::Invalid);
        assert_eq!(strict.anomaly_counts["superseded-write-accepted"], 1);
        assert!(strict.warning_counts.is_empty());
    }
}
