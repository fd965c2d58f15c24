//! Drawing a fault schedule from the nemesis stream.
//!
//! Fault sizes are drawn relative to the lease TTL, because that is the scale at which leases
//! break: a pause of 0.5×–2× TTL sometimes outlives the lease and sometimes does not, which is
//! exactly the boundary a lock user must get right.

use std::collections::BTreeSet;

use rand::RngExt;
use rand_chacha::ChaCha8Rng;

use crate::fault::{Fault, FaultKind};

/// What the schedule may contain and over how long.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleConfig {
    /// Enabled fault families; empty means no faults.
    pub kinds: BTreeSet<FaultKind>,
    /// Number of workers (`w0`..); pause and drop-renew pick one of them.
    pub workers: usize,
    /// Lease TTL, the unit fault sizes are drawn in.
    pub ttl_ns: u64,
    /// Faults are scheduled in `[0, horizon_ns)`.
    pub horizon_ns: u64,
    /// Mean gap between two faults.
    pub mean_gap_ns: u64,
    /// Roles of the servers fencer started itself (`lock`, `store`), the targets of the
    /// [`FaultKind::SERVER`] families; with none, those families are left out.
    pub servers: Vec<String>,
}

/// Largest drift the nemesis sets, in ppm: 5 %, far beyond NTP's 500 ppm bound on purpose.
pub const MAX_DRIFT_PPM: i64 = 50_000;

/// Lease-edge offsets are drawn within a TTL divided by this, either side of the edge: a
/// quarter second for a 10 s lease, close enough that a call and the lease's expiry race.
pub const EDGE_WINDOW_PER_TTL: u64 = 40;

/// Largest lock-server clock step, in TTLs: a VM restored from a snapshot or an operator
/// setting the date by hand moves the clock by minutes, not by a fraction of a lease.
pub const MAX_BIG_JUMP_TTLS: u64 = 5;

/// The most faults a schedule holds: a default run draws a few hundred, and a plan holding a
/// million is some 150 MB of JSON. [`schedule`] stops drawing here, so a fault gap far
/// shorter than the horizon cannot draw for ever.
pub const MAX_FAULTS: usize = 1_000_000;

/// Draws a schedule, sorted by start time, of at most [`MAX_FAULTS`] faults.
pub fn schedule(config: &ScheduleConfig, rng: &mut ChaCha8Rng) -> Vec<Fault> {
    let kinds: Vec<FaultKind> = config
        .kinds
        .iter()
        .copied()
        .filter(|kind| !kind.needs_private_server() || !config.servers.is_empty())
        .collect();
    if kinds.is_empty() || config.workers == 0 || config.mean_gap_ns == 0 {
        return Vec::new();
    }
    let mut faults = Vec::new();
    let mut at_ns = 0u64;
    let longest_gap_ns = config.mean_gap_ns.saturating_mul(3) / 2;
    while faults.len() < MAX_FAULTS {
        at_ns = at_ns.saturating_add(rng.random_range(config.mean_gap_ns / 2..=longest_gap_ns));
        if at_ns >= config.horizon_ns {
            return faults;
        }
        let worker = format!("w{}", rng.random_range(0..config.workers));
        let kind = kinds[rng.random_range(0..kinds.len())];
        let fault = kind.draw(at_ns, worker, config, rng);
        faults.push(fault);
    }
    faults
}

