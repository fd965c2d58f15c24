//! A lease as fencer's reference client keeps it: what the client believes about it, and the
//! watchdog that renews it.
//!
//! The belief is what the client's ownership check starts from: a lease is usable only while
//! the last confirmation (grant or renew, timed from when its *request was sent*) plus the TTL
//! lies ahead on the worker's own clock, and only while no renewal was refused. A renew that
//! timed out may well have been applied; the client still cannot *confirm* it holds the lease,
//! and once a whole TTL passed with nothing confirmed it tells its worker the lease is lost.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencer_harness::task::JoinHandle;
use fencer_harness::{CallError, LibraryContext, LockClient, Owned, OwnerToken};
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use crate::UnknownName;

/// What a worker does when its lock client says the lease is lost or cannot confirm it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RenewFailurePolicy {
    /// Start no more protected work until the lease is re-acquired: a worker that cannot
    /// confirm its lease acts as if it had lost it.
    #[default]
    Stop,
    /// Keep writing regardless — shows why the policy matters (and what fencing still saves).
    Continue,
}

impl RenewFailurePolicy {
    /// The CLI name.
    pub fn name(self) -> &'static str {
        match self {
            RenewFailurePolicy::Stop => "stop",
            RenewFailurePolicy::Continue => "continue",
        }
    }
}

impl std::str::FromStr for RenewFailurePolicy {
    type Err = UnknownName;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "stop" => Ok(RenewFailurePolicy::Stop),
            "continue" => Ok(RenewFailurePolicy::Continue),
            other => Err(UnknownName {
                setting: "renew-failure policy",
                found: other.to_string(),
                expected: "stop or continue",
            }),
        }
    }
}

/// Where the lease stands, as far as the client can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseStatus {
    /// Confirmed held until `valid_until_local_ns` on the worker's clock.
    Held {
        /// Send time of the last confirmed grant or renew, plus the TTL.
        valid_until_local_ns: i64,
    },
    /// A renew went unanswered: it may or may not have been applied; the lease cannot be
    /// claimed past `valid_until_local_ns`, the validity the last confirmation gave.
    Unconfirmed {
        /// Send time of the last confirmed grant or renew, plus the TTL.
        valid_until_local_ns: i64,
    },
    /// A renew was refused, or nothing was confirmed for a whole TTL: the lease is gone.
    Lost,
}

/// The client's belief about one lease, shared by its watchdog and its ownership check.
#[derive(Debug)]
pub struct LeaseBelief {
    status: Mutex<LeaseStatus>,
    /// Set once the worker was told the lease is lost: it is told once.
    told_lost: AtomicBool,
}

impl LeaseBelief {
    /// A lease confirmed held until `valid_until_local_ns` on its worker's clock.
    pub fn new(valid_until_local_ns: i64) -> LeaseBelief {
        LeaseBelief {
            status: Mutex::new(LeaseStatus::Held {
                valid_until_local_ns,
            }),
            told_lost: AtomicBool::new(false),
        }
    }

    fn set(&self, status: LeaseStatus) {
        *self.status.lock().unwrap_or_else(|p| p.into_inner()) = status;
    }

