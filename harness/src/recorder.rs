//! The single place events are appended: it assigns each event its index and true time, so a
//! history is ordered by construction.

use std::sync::Mutex;

use crate::clock::{LocalClock, TrueClock};
use crate::event::Event;
use crate::history::History;

/// Appends events for one run. Shared by workers, backends and the nemesis.
#[derive(Debug)]
pub struct Recorder {
    truth: TrueClock,
    events: Mutex<Vec<Event>>,
}

impl Recorder {
    /// An empty recorder stamping events with `truth`.
    pub fn new(truth: TrueClock) -> Recorder {
        Recorder {
            truth,
            events: Mutex::new(Vec::with_capacity(4096)),
        }
    }

    /// Appends `event` now; returns its index.
    pub fn record(&self, mut event: Event) -> u64 {
        let mut events = self.events.lock().unwrap_or_else(|p| p.into_inner());
        event.index = events.len() as u64;
        event.time_ns = self.truth.now_ns();
        let index = event.index;
        events.push(event);
        index
    }

    /// Appends `event` now, with `local_ns` read from `clock` at the same true instant (one
    /// clock read serves both stamps, so they can never disagree).
    pub fn record_on(&self, mut event: Event, clock: &LocalClock) -> u64 {
        let mut events = self.events.lock().unwrap_or_else(|p| p.into_inner());
        event.index = events.len() as u64;
        event.time_ns = self.truth.now_ns();
        event.local_ns = Some(clock.read_at(event.time_ns));
        let index = event.index;
        events.push(event);
        index
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
