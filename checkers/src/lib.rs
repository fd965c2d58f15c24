//! fencer's checkers: pure functions from a recorded [`History`] to a [`Verdict`].
//!
//! One private module per anomaly family, each answering one question about the history:
//!
//! | class | question | severity | evidence |
//! |---|---|---|---|
//! | `stale-write-accepted` | did the store accept a write older than one it had accepted? | anomaly | store log, else client replies (an `ok`, or a read of a stale write whose reply was lost) |
//! | `foreign-release` | did a stale owner's renew or release touch another owner's lease? | anomaly | lock log, else client replies |
//! | `overlapping-leases` | were two leases on one lock valid at once? | anomaly | lock log, else client replies (a grant inside what the service promised the previous holder) |
//! | `token-regression` | did a grant carry a token not above an earlier grant's? | anomaly | lock log and client replies |
//! | `ack-mismatch` | did a write reply contradict what the store applied? | anomaly | store log only |
//! | `superseded-write-accepted` | did the store accept a write after the lock was granted to a newer token it had not seen? | warning | lock log recorded during the run (else acquire replies) + store log |
//! | `lost-update` | is an acknowledged increment missing from the final counter? (lock-counter) | anomaly | reads + final read, else store log |
//! | `duplicate-effect` | did one write id take effect twice? (lock-counter) | anomaly | store log, else client replies |
//! | `zombie-renewal` | did a renewal task renew after its worker released or finished? | anomaly | client calls |
//! | `stale-read` | did a read miss a write that completed before it began? | anomaly | store log, else client replies |
//! | `nonlinearizable-register` | do the register's reads and writes admit no linearization? | anomaly | store log (read-mapping), else a bounded search |
//! | `unfounded-rejection` | did the store refuse a write as stale without having accepted a higher token? | anomaly | store log, else client replies |
//! | `phantom-read` | did a read return a write nobody sent, one whose every send was refused, one the store never applied, or a sent write altered? | anomaly | client calls (+ store log) |
//! | `lock-reply-mismatch` | did a lock reply contradict the lock log: `ok` unapplied or with another token, `fail` applied, `busy` with no live lease? | anomaly | lock log + client replies |
//! | `expired-lease-renewed` | did the service renew a lease its log shows ended, while no newer one was live? | warning | lock log only |
//! | `stuck-lock` | did acquires stay busy for over a TTL plus a margin (one more TTL, at least 2 s) after the last lease surely ended, with no grant? | warning | client replies |
//! | `write-after-lost-notice` | did a worker write under a lease its lock client library had told it was lost, before its last call ended? | anomaly | client calls and notices |
//! | `stale-ownership-check` | did a library answer "held" after another owner, asking later, was granted the lock? | anomaly | client calls |
//! | `silent-lease-loss` | was a renewal of a held lease refused with the worker never told? | warning | client calls and notices |
//! | `fragile-renewal` | did a library wait half a TTL or more between a lease's answer and its next renewal? | warning | client calls + faults |
//! | `abandoned-lease` | was a lease renewed after its worker gave it up unreleased? | warning | client calls and notices |
//!
//! Anomalies fail the verdict. Warnings are reported (`warning_counts`, the summary line) and
//! fail it only under `strict`: fencing's documented limit, a contract breach that harmed
//! nobody (a revived lease no other holder competed with; with one, it is an overlap), and
//! liveness, which only a time bound can judge. A reply the contract or a log proves false is
//! an anomaly even when it is safe (a refusal, a busy answer): workers act on replies.
//!
//! Server logs (`type: log`) are ground truth and preferred; histories without them (a user's
//! own recording) fall back to what clients were told, and a checker that cannot work from
//! replies alone is reported as skipped rather than guessed.
//!
//! An `info` call may or may not have been applied (Jepsen's indeterminate operation) and is
//! never taken as `ok` or `fail`. Working from replies, a checker judges what clients were
//! told and what later calls observed; an `info` call acknowledged nothing, so it matters only
//! through what another event shows it did: a read that returned its write (it was applied), a
//! grant inside a lease it may have ended. One that no recorded event depends on is consistent
//! with a correct backend (which refused it, or applied it harmlessly) and leaves the checker
//! valid. A checker is `unknown` only when it cannot settle what an event means (a read naming
//! a value two writes sent, an unreadable log entry, a search out of time), and its report
//! then names those events ([`CheckerReport::inconclusive`]).
//!
//! Every checker is a single pass over the events with per-key, per-lock or per-process state,
//! so checking is O(n log n); the index that explanations need is built once, and only when
//! there is something to explain. The passes read the history in its checking form
//! ([`PackedHistory`]: fixed-size rows, strings as interned numbers), which is what lets a
//! million events be checked in well under a second; explanations unpack the few events they
//! cite.

