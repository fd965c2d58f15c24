//! How a worker waits between two acquire attempts on a busy lock.
//!
//! - [`WaitMode::Poll`] tries again after a fixed interval (the config's `retry_every_ns`, a
//!   twentieth of the TTL). Every waiter is back within that interval of a release or an
//!   expiry, so each handover is contested by a storm of near-simultaneous acquires: the
//!   pressure that exposes races at the lease's edge. It costs one acquire per waiter per
//!   interval, so with hundreds of workers the waiting dominates the history.
//! - [`WaitMode::Backoff`] waits as client libraries do: capped exponential back-off with
//!   full jitter. The n-th wait of one acquire is drawn uniformly between the base (the poll
//!   interval) and the base doubled n times, never past the cap ([`BACKOFF_CAP_TTLS`] TTLs);
//!   every new acquire starts again from the base. A waiter settles at about two attempts
//!   per cap, so a thousand of them cost less than fifty pollers.
//!
//! The jitter comes from its own ChaCha stream ([`Stream::Backoff`], one sub-stream per
//! worker): a backing-off run draws the same waits for the same seed, and polling draws
//! nothing from it, so neither mode shifts the workload, token or latency streams.

use fencer_harness::{Stream, stream_rng};
use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::UnknownName;

/// A backing-off worker waits at most this many TTLs between two acquire attempts. A waiter
/// reaches the cap only after eight refusals in a row, which takes a crowd: with five workers
/// each waits out a few cycles in windows of a few TTLs; with a thousand, those at the cap
/// send one acquire per eight TTLs on average, so each handover meets about a hundred
/// acquires instead of the thousands polling sends.
pub const BACKOFF_CAP_TTLS: u64 = 16;

/// The largest crowd [`WaitMode::for_crowd`] lets poll. Up to ten workers every waiter is
/// served and a cycle costs about 150 events (seed 0, the default faults); at twenty polling
/// sends about 300 events a cycle and waiters begin to give up, while backing off stays near
/// 20 events a cycle at any size.
pub const POLL_MAX_WORKERS: usize = 10;

/// How waiting workers contend for a busy lock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WaitMode {
    /// Retry at a fixed interval, a twentieth of the TTL: many near-simultaneous acquires at
    /// every release and expiry.
    #[default]
    Poll,
    /// Capped exponential back-off with full jitter, reset by every new acquire: how
    /// client libraries retry, and what scales to a thousand workers.
    Backoff,
}

impl WaitMode {
    /// Every mode, the default first.
    pub const ALL: [WaitMode; 2] = [WaitMode::Poll, WaitMode::Backoff];

    /// The CLI name.
    pub fn name(self) -> &'static str {
        match self {
            WaitMode::Poll => "poll",
            WaitMode::Backoff => "backoff",
        }
    }

    /// The mode for a run of `workers` that names none: polling while the crowd is at most
    /// [`POLL_MAX_WORKERS`], where its storms at every handover are the pressure that finds
    /// lease-edge races; backing off beyond, where polling's acquires grow with the crowd
    /// until waiting is most of the history.
    pub fn for_crowd(workers: usize) -> WaitMode {
        if workers <= POLL_MAX_WORKERS {
            WaitMode::Poll
        } else {
            WaitMode::Backoff
        }
    }

    /// True for polling, the mode of every plan saved without a wait mode (left out of saved
    /// settings, which then read as they always did).
    pub fn is_poll(&self) -> bool {
        *self == WaitMode::Poll
    }
}

impl std::fmt::Display for WaitMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for WaitMode {
    type Err = UnknownName;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        WaitMode::ALL
            .into_iter()
            .find(|mode| mode.name() == text)
            .ok_or_else(|| UnknownName {
                setting: "wait mode",
                found: text.to_string(),
                expected: "poll or backoff",
            })
    }
}

/// Capped exponential back-off with full jitter above a floor: after `n` refusals of one
/// acquire the wait is drawn uniformly between `base_ns` and `base_ns` × 2^`n`, at most
/// `cap_ns`. The floor keeps a waiter from retrying at once, the jitter spreads waiters that
/// were refused together, and the doubling window brings a crowd's acquire rate down to
/// about two per cap per waiter.
#[derive(Clone, Debug)]
pub struct Backoff {
    base_ns: u64,
    cap_ns: u64,
    refusals: u32,
    rng: ChaCha8Rng,
}

impl Backoff {
    /// A back-off from `base_ns` up to `cap_ns` (raised to `base_ns` if below it), drawing
    /// its jitter from `rng`.
    pub fn new(base_ns: u64, cap_ns: u64, rng: ChaCha8Rng) -> Backoff {
        Backoff {
            base_ns,
            cap_ns: cap_ns.max(base_ns),
            refusals: 0,
            rng,
        }
    }

