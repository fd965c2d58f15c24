//! The worker's cycle, shared by every workload: workers race for one lease and do the
//! workload's protected work (see [`crate::work`]) while they hold it.
//!
//! Each cycle is the articles' loop: acquire → read → think → check → prepare → write(token)
//! → hold → release, with a renewal task alive exactly as long as the lease is held. The
//! *prepare* step sits between the last lease check and the write being sent — the gap the
//! articles point at ("A may stop again after checking ownership and before its UPDATE
//! arrives"), which no client-side check can close and only the store's fence can.

use std::time::Duration;

use fencer_harness::{
    Acquired, CallError, LockClient, OwnerToken, StoreClient, Stream, stream_rng,
};
use rand::{Rng, RngExt};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use fencer_harness::Workload;

use crate::kind::WorkerVariant;
use crate::lease::{RenewFailurePolicy, Renewal};
use crate::work::sleep_ns;

/// Settings of a workload run: the shape of every worker's cycle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegisterConfig {
    /// Number of workers.
    pub workers: usize,
    /// Cycles per worker.
    pub ops_per_worker: usize,
    /// Lease TTL requested on every acquire and renew.
    pub ttl_ns: u64,
    /// Renewal period while a lease is held.
    pub renew_every_ns: u64,
    /// What a worker does when a renewal fails or is unanswered.
    pub on_renew_failure: RenewFailurePolicy,
    /// Lock all workers contend for.
    pub lock: String,
    /// Store key the lock protects.
    pub key: String,
    /// Wait between two acquire attempts on a busy lock.
    pub retry_every_ns: u64,
    /// Acquire attempts per cycle before the worker gives the cycle up.
    pub max_acquire_attempts: u32,
    /// What the worker does under the lock.
    pub workload: Workload,
    /// The worker's code: reference or a worker mutant.
    pub variant: WorkerVariant,
}

impl RegisterConfig {
    /// Defaults for `workers` workers doing `ops_per_worker` cycles with `ttl_ns` leases
    /// renewed every `renew_every_ns`.
    pub fn new(workers: usize, ops_per_worker: usize, ttl_ns: u64, renew_every_ns: u64) -> Self {
        RegisterConfig {
            workers,
            ops_per_worker,
            ttl_ns,
            renew_every_ns,
            on_renew_failure: RenewFailurePolicy::Stop,
            lock: "lock-1".into(),
            key: "register-1".into(),
            retry_every_ns: ttl_ns / 20,
            max_acquire_attempts: 1_000,
            workload: Workload::FencedRegister,
            variant: WorkerVariant::Reference,
        }
    }

    /// As [`RegisterConfig::new`], for `workload` (its key) run by `variant` workers.
    pub fn for_workload(self, workload: Workload, variant: WorkerVariant) -> Self {
        RegisterConfig {
            key: workload.key().into(),
            workload,
            variant,
            ..self
        }
    }

    /// The renew-failure policy in force: a worker that ignores renew failures continues
    /// whatever the setting says.
    pub fn effective_policy(&self) -> RenewFailurePolicy {
        match self.variant {
            WorkerVariant::IgnoreRenewFailure => RenewFailurePolicy::Continue,
            _ => self.on_renew_failure,
        }
    }
}

/// One worker's script.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerPlan {
    /// The cycles, in order.
    pub cycles: Vec<CyclePlan>,
}

/// One acquire → write → release cycle; durations in true nanoseconds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CyclePlan {
    /// Idle time before trying to acquire.
    pub delay_ns: u64,
    /// Work between the read and the final lease check.
    pub think_ns: u64,
    /// Between the final lease check and sending the write.
    pub prepare_ns: u64,
    /// Holding the lease after the write, before releasing.
    pub hold_ns: u64,
    /// The value to write; `None` writes the write id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// Draws every worker's script from the workload stream (one sub-stream per worker, so adding
