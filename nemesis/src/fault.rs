//! The faults the nemesis knows: each family's name and how its faults are drawn
//! ([`FaultKind`]), and each fault as data ([`Fault`]) that knows what it does to its target
//! ([`Effect`]) and which events record its start and its end. Adding a fault is a variant
//! here and its ops in the history's vocabulary; injection and validation are generic.

use fencer_harness::{EdgeAnchor, Event, EventType, Op, WorkerFault};
use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::schedule::ScheduleConfig;
use crate::server::ServerAction;

/// A family of faults, as named on the command line (`--nemesis pause,skew,drop-renew`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// Freeze a worker and its renewal task (GC pause, SIGSTOP, VM steal).
    Pause,
    /// Offset, drift and step the clocks of the lock server and workers.
    Skew,
    /// The lock service applies a renew but its reply is lost.
    DropRenew,
    /// A worker's writes are held in flight and delivered late (a slow network path, a
    /// retransmission), independent of any pause: "A's UPDATE arrives after B's".
    DelayWrite,
    /// The lock service restarts: down for a while, every lease lost; whether its token
    /// counter survives is the backend's property.
    Restart,
    /// A worker's acquires are held in flight and delivered late: the grant lands after the
    /// worker gave up on it.
    DelayAcquire,
    /// A worker's renews (its renewal task's) are held in flight and delivered late: a renew
    /// lands after the lease it meant to extend expired or was granted to a rival.
    DelayRenew,
    /// A worker's releases are held in flight and delivered late: a release lands after the
    /// lease expired and a rival holds the lock.
    DelayRelease,
    /// A worker's lease is attacked at its edge: its renews, releases and writes, and its
    /// rivals' acquires, go out just before or just after the moment the lease expires.
    LeaseEdge,
    /// The lock service applies an acquire but its reply is lost (real tier: the grant happened,
    /// the worker records `info`).
    DropAcquire,
    /// The store applies a write but its reply is lost.
    DropWrite,
    /// A server fencer started is frozen with SIGSTOP (connections stay open, nothing is
    /// answered), then thawed with SIGCONT.
    ServerPause,
    /// Nothing crosses fencer's proxy to a server in either direction for a while.
    Partition,
    /// Fencer's proxy holds every reply from a server for a while.
    DelayReplies,
    /// Fencer's proxy loses every reply from a server for a while (requests still apply).
    DropReplies,
    /// Fencer's proxy closes every open connection to a server at once.
    Cut,
    /// The links between the members of a cluster fencer started are cut between groups of
    /// members for a while (clients still reach every member).
    NetPartition,
    /// The work a worker was doing under its lease is abandoned (the request it served was
    /// cancelled, its deadline passed) while its process lives on: its lock client must stop
    /// renewing, and the abandoned work may still send its write late.
    Cancel,
}

impl FaultKind {
    /// The default families (`--nemesis default`, and a `Harness`'s): pauses, skew, lost renew
    /// replies, restarts, every kind of call held in flight, and races at the lease's edge —
    /// faults that reach any backend through its calls, so a plain run meets them all.
    pub const DEFAULT: [FaultKind; 9] = [
        FaultKind::Pause,
        FaultKind::Skew,
        FaultKind::DropRenew,
        FaultKind::DelayWrite,
        FaultKind::Restart,
        FaultKind::DelayAcquire,
        FaultKind::DelayRenew,
        FaultKind::DelayRelease,
        FaultKind::LeaseEdge,
    ];

    /// Families that are not on by default but can be asked for by name: lost acquire and
    /// write replies, and cancelled work.
    pub const OPT_IN: [FaultKind; 3] = [
        FaultKind::DropAcquire,
        FaultKind::DropWrite,
        FaultKind::Cancel,
    ];

    /// Families only a real server fencer started itself can suffer (its process or fencer's
    /// proxy in front of it); opt-in too, and refused anywhere else: the simulation has no
    /// server process and a server behind a plain URL is not fencer's to freeze.
    /// Net partitions are drawn only for a cluster whose members talk to each other.
    pub const SERVER: [FaultKind; 6] = [
        FaultKind::ServerPause,
        FaultKind::Partition,
        FaultKind::DelayReplies,
        FaultKind::DropReplies,
        FaultKind::Cut,
        FaultKind::NetPartition,
    ];

