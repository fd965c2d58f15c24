//! Time: the true clock every event is stamped with, and per-node local clocks that the nemesis
//! can offset, jump and make drift.
//!
//! The true clock is tokio's (paused and auto-advancing in the simulation tier, monotonic in the
//! real tier) measured from the run's epoch, so the simulation never reads `std::time`. A local
//! clock is a piecewise-linear function of true time: each jump or drift change re-anchors it.
//!
//! Reading tokio's paused clock takes a lock, and a simulated call reads the time a dozen
//! times. Paused time only moves while the runtime parks, so inside the
//! [simulation runtime](crate::runtime::simulation_runtime) the first read after the runtime
//! parked asks tokio and every read until it parks again is a thread-local load. Anywhere else
//! (the real tier, a runtime of the caller's own) every read asks tokio.

use std::cell::Cell;
use std::sync::{Arc, Mutex};

use tokio::time::Instant;

/// The paused clock's reading in the current scheduler turn, and the last epoch it was
/// measured from (a run has one epoch, so the subtraction is done once a turn).
#[derive(Clone, Copy)]
struct Noted {
    now: Instant,
    epoch: Instant,
    since_epoch_ns: u64,
}

/// What this thread knows of the time.
#[derive(Clone, Copy)]
enum Paused {
    /// Not inside the simulation runtime: ask tokio every time.
    Elsewhere,
    /// Inside it, and it parked since the last read: time may have moved.
    Moved,
    /// Inside it, read since it last parked.
    Read(Noted),
}

thread_local! {
    static PAUSED: Cell<Paused> = const { Cell::new(Paused::Elsewhere) };
}

/// The simulation runtime starts running here, or parks (when time moves): the next read asks
/// tokio.
pub(crate) fn paused_time_may_move() {
    PAUSED.set(Paused::Moved);
}

/// The simulation runtime stops running here: reads ask tokio again.
pub(crate) fn paused_time_left() {
    PAUSED.set(Paused::Elsewhere);
}

/// Tokio's time now, read once a scheduler turn inside the simulation runtime.
fn now() -> Instant {
    match PAUSED.get() {
        Paused::Read(noted) => noted.now,
        Paused::Moved => {
            let now = Instant::now();
            PAUSED.set(Paused::Read(Noted {
                now,
                epoch: now,
                since_epoch_ns: 0,
            }));
            now
        }
        Paused::Elsewhere => Instant::now(),
    }
}

/// Nanoseconds from `epoch` to now, read once a scheduler turn inside the simulation runtime.
fn since_ns(epoch: Instant) -> u64 {
    let elapsed_ns = |now: Instant| now.duration_since(epoch).as_nanos() as u64;
    let now = match PAUSED.get() {
        Paused::Read(noted) if noted.epoch == epoch => return noted.since_epoch_ns,
        Paused::Read(noted) => noted.now,
        Paused::Moved => Instant::now(),
        Paused::Elsewhere => return elapsed_ns(Instant::now()),
    };
    let since_epoch_ns = elapsed_ns(now);
    PAUSED.set(Paused::Read(Noted {
        now,
        epoch,
        since_epoch_ns,
    }));
    since_epoch_ns
}

/// True time since the run began. Cheap to clone; every party of a run shares one epoch.
#[derive(Clone, Copy, Debug)]
pub struct TrueClock {
    epoch: Instant,
}

impl TrueClock {
    /// Starts the clock now. In the simulation tier this must run inside the paused runtime.
    pub fn start() -> TrueClock {
        TrueClock { epoch: now() }
    }

    /// Nanoseconds since the epoch.
    pub fn now_ns(&self) -> u64 {
        since_ns(self.epoch)
    }

    /// Tokio's instant now (as `tokio::time::Instant::now()`, without its lock in the
    /// simulation runtime), for deadlines relative to now.
    pub fn now_instant(&self) -> Instant {
        now()
    }

    /// The tokio instant at `true_ns`, for sleeping until a true time.
    pub fn instant_at(&self, true_ns: u64) -> Instant {
        self.epoch + std::time::Duration::from_nanos(true_ns)
    }
}

/// A node's own clock: what its owner believes the time is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeClock {
    anchor_true_ns: u64,
    anchor_local_ns: i64,
    drift_ppm: i64,
}

impl NodeClock {
    /// A clock that reads `offset_ns` ahead of true time and does not drift.
    pub fn with_offset(offset_ns: i64) -> NodeClock {
        NodeClock {
            anchor_true_ns: 0,
            anchor_local_ns: offset_ns,
            drift_ppm: 0,
        }
    }

    /// The local reading at `true_ns`, held within `i64` (a clock stepped or drifted past it
    /// reads its end rather than wrapping round to the other one).
    pub fn read(&self, true_ns: u64) -> i64 {
        let elapsed = i128::from(true_ns) - i128::from(self.anchor_true_ns);
        let scaled = elapsed * (1_000_000 + i128::from(self.drift_ppm)) / 1_000_000;
        let reading = i128::from(self.anchor_local_ns) + scaled;
        i64::try_from(reading).unwrap_or(if reading < 0 { i64::MIN } else { i64::MAX })
    }

