//! One pass over the rows for every check that follows the lock's calls and its log:
//! `lock-reply-mismatch`, `expired-lease-renewed`, `stuck-lock` and the client-reply half of
//! `token-regression`.
//!
//! A pass over a million rows costs mostly the reading of the rows themselves; these checks
//! share it (run by the first of them to be asked, kept in the [`Context`]), each as its own
//! state machine.

use fencer_harness::{EventType, Op};

use crate::context::{Context, is_lock_log};
use crate::findings::Hits;
use crate::lock_contract::{RenewHit, RenewalScan, ReplyHit, ReplyScan};
use crate::stuck_lock::{Stuck, StuckScan};
use crate::token_regression::{AckedRegression, AckedTokens};

/// What the lock pass found, per check.
pub(crate) struct LockPass {
    /// `lock-reply-mismatch` (empty without a lock log).
    pub replies: Hits<ReplyHit>,
    /// `expired-lease-renewed` (empty without a lock log).
    pub renewals: Hits<RenewHit>,
    /// `stuck-lock`.
    pub stuck: Hits<Stuck>,
    /// `token-regression` by client replies, before the log's regressions excuse any.
    pub acked_regressions: Vec<AckedRegression>,
}

impl LockPass {
    /// Reads the rows once, feeding each check.
    pub fn run(ctx: &Context<'_>) -> LockPass {
        let logged = ctx.has_lock_log;
        let mut replies = ReplyScan::new(ctx);
        let mut renewals = RenewalScan::new();
        let mut stuck = StuckScan::new(ctx);
        let mut tokens = AckedTokens::new(ctx);
        // Lock calls in flight by process: the invoke and what the reply check noted.
        let mut open = ctx.per_process(None);
        for (position, ref row) in ctx.rows.iter().enumerate() {
            match row.kind {
                EventType::Nemesis => {
                    replies.nemesis(row);
                    stuck.nemesis(row);
                    continue;
                }
                EventType::Log => {
                    if logged && is_lock_log(row) {
                        replies.log(position, row);
                        renewals.log(position, row);
                    }
                    continue;
                }
                EventType::Notice => {
                    if row.f == Op::Renewed
                        && let (Some(lock), Some(owner)) = (row.lock, row.owner)
                    {
                        stuck.renewed_notice(position, row, lock, owner);
                    }
                    continue;
                }
                _ => {}
            }
            if !matches!(row.f, Op::Acquire | Op::Renew | Op::Release) {
                continue;
            }
            if row.f == Op::Acquire
                && let Some(lock) = row.lock
            {
                tokens.acquire(position, row, lock);
            }
            let (Some(lock), Some(owner)) = (row.lock, row.owner) else {
                continue;
            };
            if row.kind == EventType::Invoke {
                let sent = replies.invoke(row, lock, owner);
                stuck.invoke(row, lock, owner);
                open[row.process] = Some((position, sent));
                continue;
            }
            let Some((invoke, sent)) = open[row.process].take() else {
                continue;
            };
            if logged {
                replies.completion(ctx.rows, position, invoke, sent, (lock, owner));
            }
            stuck.completion(ctx, position, row, invoke, lock, owner);
        }
        LockPass {
            replies: replies.finish(ctx.rows),
            renewals: renewals.hits,
            stuck: stuck.finish(),
            acked_regressions: tokens.regressions,
        }
    }
}