    /// The CLI name.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Pause => "pause",
            FaultKind::Skew => "skew",
            FaultKind::DropRenew => "drop-renew",
            FaultKind::DelayWrite => "delay-write",
            FaultKind::Restart => "restart",
            FaultKind::DropAcquire => "drop-acquire",
            FaultKind::DropWrite => "drop-write",
            FaultKind::DelayAcquire => "delay-acquire",
            FaultKind::DelayRenew => "delay-renew",
            FaultKind::DelayRelease => "delay-release",
            FaultKind::LeaseEdge => "lease-edge",
            FaultKind::ServerPause => "server-pause",
            FaultKind::Partition => "partition",
            FaultKind::DelayReplies => "delay-replies",
            FaultKind::DropReplies => "drop-replies",
            FaultKind::Cut => "cut",
            FaultKind::NetPartition => "net-partition",
            FaultKind::Cancel => "cancel",
        }
    }

    /// Every family fencer knows: [`FaultKind::DEFAULT`], then [`FaultKind::OPT_IN`], then
    /// [`FaultKind::SERVER`].
    pub const ALL: [FaultKind; 18] = [
        FaultKind::Pause,
        FaultKind::Skew,
        FaultKind::DropRenew,
        FaultKind::DelayWrite,
        FaultKind::Restart,
        FaultKind::DelayAcquire,
        FaultKind::DelayRenew,
        FaultKind::DelayRelease,
        FaultKind::LeaseEdge,
        FaultKind::DropAcquire,
        FaultKind::DropWrite,
        FaultKind::Cancel,
        FaultKind::ServerPause,
        FaultKind::Partition,
        FaultKind::DelayReplies,
        FaultKind::DropReplies,
        FaultKind::Cut,
        FaultKind::NetPartition,
    ];

    /// True for the [`FaultKind::SERVER`] families.
    pub fn needs_private_server(self) -> bool {
        FaultKind::SERVER.contains(&self)
    }

    /// Draws one fault of this family starting at `at_ns`, aimed at `worker` when it aims at
    /// a worker. Sizes are relative to the TTL, the scale at which leases break; where a
    /// lease-edge attack lands is drawn from `aim`, everything else from `rng`.
    pub(crate) fn draw(
        self,
        at_ns: u64,
        worker: String,
        config: &ScheduleConfig,
        rng: &mut ChaCha8Rng,
        aim: &mut ChaCha8Rng,
    ) -> Fault {
        let ttl = config.ttl_ns;
        match self {
            FaultKind::Pause => Fault::Pause {
                at_ns,
                target: worker,
                duration_ns: rng.random_range(ttl / 2..=ttl.saturating_mul(2)),
            },
            FaultKind::DropRenew => Fault::DropRenew {
                at_ns,
                target: worker,
                duration_ns: rng.random_range(ttl / 4..=ttl.saturating_mul(2)),
            },
            FaultKind::DelayWrite => Fault::DelayWrite {
                at_ns,
                target: worker,
                // From well under a call timeout (the write is acknowledged late) to beyond a
                // TTL (it lands after the lease moved on).
                duration_ns: rng.random_range(ttl / 20..=ttl.saturating_mul(3) / 2),
            },
            FaultKind::Restart => Fault::Restart {
                at_ns,
                target: config.pick_lock_server(rng),
                duration_ns: rng.random_range(ttl / 2..=ttl.saturating_mul(2)),
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
            // Up to a TTL: an acquire held longer only blocks the lock for a grant nobody
            // waits for any more.
            FaultKind::DelayAcquire => Fault::DelayAcquire {
                at_ns,
                target: worker,
                duration_ns: rng.random_range(ttl / 20..=ttl),
            },
            // As writes: from a renew answered late to one landing after its lease expired.
            FaultKind::DelayRenew => Fault::DelayRenew {
                at_ns,
                target: worker,
                duration_ns: rng.random_range(ttl / 20..=ttl.saturating_mul(3) / 2),
            },
            FaultKind::DelayRelease => Fault::DelayRelease {
                at_ns,
                target: worker,
                duration_ns: rng.random_range(ttl / 20..=ttl.saturating_mul(3) / 2),
            },
            // A window long enough to contain at least one edge of a lease the worker holds
            // (or is racing for); offsets within a fortieth of a TTL of the edge, aimed from
            // their own stream.
            FaultKind::LeaseEdge => {
                let duration_ns = rng.random_range(ttl / 2..=ttl.saturating_mul(2));
                let aimed = crate::aim::edge_aim(ttl / crate::schedule::EDGE_WINDOW_PER_TTL, aim);
                Fault::LeaseEdge {
                    at_ns,
                    target: worker,
                    duration_ns,
                    own_offset_ns: aimed.own_offset_ns,
                    rival_offset_ns: aimed.rival_offset_ns,
                    anchor: aimed.anchor,
                }
            }
            FaultKind::ServerPause => Fault::ServerPause {
                at_ns,
                target: config.pick_server(rng),
                duration_ns: rng.random_range(ttl / 2..=ttl.saturating_mul(2)),
            },
            FaultKind::Partition => Fault::Partition {
                at_ns,
                target: config.pick_server(rng),
                duration_ns: rng.random_range(ttl / 2..=ttl.saturating_mul(2)),
            },
            // Replies late by a fraction of a TTL up to a whole one: renewals land late,
            // acquires are granted before the worker hears of it.
            FaultKind::DelayReplies => Fault::DelayReplies {
                at_ns,
                target: config.pick_server(rng),
                duration_ns: rng.random_range(ttl / 2..=ttl.saturating_mul(2)),
                delay_ns: rng.random_range(ttl / 10..=ttl),
            },
            FaultKind::DropReplies => Fault::DropReplies {
                at_ns,
                target: config.pick_server(rng),
                duration_ns: rng.random_range(ttl / 4..=ttl),
            },
            FaultKind::Cut => Fault::Cut {
                at_ns,
                target: config.pick_server(rng),
            },
            FaultKind::Cancel => Fault::Cancel {
                at_ns,
                target: worker,
            },
            FaultKind::NetPartition => {
                let (target, groups) = config.pick_partition(rng);
                Fault::NetPartition {
                    at_ns,
                    target,
                    duration_ns: rng.random_range(ttl / 2..=ttl.saturating_mul(2)),
                    groups,
                }
            }
            FaultKind::Skew => {
                // The lock server's clock decides expiry, so it is skewed as often as all
                // workers together.
                let target = if rng.random_bool(0.5) {
                    config.pick_lock_server(rng)
                } else {
                    worker
                };
                if rng.random_bool(0.5) {
                    // One lock-server step in four is big: every lease expires at once
                    // (forward) or outlives its TTL several times over (backward).
                    let big = target_role(&target) == "lock" && rng.random_bool(0.25);
                    let size = signed(if big {
                        rng.random_range(
                            ttl.saturating_mul(2)
                                ..=ttl.saturating_mul(crate::schedule::MAX_BIG_JUMP_TTLS),
                        )
                    } else {
                        rng.random_range(ttl / 10..=ttl.saturating_mul(3) / 2)
                    });
                    Fault::ClockJump {
                        at_ns,
                        target,
                        jump_ns: if rng.random_bool(0.5) { size } else { -size },
                    }
                } else {
                    Fault::ClockDrift {
                        at_ns,
                        target,
                        drift_ppm: rng.random_range(
                            -crate::schedule::MAX_DRIFT_PPM..=crate::schedule::MAX_DRIFT_PPM,
                        ),
                    }
                }
            }
        }
    }
}