    /// Current status.
    pub fn status(&self) -> LeaseStatus {
        *self.status.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The lease was confirmed by a grant or renew sent at `sent_local_ns`: it is held until
    /// then plus `ttl_ns`, unless it was already lost (a late confirmation of a lease the
    /// client gave up does not bring it back).
    pub fn confirm(&self, sent_local_ns: i64, ttl_ns: i64) {
        let mut status = self.status.lock().unwrap_or_else(|p| p.into_inner());
        if *status != LeaseStatus::Lost {
            *status = LeaseStatus::Held {
                valid_until_local_ns: sent_local_ns.saturating_add(ttl_ns),
            };
        }
    }

    /// A renew went unanswered.
    pub fn unconfirm(&self) {
        let mut status = self.status.lock().unwrap_or_else(|p| p.into_inner());
        if let LeaseStatus::Held {
            valid_until_local_ns,
        } = *status
        {
            *status = LeaseStatus::Unconfirmed {
                valid_until_local_ns,
            };
        }
    }

    /// The lease is gone.
    pub fn lose(&self) {
        self.set(LeaseStatus::Lost);
    }

    /// True if the lease may be claimed at local time `now_local_ns`: confirmed, and its
    /// validity still ahead.
    pub fn usable_at(&self, now_local_ns: i64) -> bool {
        matches!(self.status(), LeaseStatus::Held { valid_until_local_ns } if now_local_ns < valid_until_local_ns)
    }

    /// True once the lease can no longer be claimed at local time `now_local_ns` whatever
    /// comes back later: refused, or past the validity of its last confirmation (a renewal
    /// sent now would reach a lease the service has let expire).
    pub fn ran_out_at(&self, now_local_ns: i64) -> bool {
        match self.status() {
            LeaseStatus::Lost => true,
            LeaseStatus::Held {
                valid_until_local_ns,
            }
            | LeaseStatus::Unconfirmed {
                valid_until_local_ns,
            } => now_local_ns >= valid_until_local_ns,
        }
    }

    /// True the first time it is called: whoever tells the worker the lease is lost asks
    /// this first, so it is told once.
    pub fn first_to_tell(&self) -> bool {
        !self.told_lost.swap(true, Ordering::Relaxed)
    }
}

/// How a watchdog renews: its TTL and period, and whether it tells its worker of a loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WatchdogRules {
    /// The TTL asked for on every renew.
    pub ttl: Duration,
    /// The renewal period.
    pub every: Duration,
    /// Refusals are logged and ignored: the worker is never told, and renewing goes on.
    pub swallow_failures: bool,
}

/// A running watchdog. Dropping it aborts the task, so a renewal loop tied to a lease can
/// never outlive it; [`Watchdog::stop`] ends it and waits until it is really gone.
pub struct Watchdog {
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// Starts renewing `owner`'s lease as `client` under `rules`, in a task of the worker's
    /// process (it freezes with the worker), keeping `belief` up to date and telling the
    /// worker through `cx` when the lease is lost.
    pub fn start(
        cx: &LibraryContext,
        client: LockClient,
        owner: OwnerToken,
        rules: WatchdogRules,
        belief: Arc<LeaseBelief>,
    ) -> Watchdog {
        let (stop_tx, stop_rx) = oneshot::channel();
        let task = cx.spawn(watch(cx.clone(), client, owner, rules, belief, stop_rx));
        Watchdog {
            stop: Some(stop_tx),
            task: Some(task),
        }
    }

    /// A handle that tells whether the task still runs (its process name is taken until it
    /// ends) and can stop it.
    pub fn abort_handle(&self) -> fencer_harness::task::AbortHandle {
        self.task
            .as_ref()
            .expect("a watchdog has its task until stopped")
            .abort_handle()
    }

    /// True until the task has ended (refused, stopped or aborted): while it runs, its
    /// process name is taken.
    pub fn is_running(&self) -> bool {
        self.task.as_ref().is_some_and(|task| !task.is_finished())
    }

