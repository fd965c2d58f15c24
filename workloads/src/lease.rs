//! A worker's belief about its lease, and the renewal task that keeps it fresh.
//!
//! The belief is what the articles' policy acts on: a lease is usable only while the last
//! confirmation (grant or renew, timed from when its *request was sent*) plus the TTL lies ahead
//! on the worker's own clock, and only while no renewal failed or went unanswered. A renew that
//! timed out may well have been applied; the worker still cannot *confirm* it holds the lease.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencer_harness::{CallError, Freezable, LockClient, Owned, OwnerToken};
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// What a worker does when a renewal fails or its outcome is unknown.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RenewFailurePolicy {
    /// Start no more protected work until the lease is re-acquired (the articles' policy).
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
        lock: String,
        owner: OwnerToken,
        ttl: Duration,
        every: Duration,
        granted_local_ns: i64,
    ) -> Renewal {
        let ttl_ns = ttl.as_nanos() as i64;
        let belief = Arc::new(LeaseBelief::new(granted_local_ns + ttl_ns));
        let (stop_tx, mut stop_rx) = oneshot::channel();
        let faults = Arc::clone(client.process().faults());
        let truth = client.process().clock().truth();
        let task_belief = Arc::clone(&belief);
        let task = tokio::spawn(Freezable::new(
            async move {
                loop {
                    tokio::select! {
                        biased;
                        _ = &mut stop_rx => return,
                        () = tokio::time::sleep(every) => {}
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
                            valid_until_local_ns: sent_local_ns + ttl_ns,
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
