//! Time for fencer's own tasks: sleeps, deadlines and the instant now, on the simulation
//! executor's clock where one runs on this thread and on tokio's everywhere else (the real
//! tier, a test's own runtime), so the same code runs in both.
//!
//! The simulation's sleeps are exact to the nanosecond and ordered by deadline, then by when
//! they were registered; tokio's round up to its millisecond wheel. Instants are tokio's in
//! both, so deadlines pass between the two freely.

use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::task::{Context, Poll};
use std::time::Duration;

pub use tokio::time::Instant;

use crate::sim::{self, TimerKey};

/// The instant now: the simulation's clock, or tokio's.
pub fn now() -> Instant {
    sim::with(|sim| sim.now()).unwrap_or_else(Instant::now)
}

/// Waits `duration`; a zero one is over at its first poll, in either tier (no timer, no
/// yield), so a step of zero costs nothing.
pub fn sleep(duration: Duration) -> Sleep {
    if duration.is_zero() {
        return Sleep {
            inner: SleepOn::Over(now()),
        };
    }
    match sim::with(|sim| sim.now_ns().saturating_add(duration_ns(duration))) {
        Some(deadline_ns) => Sleep::simulated(deadline_ns),
        None => Sleep::tokio(Instant::now() + duration),
    }
}

/// Waits until `deadline`.
pub fn sleep_until(deadline: Instant) -> Sleep {
    match sim::with(|sim| sim.ns_at(deadline)) {
        Some(deadline_ns) => Sleep::simulated(deadline_ns),
        None => Sleep::tokio(deadline),
    }
}

/// `duration` in nanoseconds, saturating (a deadline centuries away is still after all others).
pub(crate) fn duration_ns(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// A sleep: registered with its clock on its first poll, released when it ends or is dropped.
#[derive(Debug)]
pub struct Sleep {
    inner: SleepOn,
}

#[derive(Debug)]
enum SleepOn {
    Simulated {
        deadline_ns: u64,
        timer: Option<TimerKey>,
    },
    Tokio(Pin<Box<tokio::time::Sleep>>),
    /// A zero duration, over from the start (the instant it was made).
    Over(Instant),
}

impl Sleep {
    fn simulated(deadline_ns: u64) -> Sleep {
        Sleep {
            inner: SleepOn::Simulated {
                deadline_ns,
                timer: None,
            },
        }
    }

    fn tokio(deadline: Instant) -> Sleep {
        Sleep {
            inner: SleepOn::Tokio(Box::pin(tokio::time::sleep_until(deadline))),
        }
    }

    /// When the sleep ends.
    pub fn deadline(&self) -> Instant {
        match &self.inner {
            SleepOn::Over(at) => *at,
            SleepOn::Simulated { deadline_ns, .. } => {
                sim::with(|sim| sim.base_plus(*deadline_ns)).expect("simulated on this thread")
            }
            SleepOn::Tokio(sleep) => sleep.deadline(),
        }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match &mut self.inner {
            SleepOn::Over(_) => Poll::Ready(()),
            SleepOn::Tokio(sleep) => sleep.as_mut().poll(cx),
            SleepOn::Simulated { deadline_ns, timer } => {
                let deadline_ns = *deadline_ns;
                sim::with(|sim| {
                    if sim.now_ns() >= deadline_ns {
                        if let Some(key) = timer.take() {
                            sim.release_timer(key);
                        }
                        return Poll::Ready(());
                    }
                    match timer {
                        Some(key) => sim.rearm_timer(*key, cx.waker()),
                        None => *timer = Some(sim.register_timer(deadline_ns, cx.waker())),
                    }
                    Poll::Pending
                })
                .expect("a simulated sleep is polled on its executor's thread")
            }
        }
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let SleepOn::Simulated {
            timer: Some(key), ..
        } = self.inner
        {
            sim::with(|sim| sim.release_timer(key));
        }
    }
}

/// Runs `future`, code of a backend that fencer calls directly rather than as a recorded call
/// (its logs, its restart hook), as a recorded call's adapter runs: its `tokio::time` reads the
/// simulation's clock and its sleeps wake in their place among fencer's timers. Outside the
/// simulation it is `future` itself.
pub async fn adapter_code<F: Future>(future: F) -> F::Output {
    sim::foreign(future).await
}

/// The deadline passed before the future finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("deadline has elapsed")]
pub struct Elapsed;

/// Runs `future` until `duration` has passed.
pub async fn timeout<F: Future>(duration: Duration, future: F) -> Result<F::Output, Elapsed> {
    within(sleep(duration), future).await
}

/// Runs `future` until `deadline`.
pub async fn timeout_at<F: Future>(deadline: Instant, future: F) -> Result<F::Output, Elapsed> {
    within(sleep_until(deadline), future).await
}

/// `future`'s output, or [`Elapsed`] once `sleep` ends first; the future is polled first, so
/// one that is ready at once wins even over a deadline already past.
async fn within<F: Future>(mut sleep: Sleep, future: F) -> Result<F::Output, Elapsed> {
    let mut future = pin!(future);
    poll_fn(|cx| {
        if let Poll::Ready(output) = future.as_mut().poll(cx) {
            return Poll::Ready(Ok(output));
        }
        Pin::new(&mut sleep).poll(cx).map(|()| Err(Elapsed))
    })
    .await
}
