//! The two runtimes fencer runs in.
//!
//! The simulation runtime is a single current-thread tokio runtime with time paused: when every
//! task waits, tokio jumps the clock to the next timer, so a 12 s pause costs nothing and task
//! order depends only on the program, never on the OS. The real runtime is the same shape with
//! real time and I/O, so the same code paths run against real servers.

use tokio::runtime::{Builder, Runtime};

/// A current-thread runtime with paused, auto-advancing time and no I/O driver.
pub fn simulation_runtime() -> Runtime {
    Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime with no I/O cannot fail to build")
}

/// A current-thread runtime with real time, for backends that talk to real servers.
pub fn real_runtime() -> std::io::Result<Runtime> {
    Builder::new_current_thread().enable_all().build()
}
