//! How a worker's cycle durations are drawn: the shape of the time a cycle spends idle, under
//! the lease and around its write. Every duration is a fraction of the TTL, so a plan means
//! the same races at 10 s leases as at 300 ms ones.
//!
//! In simulated time a long critical section costs nothing, so every cycle is drawn over the
//! full ranges ([`CycleShape::Full`]). In real time it costs wall time, and with one lock the
//! workers' critical sections run one after another: full cycles hold the lease for about a
//! third of a TTL on average, most of it sleeping in `think` and `hold` with nothing happening.
//! [`CycleShape::RealTime`] keeps one cycle in [`LONG_CYCLE_ONE_IN`] exactly as in the
//! simulation (the cycles long enough to renew their lease, to be caught mid-renewal by a lost
//! reply, to outlive a skewed clock's belief) and shortens the idle parts of the others, so a
//! run spends its wall time on handovers, writes and faults. The `prepare` window between the
//! last lease check and the write, where a pause turns into a stale write, is drawn as in the
//! simulation in every cycle.

use rand::{Rng, RngExt};
use serde::{Deserialize, Serialize};

use crate::register::CyclePlan;

/// One cycle in this many is drawn over the full ranges in a [`CycleShape::RealTime`] plan.
pub const LONG_CYCLE_ONE_IN: u32 = 10;

/// A short cycle's delay, think and hold ranges are the full ones divided by this.
pub const SHORT_CYCLE_DIVISOR: u64 = 32;

/// How a plan draws its cycles' durations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CycleShape {
    /// Every cycle over the full ranges: delay and think up to TTL/2, prepare up to TTL/50,
    /// hold up to TTL/5. The simulation's shape.
    #[default]
    Full,
    /// One cycle in [`LONG_CYCLE_ONE_IN`] over the full ranges, the others with delay, think
    /// and hold [`SHORT_CYCLE_DIVISOR`] times shorter and the same prepare window. The real
    /// tier's shape: a seed costs seconds of wall time, not tens.
    RealTime,
}

impl CycleShape {
    /// True for the simulation's shape (left out of saved settings, which then read as before).
    pub fn is_full(&self) -> bool {
        *self == CycleShape::Full
    }

    /// Draws one cycle for leases of `ttl_ns` from `rng`.
    pub fn draw(self, ttl_ns: u64, rng: &mut impl Rng) -> CyclePlan {
        let short = match self {
            CycleShape::Full => false,
            CycleShape::RealTime => !rng.random_ratio(1, LONG_CYCLE_ONE_IN),
        };
        let divisor = if short { SHORT_CYCLE_DIVISOR } else { 1 };
        CyclePlan {
            delay_ns: rng.random_range(0..=ttl_ns / 2 / divisor),
            think_ns: rng.random_range(0..=ttl_ns / 2 / divisor),
            prepare_ns: rng.random_range(0..=ttl_ns / 50),
            hold_ns: rng.random_range(0..=ttl_ns / 5 / divisor),
            value: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use fencer_harness::{Stream, stream_rng};

    use super::*;

    const TTL_NS: u64 = 300_000_000;

    fn draw(shape: CycleShape, cycles: usize) -> Vec<CyclePlan> {
        let mut rng = stream_rng(3, Stream::Workload, 0);
        (0..cycles).map(|_| shape.draw(TTL_NS, &mut rng)).collect()
    }

    /// Time under the lease that the plan decides: think, prepare and hold.
    fn critical_ns(cycle: &CyclePlan) -> u64 {
        cycle.think_ns + cycle.prepare_ns + cycle.hold_ns
    }

    fn within(cycle: &CyclePlan, divisor: u64) -> bool {
        cycle.delay_ns <= TTL_NS / 2 / divisor
            && cycle.think_ns <= TTL_NS / 2 / divisor
            && cycle.prepare_ns <= TTL_NS / 50
            && cycle.hold_ns <= TTL_NS / 5 / divisor
    }

    #[test]
    fn full_cycles_span_the_full_ranges() {
        let cycles = draw(CycleShape::Full, 10_000);
        assert!(cycles.iter().all(|cycle| within(cycle, 1)));
        let longest_think = cycles.iter().map(|cycle| cycle.think_ns).max().unwrap();
        assert!(longest_think > TTL_NS / 2 * 99 / 100, "{longest_think}");
        let short = cycles
            .iter()
            .filter(|cycle| within(cycle, SHORT_CYCLE_DIVISOR))
            .count();
        assert!(short < 10, "full cycles are not short ones: {short}");
    }

    #[test]
    fn real_time_cycles_are_short_but_one_in_ten_is_a_full_one() {
        let cycles = draw(CycleShape::RealTime, 10_000);
        assert!(cycles.iter().all(|cycle| within(cycle, 1)));
        let long = cycles
            .iter()
            .filter(|cycle| !within(cycle, SHORT_CYCLE_DIVISOR))
            .count();
        // A full cycle falls within the short ranges by chance once in about 30000.
        assert!((850..=1150).contains(&long), "{long} long cycles in 10000");
    }

    #[test]
    fn real_time_cycles_still_outlast_a_renewal_period_at_a_fraction_of_the_cost() {
        let mean_ns = |cycles: &[CyclePlan]| {
            cycles.iter().map(critical_ns).sum::<u64>() / cycles.len() as u64
        };
        let full = draw(CycleShape::Full, 10_000);
        let real_time = draw(CycleShape::RealTime, 10_000);
        assert!(
            mean_ns(&real_time) * 4 < mean_ns(&full),
            "{} ns under the lease per real-time cycle, {} per full one",
            mean_ns(&real_time),
            mean_ns(&full)
        );
        // Renewing every TTL/3 (the README's 100 ms for 300 ms leases), about half of the
        // full cycles renew their lease at least once.
        let renewing = |cycles: &[CyclePlan]| {
            cycles
                .iter()
                .filter(|cycle| critical_ns(cycle) > TTL_NS / 3)
                .count()
        };
        assert!(renewing(&full) > 4_500, "{}", renewing(&full));
        assert!(
            (400..=650).contains(&renewing(&real_time)),
            "{}",
            renewing(&real_time)
        );
    }

    #[test]
    fn the_prepare_window_is_drawn_alike_in_both_shapes() {
        let mean_prepare_ns = |shape| {
            let cycles = draw(shape, 10_000);
            cycles.iter().map(|cycle| cycle.prepare_ns).sum::<u64>() / cycles.len() as u64
        };
        let (full, real_time) = (
            mean_prepare_ns(CycleShape::Full),
            mean_prepare_ns(CycleShape::RealTime),
        );
        let half_window = TTL_NS / 100;
        for mean in [full, real_time] {
            assert!(
                mean.abs_diff(half_window) < half_window / 20,
                "mean prepare {mean} ns, expected about {half_window}"
            );
        }
    }

    #[test]
    fn saved_settings_name_the_shape_in_kebab_case() {
        assert_eq!(
            serde_json::to_string(&CycleShape::RealTime).unwrap(),
            "\"real-time\""
        );
        assert_eq!(CycleShape::default(), CycleShape::Full);
        assert!(CycleShape::Full.is_full() && !CycleShape::RealTime.is_full());
    }
}
