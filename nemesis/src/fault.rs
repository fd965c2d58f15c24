//! The faults the nemesis knows, as data.

use serde::{Deserialize, Serialize};

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
}

impl FaultKind {
    /// Every family, in CLI order; also the default `--nemesis`, so a plain run meets every
    /// fault fencer knows.
    pub const ALL: [FaultKind; 5] = [
        FaultKind::Pause,
        FaultKind::Skew,
        FaultKind::DropRenew,
        FaultKind::DelayWrite,
        FaultKind::Restart,
    ];

    /// Families that are never on by default (the simulation's default schedule, and so its
    /// histories, stay as they were) but can be asked for by name: lost acquire and write
    /// replies.
    pub const OPT_IN: [FaultKind; 2] = [FaultKind::DropAcquire, FaultKind::DropWrite];

    /// Families only a real server fencer started itself can suffer (its process or fencer's
    /// proxy in front of it); opt-in too, and refused anywhere else: the simulation has no
    /// server process and a server behind a plain URL is not fencer's to freeze.
    pub const SERVER: [FaultKind; 5] = [
        FaultKind::ServerPause,
        FaultKind::Partition,
        FaultKind::DelayReplies,
        FaultKind::DropReplies,
        FaultKind::Cut,
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
            FaultKind::ServerPause => "server-pause",
            FaultKind::Partition => "partition",
            FaultKind::DelayReplies => "delay-replies",
            FaultKind::DropReplies => "drop-replies",
            FaultKind::Cut => "cut",
        }
    }

    /// True for the [`FaultKind::SERVER`] families.
    pub fn needs_private_server(self) -> bool {
        FaultKind::SERVER.contains(&self)
    }
}

impl std::str::FromStr for FaultKind {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        FaultKind::ALL
            .into_iter()
            .chain(FaultKind::OPT_IN)
            .chain(FaultKind::SERVER)
            .find(|kind| kind.name() == text)
            .ok_or_else(|| {
                format!(
                    "unknown nemesis `{text}`: expected one of pause, skew, drop-renew, \
                     delay-write, restart, drop-acquire, drop-write, server-pause, partition, \
                     delay-replies, drop-replies, cut, all, or none"
                )
            })
    }
}

/// One scheduled fault. Targets are process names (`w0`), clock owners (`lock`, `w0`) or, for
/// server faults, the server's role (`lock`, `store`).
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
}

impl Fault {
    /// True time the fault starts.
    pub fn at_ns(&self) -> u64 {
        match self {
            Fault::Pause { at_ns, .. }
            | Fault::ClockJump { at_ns, .. }
            | Fault::ClockDrift { at_ns, .. }
            | Fault::DropRenew { at_ns, .. }
            | Fault::DelayWrite { at_ns, .. }
            | Fault::Restart { at_ns, .. }
            | Fault::DropAcquire { at_ns, .. }
            | Fault::DropWrite { at_ns, .. }
            | Fault::ServerPause { at_ns, .. }
            | Fault::Partition { at_ns, .. }
            | Fault::DelayReplies { at_ns, .. }
            | Fault::DropReplies { at_ns, .. }
            | Fault::Cut { at_ns, .. } => *at_ns,
        }
    }

    /// The process or clock the fault targets.
    pub fn target(&self) -> &str {
        match self {
            Fault::Pause { target, .. }
            | Fault::ClockJump { target, .. }
            | Fault::ClockDrift { target, .. }
            | Fault::DropRenew { target, .. }
            | Fault::DelayWrite { target, .. }
            | Fault::Restart { target, .. }
            | Fault::DropAcquire { target, .. }
            | Fault::DropWrite { target, .. }
            | Fault::ServerPause { target, .. }
            | Fault::Partition { target, .. }
            | Fault::DelayReplies { target, .. }
            | Fault::DropReplies { target, .. }
            | Fault::Cut { target, .. } => target,
        }
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
        }
    }

    /// True for a fault aimed at a server's process, clock or connections (target `lock` or
    /// `store`) rather than at a worker. In the real tier with servers fencer started, these
    /// go to the server nemesis; everywhere else only the simulation's lock service can take
    /// them (restart, clock).
    pub fn aims_at_server(&self) -> bool {
        matches!(self.target(), "lock" | "store")
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
            | Fault::DropReplies { duration_ns, .. } => *duration_ns,
            Fault::ClockJump { .. } | Fault::ClockDrift { .. } | Fault::Cut { .. } => 0,
        }
    }
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
    fn names_parse_back() {
        for kind in FaultKind::ALL
            .into_iter()
            .chain(FaultKind::OPT_IN)
            .chain(FaultKind::SERVER)
        {
            assert_eq!(kind.name().parse::<FaultKind>(), Ok(kind));
        }
        assert!(
            "gc".parse::<FaultKind>()
                .unwrap_err()
                .contains("unknown nemesis `gc`")
        );
    }
}
