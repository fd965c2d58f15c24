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

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering, fence};
use std::sync::{Arc, Mutex};

use tokio::time::Instant;

use crate::sim::ExecutorId;
use crate::time::now;

/// `a - b` as a signed number, if it fits.
fn signed_difference(a: u64, b: u64) -> Option<i64> {
    match a.checked_sub(b) {
        Some(ahead) => i64::try_from(ahead).ok(),
        None => i64::try_from(b - a).ok().map(|behind| -behind),
    }
}

/// True time since the run began. Cheap to clone; every party of a run shares one epoch.
#[derive(Clone, Copy, Debug)]
pub struct TrueClock {
    epoch: Instant,
    /// The simulation executor the clock was started on and the epoch on its clock: read on
    /// that executor, true time is its clock less the epoch, with no instant to convert.
    simulated_epoch: Option<(ExecutorId, u64)>,
}

impl TrueClock {
    /// Starts the clock now. In the simulation tier this must run inside the paused runtime.
    pub fn start() -> TrueClock {
        TrueClock {
            epoch: now(),
            simulated_epoch: crate::sim::with(|sim| (sim.id(), sim.now_ns())),
        }
    }

    /// Nanoseconds since the epoch.
    pub fn now_ns(&self) -> u64 {
        crate::sim::with(|sim| {
            let epoch_ns = match self.simulated_epoch {
                Some((id, epoch_ns)) if id == sim.id() => epoch_ns,
                _ => sim.ns_at(self.epoch),
            };
            sim.now_ns().saturating_sub(epoch_ns)
        })
        .unwrap_or_else(|| Instant::now().duration_since(self.epoch).as_nanos() as u64)
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
        // In 64 bits while the product fits (an anchor under about 1.7 h back at the largest
        // drifts, as runs' are): the 128-bit division costs many times more, and both give
        // the same reading, the quotient truncated towards zero, the sum held within `i64`.
        if let Some(rate) = self.drift_ppm.checked_add(1_000_000)
            && let Some(elapsed) = signed_difference(true_ns, self.anchor_true_ns)
            && let Some(product) = elapsed.checked_mul(rate)
        {
            return self.anchor_local_ns.saturating_add(product / 1_000_000);
        }
        self.read_wide(true_ns)
    }

    /// [`NodeClock::read`] in 128 bits, whatever the anchor and drift.
    fn read_wide(&self, true_ns: u64) -> i64 {
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
    node: Arc<SharedNodeClock>,
}

impl LocalClock {
    /// A local clock over `truth`, starting at `node`'s settings.
    pub fn new(truth: TrueClock, node: NodeClock) -> LocalClock {
        LocalClock {
            truth,
            node: Arc::new(SharedNodeClock::new(node)),
        }
    }

    /// The node's reading now.
    pub fn now_ns(&self) -> i64 {
        let true_ns = self.truth.now_ns();
        self.node.load().read(true_ns)
    }

    /// The node's reading at true time `true_ns` (for stamping an event read at that instant).
    pub fn read_at(&self, true_ns: u64) -> i64 {
        self.node.load().read(true_ns)
    }

    /// The true clock this local clock is built on.
    pub fn truth(&self) -> TrueClock {
        self.truth
    }

    /// Steps the clock by `jump_ns` now.
    pub fn jump(&self, jump_ns: i64) {
        let true_ns = self.truth.now_ns();
        self.node.change(|node| node.jump(true_ns, jump_ns));
    }

    /// Sets the drift from now on.
    pub fn set_drift(&self, drift_ppm: i64) {
        let true_ns = self.truth.now_ns();
        self.node.change(|node| node.set_drift(true_ns, drift_ppm));
    }
}

/// A [`NodeClock`] read on every recorded event and changed only by the nemesis: its settings
/// are atomics behind a version that is odd while a change is being written, so a read takes
/// no lock (it reads the version, the settings, the version again, and tries again in the rare
/// case a change came between), and changes take turns behind a mutex.
#[derive(Debug)]
struct SharedNodeClock {
    version: AtomicU64,
    anchor_true_ns: AtomicU64,
    anchor_local_ns: AtomicI64,
    drift_ppm: AtomicI64,
    changing: Mutex<()>,
}

impl SharedNodeClock {
    fn new(node: NodeClock) -> SharedNodeClock {
        SharedNodeClock {
            version: AtomicU64::new(0),
            anchor_true_ns: AtomicU64::new(node.anchor_true_ns),
            anchor_local_ns: AtomicI64::new(node.anchor_local_ns),
            drift_ppm: AtomicI64::new(node.drift_ppm),
            changing: Mutex::new(()),
        }
    }