/// a worker leaves the others' scripts unchanged).
pub fn plan_workers(config: &RegisterConfig, seed: u64) -> Vec<WorkerPlan> {
    let ttl = config.ttl_ns;
    (0..config.workers)
        .map(|worker| {
            let mut rng = stream_rng(seed, Stream::Workload, worker as u32);
            let cycles = (0..config.ops_per_worker)
                .map(|_| CyclePlan {
                    delay_ns: rng.random_range(0..=ttl / 2),
                    think_ns: rng.random_range(0..=ttl / 2),
                    prepare_ns: rng.random_range(0..=ttl / 50),
                    hold_ns: rng.random_range(0..=ttl / 5),
                    value: None,
                })
                .collect();
            WorkerPlan { cycles }
        })
        .collect()
}

/// A worker: its recorded clients and its private randomness.
pub struct Worker {
    /// Index; the process is named `w{index}`.
    pub index: usize,
    /// The worker's lock client (process `w{index}`).
    pub lock: LockClient,
    /// The renewal task's lock client (process `w{index}:renew`).
    pub renew_lock: LockClient,
    /// The worker's store client.
    pub store: StoreClient,
}

impl Worker {
    /// Carries out `plan`. Returns when every cycle is done or given up.
    pub async fn run(self, plan: &WorkerPlan, config: &RegisterConfig, seed: u64) {
        let mut owners = stream_rng(seed, Stream::Tokens, self.index as u32);
        // Renewal tasks a `zombie-renewal` worker failed to stop; dropping them when the
        // worker ends aborts them, so even a zombie cannot outlive the run.
        let mut zombies = Vec::new();
        for (cycle_number, cycle) in plan.cycles.iter().enumerate() {
            sleep_ns(cycle.delay_ns).await;
            zombies.extend(self.cycle(cycle_number, cycle, config, &mut owners).await);
        }
    }

    /// One acquire → work → release cycle; returns the renewal task if the worker failed to
    /// stop it (the `zombie-renewal` bug).
    async fn cycle(
        &self,
        cycle_number: usize,
        cycle: &CyclePlan,
        config: &RegisterConfig,
        owners: &mut ChaCha8Rng,
    ) -> Option<Renewal> {
        let ttl = Duration::from_nanos(config.ttl_ns);
        let (owner, token, granted_local_ns) = self.acquire(config, owners).await?;
        let renewal = Renewal::start(
            self.renew_lock.clone(),
            config.lock.clone(),
            owner,
            ttl,
            Duration::from_nanos(config.renew_every_ns),
            granted_local_ns,
        );
        let may_work = || match config.effective_policy() {
            RenewFailurePolicy::Continue => true,
            RenewFailurePolicy::Stop => renewal
                .belief
                .usable_at(self.lock.process().clock().now_ns()),
        };
        let write_id = format!("w{}-{cycle_number}", self.index);
        self.work(cycle, config, token, &write_id, may_work).await;
        let zombie = if config.variant == WorkerVariant::ZombieRenewal {
            Some(renewal)
        } else {
            renewal.stop().await;
            None
        };
        // Safe even when the lease was lost: the service compares the owner token.
        let _ = self.lock.release(&config.lock, owner).await;
        zombie
    }

    /// Acquires the lock, retrying while busy. An acquire whose outcome is unknown may have
    /// been granted, so the worker releases that owner token (a no-op if it was not granted)
    /// and retries with a fresh one.
    async fn acquire(
        &self,
        config: &RegisterConfig,
        owners: &mut ChaCha8Rng,
    ) -> Option<(OwnerToken, u64, i64)> {
        let ttl = Duration::from_nanos(config.ttl_ns);
        for _ in 0..config.max_acquire_attempts {
            let owner =
                OwnerToken(u128::from(owners.next_u64()) << 64 | u128::from(owners.next_u64()));
            let sent_local_ns = self.lock.process().clock().now_ns();
            match self.lock.acquire(&config.lock, owner, ttl).await {
                Ok(Acquired::Granted { fencing_token }) => {
                    return Some((owner, fencing_token, sent_local_ns));
                }
                Ok(Acquired::Busy) | Err(CallError::NotApplied(_)) => {}
                Err(CallError::Unknown(_)) => {
                    let _ = self.lock.release(&config.lock, owner).await;
                }
            }
            sleep_ns(config.retry_every_ns).await;
        }
        None
    }
}