mod abandoned_lease;
mod ack_mismatch;
mod context;
pub mod coverage;
mod explain;
mod findings;
mod foreign_release;
mod fragile_renewal;
mod index;
mod later_grants;
mod lease_windows;
mod linearizable;
mod lock_contract;
mod lock_pass;
mod lost_update;
mod numbering;
mod options;
mod overlapping_leases;
mod phantom_read;
mod process_roles;
mod search;
mod silent_loss;
mod stale_check;
mod stale_read;
mod stale_write;
pub mod story;
mod stuck_lock;
mod superseded;
#[cfg(test)]
mod testkit;
mod token_regression;
mod told_lost;
mod unfounded_rejection;
mod verdict;
mod versions;
mod zombie_renewal;

use std::collections::BTreeMap;

use fencer_harness::{EventType, History, Op, PackedHistory};

use crate::context::Context;
use crate::findings::Outcome;
pub use crate::options::{CheckOptions, UnknownWorkload, Workload};
pub use crate::verdict::{
    Anomaly, AnomalyClass, CheckerReport, Inconclusive, MAX_ANOMALIES_PER_CLASS,
    MAX_INCONCLUSIVE_EVENTS, Severity, UnknownAnomalyClass, Validity, Verdict,
};

/// Runs every checker that applies to a `fenced-register` history, non-strict: the same as
/// [`check_with`] with [`CheckOptions::default`].
pub fn check(history: &History) -> Verdict {
    check_with(history, &CheckOptions::default())
}

/// Runs every checker that applies to `options.workload` on `history` and combines their
/// results: the worst validity of the checkers that ran wins; a skipped checker (its evidence
/// is missing from the history) is listed in [`Verdict::checkers`] but does not make the
/// verdict unknown; warnings are counted apart and fail the verdict only under
/// `options.strict`.
pub fn check_with(history: &History, options: &CheckOptions) -> Verdict {
    check_packed(&PackedHistory::pack(history), options)
}

/// As [`check_with`], on a history already in checking form (as
/// [`PackedHistory::read_jsonl_file`] reads a stored one, without building its events).
pub fn check_packed(history: &PackedHistory, options: &CheckOptions) -> Verdict {
    check_classes(history, options, &AnomalyClass::ALL)
}

/// As [`check`], running only the checkers for `classes` (in [`AnomalyClass::ALL`] order,
/// whatever the order given): for a CLI `--checker` filter or a focused test.
pub fn check_only(history: &History, classes: &[AnomalyClass]) -> Verdict {
    check_classes(
        &PackedHistory::pack(history),
        &CheckOptions::default(),
        classes,
    )
}

fn check_classes(
    history: &PackedHistory,
    options: &CheckOptions,
    classes: &[AnomalyClass],
) -> Verdict {
    let ctx = Context::with_options(history, *options);
    let mut verdict = Verdict {
        validity: Validity::Valid,
        events: history.rows().len() as u64,
        anomaly_counts: BTreeMap::new(),
        warning_counts: BTreeMap::new(),
        anomalies: Vec::new(),
        checkers: Vec::new(),
        unknown_because: None,
        // An empty history is unknown for that reason already.
        no_lease_granted: !history.rows().is_empty()
            && !history
                .views()
                .any(|event| event.f == Op::Acquire && event.kind == EventType::Ok),
    };
    if history.rows().is_empty() {
        verdict.validity = Validity::Unknown;
        verdict.unknown_because = Some(EMPTY_HISTORY.to_string());
    }
    for class in AnomalyClass::ALL {
        if !classes.contains(&class) || !applies(class, options.workload) {
            continue;
        }
        let mut outcome = run(&ctx, class);
        if is_warning(class) && !options.strict {
            outcome = outcome.into_warnings();
        }
        let Outcome { report, anomalies } = outcome;
        debug_assert_eq!(report.checker, class);
        debug_assert!(anomalies.len() <= MAX_ANOMALIES_PER_CLASS);
        let counts = match report.severity {
            Severity::Failure => {
                if report.skipped.is_none() {
                    verdict.validity = verdict.validity.worst(report.validity);
                }
                &mut verdict.anomaly_counts
            }
            Severity::Warning => &mut verdict.warning_counts,
        };
        if report.anomalies > 0 {
            counts.insert(class.name().to_string(), report.anomalies);
        }
        verdict.anomalies.extend(anomalies);
        verdict.checkers.push(report);
    }
    verdict
}

