//! The protected work each workload does while its worker holds the lease: the only part of
//! a cycle that differs between workloads.
//!
//! - `fenced-register`: read (recorded, unused) → think → check → prepare → write → hold;
//! - `lock-counter`: read the counter → think → check → prepare → write counter + 1 → hold;
//! - `mutex`: think → check → prepare → hold, with no store call at all.
//!
//! `check` is the worker's last question to its lock client library before it commits;
//! `prepare` is the gap after it that no client-side check can close.

use std::sync::Mutex;
use std::time::Duration;

use fencer_harness::{CallError, FencingToken, Lease, Written, roles};

use fencer_harness::Workload;

use crate::kind::ClientVariant;
use crate::register::{CyclePlan, PendingWrite, RegisterConfig, Worker};

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
    /// The workload's protected work under `lease` in cycle `cycle_number`: the library's
    /// ownership check after thinking, and its lost notices, decide whether the write goes.
    pub(crate) async fn work(
        &self,
        cycle: &CyclePlan,
        cycle_number: usize,
        config: &RegisterConfig,
        lease: &Lease,
        pending: &Mutex<Option<PendingWrite>>,
    ) {
        if self.told_lost(config, lease) {
            return;
        }
        // The cycle's write, named for the worker and the cycle; a mutex holder writes none.
        let write_id = match config.workload {
            Workload::Mutex => String::new(),
            Workload::FencedRegister | Workload::LockCounter => {
                roles::cycle_write_id(self.lock.process().name(), cycle_number)
            }
        };
        let intent = match config.workload {
            Workload::Mutex => Intent::Nothing,
            Workload::FencedRegister => {
                // The register is overwritten, not merged; the read is recorded so checkers
                // can see what each holder saw.
                let _ = self.store.read(&config.key).await;
                Intent::Overwrite(cycle.value.clone().unwrap_or_else(|| write_id.clone()))
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
        let decided = match &intent {
            Intent::Overwrite(value) => Some(value.clone()),
            Intent::Increment(counter) => Some(counter.to_string()),
            Intent::Nothing => None,
        };
        *pending.lock().unwrap_or_else(|p| p.into_inner()) = decided.map(|value| PendingWrite {
            write_id: write_id.clone(),
            value,
        });
        sleep_ns(cycle.think_ns).await;
        // Told before the check, answered not held, or told while the check was in flight:
        // each stops the write.
        if self.told_lost(config, lease)
            || !self.still_held(config, lease).await
            || self.told_lost(config, lease)
        {
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
        // Decided at the check: a loss the library tells of during prepare comes too late to
        // stop the write, which only the store's fence can refuse now. Sent from here on:
        // nothing is left for abandoned work to send.
        *pending.lock().unwrap_or_else(|p| p.into_inner()) = None;
        // Without a fencing token from the library, the store gets 0 and cannot tell an old
        // holder's write from a new one's.
        let token = lease.fencing_token.unwrap_or(0);
        self.write(config, token, &write_id, &value).await;
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
        if retry && config.variant == ClientVariant::BlindRetry {
            let _ = self.store.write(&config.key, token, write_id, value).await;
        }
    }
}

/// Sleeps `duration_ns` of simulated time; a zero step is over at its first poll, with no
/// wake-up.
pub(crate) fn sleep_ns(duration_ns: u64) -> fencer_harness::time::Sleep {
    fencer_harness::time::sleep(Duration::from_nanos(duration_ns))
}

#[cfg(test)]
mod tests {
    use fencer_harness::{EventType, Op, WorkerFault, Workload};

    use super::*;
    use crate::testkit::{FakeLock, FakeStore, MS, S, config, cycle, events, run_worker, steps};

    fn run_as(
        workload: Workload,
        variant: ClientVariant,
        cycle: CyclePlan,
        store: FakeStore,
        faults: impl FnOnce(&fencer_harness::ProcessFaults),
    ) -> fencer_harness::History {
        let config = config(10 * S, 3 * S).for_workload(workload, variant);
        run_worker(&config, vec![cycle], FakeLock::granting(4), store, faults)
    }

    fn written_values(history: &fencer_harness::History) -> Vec<Option<String>> {
        events(history, "w0", EventType::Invoke, Op::Write)
            .iter()
            .map(|write| write.value.clone())
            .collect()
    }

    #[test]
    fn lock_counter_writes_the_counter_it_read_plus_one_under_its_token() {
        let history = run_as(
            Workload::LockCounter,
            ClientVariant::Reference,
            cycle(S, 0, 0),
            FakeStore::holding(3, "41"),
            |_| {},
        );
        assert_eq!(written_values(&history), [Some("42".to_string())]);
        let write = events(&history, "w0", EventType::Invoke, Op::Write)[0];
        assert_eq!(
            (write.key.as_deref(), write.token),
            (Some("counter-1"), Some(4))
        );
    }

    #[test]
    fn lock_counter_starts_a_counter_never_written_at_one() {
        let history = run_as(
            Workload::LockCounter,
            ClientVariant::Reference,
            cycle(S, 0, 0),
            FakeStore::default(),
            |_| {},
        );
        assert_eq!(written_values(&history), [Some("1".to_string())]);
    }

    #[test]
    fn lock_counter_writes_nothing_over_a_value_that_is_no_counter_and_still_holds() {
        let history = run_as(
            Workload::LockCounter,
            ClientVariant::Reference,
            cycle(S, 100 * MS, 500 * MS),
            FakeStore::holding(3, "forty-one"),
            |_| {},
        );
        assert_eq!(
            steps(&history, "w0"),
            [
                "invoke acquire",
                "ok acquire",
                "invoke read",
                "ok read",
                "invoke check",
                "ok check",
                "invoke release",
                "ok release"
            ]
        );
        let release = events(&history, "w0", EventType::Invoke, Op::Release)[0];
        assert_eq!(release.time_ns, 1_600 * MS);
    }

    #[test]
    fn mutex_calls_no_store_and_holds_the_lock_through_think_prepare_and_hold() {
        let history = run_as(
            Workload::Mutex,
            ClientVariant::Reference,
            cycle(S, 100 * MS, 500 * MS),
            FakeStore::default(),
            |_| {},
        );
        assert_eq!(
            steps(&history, "w0"),
            [
                "invoke acquire",
                "ok acquire",
                "invoke check",
                "ok check",
                "invoke release",
                "ok release"
            ]
        );
        let release = events(&history, "w0", EventType::Invoke, Op::Release)[0];
        assert_eq!(release.time_ns, 1_600 * MS);
    }

    #[test]
    fn fenced_register_writes_the_plan_s_value_when_it_names_one() {
        let planned = CyclePlan {
            value: Some("planned".into()),
            ..cycle(0, 0, 0)
        };
        let history = run_as(
            Workload::FencedRegister,
            ClientVariant::Reference,
            planned,
            FakeStore::default(),
            |_| {},
        );
        assert_eq!(written_values(&history), [Some("planned".to_string())]);
    }

    #[test]
    fn a_reference_worker_never_resends_a_rejected_or_unanswered_write() {
        let rejected = run_as(
            Workload::FencedRegister,
            ClientVariant::Reference,
            cycle(0, 0, 0),
            FakeStore::holding(100, "newer"),
            |_| {},
        );
        assert_eq!(
            events(&rejected, "w0", EventType::Fail, Op::Write)[0]
                .error
                .as_deref(),
            Some("rejected")
        );
        let unanswered = run_as(
            Workload::FencedRegister,
            ClientVariant::Reference,
            cycle(0, 0, 0),
            FakeStore::default(),
            |faults| faults.start(WorkerFault::LoseReplies(Op::Write), u64::MAX),
        );
        assert_eq!(
            events(&unanswered, "w0", EventType::Info, Op::Write).len(),
            1
        );
        for history in [rejected, unanswered] {
            assert_eq!(written_values(&history).len(), 1);
        }
    }

    #[test]
    fn a_blind_retry_worker_resends_a_rejected_or_unanswered_write_once_unchanged() {
        let rejected = run_as(
            Workload::FencedRegister,
            ClientVariant::BlindRetry,
            cycle(0, 0, 0),
            FakeStore::holding(100, "newer"),
            |_| {},
        );
        let unanswered = run_as(
            Workload::FencedRegister,
            ClientVariant::BlindRetry,
            cycle(0, 0, 0),
            FakeStore::default(),
            |faults| faults.start(WorkerFault::LoseReplies(Op::Write), u64::MAX),
        );
        for history in [rejected, unanswered] {
            let writes = events(&history, "w0", EventType::Invoke, Op::Write);
            assert_eq!(writes.len(), 2, "{writes:?}");
            let sent = |i: usize| {
                let write = writes[i];
                (
                    write.token,
                    write.write_id.clone(),
                    write.value.clone(),
                    write.key.clone(),
                )
            };
            assert_eq!(sent(1), sent(0));
        }
        let applied = run_as(
            Workload::FencedRegister,
            ClientVariant::BlindRetry,
            cycle(0, 0, 0),
            FakeStore::default(),
            |_| {},
        );
        assert_eq!(
            written_values(&applied).len(),
            1,
            "an applied write is final"
        );
    }
}
