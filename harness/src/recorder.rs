//! The single place events are appended: it assigns each event its index and true time, so a
//! history is ordered by construction.
//!
//! Events are kept in checking form ([`PackedHistory`]: a fixed-size row each, every distinct
//! string stored once), the form the checkers read and the JSONL is written from, so a run's
//! history is never held as owned events: a process name, an op's lock and key, an error
//! string are stored once for the whole run instead of once per event.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

use crate::clock::{LocalClock, TrueClock};
use crate::event::Event;
use crate::history::History;
use crate::packed::{Number, PackedHistory};

/// Appends events for one run. Shared by workers, backends and the nemesis.
///
/// A recorder may hold a limited number of events ([`Recorder::with_limit`]): past it, events
/// are dropped and the recorder is [full](Recorder::is_full), so a run that would record
/// without end is stopped by whoever drives it instead of filling the memory.
#[derive(Debug)]
pub struct Recorder {
    truth: TrueClock,
    events: Mutex<PackedHistory>,
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
            events: Mutex::new(PackedHistory {
                rows: Vec::with_capacity(limit.min(4096)),
                ..PackedHistory::default()
            }),
            limit,
            full: AtomicBool::new(false),
            filled: Notify::new(),
        }
    }

    /// Appends `event` now; returns its index.
    pub fn record(&self, event: Event) -> u64 {
        self.append(&event, None)
    }

    /// Appends `event` now, with `local_ns` read from `clock` at the same true instant (one
    /// clock read serves both stamps, so they can never disagree).
    pub fn record_on(&self, event: Event, clock: &LocalClock) -> u64 {
        self.append(&event, Some(clock))
    }

    /// Packs `event` stamped with its index, the true time and (given `clock`) the local one,
    /// unless the recorder holds its limit already; then drops it and marks the recorder full.
    fn append(&self, event: &Event, clock: Option<&LocalClock>) -> u64 {
        let mut events = self.events.lock().unwrap_or_else(|p| p.into_inner());
        let index = events.len() as u64;
        if events.len() >= self.limit {
            if !self.full.swap(true, Ordering::Relaxed) {
                // Waiters now, and one that checked just before the flag was set.
                self.filled.notify_waiters();
                self.filled.notify_one();
            }
            return index;
        }
        let time_ns = self.truth.now_ns();
        events.push(event);
        let row = events.rows.last_mut().expect("just pushed");
        row.index = index;
        row.time_ns = time_ns;
        if let Some(clock) = clock {
            row.set(Number::LocalNs, clock.read_at(time_ns) as u64);
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

    /// Everything recorded so far in checking form, leaving the recorder empty: what the run
    /// paths check, write and explain.
    pub fn take_packed(&self) -> PackedHistory {
        std::mem::take(&mut *self.events.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Everything recorded so far as events, leaving the recorder empty: the unpacked view,
    /// for callers that want owned events.
    pub fn take_history(&self) -> History {
        self.take_packed().unpack()
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