/// Why a history with no events is judged unknown: no call was recorded, so a checker finding
/// nothing wrong means nothing (a run that never started, a recorder that wrote nothing, an
/// empty file).
const EMPTY_HISTORY: &str = "the history holds no events: nothing was recorded, so nothing \
                             can be judged";

/// Classes reported as warnings unless the check is strict: the documented limit of fencing,
/// a contract breach that harmed nobody, and liveness.
fn is_warning(class: AnomalyClass) -> bool {
    matches!(
        class,
        AnomalyClass::SupersededWriteAccepted
            | AnomalyClass::ExpiredLeaseRenewed
            | AnomalyClass::StuckLock
            | AnomalyClass::SilentLeaseLoss
            | AnomalyClass::FragileRenewal
            | AnomalyClass::AbandonedLease
    )
}

/// Whether `class` means anything for histories of `workload`: the store checkers need a
/// store, the counter checkers a counter, register linearizability a register whose reads name
/// the write they saw.
fn applies(class: AnomalyClass, workload: Workload) -> bool {
    match class {
        AnomalyClass::ForeignRelease
        | AnomalyClass::OverlappingLeases
        | AnomalyClass::TokenRegression
        | AnomalyClass::ZombieRenewal
        | AnomalyClass::LockReplyMismatch
        | AnomalyClass::ExpiredLeaseRenewed
        | AnomalyClass::StuckLock
        | AnomalyClass::StaleOwnershipCheck
        | AnomalyClass::SilentLeaseLoss
        | AnomalyClass::FragileRenewal
        | AnomalyClass::AbandonedLease => true,
        AnomalyClass::StaleWriteAccepted
        | AnomalyClass::SupersededWriteAccepted
        | AnomalyClass::AckMismatch
        | AnomalyClass::StaleRead
        | AnomalyClass::UnfoundedRejection
        | AnomalyClass::PhantomRead
        | AnomalyClass::WriteAfterLostNotice => workload != Workload::Mutex,
        AnomalyClass::LostUpdate | AnomalyClass::DuplicateEffect => {
            workload == Workload::LockCounter
        }
        AnomalyClass::NonlinearizableRegister => workload == Workload::FencedRegister,
    }
}

fn run(ctx: &Context<'_>, class: AnomalyClass) -> Outcome {
    match class {
        AnomalyClass::StaleWriteAccepted => stale_write::check(ctx),
        AnomalyClass::ForeignRelease => foreign_release::check(ctx),
        AnomalyClass::OverlappingLeases => overlapping_leases::check(ctx),
        AnomalyClass::TokenRegression => token_regression::check(ctx),
        AnomalyClass::AckMismatch => ack_mismatch::check(ctx),
        AnomalyClass::SupersededWriteAccepted => superseded::check(ctx),
        AnomalyClass::LostUpdate => lost_update::check_lost(ctx),
        AnomalyClass::DuplicateEffect => lost_update::check_duplicates(ctx),
        AnomalyClass::ZombieRenewal => zombie_renewal::check(ctx),
        AnomalyClass::StaleRead => stale_read::check(ctx),
        AnomalyClass::NonlinearizableRegister => linearizable::check(ctx),
        AnomalyClass::UnfoundedRejection => unfounded_rejection::check(ctx),
        AnomalyClass::PhantomRead => phantom_read::check(ctx),
        AnomalyClass::LockReplyMismatch => lock_contract::check_replies(ctx),
        AnomalyClass::ExpiredLeaseRenewed => lock_contract::check_renewals(ctx),
        AnomalyClass::StuckLock => stuck_lock::check(ctx),
        AnomalyClass::WriteAfterLostNotice => told_lost::check(ctx),
        AnomalyClass::StaleOwnershipCheck => stale_check::check(ctx),
        AnomalyClass::SilentLeaseLoss => silent_loss::check(ctx),
        AnomalyClass::FragileRenewal => fragile_renewal::check(ctx),
        AnomalyClass::AbandonedLease => abandoned_lease::check(ctx),
    }
}

