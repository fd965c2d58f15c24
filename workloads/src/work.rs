//! The protected work each workload does while its worker holds the lease: the only part of
//! a cycle that differs between workloads.
//!
//! - `fenced-register`: read (recorded, unused) → think → check → prepare → write → hold;
//! - `lock-counter`: read the counter → think → check → prepare → write counter + 1 → hold;
//! - `mutex`: think → check → prepare → hold, with no store call at all.
//!
//! `check` is the worker's last look at its lease belief before it commits; `prepare` is the
//! gap after it that no client-side check can close.

use std::time::Duration;

use fencer_harness::{CallError, FencingToken, Written};

use fencer_harness::Workload;

use crate::kind::WorkerVariant;
use crate::register::{CyclePlan, RegisterConfig, Worker};

/// What the worker writes, decided before it thinks.
enum Intent {
    /// Overwrite the register with this value.
    Overwrite(String),
    /// Write this counter value (the one read, plus one).
    Increment(u64),
    /// Nothing to write: the read failed (a counter cannot be incremented blind) or the
    /// workload has no store.
    Nothing,
}

impl Worker {
    /// The workload's protected work under `token`; `may_work` is the lease check.
    pub(crate) async fn work(
        &self,
        cycle: &CyclePlan,
        config: &RegisterConfig,
        token: FencingToken,
        write_id: &str,
        may_work: impl Fn() -> bool,
    ) {
        if !may_work() {
            return;
        }
        let intent = match config.workload {
            Workload::Mutex => Intent::Nothing,
            Workload::FencedRegister => {
                // The register is overwritten, not merged; the read is recorded so checkers
                // can see what each holder saw.
                let _ = self.store.read(&config.key).await;
                Intent::Overwrite(cycle.value.clone().unwrap_or_else(|| write_id.into()))
            }
            Workload::LockCounter => match self.store.read(&config.key).await {
                Ok(read) => match read.value.as_deref().map(str::parse::<u64>) {
                    None => Intent::Increment(1),
                    Some(Ok(counter)) => Intent::Increment(counter.saturating_add(1)),
                    Some(Err(_)) => Intent::Nothing,
                },
                Err(_) => Intent::Nothing,
            },
        };
        sleep_ns(cycle.think_ns).await;
        if !may_work() {
            return;
        }
        sleep_ns(cycle.prepare_ns).await;
        let value = match intent {
            Intent::Overwrite(value) => value,
            Intent::Increment(counter) => counter.to_string(),
            Intent::Nothing => {
                // A mutex holder's whole critical section is holding the lock.
                sleep_ns(cycle.hold_ns).await;
                return;
            }
        };
        self.write(config, token, write_id, &value).await;
        sleep_ns(cycle.hold_ns).await;
    }

    /// Sends the fenced write; a `blind-retry` worker sends a rejected or unanswered one again,
    /// once, unchanged.
    async fn write(
        &self,
        config: &RegisterConfig,
        token: FencingToken,
        write_id: &str,
        value: &str,
    ) {
        let reply = self.store.write(&config.key, token, write_id, value).await;
        let retry = matches!(
            reply,
            Ok(Written::Rejected { .. }) | Err(CallError::Unknown(_))
        );
        if retry && config.variant == WorkerVariant::BlindRetry {
            let _ = self.store.write(&config.key, token, write_id, value).await;
        }
    }
}

/// Sleeps `duration_ns` of simulated time (not at all for 0, so a zero step adds no await).
pub(crate) async fn sleep_ns(duration_ns: u64) {
    if duration_ns > 0 {
        tokio::time::sleep(Duration::from_nanos(duration_ns)).await;
    }
}
