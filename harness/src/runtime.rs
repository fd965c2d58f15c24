//! The two runtimes fencer runs in.
//!
//! The simulation runtime is fencer's own discrete-event executor (the `sim` module) inside a
//! current-thread tokio runtime with time paused: when every task waits, the clock jumps to
//! the next deadline, so a 12 s pause costs nothing and task order depends only on the
//! program, never on the OS. The real runtime is a plain current-thread tokio runtime with
//! real time and I/O, so the same code paths ([`crate::task`], [`crate::time`]) run against
//! real servers.

use std::future::Future;

use tokio::runtime::{Builder, Runtime};

/// Runs futures on fencer's simulation executor, with tokio's paused runtime underneath for
/// `tokio::sync` and any `tokio::time` an adapter uses.
#[derive(Debug)]
pub struct SimulationRuntime {
    runtime: Runtime,
}

impl SimulationRuntime {
    /// Runs `future` to completion, with every task it spawns through [`crate::task::spawn`];
    /// tasks still pending when it completes are dropped.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        crate::sim::block_on(&self.runtime, future)
    }
}

/// A simulation runtime: fencer's executor over a current-thread tokio runtime with paused,
/// auto-advancing time and no I/O driver.
pub fn simulation_runtime() -> SimulationRuntime {
    let runtime = Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime with no I/O cannot fail to build");
    SimulationRuntime { runtime }
}

/// A current-thread runtime with real time, for backends that talk to real servers.
pub fn real_runtime() -> std::io::Result<Runtime> {
    Builder::new_current_thread().enable_all().build()
}