    /// Stops the task and waits for it to end.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            // The task cannot panic (it only records calls); an abort is also an end.
            let _ = task.await;
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// The watchdog's loop: every `rules.every`, renew. A refusal ends the lease. So does a renewal
/// sent once the validity of the last confirmation had run out on the worker's clock, whatever
/// its answer: even one the service confirms cannot vouch for the time in between, when another
/// owner may have held the lock. Each tells the worker and ends the loop, unless failures are
/// swallowed. The renewal is sent all the same, as a watchdog waking from a pause sends it:
/// the service must refuse it if the lease is gone.
async fn watch(
    cx: LibraryContext,
    client: LockClient,
    owner: OwnerToken,
    rules: WatchdogRules,
    belief: Arc<LeaseBelief>,
    mut stop: oneshot::Receiver<()>,
) {
    let ttl_ns = i64::try_from(rules.ttl.as_nanos()).unwrap_or(i64::MAX);
    let lock = Arc::clone(&cx.settings().lock);
    loop {
        tokio::select! {
            biased;
            _ = &mut stop => return,
            () = fencer_harness::time::sleep(rules.every) => {}
        }
        let sent_local_ns = cx.clock().now_ns();
        let ran_out = belief.ran_out_at(sent_local_ns);
        let reply = tokio::select! {
            biased;
            // Dropping the call records it as `info: cancelled`.
            _ = &mut stop => return,
            reply = client.renew(&lock, owner, rules.ttl) => reply,
        };
        let lost = match reply {
            _ if rules.swallow_failures => {
                if let Ok(Owned::Done) = reply {
                    belief.confirm(sent_local_ns, ttl_ns);
                }
                None
            }
            Ok(Owned::NotOwner) | Err(CallError::NotApplied(_)) => Some("renewal refused"),
            Ok(Owned::Done) | Err(CallError::Unknown(_)) if ran_out => {
                Some("no renewal confirmed for a whole TTL")
            }
            Ok(Owned::Done) => {
                belief.confirm(sent_local_ns, ttl_ns);
                None
            }
            // Maybe applied, maybe not: keep trying, but the lease is unconfirmed until a
            // later renew succeeds.
            Err(CallError::Unknown(_)) => {
                belief.unconfirm();
                None
            }
        };
        if let Some(why) = lost {
            belief.lose();
            tell_lost(&cx, &belief, owner, why);
            return;
        }
    }
}

/// Tells the worker the lease of `owner` is lost, `why`, unless it was told already.
pub(crate) fn tell_lost(cx: &LibraryContext, belief: &LeaseBelief, owner: OwnerToken, why: &str) {
    if belief.first_to_tell() {
        cx.notify_lost(owner, why);
    }
}

#[cfg(test)]
mod tests {
    use fencer_harness::{EventType, LockService, Op, WorkerFault};

    use super::*;
    use crate::testkit::{FakeLock, MS, Rig, S, config, events, simulate, sleep_ns, times};

    const OWNER: OwnerToken = OwnerToken(0xfeed);

    /// Renews `OWNER`'s lease every 3 s with a 10 s TTL, granted at local time 0.
    fn start(rig: &Rig, lock: FakeLock, swallow_failures: bool) -> (Watchdog, Arc<LeaseBelief>) {
        let lock: Arc<dyn LockService> = Arc::new(lock);
        let cx = rig.context(&config(10 * S, 3 * S), Arc::clone(&lock));
        let belief = Arc::new(LeaseBelief::new(10 * S as i64));
        let rules = WatchdogRules {
            ttl: Duration::from_secs(10),
            every: Duration::from_secs(3),
            swallow_failures,
        };
        let watchdog = Watchdog::start(
            &cx,
            rig.renew_client(lock),
            OWNER,
            rules,
            Arc::clone(&belief),
        );
        (watchdog, belief)
    }

    fn held_until(valid_until_local_ns: u64) -> LeaseStatus {
        LeaseStatus::Held {
            valid_until_local_ns: valid_until_local_ns as i64,
        }
    }

    #[test]
    fn a_lease_is_usable_only_while_confirmed_and_before_its_validity_ends() {
        let belief = LeaseBelief::new(100);
        assert!(belief.usable_at(99));
        assert!(!belief.usable_at(100));
        assert!(!belief.ran_out_at(99));
        assert!(
            belief.ran_out_at(100),
            "past its validity, confirmed or not"
        );
        belief.unconfirm();
        assert!(!belief.usable_at(0));
        assert!(!belief.ran_out_at(99), "unconfirmed, not yet run out");
        belief.confirm(50, 100);
        assert_eq!(belief.status(), held_until(150));
        belief.lose();
        assert!(!belief.usable_at(0));
        assert!(belief.ran_out_at(0));
        belief.confirm(60, 100);
        assert_eq!(
            belief.status(),
            LeaseStatus::Lost,
            "a lost lease stays lost"
        );
        assert!(belief.first_to_tell());
        assert!(!belief.first_to_tell(), "the worker is told once");
    }

    #[test]
    fn the_lease_is_renewed_every_period_with_its_owner_and_ttl() {
        let (history, status) = simulate(async {
            let rig = Rig::new(0);
            let (watchdog, belief) = start(&rig, FakeLock::held_by(OWNER), false);
            assert_eq!(belief.status(), held_until(10 * S), "from the grant");
            sleep_ns(10 * S).await;
            let status = belief.status();
            watchdog.stop().await;
            (rig.history(), status)
        });
        let renews = events(&history, "w0:renew", EventType::Invoke, Op::Renew);
        assert_eq!(times(&renews), [3 * S, 6 * S, 9 * S]);
        for renew in &renews {
            assert_eq!(renew.lock.as_deref(), Some("lock-1"));
            assert_eq!(renew.owner, Some(OWNER.to_string()));
            assert_eq!(renew.ttl_ns, Some(10 * S));
        }
        assert_eq!(status, held_until(19 * S));
    }

