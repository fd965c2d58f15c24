//! A fault in a reader's words: what it does, to whom, for how long and when, so a shrunk plan
//! can be told as "a 12.000s pause of w0 at 1.500s" rather than as JSON.

use fencer_harness::words::{replies_of, secs, secs_signed, server_name};

use crate::fault::Fault;

impl Fault {
    /// `a 12.000s pause of w0 at 1.500s`: the fault's effect, target, size and start, on the
    /// plan's clock (true time from the workers' start).
    pub fn in_words(&self) -> String {
        let at = secs(self.at_ns());
        let what = match self {
            Fault::Pause {
                target,
                duration_ns,
                ..
            } => format!("a {} pause of {target}", secs(*duration_ns)),
            Fault::ClockJump {
                target, jump_ns, ..
            } => format!("a {} step of {target}'s clock", signed(*jump_ns)),
            Fault::ClockDrift {
                target, drift_ppm, ..
            } => format!("a drift of {target}'s clock by {drift_ppm:+} ppm"),
            Fault::DropRenew {
                target,
                duration_ns,
                ..
            } => lost(target, "renew", *duration_ns),
            Fault::DropAcquire {
                target,
                duration_ns,
                ..
            } => lost(target, "acquire", *duration_ns),
            Fault::DropWrite {
                target,
                duration_ns,
                ..
            } => lost(target, "write", *duration_ns),
            Fault::DelayWrite {
                target,
                duration_ns,
                ..
            } => return held(target, "writes", *duration_ns, &at),
            Fault::DelayAcquire {
                target,
                duration_ns,
                ..
            } => return held(target, "acquires", *duration_ns, &at),
            Fault::DelayRenew {
                target,
                duration_ns,
                ..
            } => return held(target, "renews", *duration_ns, &at),
            Fault::DelayRelease {
                target,
                duration_ns,
                ..
            } => return held(target, "releases", *duration_ns, &at),
            Fault::Restart {
                target,
                duration_ns,
                ..
            } => format!(
                "a restart of {}, down for {}",
                server_name(target),
                secs(*duration_ns)
            ),
            Fault::ServerPause {
                target,
                duration_ns,
                ..
            } => format!("{} frozen for {}", server_name(target), secs(*duration_ns)),
            Fault::Partition {
                target,
                duration_ns,
                ..
            } => format!("{} cut off for {}", server_name(target), secs(*duration_ns)),
            Fault::DelayReplies {
                target,
                duration_ns,
                delay_ns,
                ..
            } => format!(
                "{} held {} each for {}",
                replies_of(target),
                secs(*delay_ns),
                secs(*duration_ns)
            ),
            Fault::DropReplies {
                target,
                duration_ns,
                ..
            } => format!("{} lost for {}", replies_of(target), secs(*duration_ns)),
            Fault::Cut { target, .. } => {
                format!("every connection to {} closed", server_name(target))
            }
            Fault::NetPartition {
                target,
                duration_ns,
                groups,
                ..
            } => format!(
                "the links between the members of {} split into {} for {}",
                server_name(target),
                groups
                    .iter()
                    .map(|group| format!("[{}]", group.join(" ")))
                    .collect::<Vec<_>>()
                    .join(" "),
                secs(*duration_ns)
            ),
            Fault::LeaseEdge {
                target,
                duration_ns,
                own_offset_ns,
                rival_offset_ns,
                ..
            } => format!(
                "the race for the lease {target} holds or wants run at its edge for {} (the \
                 holder's calls at its expiry {}, the acquires for it at its expiry {})",
                secs(*duration_ns),
                signed(*own_offset_ns),
                signed(*rival_offset_ns)
            ),
            Fault::Cancel { target, .. } => format!("{target}'s work cancelled"),
        };
        format!("{what} at {at}")
    }
}

/// `+1.500s`, `-2.000s`: a signed size, its sign always shown.
fn signed(ns: i64) -> String {
    let words = secs_signed(ns);
    if words.starts_with('-') {
        words
    } else {
        format!("+{words}")
    }
}

/// `w2's writes sent in the 2.000s from 3.000s held 2.000s each`: a delay fault holds each
/// request sent in its window for the window's length.
fn held(target: &str, requests: &str, duration_ns: u64, at: &str) -> String {
    let duration = secs(duration_ns);
    format!("{target}'s {requests} sent in the {duration} from {at} held {duration} each")
}

/// `w0's renew replies lost for 2.000s`.
fn lost(target: &str, replies: &str, duration_ns: u64) -> String {
    format!(
        "{target}'s {replies} replies lost for {}",
        secs(duration_ns)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_fault_reads_as_what_it_does_to_whom_for_how_long_and_when() {
        let pause = Fault::Pause {
            at_ns: 1_500_000_000,
            target: "w0".into(),
            duration_ns: 12_000_000_000,
        };
        assert_eq!(pause.in_words(), "a 12.000s pause of w0 at 1.500s");
        let back = Fault::ClockJump {
            at_ns: 0,
            target: "lock".into(),
            jump_ns: -2_000_000_000,
        };
        assert_eq!(back.in_words(), "a -2.000s step of lock's clock at 0.000s");
        let forward = Fault::ClockJump {
            at_ns: 0,
            target: "w1".into(),
            jump_ns: 250_000_000,
        };
        assert_eq!(forward.in_words(), "a +0.250s step of w1's clock at 0.000s");
        let slow = Fault::ClockDrift {
            at_ns: 0,
            target: "lock".into(),
            drift_ppm: -300,
        };
        assert_eq!(
            slow.in_words(),
            "a drift of lock's clock by -300 ppm at 0.000s"
        );
        let delayed = Fault::DelayWrite {
            at_ns: 3_000_000_000,
            target: "w2".into(),
            duration_ns: 2_000_000_000,
        };
        assert_eq!(
            delayed.in_words(),
            "w2's writes sent in the 2.000s from 3.000s held 2.000s each"
        );
        let edge = Fault::LeaseEdge {
            at_ns: 2_000_000_000,
            target: "w1".into(),
            duration_ns: 5_000_000_000,
            own_offset_ns: -1_000_000,
            rival_offset_ns: 2_000_000,
            anchor: Default::default(),
        };
        assert_eq!(
            edge.in_words(),
            "the race for the lease w1 holds or wants run at its edge for 5.000s (the holder's \
             calls at its expiry -0.001s, the acquires for it at its expiry +0.002s) at 2.000s"
        );
        // A server's faults aimed at a worker act on its lock client's process and proxy.
        let held_replies = Fault::DelayReplies {
            at_ns: 0,
            target: "w2".into(),
            duration_ns: 1_000_000_000,
            delay_ns: 500_000_000,
        };
        assert_eq!(
            held_replies.in_words(),
            "replies to w2's lock client held 0.500s each for 1.000s at 0.000s"
        );
        let frozen = Fault::ServerPause {
            at_ns: 0,
            target: "lock".into(),
            duration_ns: 1_000_000_000,
        };
        assert_eq!(
            frozen.in_words(),
            "the lock service frozen for 1.000s at 0.000s"
        );
        let cancel = Fault::Cancel {
            at_ns: 4_000_000,
            target: "w0".into(),
        };
        assert_eq!(cancel.in_words(), "w0's work cancelled at 0.004s");
    }
}
