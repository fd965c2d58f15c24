//! The two runtimes fencer runs in.
//!
//! The simulation runtime is a single current-thread tokio runtime with time paused: when every
//! task waits, tokio jumps the clock to the next timer, so a 12 s pause costs nothing and task
//! order depends only on the program, never on the OS. The real runtime is the same shape with
//! real time and I/O, so the same code paths run against real servers.

use std::future::Future;

use tokio::runtime::{Builder, Runtime};

use crate::clock::{paused_time_left, paused_time_may_move};

/// A current-thread runtime with paused, auto-advancing time and no I/O driver, whose clock
/// fencer reads without tokio's lock: paused time moves only while the runtime parks, so one
/// reading holds from the first read after it parked until it parks again.
#[derive(Debug)]
pub struct SimulationRuntime {
    runtime: Runtime,
}

impl SimulationRuntime {
    /// Runs `future` to completion on this runtime, as [`Runtime::block_on`].
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        // A reading taken by a runtime that ran here before is not this one's time.
        paused_time_may_move();
        let _left = LeftOnExit;
        self.runtime.block_on(future)
    }
}

/// Forgets the reading when `block_on` returns or unwinds, so no other runtime on the thread
/// ever reads it.
struct LeftOnExit;

impl Drop for LeftOnExit {
    fn drop(&mut self) {
        paused_time_left();
    }
}

/// A current-thread runtime with paused, auto-advancing time and no I/O driver.
pub fn simulation_runtime() -> SimulationRuntime {
    let runtime = Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .on_thread_park(paused_time_may_move)
        .build()
        .expect("a current-thread runtime with no I/O cannot fail to build");
    SimulationRuntime { runtime }
}

/// A current-thread runtime with real time, for backends that talk to real servers.
pub fn real_runtime() -> std::io::Result<Runtime> {
    Builder::new_current_thread().enable_all().build()
}