#[cfg(test)]
mod tests {
    use fencer_harness::{EventType, Op};

    use super::*;
    use crate::testkit::Builder;

    /// The stale holder, with every log: w1 is paused past its TTL, w3 takes over, the
    /// store (unfenced) applies w1's late write and acknowledges it.
    fn unfenced_store_after_pause() -> Builder {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, true);
        b.write("w1", "k", 1, "w1-0", true);
        b.at(0.5);
        b.pause("w1", 12.0);
        b.at(10.7);
        b.acquire("w3", "L", "o3", 2, true);
        b.write("w3", "k", 2, "w3-0", true);
        b.at(12.5);
        b.resume("w1");
        b.write("w1", "k", 1, "w1-1", true);
        b
    }

    /// A mutex history whose lock log shows w1's renew at 12 s reviving its lease that expired
    /// at 10 s, with nobody else holding it.
    fn renewed_after_expiry() -> Builder {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, true);
        b.at(12.0);
        b.invoke_lock_call("w1:renew", Op::Renew, "L", "o1");
        b.lock_log(Op::Renew, "L", "o1", "o1", 1, 10.0);
        b.ok("w1:renew");
        b
    }

    /// A mutex history without a lock log: after w1's release at 1 s, w2 is answered busy for
    /// 40 s.
    fn stuck_after_release() -> Builder {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, false);
        b.at(1.0);
        b.lock_call("w1", Op::Release, "L", "o1", EventType::Ok);
        for busy_at in [10.0, 25.0, 41.0] {
            b.at(busy_at);
            b.busy("w2", "L", "o2");
        }
        b
    }

    #[test]
    fn liveness_and_expired_renewals_are_warnings_that_fail_only_a_strict_check() {
        for (history, class) in [
            (renewed_after_expiry().build(), "expired-lease-renewed"),
            (stuck_after_release().build(), "stuck-lock"),
        ] {
            let judged = |strict| {
                check_with(
                    &history,
                    &CheckOptions {
                        workload: Workload::Mutex,
                        strict,
                        ..CheckOptions::default()
                    },
                )
            };
            let lenient = judged(false);
            assert_eq!(
                lenient.validity,
                Validity::Valid,
                "{}",
                lenient.summary_line()
            );
            assert!(
                lenient.anomaly_counts.is_empty(),
                "{}",
                lenient.summary_line()
            );
            assert_eq!(lenient.warning_counts.get(class), Some(&1), "{class}");
            let strict = judged(true);
            assert_eq!(
                strict.validity,
                Validity::Invalid,
                "{}",
                strict.summary_line()
            );
            assert_eq!(strict.anomaly_counts.get(class), Some(&1), "{class}");
        }
    }

    #[test]
    fn an_empty_history_is_unknown_and_says_why() {
        let verdict = check(&History::default());
        assert_eq!(verdict.validity, Validity::Unknown);
        let summary = verdict.summary_line();
        assert!(
            summary.starts_with(
                "unknown: 0 anomalies in 0 events, inconclusive: the history holds no events: \
                 nothing was recorded, so nothing can be judged"
            ),
            "{summary}"
        );
        let json = serde_json::to_value(&verdict).unwrap();
        assert_eq!(json["unknown_because"], EMPTY_HISTORY);
        // One recorded call is something to judge.
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, false);
        let verdict = check(&b.build());
        assert_eq!(verdict.validity, Validity::Valid);
        assert!(
            !serde_json::to_string(&verdict)
                .unwrap()
                .contains("unknown_because")
        );
    }

    #[test]
    fn a_valid_history_in_which_no_acquire_was_granted_says_it_tested_nothing_under_a_lease() {
        let mut b = Builder::new();
        b.busy("w1", "L", "o1");
        b.at(1.0);
        b.busy("w2", "L", "o2");
        let verdict = check(&b.build());
        assert_eq!(verdict.validity, Validity::Valid);
        assert!(verdict.no_lease_granted);
        let summary = verdict.summary_line();
        assert!(
            summary.contains(
                "but no acquire was answered as granted: no worker was told it held a lease"
            ),
            "{summary}"
        );
        let json = serde_json::to_value(&verdict).unwrap();
        assert_eq!(json["no_lease_granted"], true);
        // One grant is a lease to judge: no remark, and nothing added to the JSON.
        b.acquire("w1", "L", "o3", 1, false);
        let verdict = check(&b.build());
        assert!(!verdict.no_lease_granted);
        assert!(!verdict.summary_line().contains("no acquire was answered"));
        assert!(
            !serde_json::to_string(&verdict)
                .unwrap()
                .contains("no_lease_granted")
        );
    }

    #[test]
    fn unfenced_store_after_a_pause_is_invalid_with_a_readable_summary() {
        let verdict = check(&unfenced_store_after_pause().build());
        assert_eq!(verdict.validity, Validity::Invalid);
        assert_eq!(verdict.summary_line(), "invalid: 1 stale-write-accepted");
        assert_eq!(
            verdict.anomaly_counts,
            BTreeMap::from([("stale-write-accepted".to_string(), 1)])
        );
        // Every checker but the lock-counter's two runs on a fenced-register history.
        assert_eq!(verdict.checkers.len(), AnomalyClass::ALL.len() - 2);
        assert!(
            verdict
                .checkers
                .iter()
                .all(|report| report.skipped.is_none())
        );
        let text = &verdict.anomalies[0].explanation;
        for needle in [
            "w1",
            "token 1",
            "token 2",
            "w3-0",
            "paused 12.000s",
            "store order",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in: {text}");
        }
    }

    #[test]
    fn skipped_checkers_do_not_make_a_clean_history_unknown() {
        let mut b = Builder::new();
        b.acquire("w1", "L", "o1", 1, false);
        b.write("w1", "k", 1, "w1-0", false);
        b.invoke_lock_call("w1", Op::Release, "L", "o1");
        b.ok("w1");
        let verdict = check(&b.build());
        assert_eq!(verdict.validity, Validity::Valid);
        let skipped: Vec<AnomalyClass> = verdict
            .checkers
            .iter()
            .filter(|report| report.skipped.is_some())
            .map(|report| report.checker)
            .collect();
        assert_eq!(
            skipped,
            vec![
                AnomalyClass::AckMismatch,
                AnomalyClass::SupersededWriteAccepted,
                AnomalyClass::LockReplyMismatch,
                AnomalyClass::ExpiredLeaseRenewed,
            ]
        );
        assert_eq!(
            verdict.summary_line(),
            "valid: 0 anomalies in 6 events (skipped: ack-mismatch, superseded-write-accepted, \
             lock-reply-mismatch, expired-lease-renewed)"
        );
        let evidence: Vec<&str> = verdict
            .checkers
            .iter()
            .map(|report| report.evidence.as_str())
            .collect();
        assert_eq!(
            evidence,
            vec![
                "client replies",
                "client replies",
                "client replies",
                "client replies",
                "none",
                "none",
                "client calls",
                "client replies",
                "client replies (linearizability search)",
                "client replies",
                "client calls",
                "none",
                "none",
                "client replies",
                "client calls and notices",
                "client calls",
                "client calls and notices",
                "client calls",
                "client calls and notices",
            ]
        );
    }

    #[test]
    fn an_inconclusive_checker_makes_the_verdict_unknown_and_names_the_events() {
        let mut b = Builder::new();
        b.write("w2", "k", 2, "w2-0", true);
        // A store log entry without a token cannot be ordered against the others.
        b.log("store", Op::Write, |e| e.key = Some("k".into()));
        let verdict = check(&b.build());
        assert_eq!(verdict.validity, Validity::Unknown);
        assert!(
            verdict.summary_line().starts_with(
                "unknown: 0 anomalies in 4 events, inconclusive: stale-write-accepted (1 store \
                 log entry lacks a key or token: event 3)"
            ),
            "{}",
            verdict.summary_line()
        );
        let json = serde_json::to_string(&verdict).unwrap();
        assert!(
            json.contains(
                r#""inconclusive":{"reason":"1 store log entry lacks a key or token","events":[3],"count":1}"#
            ),
            "{json}"
        );
    }

    #[test]
    fn stored_anomalies_are_capped_per_class_but_counts_are_exact() {
        let mut b = Builder::new();
        b.applied("k", 1_000_000, "top");
        for n in 0..MAX_ANOMALIES_PER_CLASS + 500 {
            b.applied("k", n as u64, &format!("stale-{n}"));
        }
        let verdict = check(&b.build());
        assert_eq!(verdict.anomaly_counts["stale-write-accepted"], 1500);
        assert_eq!(verdict.checkers[0].anomalies, 1500);
        assert_eq!(verdict.anomalies.len(), MAX_ANOMALIES_PER_CLASS);
        assert_eq!(
            verdict.summary_line(),
            "invalid: 1500 stale-write-accepted (skipped: superseded-write-accepted, \
             lock-reply-mismatch, expired-lease-renewed)"
        );
    }

    #[test]
    fn check_only_runs_the_named_checkers_in_class_order() {
        let history = unfenced_store_after_pause().build();
        let verdict = check_only(
            &history,
            &[AnomalyClass::AckMismatch, AnomalyClass::TokenRegression],
        );
        let ran: Vec<AnomalyClass> = verdict.checkers.iter().map(|r| r.checker).collect();
        assert_eq!(
            ran,
            vec![AnomalyClass::TokenRegression, AnomalyClass::AckMismatch]
        );
        assert_eq!(verdict.validity, Validity::Valid);
    }

    #[test]
    fn verdict_of_a_real_check_round_trips_through_json() {
        let verdict = check(&unfenced_store_after_pause().build());
        let json = serde_json::to_string(&verdict).unwrap();
        let back: Verdict = serde_json::from_str(&json).unwrap();
        assert_eq!(back, verdict);
        assert_eq!(check(&unfenced_store_after_pause().build()), verdict);
    }

    /// A long, busy history: 8 workers take turns on lock L with growing tokens and write with
    /// them, every call logged; every `stale_every` rounds a worker is paused and its stale
    /// write is applied anyway.
    fn busy_history(rounds: usize, stale_every: usize) -> History {
        let mut b = Builder::new();
        let mut token = 0;
        for round in 0..rounds {
            let worker = format!("w{}", round % 8);
            let owner = format!("{round:032x}");
            token += 1;
            b.acquire(&worker, "L", &owner, token, true);
            b.write(&worker, "k", token, &format!("{worker}-{round}"), true);
            b.invoke_lock_call(&worker, Op::Release, "L", &owner);
            b.lock_log(Op::Release, "L", &owner, &owner, token, 0.0);
            b.complete(&worker, EventType::Ok, |_| {});
            if round % stale_every == stale_every - 1 {
                b.pause(&worker, 1.0);
                // The worker's token from its previous turn, 8 rounds ago.
                b.write(
                    &worker,
                    "k",
                    token - 8,
                    &format!("{worker}-{round}-late"),
                    true,
                );
            }
        }
        b.build()
    }

    #[test]
    fn a_busy_history_is_checked_and_explained() {
        let history = busy_history(3000, 1000);
        let verdict = check(&history);
        assert_eq!(verdict.anomaly_counts["stale-write-accepted"], 3);
        assert_eq!(
            verdict.anomaly_counts.len(),
            1,
            "{:?}",
            verdict.anomaly_counts
        );
        let text = &verdict.anomalies[2].explanation;
        assert!(
            text.starts_with("w7 acquired lock L with token 2992"),
            "{text}"
        );
        assert!(text.contains("was paused 1.000s"), "{text}");
        assert!(
            text.contains("sent write w7-2999-late with token 2992"),
            "{text}"
        );
    }

    /// A million events: every checker finishes and the counts stay exact beyond the stored
    /// cap. How long it takes is measured by the `check` criterion bench (`cargo bench --bench
    /// check`), not asserted here: a timed test fails on a busy CI machine.
    #[test]
    #[ignore = "slow in debug; CI runs it with --release -- --ignored"]
    fn a_million_events_are_checked_with_exact_counts() {
        // Every 40th round stale: over 2,500 anomalies, more than the stored cap.
        let history = busy_history(1_000_000 / 9, 40);
        assert!(history.events.len() >= 1_000_000);
        let verdict = check(&history);
        assert_eq!(verdict.validity, Validity::Invalid);
        assert_eq!(
            verdict.anomaly_counts["stale-write-accepted"],
            1_000_000 / 9 / 40
        );
        assert_eq!(
            verdict.anomaly_counts.len(),
            1,
            "{:?}",
            verdict.anomaly_counts
        );
    }
}
