//! The one server fault fencer injects through the server itself rather than at the client
//! boundary: a restart, which loses whatever the server kept only in memory.
//!
//! What survives a restart is the backend's property, not the nemesis's: the reference lease
//! service keeps its token counter (as a durable store would) but loses every lease, a volatile
//! one also forgets its counter. The nemesis only says *when* and *for how long*.

/// A server the nemesis can restart.
pub trait Restartable: Send + Sync + std::fmt::Debug {
    /// Restarts now: in-memory state is lost as the backend defines, and every call that
    /// reaches the server in the next `down_ns` true nanoseconds is refused as
    /// `NotApplied("connection refused")`.
    fn restart(&self, down_ns: u64);
}
