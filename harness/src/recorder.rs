//! The single place events are appended: it assigns each event its index and true time, so a
//! history is ordered by construction.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

use crate::clock::{LocalClock, TrueClock};
use crate::event::Event;
use crate::history::History;

/// Appends events for one run. Shared by workers, backends and the nemesis.
///
/// A recorder may hold a limited number of events ([`Recorder::with_limit`]): past it, events
/// are dropped and the recorder is [full](Recorder::is_full), so a run that would record
/// without end is stopped by whoever drives it instead of filling the memory.
#[derive(Debug)]
pub struct Recorder {
    truth: TrueClock,
    events: Mutex<Vec<Event>>,
    limit: usize,
    full: AtomicBool,
    filled: Notify,
}

impl Recorder {
    /// An empty recorder stamping events with `truth`, holding as many events as are recorded.
    pub fn new(truth: TrueClock) -> Recorder {
        Recorder::with_limit(truth, usize::MAX)
    }

    /// An empty recorder stamping events with `truth` that holds at most `limit` events.
    pub fn with_limit(truth: TrueClock, limit: usize) -> Recorder {
        Recorder {
            truth,
            events: Mutex::new(Vec::with_capacity(limit.min(4096))),
            limit,
            full: AtomicBool::new(false),
            filled: Notify::new(),
        }
    }

    /// Appends `event` now; returns its index.
    pub fn record(&self, mut event: Event) -> u64 {
        let mut events = self.events.lock().unwrap_or_else(|p| p.into_inner());
        event.index = events.len() as u64;
        event.time_ns = self.truth.now_ns();
        self.push(&mut events, event)
    }

    /// Appends `event` now, with `local_ns` read from `clock` at the same true instant (one
    /// clock read serves both stamps, so they can never disagree).
    pub fn record_on(&self, mut event: Event, clock: &LocalClock) -> u64 {
        let mut events = self.events.lock().unwrap_or_else(|p| p.into_inner());
        event.index = events.len() as u64;
        event.time_ns = self.truth.now_ns();
        event.local_ns = Some(clock.read_at(event.time_ns));
        self.push(&mut events, event)
    }

    /// Keeps `event` unless the recorder holds its limit already; then drops it and marks the
    /// recorder full.
    fn push(&self, events: &mut Vec<Event>, event: Event) -> u64 {
        let index = event.index;
        if events.len() < self.limit {
            events.push(event);
        } else if !self.full.swap(true, Ordering::Relaxed) {
            // Waiters now, and one that checked just before the flag was set.
            self.filled.notify_waiters();
            self.filled.notify_one();
        }
        index
    }

    /// True once an event was dropped because the recorder held its limit: the history is
    /// incomplete and must not be checked.
    pub fn is_full(&self) -> bool {
        self.full.load(Ordering::Relaxed)
    }

    /// Waits until the recorder is [full](Recorder::is_full) (for ever, if it never is).
    pub async fn filled(&self) {
        while !self.is_full() {
            self.filled.notified().await;
        }
    }

    /// The true clock events are stamped with.
    pub fn truth(&self) -> TrueClock {
        self.truth
    }

    /// Everything recorded so far, leaving the recorder empty.
    pub fn take_history(&self) -> History {
        let events = std::mem::take(&mut *self.events.lock().unwrap_or_else(|p| p.into_inner()));
        History { events }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{EventType, Op};
    use crate::runtime::simulation_runtime;

    #[test]
    fn a_limited_recorder_keeps_its_limit_drops_the_rest_and_says_it_is_full() {
        let (kept, full, woke) = simulation_runtime().block_on(async {
            let recorder = std::sync::Arc::new(Recorder::with_limit(TrueClock::start(), 2));
            let waiter = {
                let recorder = std::sync::Arc::clone(&recorder);
                tokio::spawn(async move { recorder.filled().await })
            };
            tokio::task::yield_now().await;
            for _ in 0..2 {
                recorder.record(Event::new("w0", EventType::Invoke, Op::Read));
            }
            assert!(!recorder.is_full(), "at the limit, nothing was dropped yet");
            assert_eq!(
                recorder.record(Event::new("w0", EventType::Ok, Op::Read)),
                2
            );
            recorder.record(Event::new("w0", EventType::Ok, Op::Read));
            let woke = tokio::time::timeout(std::time::Duration::from_secs(1), waiter)
                .await
                .is_ok();
            (
                recorder.take_history().events.len(),
                recorder.is_full(),
                woke,
            )
        });
        assert_eq!((kept, full, woke), (2, true, true));
    }
}