    #[test]
    fn a_confirmed_renew_extends_the_lease_from_when_it_was_sent() {
        let status = simulate(async {
            let rig = Rig::new(100 * MS);
            let (_watchdog, belief) = start(&rig, FakeLock::held_by(OWNER), false);
            sleep_ns(4 * S).await;
            let renewed = events(&rig.history(), "w0:renew", EventType::Ok, Op::Renew)
                .iter()
                .map(|event| event.time_ns)
                .collect::<Vec<_>>();
            assert_eq!(renewed, [3_200 * MS], "sent at 3 s, answered 0.2 s later");
            belief.status()
        });
        assert_eq!(status, held_until(13 * S));
    }

    #[test]
    fn unanswered_renewals_leave_the_lease_unconfirmed_until_its_validity_ends_then_lost() {
        let (history, unconfirmed, lost) = simulate(async {
            let rig = Rig::new(0);
            rig.faults()
                .start(WorkerFault::LoseReplies(Op::Renew), u64::MAX);
            let (_watchdog, belief) = start(&rig, FakeLock::held_by(OWNER), false);
            sleep_ns(4_500 * MS).await;
            let unconfirmed = belief.status();
            sleep_ns(10 * S).await;
            (rig.history(), unconfirmed, belief.status())
        });
        // Sent at 3 s, 7 s and 11 s, each unanswered after the 1 s call timeout; the last was
        // sent past the grant's validity (10 s), so once it too goes unanswered the watchdog
        // says the lease is lost.
        let unanswered = events(&history, "w0:renew", EventType::Info, Op::Renew);
        assert_eq!(times(&unanswered), [4 * S, 8 * S, 12 * S]);
        assert_eq!(
            unconfirmed,
            LeaseStatus::Unconfirmed {
                valid_until_local_ns: 10 * S as i64
            }
        );
        assert_eq!(lost, LeaseStatus::Lost);
        let notices = events(&history, "w0", EventType::Notice, Op::Lost);
        assert_eq!(times(&notices), [12 * S]);
        assert_eq!(
            notices[0].error.as_deref(),
            Some("no renewal confirmed for a whole TTL")
        );
        assert_eq!(notices[0].owner, Some(OWNER.to_string()));
    }

    #[test]
    fn an_answered_renew_after_an_unanswered_one_confirms_the_lease_again() {
        let confirmed = simulate(async {
            let rig = Rig::new(0);
            rig.faults()
                .start(WorkerFault::LoseReplies(Op::Renew), 5 * S);
            let (_watchdog, belief) = start(&rig, FakeLock::held_by(OWNER), false);
            sleep_ns(8 * S).await;
            belief.status()
        });
        // 3 s unanswered (at 4 s), 7 s answered: valid until 17 s.
        assert_eq!(confirmed, held_until(17 * S));
    }

    #[test]
    fn a_refused_renew_marks_the_lease_lost_tells_the_worker_and_ends_the_renewal() {
        for refusal in [
            Ok(Owned::NotOwner),
            Err(CallError::NotApplied("refused".into())),
        ] {
            let (history, status) = simulate(async {
                let rig = Rig::new(0);
                let lock = FakeLock::held_by(OWNER).renews_answer([refusal]);
                let (watchdog, belief) = start(&rig, lock, false);
                sleep_ns(60 * S).await;
                let status = belief.status();
                drop(watchdog);
                (rig.history(), status)
            });
            let renews = events(&history, "w0:renew", EventType::Invoke, Op::Renew);
            assert_eq!(times(&renews), [3 * S], "no renew after the refusal");
            assert_eq!(status, LeaseStatus::Lost);
            let notices = events(&history, "w0", EventType::Notice, Op::Lost);
            assert_eq!(times(&notices), [3 * S]);
            assert_eq!(notices[0].error.as_deref(), Some("renewal refused"));
        }
    }

