//! Where a lease-edge attack lands its calls: the holder's renews, releases and writes, and
//! its rivals' acquires, relative to the lease's expiry.
//!
//! A race inside a lock service or a user's adapter can be open for a few microseconds or a
//! few hundred milliseconds: a release that checks the owner and deletes in two round trips
//! is open for the gap between them. Offsets drawn uniformly over a quarter second land in a
//! 5 ms window once in fifty per side, and both calls must land in it, so such a race is
//! reached once in thousands of attacks. Magnitudes are drawn log-uniformly instead (every
//! octave from [`AIM_MIN_NS`] up to the window equally likely), so a narrow window is as
//! likely to be hit as a wide one, and the two offsets are drawn in one of three shapes that
//! put the calls into each other's flight ([`EdgeAim`]). The draws come from the run's own
//! [`Stream::Aim`](fencer_harness::Stream::Aim).

use fencer_harness::EdgeAnchor;
use rand::RngExt;
use rand_chacha::ChaCha8Rng;

/// The smallest offset magnitude drawn: ten microseconds, below the latency of any real
/// network and of the simulated one, so a call can land in the same instant as an expiry.
pub const AIM_MIN_NS: u64 = 10_000;

/// How one attack's two offsets relate, each shape the setting of a different race.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EdgeAim {
    /// The holder's call goes out just before its lease expires and the rival's acquire just
    /// after: a release or renew applied in steps runs across the expiry while the rival is
    /// granted the lock.
    Straddle,
    /// The rival's acquire goes out a little after the holder's call, on either side of the
    /// edge: it lands while that call is still in flight, so a release, renew or write in
    /// flight meets another owner's grant.
    Into,
    /// Both offsets drawn on their own, either side of the edge.
    Apart,
}

impl EdgeAim {
    const ALL: [EdgeAim; 3] = [EdgeAim::Straddle, EdgeAim::Into, EdgeAim::Apart];
}

/// Where one lease-edge attack lands its calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Aimed {
    /// The holder's calls, from the lease's expiry.
    pub own_offset_ns: i64,
    /// The rivals' acquires, from the lease's expiry.
    pub rival_offset_ns: i64,
    /// Which moment of the last confirmed grant or renew the expiry is counted from.
    pub anchor: EdgeAnchor,
}

/// One attack's aim, drawn from `rng` (the run's aim stream): the anchor of the expiry, either
/// one as likely, then the two offsets, at most `window_ns` from it: a shape ([`EdgeAim`]),
/// then log-uniform magnitudes.
pub fn edge_aim(window_ns: u64, rng: &mut ChaCha8Rng) -> Aimed {
    let anchor = if rng.random_bool(0.5) {
        EdgeAnchor::Answered
    } else {
        EdgeAnchor::Sent
    };
    let (own_offset_ns, rival_offset_ns) = edge_offsets(window_ns, rng);
    Aimed {
        own_offset_ns,
        rival_offset_ns,
        anchor,
    }
}

/// One attack's offsets `(own, rival)` from a lease's expiry, each at most `window_ns` from
/// it, drawn from `rng`.
fn edge_offsets(window_ns: u64, rng: &mut ChaCha8Rng) -> (i64, i64) {
    let shape = EdgeAim::ALL[rng.random_range(0..EdgeAim::ALL.len())];
    let window = signed(window_ns);
    let own = magnitude(window_ns, rng);
    let rival = magnitude(window_ns, rng);
    match shape {
        EdgeAim::Straddle => (-own, rival),
        EdgeAim::Into => {
            let own = either_side(own, rng);
            (own, own.saturating_add(rival).min(window))
        }
        EdgeAim::Apart => (either_side(own, rng), either_side(rival, rng)),
    }
}

/// A magnitude in `[AIM_MIN_NS, window_ns]` (the window alone when it is smaller), every
/// octave equally likely and uniform within it. Integer octaves rather than a logarithm keep
/// the draw exact on every machine.
fn magnitude(window_ns: u64, rng: &mut ChaCha8Rng) -> i64 {
    if window_ns <= AIM_MIN_NS {
        return signed(window_ns);
    }
    let octaves = (window_ns / AIM_MIN_NS).ilog2();
    let octave = rng.random_range(0..=octaves);
    let low = AIM_MIN_NS << octave;
    let high = low.saturating_mul(2).min(window_ns);
    signed(rng.random_range(low..=high.max(low)))
}

fn either_side(magnitude: i64, rng: &mut ChaCha8Rng) -> i64 {
    if rng.random_bool(0.5) {
        magnitude
    } else {
        -magnitude
    }
}

fn signed(ns: u64) -> i64 {
    i64::try_from(ns).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencer_harness::{Stream, stream_rng};

    const WINDOW_NS: u64 = 250_000_000;

    fn draws(count: usize) -> Vec<(i64, i64)> {
        let mut rng = stream_rng(1, Stream::Aim, 0);
        (0..count)
            .map(|_| edge_offsets(WINDOW_NS, &mut rng))
            .collect()
    }

    #[test]
    fn offsets_stay_within_the_window_and_the_holder_s_above_the_floor() {
        for (own, rival) in draws(10_000) {
            assert!(
                (AIM_MIN_NS..=WINDOW_NS).contains(&own.unsigned_abs()),
                "{own}"
            );
            // Aimed into the holder's call, a rival's acquire may land at the edge itself.
            assert!(rival.unsigned_abs() <= WINDOW_NS, "{rival}");
        }
    }

    #[test]
    fn narrow_windows_are_as_likely_as_wide_ones() {
        let draws = draws(10_000);
        let within = |low: u64, high: u64| {
            draws
                .iter()
                .filter(|(own, _)| (low..high).contains(&own.unsigned_abs()))
                .count()
        };
        // 40–80 µs and 40–80 ms are one octave each: about one draw in fifteen each.
        let narrow = within(40_000, 80_000);
        let wide = within(40_000_000, 80_000_000);
        assert!(narrow > 400 && wide > 400, "{narrow} {wide}");
        assert!(narrow.abs_diff(wide) < 200, "{narrow} {wide}");
    }

    #[test]
    fn a_holder_s_call_before_the_edge_and_a_rival_s_acquire_within_ms_after_is_common() {
        // The race of a release in two steps 1–10 ms apart: the check before the expiry, a
        // rival's grant after it and before the delete.
        let draws = draws(10_000);
        let inside = draws
            .iter()
            .filter(|&&(own, rival)| {
                own < 0 && rival > 0 && rival - own <= 10_000_000 && own > -5_000_000
            })
            .count();
        assert!(inside > 1_000, "{inside} of 10000");
    }

    #[test]
    fn the_draws_are_a_function_of_the_stream() {
        assert_eq!(draws(50), draws(50));
        let other: Vec<_> = {
            let mut rng = stream_rng(2, Stream::Aim, 0);
            (0..50).map(|_| edge_offsets(WINDOW_NS, &mut rng)).collect()
        };
        assert_ne!(draws(50), other);
    }
}