    /// The settings as one consistent whole.
    fn load(&self) -> NodeClock {
        loop {
            let before = self.version.load(Ordering::Acquire);
            let node = NodeClock {
                anchor_true_ns: self.anchor_true_ns.load(Ordering::Relaxed),
                anchor_local_ns: self.anchor_local_ns.load(Ordering::Relaxed),
                drift_ppm: self.drift_ppm.load(Ordering::Relaxed),
            };
            fence(Ordering::Acquire);
            if before.is_multiple_of(2) && self.version.load(Ordering::Relaxed) == before {
                return node;
            }
            std::hint::spin_loop();
        }
    }

    /// Applies `change` to the settings, readers seeing them before or after it, never half.
    fn change(&self, change: impl FnOnce(&mut NodeClock)) {
        // A poisoned lock only means a panic elsewhere; the settings are whole either way.
        let _turn = self.changing.lock().unwrap_or_else(|p| p.into_inner());
        let mut node = self.load();
        change(&mut node);
        let version = self.version.load(Ordering::Relaxed);
        self.version.store(version + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        self.anchor_true_ns
            .store(node.anchor_true_ns, Ordering::Relaxed);
        self.anchor_local_ns
            .store(node.anchor_local_ns, Ordering::Relaxed);
        self.drift_ppm.store(node.drift_ppm, Ordering::Relaxed);
        self.version.store(version + 2, Ordering::Release);
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
    fn a_reader_sees_a_shared_clock_s_settings_whole_while_another_thread_changes_them() {
        let whole = [
            NodeClock {
                anchor_true_ns: 1,
                anchor_local_ns: -1,
                drift_ppm: 10,
            },
            NodeClock {
                anchor_true_ns: u64::MAX,
                anchor_local_ns: i64::MAX,
                drift_ppm: -10,
            },
        ];
        let shared = Arc::new(SharedNodeClock::new(whole[0]));
        let writer = {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || {
                for round in 0..200_000 {
                    shared.change(|node| *node = whole[(round + 1) % 2]);
                }
            })
        };
        let mut seen = [0u32; 2];
        while !writer.is_finished() || seen.iter().sum::<u32>() < 1_000 {
            let node = shared.load();
            let which = whole.iter().position(|w| *w == node);
            seen[which.unwrap_or_else(|| panic!("torn settings {node:?}"))] += 1;
        }
        writer.join().unwrap();
        assert_eq!(
            shared.load(),
            whole[0],
            "200,000 changes end where they began"
        );
    }

    #[test]
    fn a_drifting_clock_reads_the_same_in_64_bits_as_in_128() {
        let mut rng = crate::rng::stream_rng(7, crate::rng::Stream::Latency, 0);
        let edges = [
            0,
            1,
            999_999,
            1_000_000,
            6_000_000_000_000,
            u64::MAX / 2,
            u64::MAX,
        ];
        let drifts = [
            -500_000,
            -1,
            1,
            499_999,
            500_000,
            i64::MAX - 999_999,
            i64::MIN,
        ];
        // How many readings took the 64-bit way, and how many the 128-bit one.
        let (mut narrow, mut wide) = (0, 0);
        for round in 0..20_000_usize {
            use rand::Rng;
            let pick = |rng: &mut rand_chacha::ChaCha8Rng, edges: &[u64]| {
                if rng.next_u32().is_multiple_of(4) {
                    edges[rng.next_u32() as usize % edges.len()]
                } else {
                    rng.next_u64() >> (rng.next_u32() % 64)
                }
            };
            let anchor_true_ns = pick(&mut rng, &edges);
            let true_ns = if round.is_multiple_of(2) {
                anchor_true_ns.saturating_add(rng.next_u64() >> 22)
            } else {
                pick(&mut rng, &edges)
            };
            let clock = NodeClock {
                anchor_true_ns,
                anchor_local_ns: rng.next_u64() as i64 >> (rng.next_u32() % 64),
                drift_ppm: if round.is_multiple_of(3) {
                    drifts[round % drifts.len()]
                } else {
                    (rng.next_u64() % 1_000_001) as i64 - 500_000
                },
            };
            assert_eq!(
                clock.read(true_ns),
                clock.read_wide(true_ns),
                "{clock:?} at {true_ns}"
            );
            let fits = clock
                .drift_ppm
                .checked_add(1_000_000)
                .zip(signed_difference(true_ns, anchor_true_ns))
                .is_some_and(|(rate, elapsed)| elapsed.checked_mul(rate).is_some());
            if fits { narrow += 1 } else { wide += 1 }
        }
        assert!(
            narrow > 5_000 && wide > 5_000,
            "{narrow} narrow, {wide} wide"
        );
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