/// The role a target belongs to: `lock` for `lock` and for a cluster member `lock.n2` or
/// `lock.leader`; a worker's name for a worker.
pub fn target_role(target: &str) -> &str {
    target.split_once('.').map_or(target, |(role, _)| role)
}

/// The member a target names inside its role's cluster (`n2`, or `leader` for whichever member
/// leads when the fault starts), `None` for a whole role or a worker.
pub fn target_member(target: &str) -> Option<&str> {
    target.split_once('.').map(|(_, member)| member)
}

/// The member name that stands, in a fault's target (`lock.leader`) or a net partition's
/// groups, for the member that leads when the fault starts.
pub const LEADER: &str = "leader";

/// `ns` as a signed size, at most `i64::MAX`.
fn signed(ns: u64) -> i64 {
    i64::try_from(ns).unwrap_or(i64::MAX)
}

impl std::str::FromStr for FaultKind {
    type Err = UnknownFault;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        FaultKind::ALL
            .into_iter()
            .find(|kind| kind.name() == text)
            .ok_or_else(|| UnknownFault(text.to_string()))
    }
}

/// A name that is no fault family (`--nemesis`): the message lists every family and group.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown nemesis `{0}`: expected one of {families}, default, all, or none",
    families = FaultKind::ALL.map(FaultKind::name).join(", ")
)]
pub struct UnknownFault(pub String);

