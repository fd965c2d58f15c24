//! A project's own lock service and store, tested with fencer's whole command line:
//!
//! ```sh
//! cargo run -- gate --lock memory-lock --store memory-store --seeds 0..200
//! cargo run -- gate --lock memory-lock --store leaky-store --seeds 0..50   # the bug is found
//! cargo run -- --help                                                      # lists them
//! ```
//!
//! Both keep time with `tokio::time`, so fencer runs them in its simulation tier: thousands of
//! seeds a minute, each replayable byte for byte. `leaky-store` is `memory-store` with its fence
//! check left out, the bug fencer is for.

mod backends;

use std::process::ExitCode;

fn main() -> ExitCode {
    // The registrations are in `backends::cli`, shared with fencer's own test of this project.
    backends::cli().program("cargo run --").main()
}
