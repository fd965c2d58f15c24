//! Faults on a real server fencer started itself, as the nemesis sees it: a handle that takes
//! one action at a time.
//!
//! The nemesis crate knows no servers or proxies; the real tier hands it one [`ServerFaults`]
//! per role (`lock`, `store`) and the nemesis decides *when*, exactly as for a worker's faults.

use std::time::Duration;

/// One thing done to a server or to fencer's proxy in front of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerAction {
    /// Freeze the server process (SIGSTOP).
    Pause,
    /// Thaw it (SIGCONT).
    Resume,
    /// Kill it (SIGKILL): down until [`ServerAction::Start`].
    Kill,
    /// Start it again on the same port and directory; done once it accepts connections.
    Start,
    /// Step the server's wall clock by this many nanoseconds (negative: backwards).
    JumpClock(i64),
    /// Nothing crosses the proxy either way for this long.
    Partition(Duration),
    /// Hold every reply this long (zero: deliver promptly again).
    DelayReplies(Duration),
    /// Lose every reply from now on.
    DropReplies,
    /// Deliver replies again (and cut the connections that lost some).
    HealReplies,
    /// Close every connection through the proxy.
    Cut,
}

/// Why a server could not take a fault: the run then fails, since a fault that did not
/// happen must not be recorded as one that did.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FaultFailed(pub String);

/// A server the real-tier nemesis can act on.
#[async_trait::async_trait]
pub trait ServerFaults: Send + Sync + std::fmt::Debug {
    /// Does `action` now, or says why it could not.
    async fn apply(&self, action: ServerAction) -> Result<(), FaultFailed>;
}
