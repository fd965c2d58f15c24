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

/// Faults the nemesis applies to one process, read by its futures and its client calls.
#[derive(Debug, Default)]
pub struct ProcessFaults {
    frozen_until_ns: AtomicU64,
    drop_renew_replies_until_ns: AtomicU64,
    delay_writes_until_ns: AtomicU64,
    write_delay_ns: AtomicU64,
    drop_acquire_replies_until_ns: AtomicU64,
    drop_write_replies_until_ns: AtomicU64,
}

impl ProcessFaults {
    /// Freezes the process until true time `until_ns` (never shortens an ongoing pause).
    pub fn freeze_until(&self, until_ns: u64) {
        self.frozen_until_ns.fetch_max(until_ns, Ordering::Relaxed);
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

    /// Loses every renew reply addressed to this process until true time `until_ns`.
    pub fn drop_renew_replies_until(&self, until_ns: u64) {
        self.drop_renew_replies_until_ns
            .fetch_max(until_ns, Ordering::Relaxed);
    }

    /// True if a renew reply sent at true time `now_ns` is lost.
    pub fn renew_reply_lost_at(&self, now_ns: u64) -> bool {
        now_ns < self.drop_renew_replies_until_ns.load(Ordering::Relaxed)
    }

    /// Holds every write this process sends before true time `until_ns` in flight for
    /// `delay_ns` more: a write that reaches the store after its lease may have passed to
    /// another holder, with no pause of the sender needed. A longer delay set meanwhile wins,
    /// so overlapping windows never shorten one another.
    pub fn delay_writes_until(&self, until_ns: u64, delay_ns: u64) {
        self.delay_writes_until_ns
            .fetch_max(until_ns, Ordering::Relaxed);
        self.write_delay_ns.fetch_max(delay_ns, Ordering::Relaxed);
    }

    /// Ends a write-delay window that was set to end at `until_ns`, unless a later one was set.
    pub fn heal_writes(&self, until_ns: u64) {
        if self
            .delay_writes_until_ns
            .compare_exchange(until_ns, 0, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            self.write_delay_ns.store(0, Ordering::Relaxed);
        }
    }

    /// How long a write sent at true time `now_ns` is held in flight (0: delivered promptly).
    pub fn write_delay_at(&self, now_ns: u64) -> u64 {
        if now_ns < self.delay_writes_until_ns.load(Ordering::Relaxed) {
            self.write_delay_ns.load(Ordering::Relaxed)
        } else {
            0
        }
    }

    /// Loses every acquire reply addressed to this process until true time `until_ns`: the
    /// service may have granted a lease the worker never hears of.
    pub fn drop_acquire_replies_until(&self, until_ns: u64) {
        self.drop_acquire_replies_until_ns
            .fetch_max(until_ns, Ordering::Relaxed);
    }

    /// True if an acquire reply sent at true time `now_ns` is lost.
    pub fn acquire_reply_lost_at(&self, now_ns: u64) -> bool {
        now_ns < self.drop_acquire_replies_until_ns.load(Ordering::Relaxed)
    }

    /// Loses every write reply addressed to this process until true time `until_ns`: the store
    /// may have applied a write the worker must record as unknown.
    pub fn drop_write_replies_until(&self, until_ns: u64) {
        self.drop_write_replies_until_ns
            .fetch_max(until_ns, Ordering::Relaxed);
    }

    /// True if a write reply sent at true time `now_ns` is lost.
    pub fn write_reply_lost_at(&self, now_ns: u64) -> bool {
        now_ns < self.drop_write_replies_until_ns.load(Ordering::Relaxed)
    }

    /// True if the reply to a call of `f` sent at true time `now_ns` is lost.
    pub fn reply_lost_at(&self, f: crate::event::Op, now_ns: u64) -> bool {
        match f {
            crate::event::Op::Renew => self.renew_reply_lost_at(now_ns),
            crate::event::Op::Acquire => self.acquire_reply_lost_at(now_ns),
            crate::event::Op::Write => self.write_reply_lost_at(now_ns),
            _ => false,
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
                nemesis_faults.freeze_until(5_000_000_000);
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
        faults.delay_writes_until(10, 7);
        assert_eq!(faults.write_delay_at(9), 7);
        assert_eq!(faults.write_delay_at(10), 0);
        faults.delay_writes_until(20, 3);
        // Healing the first window must not end the second, longer one.
        faults.heal_writes(10);
        assert_eq!(faults.write_delay_at(15), 7);
        faults.heal_writes(20);
        assert_eq!(faults.write_delay_at(15), 0);
    }

    #[test]
    fn renew_replies_are_lost_only_inside_the_window() {
        let faults = ProcessFaults::default();
        faults.drop_renew_replies_until(10);
        assert!(faults.renew_reply_lost_at(9));
        assert!(!faults.renew_reply_lost_at(10));
    }

    #[test]
    fn acquire_and_write_replies_are_lost_only_for_their_own_op() {
        use crate::event::Op;
        let faults = ProcessFaults::default();
        faults.drop_acquire_replies_until(10);
        assert!(faults.reply_lost_at(Op::Acquire, 9));
        assert!(!faults.reply_lost_at(Op::Write, 9));
        assert!(!faults.reply_lost_at(Op::Acquire, 10));
        faults.drop_write_replies_until(20);
        assert!(faults.reply_lost_at(Op::Write, 19));
        assert!(!faults.reply_lost_at(Op::Renew, 19));
        assert!(!faults.reply_lost_at(Op::Release, 19));
    }
}
