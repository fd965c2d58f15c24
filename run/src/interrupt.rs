//! A request from outside a run (the command line's Ctrl-C handler) to stop a real-time run
//! now. The run stops its workers where they are and returns [`RunError::Interrupted`], so
//! every server and cluster it started is torn down as its handles drop: processes, network
//! namespaces, firewall rules and directories. The simulation tier never listens: a simulated
//! run owns no server, and its history must not depend on when a signal came.
//!
//! [`RunError::Interrupted`]: crate::RunError::Interrupted

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// Set by [`request`], for every real-time run of this process from then on.
static REQUESTED: AtomicBool = AtomicBool::new(false);

/// Real-time runs waiting on workers now, which will act on a request.
static LISTENING: AtomicUsize = AtomicUsize::new(0);

/// How often a listening run looks for a request: a person pressing Ctrl-C waits this long at
/// most before the teardown starts.
const POLL: Duration = Duration::from_millis(20);

/// Asks every real-time run of this process to stop. Returns whether one is running to act on
/// it; when none is, the caller should simply exit, as nothing of the run's needs tearing down.
pub fn request() -> bool {
    REQUESTED.store(true, Ordering::SeqCst);
    LISTENING.load(Ordering::SeqCst) > 0
}

/// Counts a run as listening while it lives.
pub(crate) struct Listening(());

impl Listening {
    pub(crate) fn start() -> Listening {
        LISTENING.fetch_add(1, Ordering::SeqCst);
        Listening(())
    }

    /// Completes once a stop was requested (at once if it was before).
    pub(crate) async fn requested(&self) {
        while !REQUESTED.load(Ordering::SeqCst) {
            fencer_harness::time::sleep(POLL).await;
        }
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        LISTENING.fetch_sub(1, Ordering::SeqCst);
    }
}