    /// Steps the clock by `jump_ns` at `true_ns` (an NTP step, a VM migration, an operator).
    pub fn jump(&mut self, true_ns: u64, jump_ns: i64) {
        let now = self.read(true_ns);
        self.anchor_true_ns = true_ns;
        self.anchor_local_ns = now.saturating_add(jump_ns);
    }

    /// From `true_ns` on, the clock gains `drift_ppm` microseconds per second (negative: loses).
    pub fn set_drift(&mut self, true_ns: u64, drift_ppm: i64) {
        let now = self.read(true_ns);
        self.anchor_true_ns = true_ns;
        self.anchor_local_ns = now;
        self.drift_ppm = drift_ppm;
    }

    /// Current drift, in parts per million.
    pub fn drift_ppm(&self) -> i64 {
        self.drift_ppm
    }
}

/// A node clock shared between its owner (who reads it) and the nemesis (who skews it).
#[derive(Clone, Debug)]
pub struct LocalClock {
    truth: TrueClock,
    node: Arc<Mutex<NodeClock>>,
}

impl LocalClock {
    /// A local clock over `truth`, starting at `node`'s settings.
    pub fn new(truth: TrueClock, node: NodeClock) -> LocalClock {
        LocalClock {
            truth,
            node: Arc::new(Mutex::new(node)),
        }
    }

    /// The node's reading now.
    pub fn now_ns(&self) -> i64 {
        let true_ns = self.truth.now_ns();
        self.lock().read(true_ns)
    }

    /// The node's reading at true time `true_ns` (for stamping an event read at that instant).
    pub fn read_at(&self, true_ns: u64) -> i64 {
        self.lock().read(true_ns)
    }

    /// The true clock this local clock is built on.
    pub fn truth(&self) -> TrueClock {
        self.truth
    }

    /// Steps the clock by `jump_ns` now.
    pub fn jump(&self, jump_ns: i64) {
        let true_ns = self.truth.now_ns();
        self.lock().jump(true_ns, jump_ns);
    }

    /// Sets the drift from now on.
    pub fn set_drift(&self, drift_ppm: i64) {
        let true_ns = self.truth.now_ns();
        self.lock().set_drift(true_ns, drift_ppm);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, NodeClock> {
        // A poisoned clock only means a panic elsewhere; its value is still consistent.
        self.node
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::runtime::simulation_runtime;

    const MS: u64 = 1_000_000;

    /// The true clock's readings across sleeps, each checked against tokio's own clock.
    async fn readings_across_sleeps() -> Vec<u64> {
        let truth = TrueClock::start();
        let mut readings = vec![truth.now_ns()];
        for step_ms in [3, 0, 250, 10_000] {
            tokio::time::sleep(Duration::from_millis(step_ms)).await;
            assert_eq!(truth.now_instant(), Instant::now());
            readings.push(truth.now_ns());
        }
        readings
    }

    #[test]
    fn the_true_clock_reads_paused_time_in_every_runtime_that_runs_on_a_thread() {
        let expected = [0, 3 * MS, 3 * MS, 253 * MS, 10_253 * MS];
        // The second runtime must not read the time the first one ended at.
        for _ in 0..2 {
            assert_eq!(
                simulation_runtime().block_on(readings_across_sleeps()),
                expected
            );
        }
        let own_runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        assert_eq!(own_runtime.block_on(readings_across_sleeps()), expected);
        assert_eq!(
            simulation_runtime().block_on(readings_across_sleeps()),
            expected
        );
    }

    #[test]
    fn offset_clock_reads_ahead_of_truth() {
        let clock = NodeClock::with_offset(5);
        assert_eq!(clock.read(0), 5);
        assert_eq!(clock.read(100), 105);
    }

    #[test]
    fn jump_steps_and_keeps_rate() {
        let mut clock = NodeClock::with_offset(0);
        clock.jump(1_000, -400);
        assert_eq!(clock.read(1_000), 600);
        assert_eq!(clock.read(2_000), 1_600);
    }

    #[test]
    fn a_clock_stepped_to_the_end_of_its_range_stays_there_instead_of_wrapping() {
        let mut clock = NodeClock::with_offset(0);
        clock.jump(0, i64::MAX);
        assert_eq!(clock.read(1_000), i64::MAX);
        // A drift below -1000000 ppm runs the clock backwards, down past its end.
        let mut clock = NodeClock::with_offset(i64::MIN + 10);
        clock.set_drift(0, -2_000_000);
        assert_eq!(clock.read(1_000), i64::MIN);
    }

    #[test]
    fn drift_changes_rate_from_the_anchor_without_a_step() {
        let mut clock = NodeClock::with_offset(0);
        clock.set_drift(1_000_000_000, 1_000); // +1000 ppm: 1 ms per second
        assert_eq!(clock.read(1_000_000_000), 1_000_000_000);
        assert_eq!(clock.read(2_000_000_000), 2_001_000_000);
        clock.set_drift(2_000_000_000, -1_000);
        assert_eq!(clock.read(3_000_000_000), 3_000_000_000);
        assert_eq!(clock.drift_ppm(), -1_000);
    }
}
