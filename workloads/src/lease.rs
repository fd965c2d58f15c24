//! A worker's belief about its lease, and the renewal task that keeps it fresh.
//!
//! The belief is what the renew-failure policy acts on: a lease is usable only while the last
//! confirmation (grant or renew, timed from when its *request was sent*) plus the TTL lies ahead
//! on the worker's own clock, and only while no renewal failed or went unanswered. A renew that
//! timed out may well have been applied; the worker still cannot *confirm* it holds the lease.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencer_harness::task::JoinHandle;
use fencer_harness::{CallError, Freezable, LockClient, Owned, OwnerToken};
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

/// What a worker does when a renewal fails or its outcome is unknown.
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
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "stop" => Ok(RenewFailurePolicy::Stop),
            "continue" => Ok(RenewFailurePolicy::Continue),
            other => Err(format!(
                "unknown renew-failure policy `{other}`: expected stop or continue"
            )),
        }
    }
}

/// Where the lease stands, as far as the worker can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseStatus {
    /// Confirmed held until `valid_until_local_ns` on the worker's clock.
    Held {
        /// Send time of the last confirmed grant or renew, plus the TTL.
        valid_until_local_ns: i64,
    },
    /// A renew went unanswered: it may or may not have been applied.
    Unconfirmed,
    /// A renew was refused: the lease is gone.
    Lost,
}

/// The worker's lease belief, shared with its renewal task.
#[derive(Debug)]
pub struct LeaseBelief {
    status: Mutex<LeaseStatus>,
}

impl LeaseBelief {
    fn new(valid_until_local_ns: i64) -> LeaseBelief {
        LeaseBelief {
            status: Mutex::new(LeaseStatus::Held {
                valid_until_local_ns,
            }),
        }
    }

    fn set(&self, status: LeaseStatus) {
        *self.status.lock().unwrap_or_else(|p| p.into_inner()) = status;
    }

