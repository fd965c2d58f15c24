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
    /// Roles of the servers fencer started itself (`lock`, `store`), and workers whose lock
    /// client is a process fencer started (`w0`): the targets of the [`FaultKind::SERVER`]
    /// families; with none, those families are left out.
    pub servers: Vec<String>,
    /// Clusters fencer started itself, by role: their members take the server families (and
    /// restarts and clock steps aimed at the lock service), and those whose members talk to
    /// each other take net partitions.
    pub clusters: Vec<ClusterShape>,
}

/// What a schedule needs to know of a cluster fencer starts for one role.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterShape {
    /// The role (`lock`).
    pub role: String,
    /// Its members' names (`n1`, …), in order.
    pub members: Vec<String>,
    /// Whether it has a leader to aim faults at (`lock.leader`).
    pub leader: bool,
    /// Whether its members talk to each other, so cutting them apart means something.
    pub partitions: bool,
}

/// The shapes a net partition of a cluster takes, as drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Topology {
    /// A minority of members cut off from the majority.
    MajorityMinority,
    /// Two halves that reach each other only through one member in both.
    Bridge,
    /// The leader alone, whoever it is when the partition starts.
    IsolateLeader,
}

/// Largest drift the nemesis sets, in ppm: 5 %, far beyond NTP's 500 ppm bound on purpose.
pub const MAX_DRIFT_PPM: i64 = 50_000;

/// Lease-edge offsets are drawn within a TTL divided by this, either side of the edge: a
/// quarter second for a 10 s lease, close enough that a call and the lease's expiry race
/// (down to [`AIM_MIN_NS`](crate::aim::AIM_MIN_NS), log-uniformly).
pub const EDGE_WINDOW_PER_TTL: u64 = 40;

/// Largest lock-server clock step, in TTLs: a VM restored from a snapshot or an operator
/// setting the date by hand moves the clock by minutes, not by a fraction of a lease.
pub const MAX_BIG_JUMP_TTLS: u64 = 5;

/// The most faults a schedule holds: a default run draws a few hundred, and a plan holding a
/// million is some 150 MB of JSON. [`schedule`] stops drawing here, so a fault gap far
/// shorter than the horizon cannot draw for ever.
pub const MAX_FAULTS: usize = 1_000_000;

/// Draws a schedule, sorted by start time, of at most [`MAX_FAULTS`] faults: every fault from
/// `rng` (the run's nemesis stream) but where lease-edge attacks land, which comes from `aim`
/// (its aim stream), so schedules without such attacks draw as they always did.
pub fn schedule(config: &ScheduleConfig, rng: &mut ChaCha8Rng, aim: &mut ChaCha8Rng) -> Vec<Fault> {
    let kinds: Vec<FaultKind> = config
        .kinds
        .iter()
        .copied()
        .filter(|kind| match kind {
            FaultKind::NetPartition => config.clusters.iter().any(|cluster| cluster.partitions),
            kind if kind.needs_private_server() => {
                !config.servers.is_empty() || !config.clusters.is_empty()
            }
            _ => true,
        })
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
        let fault = kind.draw(at_ns, worker, config, rng, aim);
        faults.push(fault);
    }
    faults
}

impl ScheduleConfig {
    /// One of the servers fencer started, or a cluster member (the schedule draws server
    /// faults only when there is one).
    pub(crate) fn pick_server(&self, rng: &mut ChaCha8Rng) -> String {
        if self.clusters.is_empty() {
            return self.servers[rng.random_range(0..self.servers.len())].clone();
        }
        let targets: Vec<String> = self
            .servers
            .iter()
            .cloned()
            .chain(self.clusters.iter().flat_map(ClusterShape::targets))
            .collect();
        targets[rng.random_range(0..targets.len())].clone()
    }

    /// What a restart or clock step aimed at the lock service hits: `lock` itself, or one of
    /// its members when it is a cluster (drawing nothing otherwise, so schedules without
    /// clusters stay as they were).
    pub(crate) fn pick_lock_server(&self, rng: &mut ChaCha8Rng) -> String {
        match self.clusters.iter().find(|cluster| cluster.role == "lock") {
            Some(cluster) => {
                let targets = cluster.targets();
                targets[rng.random_range(0..targets.len())].clone()
            }
            None => "lock".to_string(),
        }
    }

