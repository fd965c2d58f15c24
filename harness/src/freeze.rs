//! Process pauses, as SIGSTOP would give them: a frozen process makes no progress at all, at
//! whatever await point it happens to be, while messages it already sent keep travelling.
//!
//! [`Freezable`] wraps a process's future (the worker and its renewal task share one
//! [`ProcessFaults`]) and simply refuses to poll it until the freeze ends. Nothing inside the
//! worker has to cooperate, so a pause can land between a lease check and the write it guards.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use tokio::time::{Sleep, sleep_until};

use crate::clock::TrueClock;
use crate::event::Op;

/// One fault the nemesis can put on a process, for as long as the fault lasts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkerFault {
    /// The process (and its renewal task) makes no progress at all.
    Freeze,
    /// Replies to the process's calls of this op are lost after the backend applied them.
    LoseReplies(Op),
    /// Requests of this op the process sends are held in flight for `delay_ns` before they
    /// reach the backend; the caller's deadline still runs.
    DelayRequests {
        /// The call whose requests are held.
        op: Op,
        /// How long each request is held.
        delay_ns: u64,
    },
}

/// The calls a fault can single out, each with its own windows.
const CALLS: [Op; 5] = [Op::Acquire, Op::Renew, Op::Release, Op::Write, Op::Read];

fn call_slot(op: Op) -> Option<usize> {
    CALLS.iter().position(|call| *call == op)
}

/// Faults the nemesis applies to one process, read by its futures and its client calls.
///
/// Every window is an end time on the true clock: a fault is on while `now < until`. Windows
/// only ever grow while a fault is on (a longer one set meanwhile wins), so overlapping faults
/// never shorten one another.
#[derive(Debug, Default)]
pub struct ProcessFaults {
    frozen_until_ns: AtomicU64,
    replies_lost_until_ns: [AtomicU64; CALLS.len()],
    requests_delayed_until_ns: [AtomicU64; CALLS.len()],
    request_delay_ns: [AtomicU64; CALLS.len()],
}

impl ProcessFaults {
    /// Puts `fault` on the process until true time `until_ns`.
    pub fn start(&self, fault: WorkerFault, until_ns: u64) {
        match fault {
            WorkerFault::Freeze => {
                self.frozen_until_ns.fetch_max(until_ns, Ordering::Relaxed);
            }
            WorkerFault::LoseReplies(op) => {
                if let Some(slot) = call_slot(op) {
                    self.replies_lost_until_ns[slot].fetch_max(until_ns, Ordering::Relaxed);
                }
            }
            WorkerFault::DelayRequests { op, delay_ns } => {
                if let Some(slot) = call_slot(op) {
                    self.requests_delayed_until_ns[slot].fetch_max(until_ns, Ordering::Relaxed);
                    self.request_delay_ns[slot].fetch_max(delay_ns, Ordering::Relaxed);
                }
            }
        }
    }

    /// Ends `fault` that was set to last until `until_ns`, unless a later one of the same kind
    /// was set meanwhile. Pauses and lost replies end by themselves when their window passes;
    /// a request delay also forgets its length, so the next window starts afresh.
    pub fn heal(&self, fault: WorkerFault, until_ns: u64) {
        if let WorkerFault::DelayRequests { op, .. } = fault
            && let Some(slot) = call_slot(op)
            && self.requests_delayed_until_ns[slot]
                .compare_exchange(until_ns, 0, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.request_delay_ns[slot].store(0, Ordering::Relaxed);
        }
    }