/// One scheduled fault. Targets are process names (`w0`), clock owners (`lock`, `w0`) or, for
/// server faults, the server's role (`lock`, `store`) or one member of a cluster fencer
/// started for that role (`lock.n2`; `lock.leader`: whichever member leads when the fault
/// starts, recorded in its events).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "fault", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Fault {
    /// Freeze `target` from `at_ns` for `duration_ns`.
    Pause {
        /// True time the pause starts.
        at_ns: u64,
        /// The worker to freeze.
        target: String,
        /// How long it stays frozen.
        duration_ns: u64,
    },
    /// Step `target`'s clock by `jump_ns` at `at_ns`.
    ClockJump {
        /// True time of the step.
        at_ns: u64,
        /// Whose clock.
        target: String,
        /// Size of the step (negative: backwards).
        jump_ns: i64,
    },
    /// From `at_ns`, `target`'s clock drifts at `drift_ppm`.
    ClockDrift {
        /// True time the drift starts.
        at_ns: u64,
        /// Whose clock.
        target: String,
        /// Rate error in parts per million (negative: slow).
        drift_ppm: i64,
    },
    /// From `at_ns`, renew replies to `target` are lost for `duration_ns`.
    DropRenew {
        /// True time the loss starts.
        at_ns: u64,
        /// The worker whose renew replies are lost.
        target: String,
        /// How long replies are lost.
        duration_ns: u64,
    },
    /// Writes `target` sends in `[at_ns, at_ns + duration_ns)` are each held in flight for
    /// `duration_ns` before delivery.
    DelayWrite {
        /// True time the window opens.
        at_ns: u64,
        /// The worker whose writes are delayed.
        target: String,
        /// Window length, and how long each write in it is held.
        duration_ns: u64,
    },
    /// `target` (a server: `lock`; in the real tier also `store`) restarts at `at_ns` and stays
    /// down for `duration_ns`.
    Restart {
        /// True time of the restart.
        at_ns: u64,
        /// The server.
        target: String,
        /// How long it refuses connections.
        duration_ns: u64,
    },
    /// From `at_ns`, acquire replies to `target` are lost for `duration_ns`.
    DropAcquire {
        /// True time the loss starts.
        at_ns: u64,
        /// The worker whose acquire replies are lost.
        target: String,
        /// How long replies are lost.
        duration_ns: u64,
    },
    /// From `at_ns`, write replies to `target` are lost for `duration_ns`.
    DropWrite {
        /// True time the loss starts.
        at_ns: u64,
        /// The worker whose write replies are lost.
        target: String,
        /// How long replies are lost.
        duration_ns: u64,
    },
    /// The server `target` (`lock` or `store`) is frozen (SIGSTOP) from `at_ns` for
    /// `duration_ns`.
    ServerPause {
        /// True time the server is stopped.
        at_ns: u64,
        /// The server's role.
        target: String,
        /// How long it stays stopped.
        duration_ns: u64,
    },
    /// Fencer's proxy to `target` passes nothing either way from `at_ns` for `duration_ns`.
    Partition {
        /// True time the partition starts.
        at_ns: u64,
        /// The server's role.
        target: String,
        /// How long it lasts.
        duration_ns: u64,
    },
    /// Fencer's proxy holds every reply from `target` for `delay_ns`, from `at_ns` for
    /// `duration_ns`.
    DelayReplies {
        /// True time the window opens.
        at_ns: u64,
        /// The server's role.
        target: String,
        /// Window length.
        duration_ns: u64,
        /// How long each reply is held.
        delay_ns: u64,
    },
    /// Fencer's proxy loses every reply from `target` from `at_ns` for `duration_ns`; the
    /// connections that lost replies are cut when it heals.
    DropReplies {
        /// True time the loss starts.
        at_ns: u64,
        /// The server's role.
        target: String,
        /// How long replies are lost.
        duration_ns: u64,
    },
    /// Fencer's proxy closes every connection to `target` at `at_ns`.
    Cut {
        /// True time of the cut.
        at_ns: u64,
        /// The server's role.
        target: String,
    },
    /// The links between the members of the cluster fencer started for `target` are cut
    /// between `groups` from `at_ns` for `duration_ns`, then all restored
    /// ([`crate::ClusterFaults::partition`]): members keep their links within a group (a
    /// member in two groups bridges them), a member in no group is cut off from every other.
    /// The name [`LEADER`] in a group stands for the member leading when the partition starts,
    /// which then counts in that group only (`[["leader"], ["n1", "n2", "n3"]]` isolates the
    /// leader of three). Clients still reach every member.
    NetPartition {
        /// True time the partition starts.
        at_ns: u64,
        /// The cluster's role (`lock`).
        target: String,
        /// How long it lasts.
        duration_ns: u64,
        /// Members by name (`n1`), each group a side of the partition.
        groups: Vec<Vec<String>>,
    },
    /// Acquires `target` sends in `[at_ns, at_ns + duration_ns)` are each held in flight for
    /// `duration_ns` before delivery.
    DelayAcquire {
        /// True time the window opens.
        at_ns: u64,
        /// The worker whose acquires are delayed.
        target: String,
        /// Window length, and how long each acquire in it is held.
        duration_ns: u64,
    },
    /// Renews `target` (its renewal task) sends in `[at_ns, at_ns + duration_ns)` are each
    /// held in flight for `duration_ns` before delivery.
    DelayRenew {
        /// True time the window opens.
        at_ns: u64,
        /// The worker whose renews are delayed.
        target: String,
        /// Window length, and how long each renew in it is held.
        duration_ns: u64,
    },
    /// Releases `target` sends in `[at_ns, at_ns + duration_ns)` are each held in flight for
    /// `duration_ns` before delivery.
    DelayRelease {
        /// True time the window opens.
        at_ns: u64,
        /// The worker whose releases are delayed.
        target: String,
        /// Window length, and how long each release in it is held.
        duration_ns: u64,
    },
    /// From `at_ns` for `duration_ns`, the race between `target` and the lease it holds or
    /// wants is run at the lease's edge: the holder's renews, releases and writes wait until
    /// its lease's expiry (the send time of its last confirmed grant or renew, plus the TTL)
    /// plus `own_offset_ns`, and acquires for that lease (rivals' when `target` holds it,
    /// `target`'s when another does) until the expiry plus `rival_offset_ns`
    /// ([`fencer_harness::ProcessFaults::edge_hold_until`]).
    LeaseEdge {
        /// True time the attack starts.
        at_ns: u64,
        /// The worker whose lease is attacked.
        target: String,
        /// How long the attack lasts.
        duration_ns: u64,
        /// Where `target`'s own calls land relative to its lease's expiry (negative: before).
        own_offset_ns: i64,
        /// Where rivals' acquires land relative to the holder's expiry.
        rival_offset_ns: i64,
        /// Which moment of the holder's last confirmed grant or renew its expiry is counted
        /// from (left out of a plan when it is the send).
        #[serde(default, skip_serializing_if = "EdgeAnchor::is_sent")]
        anchor: EdgeAnchor,
    },
    /// At `at_ns`, the work `target` is doing under its lease is abandoned by its caller
    /// ([`fencer_harness::WorkerFault::Cancel`]); its process lives on.
    Cancel {
        /// True time of the cancellation.
        at_ns: u64,
        /// The worker whose work is cancelled.
        target: String,
    },
}

