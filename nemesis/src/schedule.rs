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

/// Largest lock-server clock step, in TTLs: a VM restored from a snapshot or an operator
/// setting the date by hand moves the clock by minutes, not by a fraction of a lease.
pub const MAX_BIG_JUMP_TTLS: u64 = 5;

/// Draws a schedule, sorted by start time.
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
    let ttl = config.ttl_ns;
    let mut faults = Vec::new();
    let mut at_ns = 0u64;
    loop {
        at_ns += rng.random_range(config.mean_gap_ns / 2..=config.mean_gap_ns * 3 / 2);
        if at_ns >= config.horizon_ns {
            return faults;
        }
        let worker = format!("w{}", rng.random_range(0..config.workers));
        let fault = match kinds[rng.random_range(0..kinds.len())] {
            FaultKind::Pause => Fault::Pause {
                at_ns,
                target: worker,
                duration_ns: rng.random_range(ttl / 2..=ttl * 2),
            },
            FaultKind::DropRenew => Fault::DropRenew {
                at_ns,
                target: worker,
                duration_ns: rng.random_range(ttl / 4..=ttl * 2),
            },
            FaultKind::DelayWrite => Fault::DelayWrite {
                at_ns,
                target: worker,
                // From well under a call timeout (the write is acknowledged late) to beyond a
                // TTL (it lands after the lease moved on).
                duration_ns: rng.random_range(ttl / 20..=ttl * 3 / 2),
            },
            FaultKind::Restart => Fault::Restart {
                at_ns,
                target: "lock".to_string(),
                duration_ns: rng.random_range(ttl / 2..=ttl * 2),
            },
            // One lost reply or a few: longer windows only starve the worker.
            FaultKind::DropAcquire => Fault::DropAcquire {
                at_ns,
                target: worker,
                duration_ns: rng.random_range(ttl / 10..=ttl / 2),
            },
            FaultKind::DropWrite => Fault::DropWrite {
                at_ns,
                target: worker,
                duration_ns: rng.random_range(ttl / 10..=ttl / 2),
            },
            FaultKind::ServerPause => Fault::ServerPause {
                at_ns,
                target: pick_server(config, rng),
                duration_ns: rng.random_range(ttl / 2..=ttl * 2),
            },
            FaultKind::Partition => Fault::Partition {
                at_ns,
                target: pick_server(config, rng),
                duration_ns: rng.random_range(ttl / 2..=ttl * 2),
            },
            // Replies late by a fraction of a TTL up to a whole one: renewals land late,
            // acquires are granted before the worker hears of it.
            FaultKind::DelayReplies => Fault::DelayReplies {
                at_ns,
                target: pick_server(config, rng),
                duration_ns: rng.random_range(ttl / 2..=ttl * 2),
                delay_ns: rng.random_range(ttl / 10..=ttl),
            },
            FaultKind::DropReplies => Fault::DropReplies {
                at_ns,
                target: pick_server(config, rng),
                duration_ns: rng.random_range(ttl / 4..=ttl),
            },
            FaultKind::Cut => Fault::Cut {
                at_ns,
                target: pick_server(config, rng),
            },
            FaultKind::Skew => {
                // The lock server's clock decides expiry, so it is skewed as often as all
                // workers together.
                let target = if rng.random_bool(0.5) {
                    "lock".to_string()
                } else {
                    worker
                };
                if rng.random_bool(0.5) {
                    // One lock-server step in four is big: every lease expires at once
                    // (forward) or outlives its TTL several times over (backward).
                    let big = target == "lock" && rng.random_bool(0.25);
                    let size = if big {
                        rng.random_range(ttl * 2..=ttl * MAX_BIG_JUMP_TTLS)
                    } else {
                        rng.random_range(ttl / 10..=ttl * 3 / 2)
                    } as i64;
                    Fault::ClockJump {
                        at_ns,
                        target,
                        jump_ns: if rng.random_bool(0.5) { size } else { -size },
                    }
                } else {
                    Fault::ClockDrift {
                        at_ns,
                        target,
                        drift_ppm: rng.random_range(-MAX_DRIFT_PPM..=MAX_DRIFT_PPM),
                    }
                }
            }
        };
        faults.push(fault);
    }
}

/// One of the servers fencer started (the caller checked there is one).
fn pick_server(config: &ScheduleConfig, rng: &mut ChaCha8Rng) -> String {
    config.servers[rng.random_range(0..config.servers.len())].clone()
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
                &config(&FaultKind::ALL),
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
            &config(&FaultKind::ALL),
            &mut stream_rng(2, Stream::Nemesis, 0),
        );
        let kinds: BTreeSet<FaultKind> = faults.iter().map(Fault::kind).collect();
        assert_eq!(kinds.len(), FaultKind::ALL.len());
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
    fn no_kinds_means_no_faults() {
        assert!(schedule(&config(&[]), &mut stream_rng(2, Stream::Nemesis, 0)).is_empty());
    }
}
