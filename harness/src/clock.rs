//! Time: the true clock every event is stamped with, and per-node local clocks that the nemesis
//! can offset, jump and make drift.
//!
//! The true clock is the simulation's (in the simulation tier) or tokio's monotonic one (in the
//! real tier), measured from the run's epoch, so the simulation never reads `std::time`. A local
//! clock is a piecewise-linear function of true time: each jump or drift change re-anchors it.
//!
//! Inside the [simulation runtime](crate::runtime::simulation_runtime) the true clock is the
//! simulation executor's, a thread-local read; anywhere else (the real tier, a runtime of the
//! caller's own) it is tokio's.

use std::sync::{Arc, Mutex};

use tokio::time::Instant;

use crate::time::now;

/// Nanoseconds from `epoch` to now.
fn since_ns(epoch: Instant) -> u64 {
    crate::sim::with(|sim| sim.now_ns().saturating_sub(sim.ns_at(epoch)))
        .unwrap_or_else(|| Instant::now().duration_since(epoch).as_nanos() as u64)
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

    /// The instant now ([`crate::time::now`]), for deadlines relative to now.
    pub fn now_instant(&self) -> Instant {
        now()
    }

    /// The instant at `true_ns`, for sleeping until a true time.
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
        if self.drift_ppm == 0
            && let Some(elapsed) = true_ns.checked_sub(self.anchor_true_ns)
            && let Ok(elapsed) = i64::try_from(elapsed)
        {
            // A clock that does not drift, read after its anchor: no scaling to do.
            return self.anchor_local_ns.saturating_add(elapsed);
        }
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

    /// The true clock's readings across sleeps, each checked against tokio's own clock as an
    /// adapter reads it.
    async fn readings_across_sleeps() -> Vec<u64> {
        let truth = TrueClock::start();
        let mut readings = vec![truth.now_ns()];
        for step_ms in [3, 0, 250, 10_000] {
            crate::time::sleep(Duration::from_millis(step_ms)).await;
            let adapter_reads = crate::sim::foreign(async { Instant::now() }).await;
            assert_eq!(truth.now_instant(), adapter_reads);
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