impl ScheduleConfig {
    /// One of the servers fencer started (the schedule draws server faults only when there is
    /// one).
    pub(crate) fn pick_server(&self, rng: &mut ChaCha8Rng) -> String {
        self.servers[rng.random_range(0..self.servers.len())].clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencer_harness::{Stream, stream_rng};

    fn config(kinds: &[FaultKind]) -> ScheduleConfig {
        ScheduleConfig {
            kinds: kinds.iter().copied().collect(),
            workers: 3,
            ttl_ns: 10_000_000_000,
            horizon_ns: 1_000_000_000_000,
            mean_gap_ns: 5_000_000_000,
            servers: Vec::new(),
        }
    }

    #[test]
    fn schedule_is_a_function_of_the_seed() {
        let draw = |seed| {
            schedule(
                &config(&FaultKind::DEFAULT),
                &mut stream_rng(seed, Stream::Nemesis, 0),
            )
        };
        assert_eq!(draw(3), draw(3));
        assert_ne!(draw(3), draw(4));
    }

    #[test]
    fn only_enabled_kinds_within_horizon_and_sizes_relative_to_ttl() {
        let config = config(&[FaultKind::Pause]);
        let faults = schedule(&config, &mut stream_rng(1, Stream::Nemesis, 0));
        assert!(
            faults.len() > 100,
            "about 200 faults over 1000 s, got {}",
            faults.len()
        );
        for fault in &faults {
            let Fault::Pause {
                at_ns,
                duration_ns,
                target,
            } = fault
            else {
                panic!("only pauses were enabled: {fault:?}");
            };
            assert!(*at_ns < config.horizon_ns);
            assert!((config.ttl_ns / 2..=config.ttl_ns * 2).contains(duration_ns));
            assert!(["w0", "w1", "w2"].contains(&target.as_str()));
        }
        assert!(
            faults
                .windows(2)
                .all(|pair| pair[0].at_ns() <= pair[1].at_ns())
        );
    }

    #[test]
    fn all_kinds_appear_when_enabled() {
        let faults = schedule(
            &config(&FaultKind::DEFAULT),
            &mut stream_rng(2, Stream::Nemesis, 0),
        );
        let kinds: BTreeSet<FaultKind> = faults.iter().map(Fault::kind).collect();
        assert_eq!(kinds.len(), FaultKind::DEFAULT.len());
        assert!(
            faults
                .iter()
                .any(|f| matches!(f, Fault::ClockJump { jump_ns, .. } if *jump_ns < 0))
        );
        assert!(faults.iter().any(|f| f.target() == "lock"));
    }

    #[test]
    fn big_lock_clock_jumps_both_ways_appear_in_skew_schedules() {
        let config = config(&[FaultKind::Skew]);
        let faults = schedule(&config, &mut stream_rng(5, Stream::Nemesis, 0));
        let big = |forward: bool| {
            faults.iter().any(|fault| {
                matches!(fault, Fault::ClockJump { target, jump_ns, .. }
                    if target == "lock"
                        && jump_ns.unsigned_abs() >= 2 * config.ttl_ns
                        && (*jump_ns > 0) == forward)
            })
        };
        assert!(big(true) && big(false), "{faults:?}");
        for fault in &faults {
            if let Fault::ClockJump {
                target, jump_ns, ..
            } = fault
            {
                let limit = if target == "lock" {
                    MAX_BIG_JUMP_TTLS * config.ttl_ns
                } else {
                    config.ttl_ns * 3 / 2
                };
                assert!(jump_ns.unsigned_abs() <= limit, "{fault:?}");
            }
        }
    }

    #[test]
    fn delay_write_and_restart_are_drawn_relative_to_ttl() {
        let config = config(&[FaultKind::DelayWrite, FaultKind::Restart]);
        let faults = schedule(&config, &mut stream_rng(6, Stream::Nemesis, 0));
        let ttl = config.ttl_ns;
        let (mut delays, mut restarts) = (0, 0);
        for fault in &faults {
            match fault {
                Fault::DelayWrite { duration_ns, .. } => {
                    delays += 1;
                    assert!((ttl / 20..=ttl * 3 / 2).contains(duration_ns));
                }
                Fault::Restart {
                    target,
                    duration_ns,
                    ..
                } => {
                    restarts += 1;
                    assert_eq!(target, "lock");
                    assert!((ttl / 2..=ttl * 2).contains(duration_ns));
                }
                other => panic!("not enabled: {other:?}"),
            }
        }
        assert!(delays > 10 && restarts > 10, "{delays} {restarts}");
    }

    #[test]
    fn call_delays_and_lease_edge_attacks_are_drawn_relative_to_ttl() {
        let kinds = [
            FaultKind::DelayAcquire,
            FaultKind::DelayRenew,
            FaultKind::DelayRelease,
            FaultKind::LeaseEdge,
        ];
        let config = config(&kinds);
        let faults = schedule(&config, &mut stream_rng(8, Stream::Nemesis, 0));
        let ttl = config.ttl_ns;
        let window = (ttl / EDGE_WINDOW_PER_TTL) as i64;
        let mut seen = BTreeSet::new();
        let mut offsets_below_edge = 0;
        for fault in &faults {
            seen.insert(fault.kind());
            assert!(["w0", "w1", "w2"].contains(&fault.target()), "{fault:?}");
            match fault {
                Fault::DelayAcquire { duration_ns, .. } => {
                    assert!((ttl / 20..=ttl).contains(duration_ns), "{fault:?}");
                }
                Fault::DelayRenew { duration_ns, .. } | Fault::DelayRelease { duration_ns, .. } => {
                    assert!((ttl / 20..=ttl * 3 / 2).contains(duration_ns), "{fault:?}");
                }
                Fault::LeaseEdge {
                    duration_ns,
                    own_offset_ns,
                    rival_offset_ns,
                    ..
                } => {
                    assert!((ttl / 2..=ttl * 2).contains(duration_ns), "{fault:?}");
                    assert!((-window..=window).contains(own_offset_ns), "{fault:?}");
                    assert!((-window..=window).contains(rival_offset_ns), "{fault:?}");
                    offsets_below_edge += usize::from(*own_offset_ns < 0);
                }
                other => panic!("not enabled: {other:?}"),
            }
        }
        assert_eq!(seen.len(), kinds.len(), "every family drawn");
        let attacks = faults
            .iter()
            .filter(|f| f.kind() == FaultKind::LeaseEdge)
            .count();
        assert!(
            (1..attacks).contains(&offsets_below_edge),
            "offsets on both sides of the edge: {offsets_below_edge} of {attacks} below"
        );
    }

    #[test]
    fn server_faults_aim_at_started_servers_only() {
        let mut config = config(&FaultKind::SERVER);
        assert!(schedule(&config, &mut stream_rng(7, Stream::Nemesis, 0)).is_empty());
        config.servers = vec!["store".to_string()];
        let faults = schedule(&config, &mut stream_rng(7, Stream::Nemesis, 0));
        let kinds: BTreeSet<FaultKind> = faults.iter().map(Fault::kind).collect();
        assert_eq!(kinds.len(), FaultKind::SERVER.len());
        assert!(faults.iter().all(|fault| fault.target() == "store"));
    }

    #[test]
    fn huge_gaps_and_ttls_saturate_instead_of_overflowing() {
        let config = ScheduleConfig {
            ttl_ns: u64::MAX,
            horizon_ns: u64::MAX,
            mean_gap_ns: u64::MAX,
            ..config(&FaultKind::DEFAULT)
        };
        let faults = schedule(&config, &mut stream_rng(3, Stream::Nemesis, 0));
        assert!(!faults.is_empty() && faults.len() <= 2, "{faults:?}");
        assert!(
            faults
                .windows(2)
                .all(|pair| pair[0].at_ns() <= pair[1].at_ns())
        );
    }

    #[test]
    fn a_gap_far_shorter_than_the_horizon_stops_at_the_most_faults_a_schedule_holds() {
        let config = ScheduleConfig {
            horizon_ns: u64::MAX,
            mean_gap_ns: 2,
            ..config(&[FaultKind::Pause])
        };
        let faults = schedule(&config, &mut stream_rng(4, Stream::Nemesis, 0));
        assert_eq!(faults.len(), MAX_FAULTS);
    }

    #[test]
    fn no_kinds_means_no_faults() {
        assert!(schedule(&config(&[]), &mut stream_rng(2, Stream::Nemesis, 0)).is_empty());
    }
}