    /// Worker `worker`'s back-off in a run of `seed`: from `base_ns` (the poll interval) up to
    /// [`BACKOFF_CAP_TTLS`] leases of `ttl_ns`, jittered by the worker's own sub-stream of
    /// [`Stream::Backoff`].
    pub fn for_worker(base_ns: u64, ttl_ns: u64, seed: u64, worker: usize) -> Backoff {
        let rng = stream_rng(seed, Stream::Backoff, worker as u32);
        Backoff::new(base_ns, ttl_ns.saturating_mul(BACKOFF_CAP_TTLS), rng)
    }

    /// The shortest wait.
    pub fn base_ns(&self) -> u64 {
        self.base_ns
    }

    /// The longest wait.
    pub fn cap_ns(&self) -> u64 {
        self.cap_ns
    }

    /// The longest wait after `refusals` refusals: the base doubled that many times, at most
    /// the cap.
    pub fn window_ns(&self, refusals: u32) -> u64 {
        let doubled = 1u64
            .checked_shl(refusals)
            .map_or(u64::MAX, |factor| self.base_ns.saturating_mul(factor));
        doubled.min(self.cap_ns)
    }

    /// The wait before the next attempt, after one more refusal.
    pub fn next_wait_ns(&mut self) -> u64 {
        self.refusals = self.refusals.saturating_add(1);
        let window_ns = self.window_ns(self.refusals);
        self.rng.random_range(self.base_ns..=window_ns)
    }

    /// Starts over from the base: a new acquire owes nothing to the refusals of the last one.
    pub fn reset(&mut self) {
        self.refusals = 0;
    }
}

/// One worker's waits between acquire attempts, over every cycle of its run.
#[derive(Clone, Debug)]
pub(crate) struct Waits {
    /// The wait after every refusal when polling.
    every_ns: u64,
    /// The back-off when backing off, `None` when polling.
    backoff: Option<Backoff>,
}

impl Waits {
    /// The waits of worker `worker` in `mode`, polling every `retry_every_ns` or backing off
    /// from it for leases of `ttl_ns`.
    pub(crate) fn new(
        mode: WaitMode,
        retry_every_ns: u64,
        ttl_ns: u64,
        seed: u64,
        worker: usize,
    ) -> Waits {
        let backoff = match mode {
            WaitMode::Poll => None,
            WaitMode::Backoff => Some(Backoff::for_worker(retry_every_ns, ttl_ns, seed, worker)),
        };
        Waits {
            every_ns: retry_every_ns,
            backoff,
        }
    }

    /// Called as an acquire begins: back-off starts again from its base.
    pub(crate) fn begin(&mut self) {
        if let Some(backoff) = &mut self.backoff {
            backoff.reset();
        }
    }