    /// Current status.
    pub fn status(&self) -> LeaseStatus {
        *self.status.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// True if protected work may start at local time `now_local_ns`.
    pub fn usable_at(&self, now_local_ns: i64) -> bool {
        matches!(self.status(), LeaseStatus::Held { valid_until_local_ns } if now_local_ns < valid_until_local_ns)
    }
}

/// A running renewal task. Dropping it aborts the task, so a renewal loop can never outlive its
/// worker; [`Renewal::stop`] ends it and waits until it is really gone.
pub struct Renewal {
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
    /// The belief the task keeps up to date.
    pub belief: Arc<LeaseBelief>,
}

impl Renewal {
    /// Starts renewing `owner`'s lease on `lock` every `every`, freezing with the worker.
    /// `granted_local_ns` is the worker-clock send time of the acquire that was granted.
    pub fn start(
        client: LockClient,
        lock: Arc<str>,
        owner: OwnerToken,
        ttl: Duration,
        every: Duration,
        granted_local_ns: i64,
    ) -> Renewal {
        let ttl_ns = i64::try_from(ttl.as_nanos()).unwrap_or(i64::MAX);
        let belief = Arc::new(LeaseBelief::new(granted_local_ns.saturating_add(ttl_ns)));
        let (stop_tx, mut stop_rx) = oneshot::channel();
        let faults = Arc::clone(client.process().faults());
        let truth = client.process().clock().truth();
        let task_belief = Arc::clone(&belief);
        let task = fencer_harness::task::spawn(Freezable::new(
            async move {
                loop {
                    tokio::select! {
                        biased;
                        _ = &mut stop_rx => return,
                        () = fencer_harness::time::sleep(every) => {}
                    }
                    let sent_local_ns = client.process().clock().now_ns();
                    let reply = tokio::select! {
                        biased;
                        // Dropping the call records it as `info: cancelled`.
                        _ = &mut stop_rx => return,
                        reply = client.renew(&lock, owner, ttl) => reply,
                    };
                    match reply {
                        Ok(Owned::Done) => task_belief.set(LeaseStatus::Held {
                            valid_until_local_ns: sent_local_ns.saturating_add(ttl_ns),
                        }),
                        Ok(Owned::NotOwner) | Err(CallError::NotApplied(_)) => {
                            task_belief.set(LeaseStatus::Lost);
                            return;
                        }
                        // Maybe applied, maybe not: keep trying, but the lease is unconfirmed
                        // until a later renew succeeds.
                        Err(CallError::Unknown(_)) => task_belief.set(LeaseStatus::Unconfirmed),
                    }
                }
            },
            faults,
            truth,
        ));
        Renewal {
            stop: Some(stop_tx),
            task: Some(task),
            belief,
        }
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

impl Drop for Renewal {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use fencer_harness::{EventType, LockService, Op, WorkerFault};

    use super::*;
    use crate::testkit::{FakeLock, MS, Rig, S, events, simulate, sleep_ns, times};

    const OWNER: OwnerToken = OwnerToken(0xfeed);

    /// Renews `OWNER`'s lease every 3 s with a 10 s TTL, granted at local time 0.
    fn start(rig: &Rig, lock: FakeLock) -> Renewal {
        let lock: Arc<dyn LockService> = Arc::new(lock);
        Renewal::start(
            rig.renew_client(lock),
            "lock-1".into(),
            OWNER,
            Duration::from_secs(10),
            Duration::from_secs(3),
            0,
        )
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
        belief.set(LeaseStatus::Unconfirmed);
        assert!(!belief.usable_at(0));
        belief.set(LeaseStatus::Lost);
        assert!(!belief.usable_at(0));
    }

    #[test]
    fn the_lease_is_renewed_every_renew_every_with_its_owner_and_ttl() {
        let (history, status) = simulate(async {
            let rig = Rig::new(0);
            let renewal = start(&rig, FakeLock::held_by(OWNER));
            assert_eq!(
                renewal.belief.status(),
                held_until(10 * S),
                "from the grant"
            );
            sleep_ns(10 * S).await;
            let status = renewal.belief.status();
            renewal.stop().await;
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
            let renewal = start(&rig, FakeLock::held_by(OWNER));
            sleep_ns(4 * S).await;
            let status = renewal.belief.status();
            let history = rig.history();
            let renewed = events(&history, "w0:renew", EventType::Ok, Op::Renew);
            assert_eq!(
                times(&renewed),
                [3_200 * MS],
                "sent at 3 s, answered 0.2 s later"
            );
            status
        });
        assert_eq!(status, held_until(13 * S));
    }

    #[test]
    fn an_unanswered_renew_leaves_the_lease_unconfirmed_and_renewing_goes_on() {
        let (history, unconfirmed, confirmed) = simulate(async {
            let rig = Rig::new(0);
            rig.faults()
                .start(WorkerFault::LoseReplies(Op::Renew), 5 * S);
            let renewal = start(&rig, FakeLock::held_by(OWNER));
            sleep_ns(4_500 * MS).await;
            let unconfirmed = renewal.belief.status();
            sleep_ns(3_500 * MS).await;
            let confirmed = renewal.belief.status();
            renewal.stop().await;
            (rig.history(), unconfirmed, confirmed)
        });
        let unanswered = events(&history, "w0:renew", EventType::Info, Op::Renew);
        assert_eq!(times(&unanswered), [4 * S], "the 1 s call timeout");
        assert_eq!(unconfirmed, LeaseStatus::Unconfirmed);
        let renewed = events(&history, "w0:renew", EventType::Ok, Op::Renew);
        assert_eq!(times(&renewed), [7 * S]);
        assert_eq!(confirmed, held_until(17 * S));
    }

    #[test]
    fn a_refused_renew_marks_the_lease_lost_and_ends_the_renewal() {
        for refusal in [
            Ok(Owned::NotOwner),
            Err(CallError::NotApplied("refused".into())),
        ] {
            let (history, status) = simulate(async {
                let rig = Rig::new(0);
                let renewal = start(&rig, FakeLock::held_by(OWNER).renews_answer([refusal]));
                sleep_ns(60 * S).await;
                let status = renewal.belief.status();
                drop(renewal);
                (rig.history(), status)
            });
            let renews = events(&history, "w0:renew", EventType::Invoke, Op::Renew);
            assert_eq!(times(&renews), [3 * S], "no renew after the refusal");
            assert_eq!(status, LeaseStatus::Lost);
        }
    }

    #[test]
    fn stop_ends_the_renewal_and_no_renew_follows() {
        let (history, stopped_at) = simulate(async {
            let rig = Rig::new(0);
            let epoch = fencer_harness::time::now();
            let renewal = start(&rig, FakeLock::held_by(OWNER));
            sleep_ns(4 * S).await;
            renewal.stop().await;
            let stopped_at = fencer_harness::time::now() - epoch;
            sleep_ns(60 * S).await;
            (rig.history(), stopped_at)
        });
        assert_eq!(stopped_at, Duration::from_secs(4), "stop returned at once");
        let renews = events(&history, "w0:renew", EventType::Invoke, Op::Renew);
        assert_eq!(times(&renews), [3 * S]);
    }

    #[test]
    fn dropping_the_renewal_ends_its_task() {
        let history = simulate(async {
            let rig = Rig::new(0);
            let renewal = start(&rig, FakeLock::held_by(OWNER));
            sleep_ns(4 * S).await;
            drop(renewal);
            sleep_ns(60 * S).await;
            rig.history()
        });
        let renews = events(&history, "w0:renew", EventType::Invoke, Op::Renew);
        assert_eq!(times(&renews), [3 * S]);
    }

    /// A frozen task is not polled, so only the abort can end it before the thaw.
    #[test]
    fn dropping_the_renewal_of_a_frozen_worker_cancels_its_renew_at_once() {
        let history = simulate(async {
            let rig = Rig::new(500 * MS);
            let renewal = start(&rig, FakeLock::held_by(OWNER));
            sleep_ns(3_200 * MS).await;
            rig.faults().start(WorkerFault::Freeze, 10 * S);
            sleep_ns(100 * MS).await;
            drop(renewal);
            sleep_ns(60 * S).await;
            rig.history()
        });
        let cancelled = events(&history, "w0:renew", EventType::Info, Op::Renew);
        assert_eq!(times(&cancelled), [3_300 * MS]);
        assert_eq!(cancelled[0].error.as_deref(), Some("cancelled"));
    }

    #[test]
    fn stopping_during_a_renew_in_flight_returns_at_once_and_records_it_cancelled() {
        let (history, stopped_ns) = simulate(async {
            let rig = Rig::new(500 * MS);
            let renewal = start(&rig, FakeLock::held_by(OWNER));
            sleep_ns(3_200 * MS).await;
            let started = fencer_harness::time::now();
            renewal.stop().await;
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
    fn the_renewal_freezes_with_its_worker_s_process() {
        let history = simulate(async {
            let rig = Rig::new(0);
            let renewal = start(&rig, FakeLock::held_by(OWNER));
            sleep_ns(S).await;
            rig.faults().start(WorkerFault::Freeze, 8 * S);
            sleep_ns(9 * S).await;
            renewal.stop().await;
            rig.history()
        });
        let renews = events(&history, "w0:renew", EventType::Invoke, Op::Renew);
        assert_eq!(times(&renews), [8 * S], "the 3 s renew waited for the thaw");
    }

    #[test]
    fn policy_names_parse_back_and_unknown_names_list_the_choices() {
        for policy in [RenewFailurePolicy::Stop, RenewFailurePolicy::Continue] {
            assert_eq!(policy.name().parse::<RenewFailurePolicy>(), Ok(policy));
        }
        assert_eq!(RenewFailurePolicy::default(), RenewFailurePolicy::Stop);
        let error = "retry".parse::<RenewFailurePolicy>().unwrap_err();
        assert!(
            error.contains("`retry`: expected stop or continue"),
            "{error}"
        );
    }
}