    /// A cluster that takes partitions, and the groups of one partition of it: a minority
    /// against the majority, two halves bridged by one member, or the leader alone (resolved
    /// when it starts).
    pub(crate) fn pick_partition(&self, rng: &mut ChaCha8Rng) -> (String, Vec<Vec<String>>) {
        let takers: Vec<&ClusterShape> = self
            .clusters
            .iter()
            .filter(|cluster| cluster.partitions)
            .collect();
        let cluster = takers[rng.random_range(0..takers.len())];
        let mut topologies = vec![Topology::MajorityMinority];
        if cluster.members.len() >= 3 {
            topologies.push(Topology::Bridge);
        }
        if cluster.leader {
            topologies.push(Topology::IsolateLeader);
        }
        let topology = topologies[rng.random_range(0..topologies.len())];
        (cluster.role.clone(), cluster.partition(topology, rng))
    }
}

impl ClusterShape {
    /// Its members as fault targets (`lock.n1`, …, and `lock.leader` when it has one).
    fn targets(&self) -> Vec<String> {
        let leader = self.leader.then_some(crate::fault::LEADER);
        self.members
            .iter()
            .map(String::as_str)
            .chain(leader)
            .map(|member| format!("{}.{member}", self.role))
            .collect()
    }

    /// The groups of one partition of `topology`, members drawn at random.
    fn partition(&self, topology: Topology, rng: &mut ChaCha8Rng) -> Vec<Vec<String>> {
        let mut members = self.members.clone();
        // Fisher–Yates, from the nemesis stream.
        for index in (1..members.len()).rev() {
            members.swap(index, rng.random_range(0..=index));
        }
        let sorted = |mut group: Vec<String>| {
            group.sort_by(|a, b| member_order(a, b));
            group
        };
        match topology {
            Topology::MajorityMinority => {
                let minority = rng.random_range(1..=(members.len().saturating_sub(1) / 2).max(1));
                let majority = members.split_off(minority.min(members.len()));
                vec![sorted(majority), sorted(members)]
            }
            Topology::Bridge => {
                let bridge = members.pop().expect("three members or more");
                let half = members.split_off(members.len() / 2);
                let mut left = members;
                let mut right = half;
                left.push(bridge.clone());
                right.push(bridge);
                vec![sorted(left), sorted(right)]
            }
            Topology::IsolateLeader => {
                vec![
                    vec![crate::fault::LEADER.to_string()],
                    sorted(self.members.clone()),
                ]
            }
        }
    }
}