    /// The wait after a refused, busy or unanswered attempt, before the next one.
    pub(crate) fn after_refusal_ns(&mut self) -> u64 {
        match &mut self.backoff {
            None => self.every_ns,
            Some(backoff) => backoff.next_wait_ns(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL_NS: u64 = 10_000_000_000;
    const BASE_NS: u64 = TTL_NS / 20;
    const CAP_NS: u64 = BACKOFF_CAP_TTLS * TTL_NS;

    fn backoff(seed: u64, worker: usize) -> Backoff {
        Backoff::for_worker(BASE_NS, TTL_NS, seed, worker)
    }

    fn waits(backoff: &mut Backoff, count: usize) -> Vec<u64> {
        (0..count).map(|_| backoff.next_wait_ns()).collect()
    }

    #[test]
    fn a_crowd_polls_up_to_its_limit_and_backs_off_past_it() {
        assert_eq!(WaitMode::for_crowd(1), WaitMode::Poll);
        assert_eq!(WaitMode::for_crowd(POLL_MAX_WORKERS), WaitMode::Poll);
        assert_eq!(WaitMode::for_crowd(POLL_MAX_WORKERS + 1), WaitMode::Backoff);
        assert_eq!(WaitMode::for_crowd(1000), WaitMode::Backoff);
    }

    #[test]
    fn the_window_doubles_from_the_base_up_to_the_cap() {
        let backoff = backoff(0, 0);
        assert_eq!((backoff.base_ns(), backoff.cap_ns()), (BASE_NS, CAP_NS));
        let windows: Vec<u64> = (0..10).map(|n| backoff.window_ns(n)).collect();
        assert_eq!(backoff.window_ns(10), CAP_NS);
        assert_eq!(
            windows,
            [1, 2, 4, 8, 16, 32, 64, 128, 256, 320].map(|times| times * BASE_NS)
        );
        assert_eq!(backoff.window_ns(u32::MAX), CAP_NS, "no overflow");
    }

    #[test]
    fn every_wait_lies_between_the_base_and_its_window() {
        let mut backoff = backoff(1, 0);
        for refusals in 1..=200u32 {
            let wait = backoff.next_wait_ns();
            let window = backoff.window_ns(refusals);
            assert!((BASE_NS..=window).contains(&wait), "{refusals}: {wait}");
        }
        let at_cap = waits(&mut backoff, 5_000);
        let longest = *at_cap.iter().max().unwrap();
        assert!(longest > CAP_NS * 99 / 100, "the cap is reached: {longest}");
        assert!(at_cap.iter().all(|wait| *wait <= CAP_NS));
    }

    #[test]
    fn waits_are_jittered_not_a_fixed_schedule() {
        let drawn = waits(&mut backoff(2, 0), 200);
        let distinct: std::collections::BTreeSet<_> = drawn.iter().collect();
        assert!(distinct.len() > 190, "{} distinct waits", distinct.len());
        let firsts: std::collections::BTreeSet<u64> = (0..50)
            .map(|worker| backoff(2, worker).next_wait_ns())
            .collect();
        assert!(firsts.len() > 45, "workers' first waits differ: {firsts:?}");
    }

    #[test]
    fn waiters_at_the_cap_retry_about_twice_per_cap() {
        let mut backoff = backoff(3, 0);
        waits(&mut backoff, 10);
        let at_cap = waits(&mut backoff, 10_000);
        let mean = at_cap.iter().sum::<u64>() / at_cap.len() as u64;
        let expected = (BASE_NS + CAP_NS) / 2;
        assert!(
            mean.abs_diff(expected) < expected / 50,
            "mean wait {mean}, expected about {expected}"
        );
    }

    #[test]
    fn the_same_seed_and_worker_draw_the_same_waits() {
        assert_eq!(
            waits(&mut backoff(4, 7), 100),
            waits(&mut backoff(4, 7), 100)
        );
        assert_ne!(
            waits(&mut backoff(4, 7), 100),
            waits(&mut backoff(5, 7), 100)
        );
        assert_ne!(
            waits(&mut backoff(4, 7), 100),
            waits(&mut backoff(4, 8), 100)
        );
    }

    #[test]
    fn a_reset_starts_the_waits_over_from_the_base() {
        let mut backoff = backoff(6, 0);
        waits(&mut backoff, 20);
        backoff.reset();
        let after: Vec<u64> = (0..100)
            .map(|_| {
                let wait = backoff.next_wait_ns();
                backoff.reset();
                wait
            })
            .collect();
        assert!(
            after
                .iter()
                .all(|wait| (BASE_NS..=2 * BASE_NS).contains(wait)),
            "{after:?}"
        );
    }

    #[test]
    fn a_new_acquire_resets_the_back_off_but_polling_keeps_its_interval() {
        let mut backing_off = Waits::new(WaitMode::Backoff, BASE_NS, TTL_NS, 7, 0);
        for _ in 0..20 {
            backing_off.after_refusal_ns();
        }
        backing_off.begin();
        assert!(backing_off.after_refusal_ns() <= 2 * BASE_NS);
        let mut polling = Waits::new(WaitMode::Poll, BASE_NS, TTL_NS, 7, 0);
        polling.begin();
        let polled: Vec<u64> = (0..5).map(|_| polling.after_refusal_ns()).collect();
        assert_eq!(polled, [BASE_NS; 5]);
    }

    #[test]
    fn a_cap_below_the_base_is_raised_to_it() {
        let mut backoff = Backoff::new(100, 10, stream_rng(0, Stream::Backoff, 0));
        assert_eq!(backoff.cap_ns(), 100);
        assert_eq!(waits(&mut backoff, 3), [100, 100, 100]);
    }

    #[test]
    fn mode_names_parse_back_and_unknown_names_list_the_choices() {
        for mode in WaitMode::ALL {
            assert_eq!(mode.name().parse::<WaitMode>(), Ok(mode));
            assert_eq!(
                serde_json::to_string(&mode).unwrap(),
                format!("\"{}\"", mode.name())
            );
        }
        assert_eq!(WaitMode::default(), WaitMode::Poll);
        assert!(WaitMode::Poll.is_poll() && !WaitMode::Backoff.is_poll());
        let error = "queue".parse::<WaitMode>().unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown wait mode `queue`: expected poll or backoff"
        );
    }
}