    #[test]
    fn a_watchdog_that_swallows_failures_renews_on_and_tells_nobody() {
        let (history, status) = simulate(async {
            let rig = Rig::new(0);
            let lock = FakeLock::held_by(OWNER).renews_answer([Ok(Owned::NotOwner)]);
            let (watchdog, belief) = start(&rig, lock, true);
            sleep_ns(10 * S).await;
            let status = belief.status();
            watchdog.stop().await;
            (rig.history(), status)
        });
        let renews = events(&history, "w0:renew", EventType::Invoke, Op::Renew);
        assert_eq!(times(&renews), [3 * S, 6 * S, 9 * S]);
        assert!(events(&history, "w0", EventType::Notice, Op::Lost).is_empty());
        assert_eq!(status, held_until(19 * S), "the refusal left no trace");
    }

    #[test]
    fn stop_ends_the_renewal_at_once_and_records_a_renew_in_flight_cancelled() {
        let (history, stopped_ns) = simulate(async {
            let rig = Rig::new(500 * MS);
            let (watchdog, _) = start(&rig, FakeLock::held_by(OWNER), false);
            sleep_ns(3_200 * MS).await;
            let started = fencer_harness::time::now();
            watchdog.stop().await;
            let stopped_ns = (fencer_harness::time::now() - started).as_nanos();
            sleep_ns(60 * S).await;
            (rig.history(), stopped_ns)
        });
        assert_eq!(stopped_ns, 0, "stop does not wait for the reply");
        let renewal_events: Vec<_> = history
            .events
            .iter()
            .filter(|event| event.process == "w0:renew")
            .map(|event| (event.kind, event.time_ns, event.error.as_deref()))
            .collect();
        assert_eq!(
            renewal_events,
            [
                (EventType::Invoke, 3 * S, None),
                (EventType::Info, 3_200 * MS, Some("cancelled"))
            ]
        );
    }

    #[test]
    fn dropping_the_watchdog_of_a_frozen_worker_cancels_its_renew_at_once() {
        let history = simulate(async {
            let rig = Rig::new(500 * MS);
            let (watchdog, _) = start(&rig, FakeLock::held_by(OWNER), false);
            sleep_ns(3_200 * MS).await;
            rig.faults().start(WorkerFault::Freeze, 10 * S);
            sleep_ns(100 * MS).await;
            drop(watchdog);
            sleep_ns(60 * S).await;
            rig.history()
        });
        let cancelled = events(&history, "w0:renew", EventType::Info, Op::Renew);
        assert_eq!(times(&cancelled), [3_300 * MS]);
        assert_eq!(cancelled[0].error.as_deref(), Some("cancelled"));
    }

    #[test]
    fn a_watchdog_thawed_past_the_validity_still_renews_and_says_the_lease_is_lost() {
        let history = simulate(async {
            let rig = Rig::new(0);
            let (watchdog, _) = start(&rig, FakeLock::held_by(OWNER), false);
            sleep_ns(S).await;
            rig.faults().start(WorkerFault::Freeze, 12 * S);
            sleep_ns(12 * S).await;
            watchdog.stop().await;
            rig.history()
        });
        // Frozen from 1 s to 12 s, past the grant's validity: the renewal due at 3 s goes at
        // the thaw, and though the service confirms it, the loss is told, and renewing ends.
        let renews = events(&history, "w0:renew", EventType::Ok, Op::Renew);
        assert_eq!(times(&renews), [12 * S]);
        let notices = events(&history, "w0", EventType::Notice, Op::Lost);
        assert_eq!(times(&notices), [12 * S]);
        assert_eq!(
            events(&history, "w0:renew", EventType::Invoke, Op::Renew).len(),
            1
        );
    }

    #[test]
    fn policy_names_parse_back_and_unknown_names_list_the_choices() {
        for policy in [RenewFailurePolicy::Stop, RenewFailurePolicy::Continue] {
            assert_eq!(policy.name().parse::<RenewFailurePolicy>(), Ok(policy));
        }
        assert_eq!(RenewFailurePolicy::default(), RenewFailurePolicy::Stop);
        let error = "retry".parse::<RenewFailurePolicy>().unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown renew-failure policy `retry`: expected stop or continue"
        );
    }
}