/// What a fault does to its target in a run where fencer owns the target (a worker, a node
/// clock, the simulation's lock service).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// A fault on a worker process, on until the fault heals.
    Worker(WorkerFault),
    /// The target's clock steps by this many nanoseconds (instant).
    ClockJump(i64),
    /// The target's clock drifts at this rate, in ppm, from now on (instant).
    ClockDrift(i64),
    /// The target service restarts: down for the fault's duration, its volatile state lost.
    Restart,
    /// Only a real server fencer started can take it ([`Fault::server_action`]).
    ServerOnly,
    /// Only a cluster fencer started can take it: the links between its members
    /// ([`crate::ClusterFaults`]).
    Cluster,
}

/// What may take a fault: the names of the targets a plan may aim it at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Aims {
    /// A worker (`w0`, `w1`, ...).
    pub worker: bool,
    /// These servers' roles.
    pub servers: &'static [&'static str],
}

impl Aims {
    /// `a worker (w0..)`, `a server (lock, store)`, ...: for "expected ... found" messages.
    pub fn describe(&self) -> String {
        match (self.worker, self.servers) {
            (true, []) => "a worker (w0..)".into(),
            (true, ["lock"]) => "a worker (w0..) or lock".into(),
            (true, _) => "a worker (w0..) or a server".into(),
            (false, servers) => format!("a server ({})", servers.join(", ")),
        }
    }
}

/// The field `$field` of `$fault`, a field every fault has: one list of the variants for
/// every accessor of such a field, so a new variant cannot be forgotten in one of them.
macro_rules! every_fault {
    ($fault:expr, $field:ident) => {
        match $fault {
            Fault::Pause { $field, .. }
            | Fault::ClockJump { $field, .. }
            | Fault::ClockDrift { $field, .. }
            | Fault::DropRenew { $field, .. }
            | Fault::DelayWrite { $field, .. }
            | Fault::Restart { $field, .. }
            | Fault::DropAcquire { $field, .. }
            | Fault::DropWrite { $field, .. }
            | Fault::ServerPause { $field, .. }
            | Fault::Partition { $field, .. }
            | Fault::DelayReplies { $field, .. }
            | Fault::DropReplies { $field, .. }
            | Fault::Cut { $field, .. }
            | Fault::NetPartition { $field, .. }
            | Fault::DelayAcquire { $field, .. }
            | Fault::DelayRenew { $field, .. }
            | Fault::DelayRelease { $field, .. }
            | Fault::LeaseEdge { $field, .. }
            | Fault::Cancel { $field, .. } => $field,
        }
    };
}

impl Fault {
    /// True time the fault starts.
    pub fn at_ns(&self) -> u64 {
        *every_fault!(self, at_ns)
    }

    /// The same fault starting `delay_ns` later: a real-tier run's schedule counts from the
    /// moment its workers start, after its servers and clusters came up.
    pub fn delayed_by(mut self, delay_ns: u64) -> Fault {
        let at_ns = every_fault!(&mut self, at_ns);
        *at_ns = at_ns.saturating_add(delay_ns);
        self
    }

    /// The same fault starting at `at_ns` instead: a shrunk plan that keeps only the cycles
    /// around an anomaly moves the faults with them.
    pub fn starting_at(mut self, at_ns: u64) -> Fault {
        *every_fault!(&mut self, at_ns) = at_ns;
        self
    }

    /// The process or clock the fault targets.
    pub fn target(&self) -> &str {
        every_fault!(self, target)
    }

    /// The family the fault belongs to.
    pub fn kind(&self) -> FaultKind {
        match self {
            Fault::Pause { .. } => FaultKind::Pause,
            Fault::ClockJump { .. } | Fault::ClockDrift { .. } => FaultKind::Skew,
            Fault::DropRenew { .. } => FaultKind::DropRenew,
            Fault::DelayWrite { .. } => FaultKind::DelayWrite,
            Fault::Restart { .. } => FaultKind::Restart,
            Fault::DropAcquire { .. } => FaultKind::DropAcquire,
            Fault::DropWrite { .. } => FaultKind::DropWrite,
            Fault::ServerPause { .. } => FaultKind::ServerPause,
            Fault::Partition { .. } => FaultKind::Partition,
            Fault::DelayReplies { .. } => FaultKind::DelayReplies,
            Fault::DropReplies { .. } => FaultKind::DropReplies,
            Fault::Cut { .. } => FaultKind::Cut,
            Fault::NetPartition { .. } => FaultKind::NetPartition,
            Fault::DelayAcquire { .. } => FaultKind::DelayAcquire,
            Fault::DelayRenew { .. } => FaultKind::DelayRenew,
            Fault::DelayRelease { .. } => FaultKind::DelayRelease,
            Fault::LeaseEdge { .. } => FaultKind::LeaseEdge,
            Fault::Cancel { .. } => FaultKind::Cancel,
        }
    }