/// Member names in their natural order (`n2` before `n10`).
fn member_order(a: &str, b: &str) -> std::cmp::Ordering {
    (a.len(), a).cmp(&(b.len(), b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencer_harness::{Stream, stream_rng};

    /// The schedule of `config` at `seed`, from the seed's nemesis and aim streams.
    fn drawn(config: &ScheduleConfig, seed: u64) -> Vec<Fault> {
        schedule(
            config,
            &mut stream_rng(seed, Stream::Nemesis, 0),
            &mut stream_rng(seed, Stream::Aim, 0),
        )
    }

    fn config(kinds: &[FaultKind]) -> ScheduleConfig {
        ScheduleConfig {
            kinds: kinds.iter().copied().collect(),
            workers: 3,
            ttl_ns: 10_000_000_000,
            horizon_ns: 1_000_000_000_000,
            mean_gap_ns: 5_000_000_000,
            servers: Vec::new(),
            clusters: Vec::new(),
        }
    }

    #[test]
    fn only_lease_edge_attacks_draw_from_the_aim_stream() {
        let with_aim = |kinds: &[FaultKind], aim_seed: u64| {
            schedule(
                &config(kinds),
                &mut stream_rng(3, Stream::Nemesis, 0),
                &mut stream_rng(aim_seed, Stream::Aim, 0),
            )
        };
        let without_edge: Vec<FaultKind> = FaultKind::DEFAULT
            .into_iter()
            .filter(|kind| *kind != FaultKind::LeaseEdge)
            .collect();
        assert_eq!(with_aim(&without_edge, 1), with_aim(&without_edge, 2));
        let (one, two) = (
            with_aim(&FaultKind::DEFAULT, 1),
            with_aim(&FaultKind::DEFAULT, 2),
        );
        assert_ne!(one, two, "the aim moves the attacks");
        let when = |faults: &[Fault]| faults.iter().map(Fault::at_ns).collect::<Vec<_>>();
        assert_eq!(when(&one), when(&two), "and nothing else");
    }

    #[test]
    fn schedule_is_a_function_of_the_seed() {
        let draw = |seed| drawn(&config(&FaultKind::DEFAULT), seed);
        assert_eq!(draw(3), draw(3));
        assert_ne!(draw(3), draw(4));
    }

    #[test]
    fn only_enabled_kinds_within_horizon_and_sizes_relative_to_ttl() {
        let config = config(&[FaultKind::Pause]);
        let faults = drawn(&config, 1);
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
        let faults = drawn(&config(&FaultKind::DEFAULT), 2);
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
        let faults = drawn(&config, 5);
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
        let faults = drawn(&config, 6);
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
        let faults = drawn(&config, 8);
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
        assert!(drawn(&config, 7).is_empty());
        config.servers = vec!["store".to_string()];
        let faults = drawn(&config, 7);
        let kinds: BTreeSet<FaultKind> = faults.iter().map(Fault::kind).collect();
        assert_eq!(
            kinds.len(),
            FaultKind::SERVER.len() - 1,
            "all but net-partition, which needs a cluster: {kinds:?}"
        );
        assert!(!kinds.contains(&FaultKind::NetPartition));
        assert!(faults.iter().all(|fault| fault.target() == "store"));
    }

    fn cluster(leader: bool, partitions: bool) -> ClusterShape {
        ClusterShape {
            role: "lock".into(),
            members: (1..=5).map(|n| format!("n{n}")).collect(),
            leader,
            partitions,
        }
    }

    #[test]
    fn a_cluster_lock_takes_server_faults_on_its_members_and_partitions_when_it_has_them() {
        let mut kinds = FaultKind::SERVER.to_vec();
        kinds.extend([FaultKind::Restart, FaultKind::Skew]);
        let mut config = config(&kinds);
        config.servers = vec!["store".into()];
        config.clusters = vec![cluster(false, false)];
        let faults = drawn(&config, 9);
        assert!(faults.iter().all(|f| f.kind() != FaultKind::NetPartition));
        assert!(
            faults
                .iter()
                .all(|f| f.target() != "lock" && f.target() != "lock.leader"),
            "no bare lock target and no leader for a cluster without one"
        );
        for kind in [
            FaultKind::Restart,
            FaultKind::ServerPause,
            FaultKind::Partition,
        ] {
            assert!(
                faults
                    .iter()
                    .any(|f| f.kind() == kind && f.target().starts_with("lock.n")),
                "{kind:?} on a member"
            );
        }
        assert!(
            faults.iter().any(
                |f| matches!(f, Fault::ClockJump { target, .. } if target.starts_with("lock.n"))
            )
        );
        assert_eq!(faults, drawn(&config, 9), "a function of the seed");

        config.clusters = vec![cluster(true, true)];
        let faults = drawn(&config, 9);
        assert!(faults.iter().any(|f| f.target() == "lock.leader"));
        let groups: Vec<&Vec<Vec<String>>> = faults
            .iter()
            .filter_map(|f| match f {
                Fault::NetPartition { groups, target, .. } => {
                    assert_eq!(target, "lock");
                    Some(groups)
                }
                _ => None,
            })
            .collect();
        let sizes = |g: &Vec<Vec<String>>| g.iter().map(Vec::len).collect::<Vec<_>>();
        let isolated = groups.iter().any(|g| g[0] == ["leader"] && g[1].len() == 5);
        let minority = groups
            .iter()
            .any(|g| sizes(g) == [4, 1] || sizes(g) == [3, 2]);
        let bridged = groups
            .iter()
            .any(|g| sizes(g) == [3, 3] && g[0].iter().any(|m| g[1].contains(m)));
        assert!(isolated && minority && bridged, "{groups:?}");
    }

    #[test]
    fn huge_gaps_and_ttls_saturate_instead_of_overflowing() {
        let config = ScheduleConfig {
            ttl_ns: u64::MAX,
            horizon_ns: u64::MAX,
            mean_gap_ns: u64::MAX,
            ..config(&FaultKind::DEFAULT)
        };
        let faults = drawn(&config, 3);
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
        let faults = drawn(&config, 4);
        assert_eq!(faults.len(), MAX_FAULTS);
    }

    #[test]
    fn no_kinds_means_no_faults() {
        assert!(drawn(&config(&[]), 2).is_empty());
    }
}