    /// Forgets a pause that ended at `until_ns`, unless a longer one was set meanwhile.
    fn clear_freeze(&self, until_ns: u64) {
        if until_ns != 0 {
            let _ = self.frozen_until_ns.compare_exchange(
                until_ns,
                0,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
    }

    /// True time the current pause ends (0 or past when not paused).
    pub fn frozen_until_ns(&self) -> u64 {
        self.frozen_until_ns.load(Ordering::Relaxed)
    }

    /// True if the reply to a call of `f` sent at true time `now_ns` is lost.
    pub fn reply_lost_at(&self, f: Op, now_ns: u64) -> bool {
        call_slot(f)
            .is_some_and(|slot| now_ns < self.replies_lost_until_ns[slot].load(Ordering::Relaxed))
    }

    /// How long a request of `f` sent at true time `now_ns` is held in flight (0: delivered
    /// promptly).
    pub fn request_delay_at(&self, f: Op, now_ns: u64) -> u64 {
        match call_slot(f) {
            Some(slot) if now_ns < self.requests_delayed_until_ns[slot].load(Ordering::Relaxed) => {
                self.request_delay_ns[slot].load(Ordering::Relaxed)
            }
            _ => 0,
        }
    }
}

/// A future that makes no progress while its process is frozen.
pub struct Freezable<F> {
    inner: Pin<Box<F>>,
    faults: std::sync::Arc<ProcessFaults>,
    truth: TrueClock,
    thaw: Option<Pin<Box<Sleep>>>,
}

impl<F: Future> Freezable<F> {
    /// Wraps `inner` so it obeys the freezes in `faults`.
    pub fn new(inner: F, faults: std::sync::Arc<ProcessFaults>, truth: TrueClock) -> Self {
        Freezable {
            inner: Box::pin(inner),
            faults,
            truth,
            thaw: None,
        }
    }
}

impl<F: Future> Future for Freezable<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        loop {
            let until_ns = self.faults.frozen_until_ns();
            // Reading the clock costs a lock in tokio; most polls happen with no pause pending.
            if until_ns == 0 || self.truth.now_ns() >= until_ns {
                self.faults.clear_freeze(until_ns);
                self.thaw = None;
                return self.inner.as_mut().poll(cx);
            }
            let deadline = self.truth.instant_at(until_ns);
            let rearm = match &self.thaw {
                Some(sleep) => sleep.deadline() != deadline,
                None => true,
            };
            if rearm {
                self.thaw = Some(Box::pin(sleep_until(deadline)));
            }
            let thaw = self.thaw.as_mut().expect("armed above");
            if thaw.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn frozen_future_resumes_only_after_the_pause() {
        let runtime = crate::runtime::simulation_runtime();
        runtime.block_on(async {
            let truth = TrueClock::start();
            let faults = Arc::new(ProcessFaults::default());
            let nemesis_faults = Arc::clone(&faults);
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(500)).await;
                nemesis_faults.start(WorkerFault::Freeze, 5_000_000_000);
            });
            let finished_at = Freezable::new(
                async move {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    truth.now_ns()
                },
                faults,
                truth,
            )
            .await;
            // The sleep could only be observed once the 5 s pause ended.
            assert_eq!(finished_at, 5_000_000_000);
        });
    }

    #[test]
    fn writes_are_delayed_only_inside_the_window_and_heal_keeps_a_later_one() {
        let faults = ProcessFaults::default();
        let delay = |delay_ns| WorkerFault::DelayRequests {
            op: Op::Write,
            delay_ns,
        };
        faults.start(delay(7), 10);
        assert_eq!(faults.request_delay_at(Op::Write, 9), 7);
        assert_eq!(faults.request_delay_at(Op::Acquire, 9), 0);
        assert_eq!(faults.request_delay_at(Op::Write, 10), 0);
        faults.start(delay(3), 20);
        // Healing the first window must not end the second, longer one.
        faults.heal(delay(7), 10);
        assert_eq!(faults.request_delay_at(Op::Write, 15), 7);
        faults.heal(delay(3), 20);
        assert_eq!(faults.request_delay_at(Op::Write, 15), 0);
    }

    #[test]
    fn replies_are_lost_only_inside_the_window_and_only_for_their_own_op() {
        let faults = ProcessFaults::default();
        faults.start(WorkerFault::LoseReplies(Op::Renew), 10);
        assert!(faults.reply_lost_at(Op::Renew, 9));
        assert!(!faults.reply_lost_at(Op::Renew, 10));
        faults.start(WorkerFault::LoseReplies(Op::Acquire), 10);
        assert!(faults.reply_lost_at(Op::Acquire, 9));
        assert!(!faults.reply_lost_at(Op::Write, 9));
        faults.start(WorkerFault::LoseReplies(Op::Write), 20);
        assert!(faults.reply_lost_at(Op::Write, 19));
        assert!(!faults.reply_lost_at(Op::Release, 19));
        // Ops that are not calls have no window at all.
        faults.start(WorkerFault::LoseReplies(Op::Pause), 20);
        assert!(!faults.reply_lost_at(Op::Pause, 1));
    }
}