    /// What the fault does where fencer owns its target.
    pub fn effect(&self) -> Effect {
        match self {
            Fault::Pause { .. } => Effect::Worker(WorkerFault::Freeze),
            Fault::DropRenew { .. } => Effect::Worker(WorkerFault::LoseReplies(Op::Renew)),
            Fault::DropAcquire { .. } => Effect::Worker(WorkerFault::LoseReplies(Op::Acquire)),
            Fault::DropWrite { .. } => Effect::Worker(WorkerFault::LoseReplies(Op::Write)),
            Fault::DelayWrite { duration_ns, .. } => Effect::Worker(WorkerFault::DelayRequests {
                op: Op::Write,
                delay_ns: *duration_ns,
            }),
            Fault::DelayAcquire { duration_ns, .. } => Effect::Worker(WorkerFault::DelayRequests {
                op: Op::Acquire,
                delay_ns: *duration_ns,
            }),
            Fault::DelayRenew { duration_ns, .. } => Effect::Worker(WorkerFault::DelayRequests {
                op: Op::Renew,
                delay_ns: *duration_ns,
            }),
            Fault::DelayRelease { duration_ns, .. } => Effect::Worker(WorkerFault::DelayRequests {
                op: Op::Release,
                delay_ns: *duration_ns,
            }),
            Fault::LeaseEdge {
                own_offset_ns,
                rival_offset_ns,
                anchor,
                ..
            } => Effect::Worker(WorkerFault::LeaseEdge {
                own_offset_ns: *own_offset_ns,
                rival_offset_ns: *rival_offset_ns,
                anchor: *anchor,
            }),
            Fault::Cancel { .. } => Effect::Worker(WorkerFault::Cancel),
            Fault::ClockJump { jump_ns, .. } => Effect::ClockJump(*jump_ns),
            Fault::ClockDrift { drift_ppm, .. } => Effect::ClockDrift(*drift_ppm),
            Fault::Restart { .. } => Effect::Restart,
            Fault::ServerPause { .. }
            | Fault::Partition { .. }
            | Fault::DelayReplies { .. }
            | Fault::DropReplies { .. }
            | Fault::Cut { .. } => Effect::ServerOnly,
            Fault::NetPartition { .. } => Effect::Cluster,
        }
    }

    /// What a real server fencer started does when it takes the fault, and what undoes it
    /// when the fault ends; `None` for faults no server takes.
    pub fn server_action(&self) -> Option<(ServerAction, Option<ServerAction>)> {
        Some(match self {
            Fault::Restart { .. } => (ServerAction::Kill, Some(ServerAction::Start)),
            Fault::ClockJump { jump_ns, .. } => (ServerAction::JumpClock(*jump_ns), None),
            Fault::ServerPause { .. } => (ServerAction::Pause, Some(ServerAction::Resume)),
            Fault::Partition { duration_ns, .. } => (
                ServerAction::Partition(std::time::Duration::from_nanos(*duration_ns)),
                None,
            ),
            Fault::DelayReplies { delay_ns, .. } => (
                ServerAction::DelayReplies(std::time::Duration::from_nanos(*delay_ns)),
                Some(ServerAction::DelayReplies(std::time::Duration::ZERO)),
            ),
            Fault::DropReplies { .. } => {
                (ServerAction::DropReplies, Some(ServerAction::HealReplies))
            }
            Fault::Cut { .. } => (ServerAction::Cut, None),
            Fault::Pause { .. }
            | Fault::NetPartition { .. }
            | Fault::ClockDrift { .. }
            | Fault::DropRenew { .. }
            | Fault::DelayWrite { .. }
            | Fault::DropAcquire { .. }
            | Fault::DropWrite { .. }
            | Fault::DelayAcquire { .. }
            | Fault::DelayRenew { .. }
            | Fault::DelayRelease { .. }
            | Fault::LeaseEdge { .. }
            | Fault::Cancel { .. } => return None,
        })
    }

    /// Which targets a plan may aim the fault at: workers for worker faults and clocks, the
    /// simulation's lock for its clock drift, servers for what servers take, and workers for
    /// what a server's process and proxy take (an exec client's child and proxy take them).
    pub fn aims(&self) -> Aims {
        match self.effect() {
            Effect::Worker(_) => Aims {
                worker: true,
                servers: &[],
            },
            Effect::ClockJump(_) => Aims {
                worker: true,
                servers: &["lock", "store"],
            },
            Effect::ClockDrift(_) => Aims {
                worker: true,
                servers: &["lock"],
            },
            // A worker whose lock client is a process of its own (an exec client) takes the
            // faults of its process and its proxy.
            Effect::ServerOnly => Aims {
                worker: true,
                servers: &["lock", "store"],
            },
            Effect::Restart | Effect::Cluster => Aims {
                worker: false,
                servers: &["lock", "store"],
            },
        }
    }

