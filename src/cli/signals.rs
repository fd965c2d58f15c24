//! Telling a person's second Ctrl-C from one interrupt delivered twice.
//!
//! A second signal makes fencer exit at once, skipping the teardown of what its runs started.
//! GNU `timeout`, which CI jobs wrap commands in, sends its signal to the command and then to
//! the command's whole process group, so fencer gets one interrupt twice within microseconds;
//! taken as a second request, it would leave servers, namespaces and client children behind.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A signal this soon after the first is the same interrupt again, not a person asking twice.
pub const REPEAT_WINDOW: Duration = Duration::from_millis(500);

/// What a signal is, given the ones before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// The first: stop the runs and tear down what they started.
    First,
    /// The first one again, delivered twice: nothing more to do.
    Repeat,
    /// A later request: exit now.
    Again,
}

/// The signals a process has had so far.
#[derive(Debug, Default)]
pub struct Signals {
    first_at: OnceLock<Instant>,
}

impl Signals {
    /// Classifies a signal arriving now.
    pub fn arrived(&self) -> Arrival {
        self.arrived_at(Instant::now())
    }

    fn arrived_at(&self, now: Instant) -> Arrival {
        let mut first = false;
        let first_at = *self.first_at.get_or_init(|| {
            first = true;
            now
        });
        if first {
            Arrival::First
        } else if now.duration_since(first_at) < REPEAT_WINDOW {
            Arrival::Repeat
        } else {
            Arrival::Again
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_soon_after_the_first_repeats_it_and_a_later_one_asks_again() {
        let signals = Signals::default();
        let start = Instant::now();
        assert_eq!(signals.arrived_at(start), Arrival::First);
        assert_eq!(signals.arrived_at(start), Arrival::Repeat);
        assert_eq!(
            signals.arrived_at(start + Duration::from_micros(50)),
            Arrival::Repeat
        );
        assert_eq!(signals.arrived_at(start + REPEAT_WINDOW), Arrival::Again);
    }
}