    /// The ops of the nemesis events that record the fault's start and, for faults that
    /// last, its end.
    pub fn ops(&self) -> (Op, Option<Op>) {
        match self {
            Fault::Pause { .. } => (Op::Pause, Some(Op::Resume)),
            Fault::ClockJump { .. } => (Op::ClockJump, None),
            Fault::ClockDrift { .. } => (Op::ClockDrift, None),
            Fault::DropRenew { .. } => (Op::DropRenew, Some(Op::HealRenew)),
            Fault::DelayWrite { .. } => (Op::DelayWrite, Some(Op::HealWrite)),
            Fault::Restart { .. } => (Op::Restart, Some(Op::Recover)),
            Fault::DropAcquire { .. } => (Op::DropAcquireReply, Some(Op::HealAcquireReply)),
            Fault::DropWrite { .. } => (Op::DropWriteReply, Some(Op::HealWriteReply)),
            Fault::ServerPause { .. } => (Op::ServerPause, Some(Op::ServerResume)),
            Fault::Partition { .. } => (Op::Partition, Some(Op::HealPartition)),
            Fault::DelayReplies { .. } => (Op::DelayReplies, Some(Op::HealDelayReplies)),
            Fault::DropReplies { .. } => (Op::DropReplies, Some(Op::HealDropReplies)),
            Fault::Cut { .. } => (Op::Cut, None),
            Fault::NetPartition { .. } => (Op::NetPartition, Some(Op::HealNetPartition)),
            Fault::DelayAcquire { .. } => (Op::DelayAcquire, Some(Op::HealDelayAcquire)),
            Fault::DelayRenew { .. } => (Op::DelayRenew, Some(Op::HealDelayRenew)),
            Fault::DelayRelease { .. } => (Op::DelayRelease, Some(Op::HealDelayRelease)),
            Fault::LeaseEdge { .. } => (Op::LeaseEdge, Some(Op::HealLeaseEdge)),
            Fault::Cancel { .. } => (Op::Cancel, None),
        }
    }

    /// The nemesis event that records the fault's start: its op, target and parameters.
    pub fn start_event(&self) -> Event {
        let (f, heal) = self.ops();
        let mut event = Event {
            target: Some(self.target().to_string()),
            ..Event::new("nemesis", EventType::Nemesis, f)
        };
        if heal.is_some() {
            event.duration_ns = Some(self.duration_ns());
        }
        match self {
            Fault::ClockJump { jump_ns, .. } => event.jump_ns = Some(*jump_ns),
            Fault::ClockDrift { drift_ppm, .. } => event.drift_ppm = Some(*drift_ppm),
            Fault::DelayReplies { delay_ns, .. } => event.delay_ns = Some(*delay_ns),
            Fault::NetPartition { groups, .. } => event.value = Some(groups_text(groups)),
            _ => {}
        }
        event
    }

    /// The nemesis event that records the fault's end, when it lasts.
    pub fn end_event(&self) -> Option<Event> {
        let (_, heal) = self.ops();
        heal.map(|f| Event {
            target: Some(self.target().to_string()),
            ..Event::new("nemesis", EventType::Nemesis, f)
        })
    }

    /// How long the fault can keep workers from making progress, for a lease TTL of `ttl_ns`:
    /// its whole duration when their process, or the server they need, is stopped or cut
    /// off, and for a lease-edge attack its duration plus the TTL (a call made as it ends
    /// still waits for its lease's edge). A run's time budget must allow for it.
    pub fn stalls_workers_ns(&self, ttl_ns: u64) -> u64 {
        match self {
            Fault::Pause { duration_ns, .. }
            | Fault::ServerPause { duration_ns, .. }
            | Fault::Restart { duration_ns, .. }
            | Fault::Partition { duration_ns, .. } => *duration_ns,
            Fault::LeaseEdge { duration_ns, .. } => duration_ns.saturating_add(ttl_ns),
            _ => 0,
        }
    }

    /// How long a request may be held in flight by the fault (zero for faults that hold none):
    /// a run ends only once such requests have landed.
    pub fn holds_requests_ns(&self) -> u64 {
        match self.effect() {
            Effect::Worker(WorkerFault::DelayRequests { delay_ns, .. }) => delay_ns,
            _ => 0,
        }
    }

    /// True for a fault aimed at a server's process, clock or connections (target `lock` or
    /// `store`, or a member of a cluster in that role: `lock.n2`) rather than at a worker. In
    /// the real tier with servers fencer started, these go to the server nemesis; everywhere
    /// else only the simulation's lock service can take them (restart, clock).
    pub fn aims_at_server(&self) -> bool {
        matches!(target_role(self.target()), "lock" | "store")
    }

    /// Every size in nanoseconds the fault carries besides its start, by field name: its
    /// duration, a reply delay, lease-edge offsets and a clock step (signed ones by their
    /// magnitude), for a plan's ceilings to bound.
    pub fn sizes_ns(&self) -> Vec<(&'static str, u64)> {
        let mut sizes = Vec::new();
        if self.ops().1.is_some() {
            sizes.push(("duration_ns", self.duration_ns()));
        }
        match self {
            Fault::DelayReplies { delay_ns, .. } => sizes.push(("delay_ns", *delay_ns)),
            Fault::LeaseEdge {
                own_offset_ns,
                rival_offset_ns,
                ..
            } => {
                sizes.push(("own_offset_ns", own_offset_ns.unsigned_abs()));
                sizes.push(("rival_offset_ns", rival_offset_ns.unsigned_abs()));
            }
            Fault::ClockJump { jump_ns, .. } => sizes.push(("jump_ns", jump_ns.unsigned_abs())),
            _ => {}
        }
        sizes
    }

    /// How long the fault lasts (zero for instant ones: jumps, drift changes, cuts).
    pub fn duration_ns(&self) -> u64 {
        match self {
            Fault::Pause { duration_ns, .. }
            | Fault::DropRenew { duration_ns, .. }
            | Fault::DelayWrite { duration_ns, .. }
            | Fault::Restart { duration_ns, .. }
            | Fault::DropAcquire { duration_ns, .. }
            | Fault::DropWrite { duration_ns, .. }
            | Fault::ServerPause { duration_ns, .. }
            | Fault::Partition { duration_ns, .. }
            | Fault::DelayReplies { duration_ns, .. }
            | Fault::DropReplies { duration_ns, .. }
            | Fault::NetPartition { duration_ns, .. }
            | Fault::DelayAcquire { duration_ns, .. }
            | Fault::DelayRenew { duration_ns, .. }
            | Fault::DelayRelease { duration_ns, .. }
            | Fault::LeaseEdge { duration_ns, .. } => *duration_ns,
            Fault::ClockJump { .. }
            | Fault::ClockDrift { .. }
            | Fault::Cut { .. }
            | Fault::Cancel { .. } => 0,
        }
    }
}

/// A net partition's groups as its events record them: `n1 n2 | n3 n4 n5`.
pub fn groups_text(groups: &[Vec<String>]) -> String {
    groups
        .iter()
        .map(|group| group.join(" "))
        .collect::<Vec<_>>()
        .join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_json_is_tagged_and_round_trips() {
        let fault = Fault::Pause {
            at_ns: 5,
            target: "w1".into(),
            duration_ns: 7,
        };
        let json = serde_json::to_string(&fault).unwrap();
        assert_eq!(
            json,
            r#"{"fault":"pause","at_ns":5,"target":"w1","duration_ns":7}"#
        );
        assert_eq!(serde_json::from_str::<Fault>(&json).unwrap(), fault);
        let typo = r#"{"fault":"pause","at_ns":5,"target":"w1","duraton_ns":7}"#;
        assert!(serde_json::from_str::<Fault>(typo).is_err());
    }

    #[test]
    fn a_delayed_fault_keeps_everything_but_its_start() {
        let partition = Fault::NetPartition {
            at_ns: 5,
            target: "lock".into(),
            duration_ns: 7,
            groups: vec![vec!["n1".into()], vec!["n2".into(), "n3".into()]],
        };
        let delayed = partition.clone().delayed_by(1_000);
        assert_eq!(delayed.at_ns(), 1_005);
        assert_eq!(delayed.clone().delayed_by(0), delayed);
        let (Fault::NetPartition { groups, .. }, Fault::NetPartition { groups: kept, .. }) =
            (&partition, &delayed)
        else {
            panic!("{delayed:?}");
        };
        assert_eq!(groups, kept);
        assert_eq!(delayed.duration_ns(), partition.duration_ns());
        assert_eq!(delayed.target(), partition.target());
        let late = Fault::Cut {
            at_ns: u64::MAX - 1,
            target: "lock".into(),
        };
        assert_eq!(late.delayed_by(5).at_ns(), u64::MAX, "saturates");
    }

    #[test]
    fn a_net_partition_is_tagged_and_a_member_target_names_its_role() {
        let json = r#"{"fault":"net-partition","at_ns":5,"target":"lock","duration_ns":7,"groups":[["n1","n2"],["n3","n4","n5"]]}"#;
        let fault: Fault = serde_json::from_str(json).unwrap();
        assert_eq!(serde_json::to_string(&fault).unwrap(), json);
        assert_eq!(fault.kind(), FaultKind::NetPartition);
        assert_eq!(fault.effect(), Effect::Cluster);
        assert_eq!(
            fault.start_event().value.as_deref(),
            Some("n1 n2 | n3 n4 n5")
        );
        assert!(fault.aims_at_server());
        let typo = json.replace("groups", "group");
        assert!(serde_json::from_str::<Fault>(&typo).is_err());
        let pause = Fault::ServerPause {
            at_ns: 1,
            target: "lock.leader".into(),
            duration_ns: 2,
        };
        assert!(pause.aims_at_server());
        assert_eq!(
            (target_role(pause.target()), target_member(pause.target())),
            ("lock", Some(LEADER))
        );
        assert_eq!((target_role("w0"), target_member("w0")), ("w0", None));
    }

    #[test]
    fn names_parse_back() {
        for kind in FaultKind::ALL {
            assert_eq!(kind.name().parse::<FaultKind>(), Ok(kind));
        }
        let listed: Vec<FaultKind> = FaultKind::DEFAULT
            .into_iter()
            .chain(FaultKind::OPT_IN)
            .chain(FaultKind::SERVER)
            .collect();
        assert_eq!(listed, FaultKind::ALL, "ALL is the three sets, each once");
        assert!(
            "gc".parse::<FaultKind>()
                .unwrap_err()
                .to_string()
                .contains("unknown nemesis `gc`")
        );
    }
}
